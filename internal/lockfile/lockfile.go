//go:build unix

// Package lockfile opens the small files that hold a flock(2) and name
// their holder: a file sink's lock file, a checkpoint folder's lock and
// ownership files.
package lockfile

import (
	"fmt"
	"os"
	"syscall"
)

// Open opens the lock file at path for reading and writing, creating it
// with perm, without following a symbolic link: a link there (which anyone
// who can write the folder may put) would have the holder's line written
// into, and cleared from, the file it points to. A path that is a link,
// names something other than a regular file, or a file with other hard
// links, is an error saying so.
func Open(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, perm)
	if err != nil {
		if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is a symbolic link: a lock file is written and is never followed; remove the link", path)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v): a lock file is written; remove it", path, st.Mode().Type())
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok && uint64(s.Nlink) > 1 {
		f.Close()
		return nil, fmt.Errorf("%s has %d hard links: a lock file is written, and writing it would change the other names' file; remove it", path, uint64(s.Nlink))
	}
	return f, nil
}
