package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// Serving predictions (POST /v1/predict) must not touch the live models:
// they belong to the loop goroutine, and a prediction must never change
// what a model learns. So the loop publishes copies. Copying costs a few
// MiB per linear learner, so it happens only while someone asks: a
// request marks serving active for ServeIdle, and while it is, each
// snapshot (every SnapshotInterval) also refreshes the copy of every model
// that learned something since its last copy. The first request after an
// idle spell waits for the next snapshot; later ones are answered at once
// by a copy at most about one SnapshotInterval behind the live model.

// ServeIdle is how long serving stays active after a prediction request.
const ServeIdle = time.Minute

// ErrNoModel is returned by Predictor when there is no model to serve:
// the service has not learned from the partition (or from anything yet).
var ErrNoModel = errors.New("no model yet")

// A Predictor is the copy of one partition's model that answers
// predictions. It is safe for concurrent use.
type Predictor struct {
	// Partition is the source partition of the model.
	Partition int32
	// Events is how many records the model had processed when copied.
	Events uint64
	// Time is when it was copied.
	Time time.Time
	// SHA256 is the SHA-256 of the model's state (pipeline.Pipeline's
	// MarshalBinary, a checkpoint's State): equal digests are equal
	// models, in this process or another one serving the same
	// checkpoint.
	SHA256 [32]byte
	// Key, with models per key, is the key of the model when HasKey;
	// HasKey is false for a new key's model and with one model per
	// partition.
	Key    string
	HasKey bool

	mu sync.Mutex
	p  *pipeline.Pipeline // nil for a partition's models per key
	// keyed is a partition's models per key, and totals their report;
	// nil with one model.
	keyed  *keyedServing
	totals *pipeline.Report
	// global, with a global model beside the models per key, is its
	// copy: learner i's prediction is the global model's when
	// fromGlobal[i] (the key's choice, pipeline.Mixed).
	global     *Predictor
	fromGlobal []bool
	mix        []pipeline.MixReport // the key's choices, for its report
}

// GlobalSHA256 returns the digest of the global model whose predictions
// are mixed with the key's model's; ok is false without one.
func (pr *Predictor) GlobalSHA256() (sum [32]byte, ok bool) {
	if pr.global == nil {
		return sum, false
	}
	return pr.global.SHA256, true
}

// Prediction is one learner's prediction of an event.
type Prediction struct {
	Learner string
	online.Prediction
	// Class is the label as the configuration names it.
	Class string
	// Probability is the probability of the positive label, nil when the
	// learner has none (pipeline.Pipeline.Probability).
	Probability *float64
}

// Predict appends to dst every learner's prediction of ev, without
// learning, and returns it; reason is non-empty (and nothing appended)
// when ev lies outside the domain of a configured hypothesis class.
func (pr *Predictor) Predict(dst []Prediction, ev *event.Event) ([]Prediction, event.Reason) {
	start := len(dst)
	pr.mu.Lock()
	dst, reason := pr.predict(dst, ev)
	pr.mu.Unlock()
	if reason != "" || pr.global == nil {
		return dst, reason
	}
	// The key's choice, learner by learner (the global copy has a lock
	// of its own: it serves every key).
	var g []Prediction
	if g, reason = pr.global.Predict(nil, ev); reason != "" {
		return dst[:start], reason
	}
	for i := range dst[start:] {
		if i < len(pr.fromGlobal) && pr.fromGlobal[i] {
			dst[start+i] = g[i]
		}
	}
	return dst, ""
}

// predict appends pr's own model's predictions of ev; pr.mu is held.
func (pr *Predictor) predict(dst []Prediction, ev *event.Event) ([]Prediction, event.Reason) {
	preds, reason := pr.p.Predict(ev)
	if reason != "" {
		return dst, reason
	}
	for i, p := range preds {
		out := Prediction{Learner: pr.p.Name(i), Prediction: p, Class: pr.p.LabelName(p.Label)}
		if prob, ok := pr.p.Probability(i, p); ok && !math.IsNaN(prob) {
			out.Probability = &prob
		}
		dst = append(dst, out)
	}
	return dst, ""
}

