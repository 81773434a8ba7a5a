//go:build !unix

package checkpoint

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// otherLock orders the Saves of this process where flock(2) does not
// exist; Saves of one directory from several processes are not ordered
// there (README).
var otherLock sync.Mutex

// lockFile takes the process-wide lock; path is unused.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	otherLock.Lock()
	return otherLock.Unlock, nil
}

// owned is the set of ownership files this process holds.
var owned sync.Map // path → struct{}

// unlockOwner releases what lockOwner took.
func unlockOwner(f *os.File, path string) {
	f.Close()
	owned.Delete(path)
}

// lockOwner takes path's ownership in this process only: the set of
// paths owned, polled until ctx is done, and opens the file to hold the
// holder's name.
func lockOwner(ctx context.Context, path string) (*os.File, error) {
	for {
		if _, held := owned.LoadOrStore(path, struct{}{}); !held {
			if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
				owned.Delete(path)
				return nil, fmt.Errorf("%s is not a regular file (%v): an ownership file is written and is never followed; remove it", path, st.Mode().Type())
			}
			f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
			if err != nil {
				owned.Delete(path)
			}
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fileID is empty where the file's identity is not at hand.
func fileID(os.FileInfo) string { return "" }
