//go:build !unix

package connectors

import (
	"os"
	"path/filepath"
	"sync"
)

// sinkFiles is the set of files the file sinks of this process hold, by
// absolute path. Without flock(2), the sinks of several processes do not
// exclude each other.
var sinkFiles sync.Map // absolute path → struct{}

// lockSinkFile takes path in this process's set of sink files; held, it is
// a *FileInUseError naming this process.
func lockSinkFile(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if _, held := sinkFiles.LoadOrStore(abs, struct{}{}); held {
		return nil, &FileInUseError{Path: path, Holder: FileHolder(), Lock: "(this process)"}
	}
	return nil, nil
}

// lockOpenFile does nothing: lockSinkFile's set is the lock.
func lockOpenFile(*os.File, string) error { return nil }

// unlockOpenFile does nothing, as lockOpenFile.
func unlockOpenFile(*os.File) {}

// unlockSinkFile gives path back to this process's set of sink files.
func unlockSinkFile(_ *os.File, path string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	sinkFiles.Delete(abs)
}
