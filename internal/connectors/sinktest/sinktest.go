// Package sinktest is a conformance suite for connectors.Sink
// implementations, the counterpart of sourcetest for sources: every sink
// runs through Run.
//
// Run publishes records — sourcetest.Values: valid events and bad ones
// (not JSON, invalid UTF-8), which a sink must carry as they are — into
// new destinations, reads back what each destination holds, and checks
// what the sink promises:
//
//   - publish and flush: a Checker's Check passes on a destination that
//     takes the messages; once Flush returned, the destination holds every
//     message published before it, once, in order, with its key where the
//     transport keeps keys, although the caller overwrote the key and
//     value it passed as soon as Publish returned (a sink does not retain
//     them); Flush with nothing new to flush returns at once;
//   - close: Close alone flushes, the destination then holds every
//     message;
//   - barrier (a connectors.BarrierSink): a barrier's wait, called on
//     another goroutine while the publishing goroutine goes on, returns
//     once the destination holds every message published before the
//     barrier (a wait taken before any message returns at once); a Flush
//     afterwards delivers the rest;
//   - identities (a connectors.IDSink): every message published with
//     PublishID carries its identity to the destination, a message
//     published with Publish carries none; a message published again with
//     the identity of one before (the repeats of a crash) is stored once
//     where the harness Dedups (a JetStream stream's duplicate window), and
//     stored again, with its identity, where it does not (Kafka's
//     streamlearn-id header, by which a consumer drops it).
//
// The package depends on the standard library, connectors and sourcetest
// only.
package sinktest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/sourcetest"
)

// A Harness makes the destinations and sinks under test.
type Harness struct {
	// New makes a new, empty destination and a sink publishing to it.
	// The suite closes the sink.
	New func(t *testing.T) Destination
	// Keys: the destination keeps each message's key (a Kafka message
	// key; false for a file and NATS, which drop it).
	Keys bool
	// Dedups: the destination stores a message published with the
	// identity of a message it holds only once (a JetStream stream's
	// Nats-Msg-Id); only for an IDSink.
	Dedups bool
}

// A Destination is one destination a Harness made, with its sink.
type Destination struct {
	// Sink publishes to the destination.
	Sink connectors.Sink
	// Stored returns the messages the destination holds now, in the
	// order it holds them. It may be called while the sink publishes.
	Stored func(t *testing.T) []Message
}

// A Message is one message a destination holds.
type Message struct {
	Key, Value []byte
	// ID is the identity the message carries (connectors.IDSink), ""
	// when none.
	ID string
}

// keyOf returns the key Run publishes value with: one of a few, the same
// for a value published again.
func keyOf(value []byte) []byte { return fmt.Appendf(nil, "k%d", len(value)%11) }

