//go:build unix

package connectors

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/streamlearn/streamlearn/internal/lockfile"
)

// lockSinkFile takes the exclusive flock(2) of the lock file of the file
// sink at path, creating it, and writes the holder's line into it (the
// lock is what counts; the line names the holder to the next one). A lock
// another open file holds is a *FileInUseError naming the holder it wrote.
// The kernel releases the lock when the process dies. The lock file is
// not removed (but by a FileSink with RemoveUnused that made it and wrote
// nothing, which the lock on the file itself covers): a process that
// opened it before its removal would lock a file no one else sees. A lock path that is a symbolic link, names
// something other than a regular file or has other hard links is refused
// (lockfile.Open): the holder's line would be written into another file.
func lockSinkFile(path string) (*os.File, error) {
	lp := lockPath(path)
	l, err := lockfile.Open(lp, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: lock: %w", path, err)
	}
	if err := flockNB(l); err != nil {
		defer l.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &FileInUseError{Path: path, Holder: readHolder(l), Lock: lp}
		}
		return nil, fmt.Errorf("file sink %s: lock: %w", path, &os.PathError{Op: "flock", Path: lp, Err: err})
	}
	writeHolder(l, FileHolder())
	return l, nil
}

// writeHolder writes the holder's line into the lock file l, whose lock
// is held: over what is there, then cut to its length, so that a reader
// never finds it empty meanwhile.
func writeHolder(l *os.File, holder string) {
	line := []byte(holder + "\n")
	if _, err := l.WriteAt(line, 0); err == nil {
		_ = l.Truncate(int64(len(line)))
	}
}

// lockOpenFile takes the exclusive flock(2) of the sink's file itself, f,
// opened from path: it excludes a sink that reaches the same file through
// another path (a symbolic or hard link), whose lock file is another.
// A file this process holds is named by the sink that holds it
// (heldFiles): its lock file is another.
func lockOpenFile(f *os.File, path string) error {
	id, idErr := openFileID(f)
	if err := flockNB(f); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			e := &FileInUseError{Path: path, Lock: lockPath(path)}
			if other, ok := heldFiles.Load(id); ok && idErr == nil {
				e.Holder = FileHolder() + " (this process: its file sink " + other.(string) + " is the same file)"
			}
			return e
		}
		return fmt.Errorf("file sink %s: lock: %w", path, &os.PathError{Op: "flock", Path: path, Err: err})
	}
	if idErr == nil {
		heldFiles.Store(id, path)
	}
	return nil
}

// heldFiles is the set of files the file sinks of this process hold
// (lockOpenFile), by device and inode, to the path their sink opened.
var heldFiles sync.Map // fileKey → string

// fileKey is a file's identity: its device and inode.
type fileKey struct{ dev, ino uint64 }

// openFileID returns the identity of the open file f.
func openFileID(f *os.File) (fileKey, error) {
	st, err := f.Stat()
	if err != nil {
		return fileKey{}, err
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, errors.New("no device and inode")
	}
	return fileKey{uint64(s.Dev), uint64(s.Ino)}, nil
}

// unlockOpenFile forgets what lockOpenFile recorded of f, before it is
// closed (closing releases the lock).
func unlockOpenFile(f *os.File) {
	if id, err := openFileID(f); err == nil {
		heldFiles.Delete(id)
	}
}

// unlockSinkFile releases what lockSinkFile took: the holder's line is
// cleared, and closing the file releases the lock.
func unlockSinkFile(l *os.File, _ string) {
	if l == nil {
		return
	}
	_ = l.Truncate(0)
	l.Close()
}

// flockNB takes an exclusive flock(2) on f without waiting.
func flockNB(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// readHolder returns the first line of the lock file l, waiting a little
// for a holder that has locked it but not yet written its line.
func readHolder(l *os.File) string {
	b := make([]byte, 256)
	for try := 0; ; try++ {
		n, _ := l.ReadAt(b, 0)
		if h := firstLine(b[:n]); h != "" || try == 5 {
			return h
		}
		time.Sleep(10 * time.Millisecond)
	}
}
