// Package sourcetest is a conformance suite for connectors.Source
// implementations, in the spirit of testing/fstest and of onlinetest for
// learners: every source runs through Run.
//
// Run fills new streams with records — valid events and bad ones (not
// JSON, invalid UTF-8), which a source must deliver as they are — and
// checks:
//
//   - order and positions: opened to stop at the end, the source delivers
//     every record once, in order, each with the offset after the one
//     before (from Harness.FirstOffset), and the broker's time where
//     Harness.Times says it has one; then connectors.ErrEndOfInput, and
//     ErrEndOfInput again; the records published after it opened lie
//     beyond its end;
//   - an empty stream ends at once;
//   - commit then restart: a source closed without a commit is reopened
//     at the first record; one that commits a record (and then an earlier
//     one, which changes nothing) and is reopened as the same consumer
//     delivers the record after it first, and the records fetched but not
//     committed again (redelivery); a consumer that committed everything,
//     reopened, is at its end;
//   - following: a source opened to follow delivers the stream, then a
//     Fetch that waits ends with its context's error, and the source
//     goes on to deliver the next record published.
//
// A live stream (core NATS), which keeps nothing for a consumer that is
// not there and has no end, is checked for order, positions and
// following only.
//
// The package depends on the standard library and connectors only.
package sourcetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// A Harness makes the streams and sources under test.
type Harness struct {
	// New makes a new stream of one partition holding values, in order
	// (a live stream cannot hold them: Run publishes them itself, once a
	// source is open).
	New func(t *testing.T, values [][]byte) Stream
	// FirstOffset is the offset of a new stream's first record; each
	// record after it has the next (a Kafka offset counts from 0, a
	// JetStream sequence, a file's line and a NATS arrival from 1).
	FirstOffset int64
	// Times: records carry the broker's time (false for a file and core
	// NATS, whose records have none).
	Times bool
	// Resumes: Commit is kept, and a reopened source starts after the
	// last committed record (false for a file, which is replayed whole).
	Resumes bool
	// Follows: a source opened without untilEnd waits at the end for more
	// (false for a file, which ends anyway), and one opened with untilEnd
	// ends where the stream ended when it opened.
	Follows bool
	// Live: the stream keeps no record for a source that is not open and
	// a source cannot be opened to stop at the end (core NATS). Run opens
	// a source to follow, then publishes.
	Live bool
}

// A Stream is one stream a Harness made.
type Stream struct {
	// Open opens a source reading the stream as one consumer (the same
	// group or durable on every call): to stop at the end it had when
	// opened with untilEnd, to follow it otherwise.
	Open func(t *testing.T, untilEnd bool) connectors.Source
	// Publish appends values to the stream; it may be nil unless the
	// harness Follows or is Live.
	Publish func(t *testing.T, values [][]byte)
}

// Values returns the records Run publishes: n events, every 7th of them
// a bad record. None holds a newline, so that a file carries each as one
// line.
func Values(n int) [][]byte {
	vs := make([][]byte, n)
	for i := range vs {
		switch {
		case i%7 == 3:
			vs[i] = fmt.Appendf(nil, `{"id": "bad-%d", broken`, i)
		case i%7 == 5:
			vs[i] = []byte{'{', 0xff, 0xfe, 0x80 | byte(i%64), '}'}
		default:
			vs[i] = fmt.Appendf(nil, `{"id":"e-%d","label":%d,"x":[%d]}`, i, i%2, i)
		}
	}
	return vs
}