// Run runs the suite against h as subtests of t named name. The checks
// for barriers and identities run for sinks that have them.
func Run(t *testing.T, name string, h Harness) {
	t.Run(name, func(t *testing.T) {
		t.Run("PublishFlush", func(t *testing.T) { testPublishFlush(t, h) })
		t.Run("Close", func(t *testing.T) { testClose(t, h) })
		d := h.New(t)
		_, barrier := d.Sink.(connectors.BarrierSink)
		_, ids := d.Sink.(connectors.IDSink)
		d.Sink.Close()
		if barrier {
			t.Run("Barrier", func(t *testing.T) { testBarrier(t, h) })
		}
		if ids {
			t.Run("Identities", func(t *testing.T) { testIdentities(t, h) })
		}
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// open makes a destination, its sink closed when the test ends.
func open(t *testing.T, h Harness) Destination {
	t.Helper()
	d := h.New(t)
	t.Cleanup(func() { d.Sink.Close() })
	return d
}

// publish publishes values[from:to] through s, each with its key, from
// buffers it overwrites once Publish returned.
func publish(ctx context.Context, s connectors.Sink, values [][]byte, from, to int) error {
	var kbuf, vbuf []byte
	for i := from; i < to; i++ {
		kbuf, vbuf = append(kbuf[:0], keyOf(values[i])...), append(vbuf[:0], values[i]...)
		if err := s.Publish(ctx, kbuf, vbuf); err != nil {
			return fmt.Errorf("Publish of record %d: %w", i, err)
		}
		clear(kbuf)
		clear(vbuf)
	}
	return nil
}

// same checks that msgs are values[:len(msgs)], in order, with their keys
// where h says so, and carry ids or none (ids nil).
func same(t *testing.T, h Harness, what string, msgs []Message, values [][]byte, ids []string) {
	t.Helper()
	for i, m := range msgs {
		if i >= len(values) || !bytes.Equal(m.Value, values[i]) {
			t.Fatalf("%s: message %d is %q, want record %d as published", what, i, m.Value, i)
		}
		if h.Keys && !bytes.Equal(m.Key, keyOf(values[i])) {
			t.Fatalf("%s: message %d has key %q, want %q", what, i, m.Key, keyOf(values[i]))
		}
		want := ""
		if ids != nil {
			want = ids[i]
		}
		if m.ID != want {
			t.Fatalf("%s: message %d carries identity %q, want %q", what, i, m.ID, want)
		}
	}
}

// wantAll checks that d holds exactly values, in order.
func wantAll(t *testing.T, h Harness, what string, d Destination, values [][]byte, ids []string) {
	t.Helper()
	msgs := d.Stored(t)
	same(t, h, what, msgs, values, ids)
	if len(msgs) != len(values) {
		t.Fatalf("%s: the destination holds %d messages, want %d", what, len(msgs), len(values))
	}
}

func testPublishFlush(t *testing.T, h Harness) {
	values := sourcetest.Values(200)
	d := open(t, h)
	if c, ok := d.Sink.(connectors.Checker); ok {
		if err := c.Check(ctx(t)); err != nil {
			t.Fatalf("Check on a destination that takes messages: %v", err)
		}
	}
	if err := publish(ctx(t), d.Sink, values, 0, 150); err != nil {
		t.Fatal(err)
	}
	if err := d.Sink.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	wantAll(t, h, "after Flush", d, values[:150], nil)
	if err := publish(ctx(t), d.Sink, values, 150, 200); err != nil {
		t.Fatal(err)
	}
	if err := d.Sink.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	wantAll(t, h, "after a second Flush", d, values, nil)
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Sink.Flush(c); err != nil {
		t.Fatalf("Flush with nothing new to flush: %v", err)
	}
	wantAll(t, h, "after a Flush with nothing new", d, values, nil)
}

func testClose(t *testing.T, h Harness) {
	values := sourcetest.Values(100)
	d := h.New(t)
	if err := publish(ctx(t), d.Sink, values, 0, len(values)); err != nil {
		d.Sink.Close()
		t.Fatal(err)
	}
	if err := d.Sink.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantAll(t, h, "after Close", d, values, nil)
}

func testBarrier(t *testing.T, h Harness) {
	const before, after = 300, 3000
	values := sourcetest.Values(before + after)
	d := open(t, h)
	s := d.Sink.(connectors.BarrierSink)

	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Barrier()(c); err != nil {
		t.Fatalf("the wait of a barrier before any message: %v", err)
	}
	if err := publish(ctx(t), s, values, 0, before); err != nil {
		t.Fatal(err)
	}
	wait := s.Barrier()
	published := make(chan error, 1)
	pctx := ctx(t)
	go func() { published <- publish(pctx, s, values, before, before+after) }()
	waited := make(chan error, 1)
	wctx := ctx(t)
	go func() { waited <- wait(wctx) }() // a wait may be called on any goroutine
	if err := <-waited; err != nil {
		t.Fatalf("the wait of a barrier: %v", err)
	}
	msgs := d.Stored(t)
	same(t, h, "after the wait of a barrier", msgs, values, nil)
	if len(msgs) < before {
		t.Fatalf("after the wait of a barrier, the destination holds %d messages; want the %d published before it", len(msgs), before)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	wantAll(t, h, "after Flush", d, values, nil)
}

func testIdentities(t *testing.T, h Harness) {
	const n, repeated = 40, 10
	values := sourcetest.Values(n + 10)
	d := open(t, h)
	s := d.Sink.(connectors.IDSink)
	ids := make([]string, 0, n+repeated)
	var kbuf, vbuf []byte
	publishID := func(i int) {
		t.Helper()
		id := fmt.Sprintf("sinktest-%d", i)
		kbuf, vbuf = append(kbuf[:0], keyOf(values[i])...), append(vbuf[:0], values[i]...)
		if err := s.PublishID(ctx(t), id, kbuf, vbuf); err != nil {
			t.Fatalf("PublishID of record %d: %v", i, err)
		}
		clear(kbuf)
		clear(vbuf)
		ids = append(ids, id)
	}
	for i := range n {
		publishID(i)
	}
	// A crash's repeats: the last records again, with their identities.
	for i := n - repeated; i < n; i++ {
		publishID(i)
	}
	if err := s.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	msgs := d.Stored(t)
	want, wantIDs := values[:n], ids[:n]
	if !h.Dedups {
		want = append(values[:n:n], values[n-repeated:n]...)
		wantIDs = ids
	}
	same(t, h, "published with identities", msgs, want, wantIDs)
	if len(msgs) != len(want) {
		t.Fatalf("published with identities, %d of them repeats: the destination holds %d messages, want %d", repeated, len(msgs), len(want))
	}

	// Publish sends none.
	if err := publish(ctx(t), s, values, n, n+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	msgs = d.Stored(t)
	if len(msgs) != len(want)+1 {
		t.Fatalf("after a Publish and Flush, the destination holds %d messages, want %d", len(msgs), len(want)+1)
	}
	if last := msgs[len(msgs)-1]; !bytes.Equal(last.Value, values[n]) || last.ID != "" {
		t.Fatalf("a message of Publish is %q with identity %q, want %q with none", last.Value, last.ID, values[n])
	}
}
