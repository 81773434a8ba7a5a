package serving

import (
	"fmt"
	"time"

	"github.com/streamlearn/streamlearn/internal/pipeline"
)

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
	// each key's choice between it and the key's (see KeyedCopy);
	// nil without.
	global *Predictor
	mixes  map[string][]pipeline.MixReport
}

// keyedServingCache bounds the keys a serving copy keeps decoded.
const keyedServingCache = 256

// KeyedCopy is what the serving copy of a partition's models per key is
// made of (NewKeyed).
type KeyedCopy struct {
	// Partition is the source partition of the models.
	Partition int32
	// Events is how many records the models had processed.
	Events uint64
	// States has every key's encoding (pipeline.Keyed.ServingStates).
	States map[string]pipeline.StateRef
	// Warm, when not nil and readable, is what a new key's model starts
	// from (models.warm_start); nil: an empty model.
	Warm *WarmStart
	// Totals is the report of the partition's models.
	Totals pipeline.Report
	// Global, with a global model (models.global), is its copy, and
	// Mixes has, per key, each learner's choice between the global model
	// and the key's (pipeline.Keyed.Mixes): which predicts next; a new
	// key's learners all take the global model's. Nil without.
	Global *Predictor
	Mixes  map[string][]pipeline.MixReport
	// Gen numbers the copies of one partition's models: States shares
	// encodings only with the copy of the Gen before (KeyedStates).
	Gen uint64
}

// NewKeyed returns the serving copy of a partition's models per key,
// whose models b builds.
func NewKeyed(b *pipeline.Builder, k KeyedCopy) (*Predictor, error) {
	b = b.Sparse() // the keys' models, as the learning service holds them
	p, err := b.New()
	if err != nil {
		return nil, err
	}
	if warm := k.Warm; warm != nil && warm.Err == nil {
		if err := p.StartFrom(warm.Model.State, warm.SHA256); err != nil {
			return nil, err
		}
	}
	_, sum, err := p.CloneDigest()
	if err != nil {
		return nil, err
	}
	fresh := &Predictor{Partition: k.Partition, Events: p.Seen(), SHA256: sum, p: p}
	if k.Global != nil {
		fresh.global, fresh.fromGlobal = k.Global, make([]bool, len(p.Names()))
		for i := range fresh.fromGlobal {
			fresh.fromGlobal[i] = true // a new key: the global model's, on the tie
		}
	}
	totals := k.Totals
	return &Predictor{Partition: k.Partition, Events: k.Events, totals: &totals,
		keyed: &keyedServing{build: b, states: k.States, fresh: fresh, cache: map[string]*Predictor{}, gen: k.Gen, global: k.Global, mixes: k.Mixes}}, nil
}

// KeyedStates returns the keys' encodings of pr, a copy of models per
// key numbered gen (KeyedCopy.Gen), for the next copy to share those not
// changed since; nil when pr is another copy or of one model.
func (pr *Predictor) KeyedStates(gen uint64) map[string]pipeline.StateRef {
	if pr == nil || pr.keyed == nil || pr.keyed.gen != gen {
		return nil
	}
	return pr.keyed.states
}

// Stamp sets when pr was copied (Time), and, of models per key, when
// their new key's model was.
func (pr *Predictor) Stamp(t time.Time) {
	pr.Time = t
	if pr.keyed != nil {
		pr.keyed.fresh.Time = t
	}
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
