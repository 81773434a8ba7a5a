//go:build unix

package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/streamlearn/streamlearn/internal/lockfile"
)

// lockFile takes an exclusive flock(2) on path, creating the file, and
// returns the function that releases it. It polls rather than blocks so
// that ctx can end the wait: a process that holds the lock and is paused
// (SIGSTOP, a frozen VM) holds it until it resumes or dies, and the
// kernel releases it when it dies. flock excludes other open files of the
// same path, so it also orders goroutines of one process; on Linux it
// works across machines on NFS (emulated with byte-range locks).
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := flockFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// lockOwner takes the exclusive flock(2) of an ownership file (Dir.Own),
// as lockFile does, and returns the open file, which holds it.
func lockOwner(ctx context.Context, path string) (*os.File, error) {
	return flockFile(ctx, path)
}

// unlockOwner releases what lockOwner took: closing f releases the lock.
func unlockOwner(f *os.File, _ string) { f.Close() }

// flockFile opens path, creating it, and takes an exclusive flock(2) on
// it, polling until ctx is done. It never follows a symbolic link at path
// (anyone who can write the folder may put one there, and an ownership
// file is written and cleared): a link, something other than a regular
// file, or a file with other hard links is an error saying so.
func flockFile(ctx context.Context, path string) (*os.File, error) {
	f, err := lockfile.Open(path, 0o640)
	if err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// fileID returns the device and inode of the file st describes.
func fileID(st os.FileInfo) string {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", s.Dev, s.Ino)
	}
	return ""
}
