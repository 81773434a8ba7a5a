package sourcetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/sourcetest"
)

// stream is an in-memory stream with one consumer position.
type stream struct {
	mu        sync.Mutex
	values    [][]byte
	committed int64 // offset of the next record to deliver on open
}

// mem reads a stream from its committed position; forgetful ignores
// commits, as a broken source would.
type mem struct {
	s         *stream
	next      int64
	untilEnd  bool
	forgetful bool
}

func (m *mem) Fetch(ctx context.Context) (connectors.Record, error) {
	if int(m.next) < len(m.s.values) {
		r := connectors.Record{Value: m.s.values[m.next], Offset: m.next}
		m.next++
		return r, nil
	}
	if m.untilEnd {
		return connectors.Record{}, connectors.ErrEndOfInput
	}
	<-ctx.Done()
	return connectors.Record{}, ctx.Err()
}

func (m *mem) Commit(_ context.Context, r connectors.Record) error {
	if !m.forgetful {
		m.s.mu.Lock()
		m.s.committed = r.Offset + 1
		m.s.mu.Unlock()
	}
	return nil
}

func (m *mem) Name() string { return "mem" }
func (m *mem) Close() error { return nil }

func harness(forgetful bool) sourcetest.Harness {
	return sourcetest.Harness{Resumes: true, Follows: true,
		New: func(t *testing.T, values [][]byte) func(*testing.T, bool) connectors.Source {
			s := &stream{values: values}
			return func(t *testing.T, untilEnd bool) connectors.Source {
				return &mem{s: s, next: s.committed, untilEnd: untilEnd, forgetful: forgetful}
			}
		}}
}

// TestRun: a conforming in-memory source passes; one that forgets its
// commits fails, in a process of its own, with the resume check.
func TestRun(t *testing.T) {
	if os.Getenv("SOURCETEST_BROKEN") != "" {
		sourcetest.Run(t, "forgetful", harness(true))
		return
	}
	sourcetest.Run(t, "mem", harness(false))
	cmd := exec.Command(os.Args[0], "-test.run=^TestRun$", "-test.v")
	cmd.Env = append(os.Environ(), "SOURCETEST_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "after a commit of record 19 and a restart") {
		t.Errorf("the suite on a source that forgets its commits: err %v; output:\n%s", err, out)
	}
}
