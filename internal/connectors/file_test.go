package connectors

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileSourceBoundsLines: a line longer than MaxBytes comes as its
// first MaxBytes+1 bytes (too long for the decoder, whose limit is the
// same), with Size its whole length, and costs no more memory; the lines
// around it, one of exactly
// MaxBytes before its "\r\n", come whole, with their line numbers.
func TestFileSourceBoundsLines(t *testing.T) {
	const max = 1024
	huge := bytes.Repeat([]byte("x"), 5<<20)
	exact := bytes.Repeat([]byte("y"), max)
	var file bytes.Buffer
	file.WriteString("{\"a\":1}\n")
	file.Write(huge)
	file.WriteString("\n{\"b\":2}\n")
	file.Write(exact)
	file.WriteString("\r\n")
	path := filepath.Join(t.TempDir(), "lines.jsonl")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewFileSource(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.MaxBytes = max
	for _, want := range []struct {
		value  []byte
		offset int64
		size   int
	}{
		{[]byte(`{"a":1}`), 1, 0},
		{huge[:max+1], 2, len(huge)},
		{[]byte(`{"b":2}`), 3, 0},
		{exact, 4, 0},
	} {
		r, err := s.Fetch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Value, want.value) || r.Offset != want.offset || r.Size != want.size {
			t.Fatalf("line %d: %d bytes %.20q (size %d), want %d bytes %.20q (size %d)", r.Offset, len(r.Value), r.Value, r.Size, len(want.value), want.value, want.size)
		}
		if c := cap(s.buf); c > 4*max {
			t.Fatalf("line %d: the source holds a %d-byte buffer for a limit of %d", r.Offset, c, max)
		}
	}
	if _, err := s.Fetch(context.Background()); !errors.Is(err, ErrEndOfInput) {
		t.Fatalf("after the last line: %v, want ErrEndOfInput", err)
	}
}

// TestFileSourceFollowRotation: a following source reads lines appended
// to its file and stops with an error, rather than read lines numbered
// unlike the ones learned, when the file is truncated or its path names
// another file (a rotation); a path removed and not replaced is read on.
func TestFileSourceFollowRotation(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string)
		err    string // "" : no error, the source reads on
	}{
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 3); err != nil {
				t.Fatal(err)
			}
		}, "truncated to 3 bytes after 16 were read (line 2)"},
		{"rotated", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("{\"c\":3}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "names another file now (rotated or replaced) after line 2"},
		{"removed", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.jsonl")
			if err := os.WriteFile(path, []byte("{\"a\":1}\n{\"b\":2}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := NewFileSource(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.Follow = true
			for range 2 {
				if _, err := s.Fetch(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			c.change(t, path)
			ctx, cancel := context.WithTimeout(t.Context(), 3*followPoll)
			defer cancel()
			_, err = s.Fetch(ctx)
			switch {
			case c.err == "" && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("Fetch: %v, want it to wait for more lines", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("Fetch: %v, want an error with %q", err, c.err)
			}
		})
	}
}
