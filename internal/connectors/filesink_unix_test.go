//go:build unix

package connectors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFileSinkNotRegular: a path that names no regular file (a FIFO here;
// a device such as /dev/stdout alike) is refused at open, saying so,
// rather than opened: it cannot be fsynced, and a FIFO's open would wait
// for a reader. (Before, the open of a FIFO waited for a reader, and a
// device failed at the first fsync, after its outputs were written.)
func TestFileSinkNotRegular(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := NewFileSink(path)
	done := make(chan error, 1)
	go func() { done <- s.Publish(ctx, nil, []byte(`{"a":1}`)) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "file sink "+path+": not a regular file") {
			t.Fatalf("Publish to a FIFO: %v, want an error saying it is not a regular file", err)
		}
	case <-ctx.Done():
		t.Fatal("Publish to a FIFO still waits after 5s")
	}
	if _, err := os.Stat(lockPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock file beside the refused FIFO: %v", err)
	}
}