// Report returns the report of pr's model, or the totals of its models
// per key.
func (pr *Predictor) Report() (pipeline.Report, error) {
	if pr.totals != nil {
		return *pr.totals, nil
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r, err := pr.p.Report()
	r.Mix = pr.mix
	return r, err
}

// serving is the set of Predictors a snapshot published.
type serving struct {
	byPartition map[int32]*Predictor
	order       []int32 // ascending
	keyed       bool    // models per key
}

// Predictor returns the copy of partition's model that serves predictions,
// or, when only is true, of the only model there is. With models per key
// (models.by: key), it is the model of key in partition, or, when only,
// in the partition that has it; the model of a new key (empty, or the
// warm start) when none has. It marks serving active (see ServeIdle)
// and, when serving was idle, waits for the next snapshot to copy the
// models, until ctx is done.
func (s *Service) Predictor(ctx context.Context, partition int32, only bool, key []byte) (*Predictor, error) {
	s.serveUntil.Store(time.Now().Add(ServeIdle).UnixNano())
	for {
		if sv := s.serving.Load(); sv != nil {
			return sv.pick(partition, only, key)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: no copy of the models was made (%v)", ErrNoModel, ctx.Err())
		case <-t.C:
		}
	}
}

// pick chooses the Predictor of partition, or the only one when only;
// with models per key, key's.
func (sv *serving) pick(partition int32, only bool, key []byte) (*Predictor, error) {
	if only && sv.keyed {
		if len(sv.order) == 0 {
			return nil, ErrNoModel
		}
		for _, part := range sv.order {
			if pr := sv.byPartition[part]; pr.has(key) {
				return pr.forKey(key)
			}
		}
		return sv.byPartition[sv.order[0]].forKey(key) // a new key's model
	}
	if only {
		switch len(sv.order) {
		case 0:
			return nil, ErrNoModel
		case 1:
			return sv.byPartition[sv.order[0]], nil
		default:
			parts := make([]string, len(sv.order))
			for i, p := range sv.order {
				parts[i] = strconv.Itoa(int(p))
			}
			return nil, fmt.Errorf("%d models (partitions %s): choose one with ?partition=N", len(sv.order), strings.Join(parts, ", "))
		}
	}
	if pr, ok := sv.byPartition[partition]; ok {
		return pr.forKey(key)
	}
	return nil, fmt.Errorf("%w for partition %d", ErrNoModel, partition)
}

// refreshServing, called by the loop when it publishes a snapshot,
// publishes the copies of the models of parts the workers made for it
// (served: those that changed since their last copy) beside the copies
// still current, while serving is active.
func (s *Service) refreshServing(now time.Time, active bool, old *serving, parts []int32, served map[int32]*Predictor) {
	if !active {
		if old != nil {
			s.serving.Store(nil) // idle: let the copies go
		}
		return
	}
	sv := &serving{byPartition: make(map[int32]*Predictor, len(parts)), order: make([]int32, 0, len(parts)), keyed: keyed(s.opt.Config)}
	for _, part := range parts {
		pr, ok := served[part]
		if !ok && old != nil {
			if pr, ok := old.byPartition[part]; ok {
				sv.order = append(sv.order, part)
				sv.byPartition[part] = pr
			}
			continue
		}
		if pr == nil {
			continue
		}
		pr.Time = now
		if pr.keyed != nil {
			pr.keyed.fresh.Time = now // not published yet
		}
		sv.order = append(sv.order, part)
		sv.byPartition[part] = pr
	}
	s.serving.Store(sv)
}

// servingCopy returns a copy of the model for serving; prev is the last
// one, nil when none.
func (w *worker) servingCopy(prev *Predictor, r Report) (*Predictor, error) {
	if w.m.k == nil {
		return newPredictor(w.part, w.m.p)
	}
	var states map[string]pipeline.StateRef
	if prev != nil && prev.keyed != nil && prev.keyed.gen == w.servedGen {
		// The copy of the last call: the keys not changed since are its.
		states = prev.keyed.states
	}
	states, err := w.m.k.ServingStates(states)
	if err != nil {
		return nil, err
	}
	var global *Predictor
	var mixes map[string][]pipeline.MixReport
	if g := w.m.k.Global(); g != nil {
		if global, err = newPredictor(w.part, g); err != nil {
			return nil, err
		}
		mixes = w.m.k.Mixes()
	}
	pr, err := newKeyedPredictor(w.s.build, w.part, w.m.events(), states, w.s.opt.WarmStart, r.Report, global, mixes)
	if err != nil {
		return nil, err
	}
	w.servedGen++
	pr.keyed.gen = w.servedGen
	return pr, nil
}

// newPredictor returns a copy of p, partition's model, for serving.
func newPredictor(partition int32, p *pipeline.Pipeline) (*Predictor, error) {
	q, sum, err := p.CloneDigest()
	if err != nil {
		return nil, err
	}
	return &Predictor{Partition: partition, Events: q.Seen(), SHA256: sum, p: q}, nil
}
