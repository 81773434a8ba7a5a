package service

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
)

// mountTmpfs mounts a tmpfs of the given size (mount(8)'s "size=" syntax)
// on a fresh directory and returns it, or skips when this process may not
// mount (not root, or no CAP_SYS_ADMIN in a container).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the file system has no room left.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(dir + "/filler")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
				t.Fatal(err)
			}
			return
		}
	}
}

// A checkpoint directory on a real, full file system (a 64 KiB tmpfs
// filled up):
// the saves fail with ENOSPC, nothing is committed, Run reports the
// device's error, and no temporary file is left; once the file system
// grows (remounted at 16 MiB), the next run saves and commits everything.
func TestCheckpointDiskFull(t *testing.T) {
	path := mountTmpfs(t, "64k")
	fill(t, path)
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(500, 5, 0, 0, 0)
	store, err := checkpoint.OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	_, commits, err := runStore(t, c, store, values, 1, 100)
	if len(commits) != 0 {
		t.Errorf("%d commits while the disk is full, want none", len(commits))
	}
	if err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Errorf("Run on a full disk: %v, want %q", err, syscall.ENOSPC.Error())
	}
	if _, err := store.Load(context.Background(), 0); !checkpoint.IsNotExist(err) {
		t.Errorf("a checkpoint exists after failing saves: %v", err)
	}
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	if err := syscall.Mount("tmpfs", path, "tmpfs", syscall.MS_REMOUNT, "size=16m"); err != nil {
		t.Fatal(err)
	}
	_, commits, err = runStore(t, c, store, values, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(commits); n == 0 || commits[n-1].Offset != 499 {
		t.Errorf("commits after the disk grew: %v, want up to offset 499", commits)
	}
	if cp, err := store.Load(context.Background(), 0); err != nil || cp.Position != 499 {
		t.Errorf("checkpoint after the disk grew: %v", err)
	}
}
