//go:build unix

package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// OpenDir removes the temporary files of Saves a crash interrupted, but
// not one whose partition's lock is held (a Save in progress elsewhere).
func TestDirRemovesTemps(t *testing.T) {
	path := t.TempDir()
	crashed := filepath.Join(path, ".partition-3.ckpt.tmp-123456")
	busy := filepath.Join(path, ".partition-4.ckpt.tmp-654321")
	other := filepath.Join(path, ".partition-x.ckpt.tmp-1")
	for _, f := range []string{crashed, busy, other} {
		if err := os.WriteFile(f, []byte("half a checkpoint"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	d := &Dir{path: path}
	unlock, err := lockFile(context.Background(), d.lockFile(4))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := OpenDir(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Errorf("temporary file of a crashed save: %v, want removed", err)
	}
	for _, f := range []string{busy, other} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v, want it left", filepath.Base(f), err)
		}
	}
}

// A FIFO at a checkpoint's path is refused at once: it would block the
// open of Load, Save and inspect forever.
func TestDirRefusesFIFO(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(d.File(5), 0o640); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 2)
	go func() { _, err := d.Load(ctx, 5); done <- err }()
	go func() { c := sample(5); done <- d.Save(ctx, c) }()
	for range 2 {
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("error %v does not say the path is not a regular file", err)
			}
		case <-ctx.Done():
			t.Fatal("Load or Save of a FIFO still blocked after 5s")
		}
	}
	if _, err := d.Load(ctx, 5); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load of a FIFO: %v, want an error saying it is not a regular file", err)
	}
}

// One owner per partition: while a process owns a partition's
// checkpoints, Own of the same partition waits, then fails naming the
// holder; other partitions are free; once released (or the holder's
// process dies, which closes its file), the next Own succeeds and names
// itself to the one after.
func TestDirOwn(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, err := d.Own(ctx, 0, "pid 1 on here since then")
	if err != nil {
		t.Fatal(err)
	}
	wait := func(partition int32, holder string) (func(), error) {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return d.Own(ctx, partition, holder)
	}
	start := time.Now()
	_, err = wait(0, "pid 2")
	var held *HeldError
	if !errors.As(err, &held) || held.Partition != 0 || held.Holder != "pid 1 on here since then" || held.Store != d.String() {
		t.Fatalf("Own of a held partition: %v (%#v), want a HeldError naming pid 1", err, held)
	}
	// Own gives up when the context ends, 50 ms after it was made, and
	// says how long it waited from its own start: a little after the
	// context was made, so Waited may fall short of 50 ms by that much
	// (1.6 ms under -race on a loaded CI machine), never more than took.
	if took := time.Since(start); took < 50*time.Millisecond || held.Waited <= 0 || held.Waited > took || held.Waited < 25*time.Millisecond {
		t.Errorf("gave up after %v (says %v), want the whole wait", took, held.Waited)
	}
	if !strings.Contains(err.Error(), "partition 0: owned by pid 1 on here since then") {
		t.Errorf("error %q does not name the partition and holder", err)
	}
	other, err := wait(1, "pid 2")
	if err != nil {
		t.Fatalf("Own of another partition: %v", err)
	}
	other()
	release()
	release() // twice is once
	again, err := wait(0, "pid 3")
	if err != nil {
		t.Fatalf("Own after the release: %v", err)
	}
	defer again()
	if _, err := wait(0, "pid 4"); !errors.As(err, &held) || held.Holder != "pid 3" {
		t.Fatalf("Own held by pid 3: %v, want it named", err)
	}
	if h := Holder(); !strings.HasPrefix(h, "pid "+strconv.Itoa(os.Getpid())+" on ") {
		t.Errorf("Holder() = %q", h)
	}
}

// TestDirLockLinks: an ownership or lock file that is a symbolic link (to
// a file, or to a path that does not exist) or a hard link to another
// file is refused with an error naming it, and the file it leads to is
// left as it was: neither written, emptied nor created. (Before, Own
// opened the link's target, wrote the holder's line into it and emptied
// it at release; a Save's lock created a missing target.)
func TestDirLockLinks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	const content = "precious\nlines\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, d.ownFile(0)); err != nil {
		t.Fatal(err)
	}
	if release, err := d.Own(ctx, 0, "pid 1 on here since then"); err == nil {
		release()
		t.Error("Own through a symbolic link: no error")
	} else if !strings.Contains(err.Error(), d.ownFile(0)+" is a symbolic link") {
		t.Errorf("Own through a symbolic link: %v, want it named as one", err)
	}
	if err := os.Link(victim, d.ownFile(1)); err != nil {
		t.Fatal(err)
	}
	if release, err := d.Own(ctx, 1, "pid 1 on here since then"); err == nil {
		release()
		t.Error("Own of a hard link: no error")
	} else if !strings.Contains(err.Error(), d.ownFile(1)+" has 2 hard links") {
		t.Errorf("Own of a hard link: %v, want it named as one", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != content {
		t.Errorf("the linked file holds %q, %v; want it untouched (%q)", b, err, content)
	}
	missing := filepath.Join(outside, "created")
	if err := os.Symlink(missing, d.lockFile(2)); err != nil {
		t.Fatal(err)
	}
	if err := d.Save(ctx, sample(2)); err == nil || !strings.Contains(err.Error(), d.lockFile(2)+" is a symbolic link") {
		t.Errorf("Save with its lock a symbolic link: %v, want it named as one", err)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock's link target: %v, want it not created", err)
	}
}
