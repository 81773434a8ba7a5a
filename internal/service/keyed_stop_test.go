package service

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/connectors"
)

// heldSink is a memSink whose publish of message number hold (from 1)
// closes reached and waits until release is closed.
type heldSink struct {
	memSink
	n                atomic.Int64
	hold             int64
	reached, release chan struct{}
}

func (s *heldSink) Publish(ctx context.Context, key, value []byte) error {
	if s.n.Add(1) == s.hold {
		close(s.reached)
		<-s.release
	}
	return s.memSink.Publish(ctx, key, value)
}

// countedSource is a memSource that counts its records fetched.
type countedSource struct {
	*memSource
	fetched atomic.Int64
}

func (s *countedSource) Fetch(ctx context.Context) (connectors.Record, error) {
	r, err := s.memSource.Fetch(ctx)
	if err == nil {
		s.fetched.Add(1)
	}
	return r, err
}

// A stop that comes while a checkpoint of models per key is asked for
// gives that checkpoint up: the worker learns the records it was handed
// and the final checkpoint, taken once, holds them all (before, the
// worker made the one asked for, every model that learned since the last
// encoded, and the final one after it: two checkpoints written after the
// stop, and a stop as long as a checkpoint of every model, whose waits the
// drain's deadline bounded). The records learned after the stop are at
// most those handed over before it, and a run resumed from the checkpoint
// reports every key's model as an uninterrupted run does.
func TestKeyedStopGivesCheckpointUp(t *testing.T) {
	const (
		n     = 3000
		every = 1000 // the first round asks after record every
	)
	keys := make([]string, 2500)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	lines := keyedLines(n, keys)
	c := parseYAML(t, `features: {bits: 12}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, bias: true, normalized: false}
models: {by: key}
`)
	whole := newService(t, Options{Config: c, Source: newMemSource(lines, 1)})
	run(t, whole)
	want, err := whole.Reports()
	if err != nil {
		t.Fatal(err)
	}

	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &savedStore{Store: dir}
	// The worker holds at the prediction of the round's last record, so
	// the round's question waits behind it while the loop hands more
	// records over; the stop comes then.
	sink := &heldSink{hold: every, reached: make(chan struct{}), release: make(chan struct{})}
	src := &countedSource{memSource: newMemSource(lines, 1)}
	for i := range src.recs {
		src.recs[i].Lag = int64(n - i) // a backlog: batches of 256 records
	}
	s := newService(t, Options{Config: c, Source: src, Checkpoints: store, Predictions: sink,
		CommitEvery: every, CommitInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-sink.reached
	// A batch handed over after the question (a batch is 256 records).
	for deadline := time.Now().Add(10 * time.Second); src.fetched.Load() <= every+256; {
		if time.Now().After(deadline) {
			t.Fatalf("the loop fetched %d records while the worker held: want more than %d", src.fetched.Load(), every+256)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	handed := src.fetched.Load()
	close(sink.release)
	if err := <-done; err != nil {
		t.Fatalf("Run after the stop: %v", err)
	}
	store.mu.Lock()
	saved := store.saved
	store.mu.Unlock()
	if len(saved) != 1 {
		var at []int64
		for _, c := range saved {
			at = append(at, c.Position)
		}
		t.Fatalf("%d checkpoints written at positions %v, want one: the final one (the one asked for before the stop given up)", len(saved), at)
	}
	learned := saved[0].Position + 1
	if learned <= every || learned > handed {
		t.Errorf("the final checkpoint holds %d records: want more than the %d before the stop's round and at most the %d fetched before the stop", learned, every, handed)
	}
	t.Logf("stop after %d records fetched; the final checkpoint holds %d", handed, learned)

	resumed := newService(t, Options{Config: c, Source: newMemSource(lines, 1), Checkpoints: store, CommitEvery: every})
	run(t, resumed)
	got, err := resumed.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d key reports after the resume, want %d", len(got), len(want))
	}
	for i := range want {
		sameReport(t, "key "+*want[i].Key, got[i].Report, want[i].Report)
	}
}
