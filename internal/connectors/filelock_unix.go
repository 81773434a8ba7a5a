//go:build unix

package connectors

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockSinkFile takes the exclusive flock(2) of the lock file of the file
// sink at path, creating it, and writes the holder's line into it (the
// lock is what counts; the line names the holder to the next one). A lock
// another open file holds is a *FileInUseError naming the holder it wrote.
// The kernel releases the lock when the process dies. The lock file is
// never removed: a process that opened it before its removal would lock
// a file no one else sees.
func lockSinkFile(path string) (*os.File, error) {
	lp := lockPath(path)
	l, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: lock: %w", path, err)
	}
	if err := flockNB(l); err != nil {
		l.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &FileInUseError{Path: path, Holder: readHolder(lp), Lock: lp}
		}
		return nil, fmt.Errorf("file sink %s: lock: %w", path, &os.PathError{Op: "flock", Path: lp, Err: err})
	}
	if err := l.Truncate(0); err == nil {
		_, _ = l.WriteAt([]byte(FileHolder()+"\n"), 0)
	}
	return l, nil
}

// lockOpenFile takes the exclusive flock(2) of the sink's file itself, f,
// opened from path: it excludes a sink that reaches the same file through
// another path (a symbolic or hard link), whose lock file is another.
func lockOpenFile(f *os.File, path string) error {
	if err := flockNB(f); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return &FileInUseError{Path: path, Lock: lockPath(path)}
		}
		return fmt.Errorf("file sink %s: lock: %w", path, &os.PathError{Op: "flock", Path: path, Err: err})
	}
	return nil
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

// readHolder returns the first line of the lock file at path, waiting a
// little for a holder that has locked it but not yet written its line.
func readHolder(path string) string {
	for try := 0; ; try++ {
		b, _ := os.ReadFile(path)
		if h := firstLine(b); h != "" || try == 5 {
			return h
		}
		time.Sleep(10 * time.Millisecond)
	}
}
