//go:build !unix

package checkpoint

import (
	"context"
	"sync"
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
