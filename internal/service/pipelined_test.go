package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/connectors"
)

// gatedSink is a memSink whose broker acknowledges nothing until gate
// closes: a barrier's wait (and Flush) blocks until then. It counts the
// messages published while a wait blocks.
type gatedSink struct {
	memSink
	gate       chan struct{}
	waiting    atomic.Int32
	duringWait atomic.Int64
}

var _ connectors.BarrierSink = (*gatedSink)(nil)

func (s *gatedSink) Publish(ctx context.Context, key, value []byte) error {
	if s.waiting.Load() > 0 {
		s.duringWait.Add(1)
	}
	return s.memSink.Publish(ctx, key, value)
}

func (s *gatedSink) Barrier() func(context.Context) error {
	s.mu.Lock()
	target := len(s.msgs)
	s.mu.Unlock()
	return func(ctx context.Context) error {
		s.waiting.Add(1)
		defer s.waiting.Add(-1)
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		s.durable = max(s.durable, target)
		s.flushes++
		s.mu.Unlock()
		return nil
	}
}

func (s *gatedSink) Flush(ctx context.Context) error { return s.Barrier()(ctx) }

// A commit waits for the outputs of the records it covers, and only for
// them: while the sink's acknowledgements are late, the partition learns
// on and its predictions go out (neither the loop nor the worker waits
// on the round trip), and nothing is committed; once they come, every
// commit covers only predictions acknowledged, up to the last record.
func TestCommitsPipelined(t *testing.T) {
	const n = 5000
	src := newMemSource(genEvents(n, 9, 0, 0, 0), 1)
	src.block = true
	preds := &gatedSink{gate: make(chan struct{})}
	var early []connectors.Record // commits of records whose prediction was not durable
	src.onCommit = func(r connectors.Record) {
		preds.mu.Lock()
		defer preds.mu.Unlock()
		if preds.durable < int(r.Offset)+1 {
			early = append(early, r)
		}
	}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds,
		CommitEvery: 100, CommitInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	deadline := time.Now().Add(20 * time.Second)
	for preds.duringWait.Load() < n/2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d predictions published while a commit waited for the sink; want the stream to go on (at least %d)", preds.duringWait.Load(), n/2)
		}
		time.Sleep(time.Millisecond)
	}
	if c := src.commitLog(); len(c) > 0 {
		t.Fatalf("commits %v before the sink acknowledged anything", c)
	}
	close(preds.gate)
	for {
		c := src.commitLog()
		if len(c) > 0 && c[len(c)-1].Offset == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the acknowledgements, commits %v; want one of the last record, %d", c[max(0, len(c)-3):], n-1)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(early) > 0 {
		t.Fatalf("%d commits before their predictions were acknowledged, first %v", len(early), early[0])
	}
	if got := len(preds.messages()); got != n {
		t.Fatalf("%d predictions, want %d", got, n)
	}
}

// failingSink is a memSink whose broker loses message failAt: the wait
// that covers it reports the failure once, as a Kafka or JetStream sink
// does, and forgets it.
type failingSink struct {
	memSink
	failAt   int
	reported bool
}

func (s *failingSink) Barrier() func(context.Context) error {
	s.mu.Lock()
	target := len(s.msgs)
	s.mu.Unlock()
	return func(context.Context) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if target > s.failAt && !s.reported {
			s.reported = true
			return errors.New("message lost by the broker")
		}
		s.durable = max(s.durable, target)
		return nil
	}
}

func (s *failingSink) Flush(ctx context.Context) error { return s.Barrier()(ctx) }

// Once an output failed at its sink, nothing is committed after it, nor
// checkpointed (a restore skips up to its checkpoint), not even by the
// final commit of the drain (whose barrier no longer sees the failure,
// reported once): the run stops with the error, and the position of the
// partition whose prediction was lost stays before its record, so that
// the rerun learns and publishes it again. One partition without
// checkpoints, and four with: rounds of the other partitions go on around
// the failed one.
func TestNoCommitPastFailedOutput(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parts       int32
		checkpoints bool
	}{{"one partition", 1, false}, {"four partitions, checkpoints", 4, true}} {
		t.Run(tc.name, func(t *testing.T) {
			const n, failAt = 4000, 1400
			src := newMemSource(genEvents(n, 3, 0, 0, 0), tc.parts)
			preds := &failingSink{failAt: failAt}
			opt := Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds, CommitEvery: 50}
			var store checkpoint.Store
			if tc.checkpoints {
				dir, err := checkpoint.OpenDir(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				store, opt.Checkpoints = dir, dir
			}
			s := newService(t, opt)
			err := s.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "message lost by the broker") {
				t.Fatalf("Run: %v, want the sink's failure", err)
			}
			var lost struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
			}
			if err := json.Unmarshal(preds.messages()[failAt], &lost); err != nil {
				t.Fatal(err)
			}
			commits := src.commitLog()
			if len(commits) == 0 {
				t.Fatal("no commit before the failure")
			}
			for _, c := range commits {
				if c.Partition == lost.Partition && c.Offset >= lost.Offset {
					t.Fatalf("commit of partition %d offset %d, past the prediction lost (offset %d)", c.Partition, c.Offset, lost.Offset)
				}
			}
			if store != nil {
				if c, err := store.Load(context.Background(), lost.Partition); err == nil && c.Position >= lost.Offset {
					t.Fatalf("partition %d checkpointed at %d, past the prediction lost (offset %d): a restore skips it", lost.Partition, c.Position, lost.Offset)
				}
			}
		})
	}
}

// The saver writes no checkpoint after a round whose outputs failed: the
// failure is reported to that round's wait only, and a later round's wait
// passes, but a checkpoint past the lost output would have a restore skip
// its record. (Rounds of other partitions can be in flight behind the
// failed one; the loop learns of the failure only when it collects it.)
func TestSaverStopsAfterFailedOutputs(t *testing.T) {
	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: newMemSource(nil, 1), Checkpoints: dir})
	s.wctx = context.Background()
	s.commits.startSaver()
	defer s.commits.stopSaver()
	ckpt := func(part int32) saveJob {
		c := &checkpoint.Checkpoint{Fingerprint: s.models.fingerprint, Source: "mem:test", Partition: part, Position: 100, State: []byte("x"), Report: []byte("{}")}
		return saveJob{part: part, pos: 100, c: &taken{c: c}}
	}
	lost := errors.New("message lost by the broker")
	jobs := []*roundJob{
		{waits: []func(context.Context) error{func(context.Context) error { return lost }}, saves: []saveJob{ckpt(0)}},
		{waits: []func(context.Context) error{func(context.Context) error { return nil }}, saves: []saveJob{ckpt(1)}},
	}
	for _, j := range jobs {
		s.commits.saver.inflight++
		s.commits.saver.jobs <- j
	}
	for range jobs {
		<-s.commits.saver.results
		s.commits.saver.inflight--
	}
	if jobs[0].err == nil || jobs[1].err == nil || !errors.Is(jobs[1].err, lost) {
		t.Fatalf("round errors %v and %v, want the failure in both", jobs[0].err, jobs[1].err)
	}
	for _, part := range []int32{0, 1} {
		if _, err := dir.Load(context.Background(), part); !checkpoint.IsNotExist(err) {
			t.Errorf("partition %d: checkpoint written after a failed output (%v)", part, err)
		}
	}
}
