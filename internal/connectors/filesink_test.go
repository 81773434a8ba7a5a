package connectors

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

// TestFileSinkTornTail: a file whose last line has no end (a process
// killed in the middle of a write) is truncated after its last newline
// when a sink opens it — by Check, or by the first Publish — with a
// warning naming the file and the bytes removed; the next line starts at
// a line's start. A file of whole lines is left as it is, silently; one
// with no newline at all is emptied. (Before, the next line was appended
// to the torn one: `…"round":339{"id":"e-6645",…`.)
func TestFileSinkTornTail(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		before    string
		open      func(s *FileSink) error
		want      string // after the open and one line published
		warnBytes int    // the bytes the warning says went; 0: no warning
	}{
		{"check", "{\"a\":1}\n{\"b\":2}\n{\"offset\":14643,\"round\":339", func(s *FileSink) error { return s.Check(ctx) },
			"{\"a\":1}\n{\"b\":2}\n{\"n\":3}\n", 27},
		{"publish", "{\"a\":1}\n{\"b\":2}\n{\"offset\":14643,\"round\":339", func(*FileSink) error { return nil },
			"{\"a\":1}\n{\"b\":2}\n{\"n\":3}\n", 27},
		{"no newline", "{\"offset\":1", func(s *FileSink) error { return s.Check(ctx) }, "{\"n\":3}\n", 11},
		// A tail longer than the 4 KiB the search reads at a time.
		{"long tail", "{\"a\":1}\n" + strings.Repeat("x", 10000), func(s *FileSink) error { return s.Check(ctx) }, "{\"a\":1}\n{\"n\":3}\n", 10000},
		{"whole", "{\"a\":1}\n{\"b\":2}\n", func(s *FileSink) error { return s.Check(ctx) }, "{\"a\":1}\n{\"b\":2}\n{\"n\":3}\n", 0},
		{"absent", "", func(s *FileSink) error { return s.Check(ctx) }, "{\"n\":3}\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			if c.before != "" {
				if err := os.WriteFile(path, []byte(c.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var log bytes.Buffer
			s := NewFileSink(path)
			s.Logger = slog.New(slog.NewTextHandler(&log, nil))
			if err := c.open(s); err != nil {
				t.Fatal(err)
			}
			if err := s.Publish(ctx, nil, []byte(`{"n":3}`)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("the file holds %.300q, want %q", got, c.want)
			}
			warned := strings.Contains(log.String(), "level=WARN") && strings.Contains(log.String(), "torn")
			if c.warnBytes == 0 && log.Len() != 0 {
				t.Errorf("logged %q for a file of whole lines", log.String())
			}
			if c.warnBytes != 0 && (!warned || !strings.Contains(log.String(), "path="+path) || !strings.Contains(log.String(), "bytes="+strconv.Itoa(c.warnBytes))) {
				t.Errorf("logged %q, want a warning naming %s and %d bytes", log.String(), path, c.warnBytes)
			}
		})
	}
}

// TestFileSinkWritesWholeLines: what a sink has written to its file ends
// at a line's end at every moment, so a process killed at any point
// leaves whole lines (but for the part of one a write in flight can
// leave, which the next open removes). Lines longer than the buffer too.
// (Before, the buffer was written each time it was full, in the middle of
// a line.)
func TestFileSinkWritesWholeLines(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s := NewFileSink(path)
	defer s.Close()
	size, writes, lines := int64(0), 0, 0
	for i := range 5000 {
		n := 90 + i%37
		if i%1000 == 999 {
			n = 3*fileSinkBuffer + 5 // longer than the buffer
		}
		v := fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", n))
		if err := s.Publish(ctx, nil, v); err != nil {
			t.Fatal(err)
		}
		lines++
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == size {
			continue
		}
		size = st.Size()
		writes++
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if b[len(b)-1] != '\n' {
			t.Fatalf("after line %d the file's %d bytes end in %q: a torn line", i, len(b), b[max(0, len(b)-20):])
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != lines || writes < 10 {
		t.Fatalf("%d lines in the file of %d published, in %d writes seen", n, lines, writes)
	}
}

// TestFileSinkOneWriter: a file sink's file has one writer. Held by
// another process (this test binary run again, holding it with a sink of
// its own), opening it is refused with a *FileInUseError naming that
// process (pid and host, from the lock file beside it); the same in this
// process, and through a symbolic link, whose lock file is another. Once
// the holder is killed (SIGKILL: nothing cleaned up) the kernel has
// released its lock and the file opens. (Before, both sinks appended to
// the file and their buffers interleaved in the middle of lines.)
func TestFileSinkOneWriter(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("flock(2) only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "dead.jsonl")
	holder := testproc.CommandContext(t, ctx, os.Args[0], "-test.run=^TestFileSinkHolderProcess$")
	holder.Env = append(os.Environ(), "STREAMLEARN_FILESINK_HOLDER="+path)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer holder.Process.Kill()
	if said, _ := bufio.NewReader(out).ReadString('\n'); said != "holding\n" {
		t.Fatalf("the holder process said %q, want \"holding\"", said)
	}
	host, _ := os.Hostname()
	want := "in use by pid " + strconv.Itoa(holder.Process.Pid) + " on " + host + " since "
	s := NewFileSink(path)
	err = s.Check(ctx)
	var inUse *FileInUseError
	if !errors.As(err, &inUse) || inUse.Path != path || !strings.HasPrefix(inUse.Holder, "pid "+strconv.Itoa(holder.Process.Pid)+" on ") ||
		!strings.Contains(err.Error(), "file sink "+path+": "+want) {
		t.Fatalf("Check of a file another process holds: %v, want a FileInUseError with %q", err, want)
	}
	if err := s.Publish(ctx, nil, []byte(`{"x":1}`)); !errors.As(err, &inUse) {
		t.Fatalf("Publish to a file another process holds: %v, want a FileInUseError", err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := NewFileSink(link).Check(ctx); !errors.As(err, &inUse) || inUse.Path != link {
		t.Fatalf("Check of the file through a symbolic link: %v, want a FileInUseError", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "{\"held\":1}\n" {
		t.Fatalf("the holder's file: %q (%v), want its one line", b, err)
	}

	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.Wait()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check once the holder was killed: %v", err)
	}
	if err := NewFileSink(path).Check(ctx); !errors.As(err, &inUse) || !strings.HasPrefix(inUse.Holder, "pid "+strconv.Itoa(os.Getpid())+" on ") {
		t.Fatalf("a second sink of this process: %v, want a FileInUseError naming pid %d", err, os.Getpid())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other := NewFileSink(path)
	if err := other.Check(ctx); err != nil {
		t.Fatalf("Check after Close: %v", err)
	}
	other.Close()
}

// TestFileSinkHolderProcess is the holder of TestFileSinkOneWriter when
// run with STREAMLEARN_FILESINK_HOLDER=path: it opens a sink on path,
// writes a line, says "holding" and waits to be killed.
func TestFileSinkHolderProcess(t *testing.T) {
	path := os.Getenv("STREAMLEARN_FILESINK_HOLDER")
	if path == "" {
		t.Skip("the holder of TestFileSinkOneWriter")
	}
	s := NewFileSink(path)
	if err := s.Publish(context.Background(), nil, []byte(`{"held":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("holding")
	time.Sleep(time.Minute)
}

// A file sink whose folder does not exist says so, naming the folder,
// rather than failing on its lock file.
func TestFileSinkMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "predictions.jsonl")
	err := NewFileSink(path).Check(context.Background())
	if want := "its folder " + filepath.Dir(path) + " does not exist"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Check: %v, want an error saying %q", err, want)
	}
}
