package sourcetest_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/sourcetest"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// stream is an in-memory stream with one consumer position.
type stream struct {
	mu        sync.Mutex
	values    [][]byte
	committed int64 // offset of the next record to deliver on open
}

// A fault makes mem break the source contract one way.
type fault int

const (
	sound      fault = iota
	forgetful        // ignores commits
	regressing       // a commit of an earlier record moves the position back
	endless          // opened to stop at the end, reads what is there when it fetches
)

// mem reads a stream from its committed position.
type mem struct {
	s        *stream
	next     int64
	untilEnd bool
	end      int64 // with untilEnd: the stream's length at open
	fault    fault
}

func (m *mem) Fetch(ctx context.Context) (connectors.Record, error) {
	m.s.mu.Lock()
	n := int64(len(m.s.values))
	var v []byte
	if m.next < n {
		v = m.s.values[m.next]
	}
	m.s.mu.Unlock()
	end := m.end
	if m.fault == endless {
		end = n
	}
	switch {
	case m.untilEnd && m.next >= end:
		return connectors.Record{}, connectors.ErrEndOfInput
	case m.next < n:
		m.next++
		return connectors.Record{Value: v, Offset: m.next - 1}, nil
	}
	<-ctx.Done()
	return connectors.Record{}, ctx.Err()
}

func (m *mem) Commit(_ context.Context, r connectors.Record) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	switch {
	case m.fault == forgetful:
	case m.fault == regressing || r.Offset+1 > m.s.committed:
		m.s.committed = r.Offset + 1
	}
	return nil
}

func (m *mem) Name() string { return "mem" }
func (m *mem) Close() error { return nil }

func harness(f fault) sourcetest.Harness {
	return sourcetest.Harness{Resumes: true, Follows: true,
		New: func(t *testing.T, values [][]byte) sourcetest.Stream {
			s := &stream{values: values}
			return sourcetest.Stream{
				Open: func(t *testing.T, untilEnd bool) connectors.Source {
					s.mu.Lock()
					defer s.mu.Unlock()
					return &mem{s: s, next: s.committed, untilEnd: untilEnd, end: int64(len(s.values)), fault: f}
				},
				Publish: func(t *testing.T, values [][]byte) {
					s.mu.Lock()
					defer s.mu.Unlock()
					s.values = append(s.values, values...)
				},
			}
		}}
}

// TestRun: a conforming in-memory source passes; each broken one fails,
// in a process of its own, with the check it breaks.
func TestRun(t *testing.T) {
	broken := map[string]struct {
		fault fault
		want  string
	}{
		"forgetful":  {forgetful, "after a commit of record 19 and a restart"},
		"regressing": {regressing, "after a commit of record 19 and a restart"},
		"endless":    {endless, "60 records before the end, want 50"},
	}
	if name := os.Getenv("SOURCETEST_BROKEN"); name != "" {
		sourcetest.Run(t, name, harness(broken[name].fault))
		return
	}
	sourcetest.Run(t, "mem", harness(sound))
	for name, b := range broken {
		cmd := testproc.Command(t, os.Args[0], "-test.run=^TestRun$", "-test.v")
		cmd.Env = append(os.Environ(), "SOURCETEST_BROKEN="+name)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), b.want) {
			t.Errorf("the suite on a %s source: err %v, want a failure saying %q; output:\n%s", name, err, b.want, out)
		}
	}
}
