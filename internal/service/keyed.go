package service

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// Models per key (models.by: key). A partition's model is then a
// pipeline.Keyed: a model per event key, each the replay of its key's
// events alone. Everything the service does with a partition's model —
// checkpoints, restores, warm starts, reports, serving copies — goes
// through the methods below, which choose between the one model and the
// models per key; the worker learns each event with its key's model.

// keyed reports whether c gives each event key a model of its own.
func keyed(c *config.Config) bool { return c.Models.By == "key" }

// TopKeys is how many keys of each partition the snapshot reports on
// their own (Report.TopKeys; the metrics' key label): the keys of the
// most records. The others are in the partition's totals only, which
// bounds the metrics' series whatever the number of keys.
const TopKeys = 10

// newModel returns a partition's empty model, of c's kind.
func newPartitionModel(c *config.Config, history int) (*model, error) {
	m := &model{pos: -1, skipTo: -1}
	if keyed(c) {
		k, err := pipeline.NewKeyed(c, pipeline.KeyedOptions{Max: c.Models.Max, Idle: c.Models.Idle, Global: c.Models.Global,
			SpillDir: cmp.Or(c.Models.SpillDir, os.TempDir())})
		if err != nil {
			return nil, err
		}
		m.k = k
		return m, nil
	}
	p, err := pipeline.New(c)
	if err != nil {
		return nil, err
	}
	if history > 0 {
		p.Tracker().EnableHistory(history)
	}
	m.p = p
	return m, nil
}

// mixed returns, with a global model, where the last predictions came
// from; nil otherwise.
func (m *model) mixed() *pipeline.Mixed {
	if m.k == nil {
		return nil
	}
	return m.k.Mixed()
}

// events returns the records the model counted; learned its labeled
// rounds; started when it was made.
func (m *model) events() uint64 {
	if m.k != nil {
		return m.k.Seen()
	}
	return m.p.Seen()
}

func (m *model) learned() uint64 {
	if m.k != nil {
		return m.k.Learned()
	}
	return m.p.Learned()
}

func (m *model) started() time.Time {
	if m.k != nil {
		return m.k.Started()
	}
	return m.p.Started()
}

// reject counts a record that could not be decoded; with models per key,
// in the model of key, the key read before the fault (else the empty
// key).
func (m *model) reject(key []byte, reason event.Reason) error {
	if m.k != nil {
		return m.k.Reject(key, reason)
	}
	m.p.Reject(reason)
	return nil
}

// unmarshal restores the model from a checkpoint's state.
func (m *model) unmarshal(b []byte) error {
	if m.k != nil {
		return m.k.UnmarshalBinary(b)
	}
	return m.p.UnmarshalBinary(b)
}

// startFrom makes the model the warm start's: with models per key, every
// new key's model.
func (m *model) startFrom(state []byte, sha [32]byte) error {
	if m.k != nil {
		return m.k.StartFrom(state, sha)
	}
	return m.p.StartFrom(state, sha)
}

// totals returns the model's report (with the learners' state digests
// when digests): with models per key, their totals and the keys of the
// most records (TopKeys).
func (m *model) totals(digests bool) (pipeline.Report, []KeyReport, error) {
	if m.k == nil {
		if !digests {
			r, err := m.p.ReportWithoutDigests()
			return r, nil, err
		}
		r, err := m.p.Report()
		return r, nil, err
	}
	top := m.k.Top(TopKeys)
	keys := make([]KeyReport, len(top))
	for i, t := range top {
		keys[i] = KeyReport{Key: t.Key, Events: t.Events, Mistakes: t.Mistakes}
	}
	if !digests {
		return m.k.ReportWithoutDigests(), keys, nil
	}
	return m.k.Report(), keys, nil
}

// KeyReport is what a partition's report says of one of its keys with
// models per key: its records and each learner's mistakes, in the
// learners' order. Each key's whole report is GET /v1/report?key=, and in
// `--report json` at the end.
type KeyReport struct {
	Key      string   `json:"key"`
	Events   uint64   `json:"events"`
	Mistakes []uint64 `json:"mistakes"`
}

