package service

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// volatileSource is a memSource whose offsets, like core NATS's, count
// arrivals in this run and begin again at every restart.
type volatileSource struct{ *memSource }

func (volatileSource) Traits() connectors.Traits { return connectors.Traits{Volatile: true} }

// runVolatile runs a Service of c over values from a volatile source with
// checkpoints in store.
func runVolatile(t *testing.T, c *config.Config, store checkpoint.Store, values [][]byte, reset []string) ([]Report, error) {
	t.Helper()
	s := newService(t, Options{Config: c, Source: volatileSource{newMemSource(values, 1)}, Checkpoints: store, CommitEvery: 100, ResetLearners: reset})
	err := s.Run(context.Background())
	reps, rerr := s.Reports()
	if rerr != nil {
		t.Fatal(rerr)
	}
	return reps, err
}

// A source whose offsets begin again at every restart (core NATS): each
// run's records are new ones, and every run's learning reaches the
// checkpoint, whatever positions the earlier runs saved at. Cut in three
// runs, the model is an uninterrupted run's.
func TestCheckpointVolatileRestarts(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(2000, 5, 0.05, 0.1, 97)
	whole, _, err := runStore(t, c, nil, values, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]func(t *testing.T) checkpoint.Store{
		"dir": func(t *testing.T) checkpoint.Store {
			s, err := checkpoint.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"bucket": func(t *testing.T) checkpoint.Store {
			js := testbroker.JetStream(t, testbroker.NATS(t, "UNUSED", "unused"))
			s, err := checkpoint.OpenObjectStore(context.Background(), js, "STATE", checkpoint.ObjectStoreConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			var last []Report
			for _, part := range [][][]byte{values[:1200], values[1200:1500], values[1500:]} {
				if last, err = runVolatile(t, c, store, part, nil); err != nil {
					t.Fatal(err)
				}
			}
			sameReport(t, "three runs", last[0].Report, whole[0].Report)
			again, err := runVolatile(t, c, store, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameReport(t, "restored", again[0].Report, whole[0].Report)

			// A learner added and reset: the checkpoint is written again
			// for the new configuration at once (over the old one, not
			// below it), so a restart with the same flag does nothing
			// and one without it restores the new model.
			other := *c
			other.Learners = append(slices.Clone(c.Learners), config.Learner{Name: "extra", Algorithm: "perceptron", Params: &online.PerceptronConfig{Bias: true}})
			reset, err := runVolatile(t, &other, store, nil, []string{"extra"})
			if err != nil {
				t.Fatal(err)
			}
			cp, err := store.Load(context.Background(), 0)
			if err != nil || cp.Fingerprint != Fingerprint(&other) {
				t.Fatalf("after the reset the checkpoint is not of the new configuration (%v)", err)
			}
			for _, flag := range [][]string{{"extra"}, nil} {
				again, err := runVolatile(t, &other, store, nil, flag)
				if err != nil {
					t.Fatalf("restart with reset %v: %v", flag, err)
				}
				sameReport(t, "restarted after the reset", again[0].Report, reset[0].Report)
			}
		})
	}
}

// idSink records the identities outputs are published with.
type idSink struct {
	mu  sync.Mutex
	ids []string
}

func (s *idSink) Publish(ctx context.Context, k, v []byte) error { return s.PublishID(ctx, "", k, v) }
func (s *idSink) PublishID(_ context.Context, id string, _, _ []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
	return nil
}
func (s *idSink) Flush(context.Context) error { return nil }
func (s *idSink) Close() error                { return nil }

// The identities of the outputs of a source whose offsets begin again at
// every run (Nats-Msg-Id on a JetStream sink) never repeat another run's,
// with checkpoints or without: the records are new ones, and a sink that
// deduplicates must not drop their outputs as repeats.
func TestVolatileOutputIDs(t *testing.T) {
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	values := genEvents(400, 5, 0.05, 0.1, 37) // bad records: dead letters too
	for _, withStore := range []bool{true, false} {
		var store checkpoint.Store
		if withStore {
			d, err := checkpoint.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			store = d
		}
		seen := map[string]bool{}
		for run, part := range [][][]byte{values[:200], values[200:]} {
			preds, dead := &idSink{}, &idSink{}
			s := newService(t, Options{Config: c, Source: volatileSource{newMemSource(part, 1)}, Checkpoints: store, CommitEvery: 100,
				Predictions: preds, DeadLetters: dead})
			if err := s.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(preds.ids) == 0 || len(dead.ids) == 0 {
				t.Fatalf("run %d: %d predictions, %d dead letters", run, len(preds.ids), len(dead.ids))
			}
			for _, id := range slices.Concat(preds.ids, dead.ids) {
				if seen[id] {
					t.Fatalf("checkpoints %v, run %d: output identity %s repeats an earlier one", withStore, run, id)
				}
				seen[id] = true
			}
		}
	}
}