// LinesFile writes lines, each with its newline, to a new file name in a
// temporary directory of t and returns its path: the stream of a source
// that reads a file.
func LinesFile(t *testing.T, name string, lines [][]byte) string {
	t.Helper()
	var data []byte
	for _, l := range lines {
		data = append(append(data, l...), '\n')
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Run runs the suite against h as subtests of t named name.
func Run(t *testing.T, name string, h Harness) {
	t.Run(name, func(t *testing.T) {
		if !h.Live {
			t.Run("OrderAndEnd", func(t *testing.T) { testOrder(t, h) })
			t.Run("Empty", func(t *testing.T) { testEmpty(t, h) })
		}
		if h.Resumes && !h.Live {
			t.Run("CommitRestart", func(t *testing.T) { testResume(t, h) })
		}
		if h.Follows || h.Live {
			t.Run("Follow", func(t *testing.T) { testFollow(t, h) })
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

// same checks that recs are values[from:from+len(recs)], in order, in
// partition 0, with the offsets of those records and, where h says so, a
// broker's time.
func same(t *testing.T, h Harness, what string, recs []connectors.Record, values [][]byte, from int) {
	t.Helper()
	for k, r := range recs {
		i := from + k
		if i >= len(values) || !bytes.Equal(r.Value, values[i]) {
			t.Fatalf("%s: record %d is %q, want record %d of the stream", what, k, r.Value, i)
		}
		if want := h.FirstOffset + int64(i); r.Offset != want {
			t.Fatalf("%s: record %d of the stream at offset %d, want %d", what, i, r.Offset, want)
		}
		if r.Partition != 0 {
			t.Fatalf("%s: partition %d, want 0", what, r.Partition)
		}
		if h.Times && r.Time.IsZero() {
			t.Fatalf("%s: record %d of the stream has no time", what, i)
		}
	}
}

// wantEnd checks that s is at its end.
func wantEnd(t *testing.T, s connectors.Source, what string) {
	t.Helper()
	if r, err := s.Fetch(ctx(t)); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatalf("%s: %q (offset %d), %v; want ErrEndOfInput", what, r.Value, r.Offset, err)
	}
}

func testOrder(t *testing.T, h Harness) {
	values := Values(50)
	st := h.New(t, values)
	s := st.Open(t, true)
	defer s.Close()
	if h.Follows {
		st.Publish(t, Values(60)[50:])
	}
	recs := fetch(t, s, -1)
	if len(recs) != len(values) {
		t.Fatalf("%d records before the end, want %d", len(recs), len(values))
	}
	same(t, h, "opened to the end", recs, values, 0)
	wantEnd(t, s, "Fetch at the end, again")
}

func testEmpty(t *testing.T, h Harness) {
	s := h.New(t, nil).Open(t, true)
	defer s.Close()
	wantEnd(t, s, "an empty stream")
	wantEnd(t, s, "an empty stream, again")
}

func testResume(t *testing.T, h Harness) {
	values := Values(60)
	st := h.New(t, values)

	// Fetch 10 and close without a commit: all of them come again.
	s := st.Open(t, true)
	same(t, h, "first run", fetch(t, s, 10), values, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Fetch 30, commit the 20th, then the 6th (commits are cumulative: it
	// changes nothing): a reopened consumer starts at the 21st,
	// delivering the ten fetched but not committed again.
	s = st.Open(t, true)
	recs := fetch(t, s, 30)
	same(t, h, "after a restart without a commit", recs, values, 0)
	for _, r := range []connectors.Record{recs[19], recs[5]} {
		if err := s.Commit(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = st.Open(t, true)
	rest := fetch(t, s, -1)
	same(t, h, "after a commit of record 19 and a restart", rest, values, 20)
	if len(rest) != 40 {
		t.Fatalf("after a commit of record 19 and a restart: %d records, want 40", len(rest))
	}
	if err := s.Commit(ctx(t), rest[len(rest)-1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Everything committed: the consumer is at its end.
	s = st.Open(t, true)
	defer s.Close()
	wantEnd(t, s, "after committing everything")
}

func testFollow(t *testing.T, h Harness) {
	values := Values(51)
	var st Stream
	if h.Live {
		st = h.New(t, nil)
	} else {
		st = h.New(t, values[:50])
	}
	s := st.Open(t, false)
	defer s.Close()
	if h.Live {
		st.Publish(t, values[:50])
	}
	same(t, h, "following", fetch(t, s, 50), values, 0)

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

	st.Publish(t, values[50:])
	same(t, h, "following, after a Fetch ran out of time", fetch(t, s, 1), values, 50)
}