// keyReports returns the report of every key's model, in key order, as
// the worker's report of the partition does (report).
func (w *worker) keyReports() ([]Report, error) {
	var out []Report
	err := w.m.k.Each(func(key string, p *pipeline.Pipeline) error {
		r, err := p.Report()
		if err != nil {
			return err
		}
		if r.Labels != nil {
			r.Labels.StateSHA256 = p.StoreDigest()
		}
		r.Mix = w.m.k.KeyMix(key)
		k := key
		out = append(out, Report{Source: w.s.opt.Source.Name(), Partition: w.part, Key: &k, Report: r})
		return nil
	})
	return out, err
}

// keyedServing is the serving copy of a partition's models per key: each
// key's encoding, decoded into a Predictor of its own when a prediction
// asks for the key (a few are kept decoded).
type keyedServing struct {
	build  *pipeline.Builder
	states map[string]pipeline.StateRef
	fresh  *Predictor // a new key's model: empty, or the warm start
	// cache has the keys decoded; bounded by keyedServingCache.
	cache map[string]*Predictor
	// gen numbers the copies of a worker: the next copy shares states
	// only with the one made last (the worker's servedGen).
	gen uint64
	// global is the copy of the global model (models.global), and mixes
	// each key's choice between it and the key's (see newKeyedPredictor);
	// nil without.
	global *Predictor
	mixes  map[string][]pipeline.MixReport
}

// keyedServingCache bounds the keys a serving copy keeps decoded.
const keyedServingCache = 256

// newKeyedPredictor returns the serving copy of partition's models per
// key from their encodings (pipeline.Keyed.ServingStates), at events
// records, with totals r.
//
// With a global model (global, not nil), mixes has, per key, each
// learner's choice between the global model and the key's
// (pipeline.Keyed.Mixes): which predicts next; a new key's learners all
// take the global model's.
func newKeyedPredictor(b *pipeline.Builder, partition int32, events uint64, states map[string]pipeline.StateRef, warm *WarmStart, r pipeline.Report,
	global *Predictor, mixes map[string][]pipeline.MixReport) (*Predictor, error) {
	p, err := b.New()
	if err != nil {
		return nil, err
	}
	if warm != nil && warm.Err == nil {
		if err := p.StartFrom(warm.Model.State, warm.SHA256); err != nil {
			return nil, err
		}
	}
	_, sum, err := p.CloneDigest()
	if err != nil {
		return nil, err
	}
	fresh := &Predictor{Partition: partition, Events: p.Seen(), SHA256: sum, p: p}
	if global != nil {
		fresh.global, fresh.fromGlobal = global, make([]bool, len(p.Names()))
		for i := range fresh.fromGlobal {
			fresh.fromGlobal[i] = true // a new key: the global model's, on the tie
		}
	}
	return &Predictor{Partition: partition, Events: events, totals: &r,
		keyed: &keyedServing{build: b, states: states, fresh: fresh, cache: map[string]*Predictor{}, global: global, mixes: mixes}}, nil
}

// has reports whether pr has a model of key.
func (pr *Predictor) has(key []byte) bool {
	if pr.keyed == nil {
		return false
	}
	_, ok := pr.keyed.states[string(key)]
	return ok
}

// forKey returns, of a partition's models per key, the Predictor of key's
// model, or of a new key's model when it has none; of one model, pr.
func (pr *Predictor) forKey(key []byte) (*Predictor, error) {
	ks := pr.keyed
	if ks == nil {
		return pr, nil
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if kp, ok := ks.cache[string(key)]; ok {
		return kp, nil
	}
	ref, ok := ks.states[string(key)]
	if !ok {
		return ks.fresh, nil
	}
	state, err := ref.Bytes()
	if err != nil {
		return nil, err
	}
	p, err := ks.build.Decode(state)
	if err != nil {
		return nil, fmt.Errorf("service: the serving copy of key %q: %w", key, err)
	}
	if len(ks.cache) >= keyedServingCache {
		clear(ks.cache)
	}
	sum, err := pipeline.ModelDigest(state)
	if err != nil {
		return nil, fmt.Errorf("service: the serving copy of key %q: %w", key, err)
	}
	kp := &Predictor{Partition: pr.Partition, Key: string(key), HasKey: true, Events: p.Seen(), Time: pr.Time, SHA256: sum, p: p}
	if ks.global != nil {
		kp.global, kp.mix = ks.global, ks.mixes[string(key)]
		kp.fromGlobal = make([]bool, len(kp.mix))
		for i, m := range kp.mix {
			kp.fromGlobal[i] = m.Next != "own"
		}
	}
	ks.cache[string(key)] = kp
	return kp, nil
}
