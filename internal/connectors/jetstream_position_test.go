package connectors

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// Position's committed position of a JetStream durable: none for a new
// durable, even on a stream whose first messages were purged (the
// server's floor below the first sequence is not a commit); the ack
// floor once the durable acknowledged, and still after the consumer
// resets that redeliver what was fetched but not acknowledged, which zero
// the consumer-side floor for good.
func TestJetStreamPosition(t *testing.T) {
	url := jsTestServer(t, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, js := jsTestClient(t, url)
	stream, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(6)); err != nil { // keeps 6..20
		t.Fatal(err)
	}
	cfg := NATSConfig{URL: url, Durable: "pos", JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}
	open := func() *JetStreamSource {
		t.Helper()
		src, err := NewJetStreamSource(ctx, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	check := func(what string, src *JetStreamSource, committed, first int64) {
		t.Helper()
		pos, ok := src.Position(0)
		if !ok || pos.Committed != committed || pos.First != first || pos.Origin == "" {
			t.Errorf("%s: Position = %+v, %v; want committed %d, first %d, an origin", what, pos, ok, committed, first)
		}
		if _, ok := src.Position(1); ok {
			t.Errorf("%s: Position of partition 1 known", what)
		}
	}
	src := open()
	check("new durable on a stream starting at 6", src, -1, 6)
	natsFetchN(t, src, 10, 5) // sequences 6..15
	src.Close()

	src = open() // nothing acknowledged: still no commit
	check("durable that fetched, acknowledged nothing", src, -1, 6)
	var last Record
	for range 5 {
		if last, err = src.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Commit(ctx, last); err != nil { // 6..10
		t.Fatal(err)
	}
	natsFetchN(t, src, 3, 10) // 11..13 fetched, not acknowledged
	src.Close()

	for i := range 3 {
		src = open() // resets the consumer to redeliver 11.. (the first time)
		check("reopened after a commit of 10", src, 10, 6)
		if i == 0 {
			natsFetchN(t, src, 2, 10) // delivered again, not acknowledged
		}
		src.Close()
	}
}
