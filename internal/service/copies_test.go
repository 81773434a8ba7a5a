package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// chanSource delivers the records sent on its channel, blocking between.
type chanSource struct {
	ch   chan []byte
	next int64
}

func (s *chanSource) Fetch(ctx context.Context) (connectors.Record, error) {
	select {
	case v := <-s.ch:
		s.next++
		return connectors.Record{Value: v, Offset: s.next - 1, Lag: int64(len(s.ch))}, nil
	case <-ctx.Done():
		return connectors.Record{}, ctx.Err()
	}
}
func (s *chanSource) Commit(context.Context, connectors.Record) error { return nil }
func (s *chanSource) Name() string                                    { return "chan:test" }
func (s *chanSource) Close() error                                    { return nil }

// The serving copies follow the live model: none before the first event,
// then a copy with the model's count, reused while the model does not
// change and replaced once it does. Predicting on a copy changes nothing
// in the live model.
func TestServingFollowsModel(t *testing.T) {
	c := loadExampleConfig(t)
	values := genEvents(400, 3, 0, 0, 0)
	src := &chanSource{ch: make(chan []byte, len(values))}
	s := newService(t, Options{Config: c, Source: src, SnapshotInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := s.Predictor(wctx, 0, true, nil); !errors.Is(err, serving.ErrNoModel) {
		t.Fatalf("before any event: %v, want serving.ErrNoModel", err)
	}
	waitFor := func(n uint64) *serving.Predictor {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			pr, err := s.Predictor(wctx, 0, true, nil)
			if err == nil && pr.Events == n {
				return pr
			}
			if time.Now().After(deadline) {
				t.Fatalf("no serving copy with %d events: %v %v", n, pr, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for _, v := range values[:200] {
		src.ch <- v
	}
	pr := waitFor(200)
	time.Sleep(30 * time.Millisecond) // several snapshots, no new event
	if again, err := s.Predictor(wctx, 0, true, nil); err != nil || again != pr {
		t.Errorf("unchanged model: a new copy was made (%v)", err)
	}
	s.WantDigests(wctx) // the snapshots carry the state digests from now on
	before := s.Snapshot().Reports[0]
	if before.Learners[0].StateSHA256 == "" {
		t.Fatal("no state digests after WantDigests")
	}
	ev := decodeOne(t, c, values[300])
	for range 50 {
		pr.Predict(nil, ev)
	}
	time.Sleep(30 * time.Millisecond)
	after := s.Snapshot().Reports[0]
	for i := range before.Learners {
		if before.Learners[i].StateSHA256 != after.Learners[i].StateSHA256 {
			t.Errorf("%s: the live state changed under predictions", before.Learners[i].Name)
		}
	}
	for _, v := range values[200:] {
		src.ch <- v
	}
	if pr2 := waitFor(400); pr2 == pr {
		t.Error("the model learned 200 more events and the copy was not replaced")
	}
}

func decodeOne(t *testing.T, c *config.Config, v []byte) *event.Event {
	t.Helper()
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	ev := new(event.Event)
	if err := dec.Decode(v, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}
