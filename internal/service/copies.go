package service

import (
	"context"
	"fmt"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// What the service offers its readers — the snapshots' types and the
// copies of the models that answer predictions — is package serving's;
// the names below are the service's for its callers.

// Snapshot is what the service looked like at one moment (serving.Snapshot).
type Snapshot = serving.Snapshot

// Report is a model's regret report with the source and partition it
// learned from (serving.Report).
type Report = serving.Report

// KeyReport is what a partition's report says of one of its keys with
// models per key (serving.KeyReport).
type KeyReport = serving.KeyReport

// TopKeys is how many keys of each partition the snapshot reports on
// their own (serving.TopKeys).
const TopKeys = serving.TopKeys

// WarmStart is a model file the service's new models start from
// (Options.WarmStart; serving.WarmStart).
type WarmStart = serving.WarmStart

// LoadWarmStart reads and verifies the model file at path
// (serving.LoadWarmStart).
func LoadWarmStart(path string) (*WarmStart, error) { return serving.LoadWarmStart(path) }

// Fingerprint identifies the parts of a configuration a model's state
// depends on, which a checkpoint holds (serving.Fingerprint).
func Fingerprint(c *config.Config) [32]byte { return serving.Fingerprint(c) }

// keyed reports whether c gives each event key a model of its own.
func keyed(c *config.Config) bool { return serving.Keyed(c) }

// Predictor returns the copy of partition's model that serves predictions,
// or, when only is true, of the only model there is. With models per key
// (models.by: key), it is the model of key in partition, or, when only,
// in the partition that has it; the model of a new key (empty, or the
// warm start) when none has. It marks serving active (see serving.ServeIdle)
// and, when serving was idle, waits for the next snapshot to copy the
// models, until ctx is done.
func (s *Service) Predictor(ctx context.Context, partition int32, only bool, key []byte) (*serving.Predictor, error) {
	s.snaps.serveUntil.Store(time.Now().Add(serving.ServeIdle).UnixNano())
	for {
		if sv := s.snaps.copies.Load(); sv != nil {
			return sv.Pick(partition, only, key)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: no copy of the models was made (%v)", serving.ErrNoModel, ctx.Err())
		case <-t.C:
		}
	}
}

// refreshServing, called by the loop when it publishes a snapshot,
// publishes the copies of the models of parts the workers made for it
// (served: those that changed since their last copy) beside the copies
// still current, while serving is active.
func (s *Service) refreshServing(now time.Time, active bool, old *serving.Copies, parts []int32, served map[int32]*serving.Predictor) {
	if !active {
		if old != nil {
			s.snaps.copies.Store(nil) // idle: let the copies go
		}
		return
	}
	sv := serving.NewCopies(len(parts), serving.Keyed(s.opt.Config))
	for _, part := range parts {
		pr, ok := served[part]
		if !ok && old != nil {
			if pr, ok := old.Of(part); ok {
				sv.Add(part, pr)
			}
			continue
		}
		if pr == nil {
			continue
		}
		pr.Stamp(now) // not published yet
		sv.Add(part, pr)
	}
	s.snaps.copies.Store(sv)
}

// servingCopy returns a copy of the model for serving; prev is the last
// one, nil when none.
func (w *worker) servingCopy(prev *serving.Predictor, r Report) (*serving.Predictor, error) {
	if w.m.k == nil {
		return serving.NewPredictor(w.part, w.m.p)
	}
	// The copy of the last call: the keys not changed since are its.
	states, err := w.m.k.ServingStates(prev.KeyedStates(w.servedGen))
	if err != nil {
		return nil, err
	}
	var global *serving.Predictor
	var mixes map[string][]pipeline.MixReport
	if g := w.m.k.Global(); g != nil {
		if global, err = serving.NewPredictor(w.part, g); err != nil {
			return nil, err
		}
		mixes = w.m.k.Mixes()
	}
	pr, err := serving.NewKeyed(w.s.models.build, serving.KeyedCopy{Partition: w.part, Events: w.m.events(), States: states, Warm: w.s.opt.WarmStart,
		Totals: r.Report, Global: global, Mixes: mixes, Gen: w.servedGen + 1})
	if err != nil {
		return nil, err
	}
	w.servedGen++
	return pr, nil
}
