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

// TestFileSinkLockLinks: a sink's lock file path that is a symbolic link
// (to a file, or to a path that does not exist) or a hard link to another
// file is refused with an error naming it, and the file it leads to is
// left as it was: neither written, emptied nor created. (Before, the
// holder's line was written into the link's target, which Close emptied.)
func TestFileSinkLockLinks(t *testing.T) {
	ctx := context.Background()
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	const content = "precious\nlines\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(outside, "created")
	for _, c := range []struct {
		name, want string
		link       func(lock string) error
	}{
		{"symlink", "is a symbolic link", func(lock string) error { return os.Symlink(victim, lock) }},
		{"dangling symlink", "is a symbolic link", func(lock string) error { return os.Symlink(missing, lock) }},
		{"hard link", "has 2 hard links", func(lock string) error { return os.Link(victim, lock) }},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
		if err := c.link(lockPath(path)); err != nil {
			t.Fatal(err)
		}
		s := NewFileSink(path)
		err := s.Check(ctx)
		if err == nil {
			s.Publish(ctx, nil, []byte(`{"a":1}`))
			s.Close()
			t.Errorf("%s: Check: no error", c.name)
		} else if !strings.Contains(err.Error(), "file sink "+path+": lock: "+lockPath(path)+" "+c.want) {
			t.Errorf("%s: Check: %v, want it to say the lock file %s", c.name, err, c.want)
		}
		if b, err := os.ReadFile(victim); err != nil || string(b) != content {
			t.Fatalf("%s: the linked file holds %q, %v; want it untouched (%q)", c.name, b, err, content)
		}
		if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the link's target: %v, want it not created", c.name, err)
		}
	}
}

// TestFileSinkPathGone: a sink's file removed, or renamed and replaced,
// under the sink (rm, logrotate's mv) fails the next barrier with an
// error naming the path and saying so, and every later one, so that no
// commit counts on lines a reader of the path never sees; nothing more is
// written to the old file. (Before, the lines went to the old file and the
// barrier succeeded.)
func TestFileSinkPathGone(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, want string
		change     func(path string) error
	}{
		{"removed", "removed", os.Remove},
		{"renamed", "removed", func(path string) error { return os.Rename(path, path+".1") }},
		{"replaced", "replaced by another file", func(path string) error {
			if err := os.Rename(path, path+".1"); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o644)
		}},
	} {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		s := NewFileSink(path)
		if err := s.Publish(ctx, nil, []byte(`{"a":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.change(path); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Errorf("%s: a barrier with no line since the last: %v", c.name, err)
		}
		if err := s.Publish(ctx, nil, []byte(`{"a":2}`)); err != nil {
			t.Fatal(err)
		}
		want := "file sink " + path + ": " + c.want + " while the process was writing it: the 1 line published since the last commit is not in the file it names"
		if err := s.Barrier()(ctx); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: barrier: %v, want %q", c.name, err, want)
		}
		s.Publish(ctx, nil, []byte(`{"a":3}`))
		if err := s.Flush(ctx); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: the next barrier: %v, want %q", c.name, err, want)
		}
		if err := s.Close(); err == nil {
			t.Errorf("%s: Close: no error", c.name)
		}
		if c.name != "removed" {
			if b, err := os.ReadFile(path + ".1"); err != nil || string(b) != "{\"a\":1}\n" {
				t.Errorf("%s: the old file holds %q, %v; want only the line before the change", c.name, b, err)
			}
		}
	}
}

// TestFileSinkSameProcessLink: a second sink of this process on a file one
// of its sinks holds, reached through a symbolic link (so through another
// lock file), is refused naming this process and the sink that holds the
// file; once that one is closed, the file is free. (Before, it was "in use
// by another process", unnamed.) The lock file then holds the holder's
// line alone, whatever longer line a killed holder left in it.
func TestFileSinkSameProcessLink(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(lockPath(path), []byte("pid 1 on a host whose name is much longer than this one's since long ago\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	s := NewFileSink(path)
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(lockPath(path)); err != nil || string(b) != FileHolder()+"\n" {
		t.Errorf("the lock file holds %q, %v; want the holder's line alone", b, err)
	}
	other := NewFileSink(link)
	err := other.Check(ctx)
	var inUse *FileInUseError
	want := FileHolder() + " (this process: its file sink " + path + " is the same file)"
	if !errors.As(err, &inUse) || inUse.Holder != want || !strings.Contains(err.Error(), "file sink "+link+": in use by "+want) {
		t.Fatalf("a second sink of this process through a link: %v, want it to name %q", err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Check(ctx); err != nil {
		t.Fatalf("Check once the first sink closed: %v", err)
	}
	defer other.Close()
	err = NewFileSink(path).Check(ctx)
	want = FileHolder() + " (this process: its file sink " + link + " is the same file)"
	if !errors.As(err, &inUse) || inUse.Holder != want {
		t.Fatalf("a sink on the path the link's sink holds: %v, want it to name %q", err, want)
	}
}
