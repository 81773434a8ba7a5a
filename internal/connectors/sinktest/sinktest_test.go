package sinktest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/sinktest"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// A fault makes mem break the sink contract one way.
type fault int

const (
	sound     fault = iota
	forgetful       // loses every 10th message
	retaining       // keeps the caller's value rather than a copy
	lazyClose       // Close drops what was not flushed
	hasty           // a barrier's wait returns before its messages are delivered
	anonymous       // PublishID drops the identity
	repeating       // stores a repeated identity again, although the harness says it dedups
	keyless         // drops keys, although the harness says it keeps them
	refusing        // Check fails on a destination that takes messages
)

// dest is an in-memory destination.
type dest struct {
	mu   sync.Mutex
	msgs []sinktest.Message
	seen map[string]bool
}

// mem publishes into a dest: messages wait in pending until a Flush, a
// barrier's wait or Close delivers them.
type mem struct {
	d     *dest
	dedup bool
	fault fault

	mu        sync.Mutex
	pending   []sinktest.Message
	published int // messages published
	delivered int // messages delivered (or lost)
}

var (
	_ connectors.BarrierSink = (*mem)(nil)
	_ connectors.IDSink      = (*mem)(nil)
	_ connectors.Checker     = (*mem)(nil)
)

func (m *mem) Check(context.Context) error {
	if m.fault == refusing {
		return errors.New("mem: refused")
	}
	return nil
}

func (m *mem) Publish(ctx context.Context, key, value []byte) error {
	return m.PublishID(ctx, "", key, value)
}

func (m *mem) PublishID(_ context.Context, id string, key, value []byte) error {
	msg := sinktest.Message{Key: bytes.Clone(key), Value: bytes.Clone(value), ID: id}
	switch m.fault {
	case retaining:
		msg.Value = value
	case anonymous:
		msg.ID = ""
	case keyless:
		msg.Key = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, msg)
	m.published++
	return nil
}

// deliver delivers the messages published before the upTo-th.
func (m *mem) deliver(upTo int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	for ; m.delivered < upTo; m.delivered++ {
		msg := m.pending[0]
		m.pending = m.pending[1:]
		switch {
		case m.fault == forgetful && m.delivered%10 == 9:
		case msg.ID != "" && m.dedup && m.fault != repeating && m.d.seen[msg.ID]:
		default:
			m.d.msgs = append(m.d.msgs, msg)
			m.d.seen[msg.ID] = true
		}
	}
}

func (m *mem) Flush(context.Context) error {
	m.mu.Lock()
	n := m.published
	m.mu.Unlock()
	m.deliver(n)
	return nil
}

func (m *mem) Barrier() func(context.Context) error {
	m.mu.Lock()
	n := m.published
	m.mu.Unlock()
	if m.fault == hasty {
		return func(context.Context) error { return nil }
	}
	return func(context.Context) error { m.deliver(n); return nil }
}

func (m *mem) Close() error {
	if m.fault == lazyClose {
		return nil
	}
	return m.Flush(context.Background())
}

func harness(f fault, dedup bool) sinktest.Harness {
	return sinktest.Harness{Keys: true, Dedups: dedup || f == repeating,
		New: func(t *testing.T) sinktest.Destination {
			d := &dest{seen: map[string]bool{}}
			return sinktest.Destination{
				Sink: &mem{d: d, dedup: dedup, fault: f},
				Stored: func(*testing.T) []sinktest.Message {
					d.mu.Lock()
					defer d.mu.Unlock()
					return slices.Clone(d.msgs)
				},
			}
		}}
}

// TestRun: conforming in-memory sinks pass, one that stores every message
// and one that drops a repeated identity; each broken one fails, in a
// process of its own, with the check it breaks.
func TestRun(t *testing.T) {
	broken := map[string]struct {
		fault fault
		want  string
	}{
		"forgetful": {forgetful, "after Flush: message 9 is"},
		"retaining": {retaining, "after Flush: message 0 is"},
		"lazyClose": {lazyClose, "after Close: the destination holds 0 messages, want 100"},
		"hasty":     {hasty, "after the wait of a barrier, the destination holds 0 messages; want the 300 published before it"},
		"anonymous": {anonymous, `published with identities: message 0 carries identity "", want "sinktest-0"`},
		"repeating": {repeating, "published with identities: message 40 is"},
		"keyless":   {keyless, `after Flush: message 0 has key "", want`},
		"refusing":  {refusing, "Check on a destination that takes messages: mem: refused"},
	}
	if name := os.Getenv("SINKTEST_BROKEN"); name != "" {
		sinktest.Run(t, name, harness(broken[name].fault, false))
		return
	}
	sinktest.Run(t, "mem", harness(sound, false))
	sinktest.Run(t, "mem-dedup", harness(sound, true))
	for name, b := range broken {
		cmd := testproc.Command(t, os.Args[0], "-test.run=^TestRun$", "-test.v")
		cmd.Env = append(os.Environ(), "SINKTEST_BROKEN="+name)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), b.want) {
			t.Errorf("the suite on a %s sink: err %v, want a failure saying %q; output:\n%s", name, err, b.want, out)
		}
	}
}
