// Package sourcetest is a conformance suite for connectors.Source
// implementations, in the spirit of testing/fstest and of onlinetest for
// learners: every source that keeps positions runs through Run.
//
// Run fills a new stream with records — valid events and bad ones (not
// JSON, invalid UTF-8), which a source must deliver as they are — and
// checks:
//
//   - order and positions: opened to stop at the end, the source delivers
//     every record once, in order, with strictly increasing offsets, then
//     connectors.ErrEndOfInput, and ErrEndOfInput again;
//   - commit then restart: a source that commits a record and is reopened
//     as the same consumer delivers the record after it first, and the
//     records fetched but not committed again (redelivery);
//   - a consumer that committed everything, reopened, is at its end;
//   - a cancelled context ends a Fetch that waits with the context's
//     error.
//
// The package depends on the standard library and connectors only.
package sourcetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// A Harness makes the source under test.
type Harness struct {
	// New fills a new stream with values, in order, in one partition, and
	// returns open, which opens a source reading it as one consumer (the
	// same group or durable on every call): to stop at the end it had
	// when opened with untilEnd, to follow it otherwise.
	New func(t *testing.T, values [][]byte) (open func(t *testing.T, untilEnd bool) connectors.Source)
	// Resumes: Commit is kept, and a reopened source starts after the
	// last committed record (false for a file, which is replayed whole).
	Resumes bool
	// Follows: a source opened without untilEnd waits at the end for more
	// (false for a file, which ends anyway).
	Follows bool
}

// Values returns the records Run publishes: n events, every 7th of them
// a bad record.
func Values(n int) [][]byte {
	vs := make([][]byte, n)
	for i := range vs {
		switch {
		case i%7 == 3:
			vs[i] = fmt.Appendf(nil, `{"id": "bad-%d", broken`, i)
		case i%7 == 5:
			vs[i] = []byte{'{', 0xff, 0xfe, byte(i), '}'}
		default:
			vs[i] = fmt.Appendf(nil, `{"id":"e-%d","label":%d,"x":[%d]}`, i, i%2, i)
		}
	}
	return vs
}

// Run runs the suite against h as subtests of t named name.
func Run(t *testing.T, name string, h Harness) {
	t.Run(name, func(t *testing.T) {
		t.Run("OrderAndEnd", func(t *testing.T) { testOrder(t, h) })
		if h.Resumes {
			t.Run("CommitRestart", func(t *testing.T) { testResume(t, h) })
		}
		if h.Follows {
			t.Run("Cancel", func(t *testing.T) { testCancel(t, h) })
		}
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// fetch fetches n records (n < 0: until ErrEndOfInput), copying them.
func fetch(t *testing.T, s connectors.Source, n int) []connectors.Record {
	t.Helper()
	var out []connectors.Record
	for n < 0 || len(out) < n {
		r, err := s.Fetch(ctx(t))
		if n < 0 && errors.Is(err, connectors.ErrEndOfInput) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: Fetch after %d records: %v", s.Name(), len(out), err)
		}
		r.Value = bytes.Clone(r.Value)
		out = append(out, r)
	}
	return out
}

// same checks that recs are values[from:from+len(recs)], in order, with
// increasing offsets.
func same(t *testing.T, what string, recs []connectors.Record, values [][]byte, from int) {
	t.Helper()
	for k, r := range recs {
		if i := from + k; i >= len(values) || !bytes.Equal(r.Value, values[i]) {
			t.Fatalf("%s: record %d is %q, want record %d of the stream", what, k, r.Value, i)
		}
		if k > 0 && r.Offset <= recs[k-1].Offset {
			t.Fatalf("%s: offset %d after %d", what, r.Offset, recs[k-1].Offset)
		}
		if r.Partition != 0 {
			t.Fatalf("%s: partition %d, want 0", what, r.Partition)
		}
	}
}

func testOrder(t *testing.T, h Harness) {
	values := Values(50)
	open := h.New(t, values)
	s := open(t, true)
	defer s.Close()
	recs := fetch(t, s, -1)
	if len(recs) != len(values) {
		t.Fatalf("%d records before the end, want %d", len(recs), len(values))
	}
	same(t, "opened to the end", recs, values, 0)
	if _, err := s.Fetch(ctx(t)); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatalf("Fetch at the end, again: %v, want ErrEndOfInput", err)
	}
}

func testResume(t *testing.T, h Harness) {
	values := Values(60)
	open := h.New(t, values)

	// Fetch 30, commit the 20th: a reopened consumer starts at the 21st,
	// delivering the ten fetched but not committed again.
	s := open(t, true)
	recs := fetch(t, s, 30)
	same(t, "first run", recs, values, 0)
	if err := s.Commit(ctx(t), recs[19]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, true)
	rest := fetch(t, s, -1)
	same(t, "after a commit of record 19 and a restart", rest, values, 20)
	if len(rest) != 40 {
		t.Fatalf("after a commit of record 19 and a restart: %d records, want 40", len(rest))
	}
	if rest[0].Offset <= recs[19].Offset {
		t.Fatalf("after the restart: offset %d, not after the committed %d", rest[0].Offset, recs[19].Offset)
	}
	if err := s.Commit(ctx(t), rest[len(rest)-1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Everything committed: the consumer is at its end.
	s = open(t, true)
	defer s.Close()
	if r, err := s.Fetch(ctx(t)); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatalf("after committing everything: %q, %v; want ErrEndOfInput", r.Value, err)
	}
}

func testCancel(t *testing.T, h Harness) {
	values := Values(5)
	open := h.New(t, values)
	s := open(t, false)
	defer s.Close()
	same(t, "following", fetch(t, s, len(values)), values, 0)
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Fetch(c)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Fetch at the end of a followed stream: %v, want the context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Fetch at the end did not return after its context's deadline")
	}
}
