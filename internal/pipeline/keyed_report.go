package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/regret"
)

// KeyTop is a key and its stats.
type KeyTop struct {
	Key string
	KeyStats
}

// Top returns the n keys of the most records, most first (ties by key),
// with copies of their stats.
func (k *Keyed) Top(n int) []KeyTop {
	if n <= 0 {
		return nil
	}
	top := make([]KeyTop, 0, min(n, len(k.stats))+1)
	before := func(a, b *KeyTop) bool { return a.Events > b.Events || a.Events == b.Events && a.Key < b.Key }
	for key, st := range k.stats {
		c := KeyTop{Key: key, KeyStats: *st}
		if len(top) == n && !before(&c, &top[n-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, c, func(a, b KeyTop) int {
			if before(&a, &b) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, c)
		if len(top) > n {
			top = top[:n]
		}
	}
	for i := range top {
		top[i].Mistakes = slices.Clone(top[i].Mistakes)
		top[i].changed = 0 // the Keyed's marks, not stats
	}
	return top
}

// KeysReport says how many keys a partition's models are of.
type KeysReport struct {
	// Keys is how many keys have a model; Resident how many are decoded
	// in memory, the others being spilled as their encodings of
	// SpillBytes bytes in all; Evicted how many evictions there were;
	// IndexBytes the estimated heap of every key's counts and place in
	// the spill (Keyed.IndexBytes), counted in models.max_bytes.
	Keys       int    `json:"keys"`
	Resident   int    `json:"resident"`
	Evicted    uint64 `json:"evicted"`
	SpillBytes int64  `json:"spill_bytes"`
	IndexBytes int64  `json:"index_bytes"`
}

// Report returns the totals over every key's model: the records (those
// of no key included) and each learner's rounds, mistakes and loss.
// Bounds, regrets and state digests are each model's (KeyReport): a
// theorem is about one model's rounds. With a global model, its report is
// Global, state digests included.
func (k *Keyed) Report() Report { return k.report(true) }

// ReportWithoutDigests is Report without the global model's state digests
// (Pipeline.ReportWithoutDigests): no pass over its states.
func (k *Keyed) ReportWithoutDigests() Report { return k.report(false) }

func (k *Keyed) report(digests bool) Report {
	r := Report{
		Events:          k.total.Events,
		Labeled:         k.total.Learned,
		Predicted:       k.total.Predicted,
		Invalid:         k.total.Invalid,
		InvalidByReason: make(map[string]uint64, len(k.total.InvalidBy)),
		Seconds:         time.Since(k.start).Seconds(),
		Keys:            &KeysReport{Keys: k.Len(), Resident: k.Resident(), Evicted: k.evicted, SpillBytes: k.SpillBytes(), IndexBytes: k.index},
		Learners:        make([]regret.LearnerReport, len(k.names)),
		Answer:          k.names[k.build.dg.spec.AnswerIndex()],
	}
	for reason, n := range k.total.InvalidBy {
		r.InvalidByReason[string(reason)] = n
	}
	for i, l := range k.learners {
		lr := regret.LearnerReport{Name: k.names[i], Algorithm: k.algs[i], Rounds: l.Rounds - l.Default.Rounds,
			Mistakes: l.Mistakes - l.Default.Mistakes, Loss: l.Loss}
		if l.Default.Rounds > 0 {
			lr.Loss = l.Loss - l.Default.Loss
		}
		lr.Accuracy = regret.Accuracy(lr.Rounds, lr.Mistakes)
		if k.defaults || l.Default.Rounds > 0 {
			lr.DefaultLabeled = &regret.DefaultLabeledReport{Rounds: l.Default.Rounds, Mistakes: l.Default.Mistakes,
				Accuracy: regret.Accuracy(l.Default.Rounds, l.Default.Mistakes), Loss: l.Default.Loss}
		}
		r.Learners[i] = lr
	}
	if k.global != nil {
		r.Mix = k.mixReports(nil)
		if g, err := k.global.report(digests); err == nil {
			r.Global = &g
		}
	}
	return r
}

// peek returns key's model without making it resident: a spilled one is
// decoded into a pipeline of its own.
func (k *Keyed) peek(key string) (*Pipeline, error) {
	if m, ok := k.resident[key]; ok {
		return m.p, nil
	}
	b, ok, err := k.spill.Get(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, ErrNoKey)
	}
	// A spilled model is most often peeked for its report: its own
	// encoding, when this process wrote it, gives its state digests.
	st := k.stats[key]
	p, err := k.build.decode(b, st != nil && !st.restored())
	if err != nil {
		return nil, fmt.Errorf("pipeline: keyed: key %q from the spill: %w", key, err)
	}
	return p, nil
}

// Each calls f with every key's model, in key order, until f returns an
// error; a spilled model is decoded for the call and not kept (the
// resident ones stay as they are). f must not keep p.
func (k *Keyed) Each(f func(key string, p *Pipeline) error) error {
	return EachOrdered(k, 1, func(key string, p *Pipeline) (struct{}, error) { return struct{}{}, f(key, p) },
		func(struct{}) error { return nil })
}

// eachChunk is how many keys EachOrdered shares among its goroutines at
// a time: the most results it holds at once.
const eachChunk = 256

// EachOrdered is Each on up to workers goroutines: it calls of with every
// key's model, different keys' concurrently, and emit with of's results
// in key order, one at a time on the caller's goroutine, until of or emit
// returns an error (the first in key order). A spilled model is decoded
// for its call and not kept. of must not keep p, and may touch p and
// read k, nothing else of k's: no one uses k until EachOrdered returns.
// It holds at most eachChunk results at once.
func EachOrdered[T any](k *Keyed, workers int, of func(key string, p *Pipeline) (T, error), emit func(T) error) error {
	keys := k.Keys()
	n := min(eachChunk, len(keys))
	out, errs := make([]T, n), make([]error, n)
	for len(keys) > 0 {
		chunk := keys[:min(n, len(keys))]
		keys = keys[len(chunk):]
		var next atomic.Int64
		var failed atomic.Bool
		run := func() {
			// A key taken is done, so that every key before a failed
			// one has its result.
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(chunk) {
					return
				}
				p, err := k.peek(chunk[i])
				if err == nil {
					out[i], err = of(chunk[i], p)
				}
				if errs[i] = err; err != nil {
					failed.Store(true)
				}
			}
		}
		var wg sync.WaitGroup
		for range min(workers, len(chunk)) - 1 {
			wg.Go(run)
		}
		run()
		wg.Wait()
		for i := range chunk {
			if errs[i] != nil {
				return errs[i]
			}
			if err := emit(out[i]); err != nil {
				return err
			}
		}
		clear(out) // what the results refer to is collectable
	}
	return nil
}

// ServingStates returns every key's encoding (MarshalBinary of its
// model), for serving predictions from: prev's, the encodings of the
// last call, for the keys whose models have not changed since, new ones
// for the others (all of them when prev is nil). The slices are shared:
// no one modifies them.
func (k *Keyed) ServingStates(prev map[string]StateRef) (map[string]StateRef, error) {
	out := make(map[string]StateRef, k.Len())
	for key, b := range prev {
		if _, ok := k.stats[key]; ok {
			out[key] = b
		}
	}
	for key, st := range k.stats {
		if _, ok := out[key]; ok && st.changed&^restoredBit != k.epoch+1 {
			continue
		}
		if r, ok := k.spill.Ref(key); ok {
			out[key] = r
			continue
		}
		b, err := k.resident[key].p.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
		}
		out[key] = StateRef{b: b}
	}
	k.epoch++ // every key unchanged
	return out, nil
}

// KeyReport returns key's report; an error wrapping ErrNoKey when key has
// no model. A spilled model is decoded for it, and not kept.
func (k *Keyed) KeyReport(key string) (Report, error) {
	p, err := k.peek(key)
	if err != nil {
		return Report{}, err
	}
	r, err := p.Report()
	if err == nil {
		r.Mix = k.mixReports(k.stats[key])
	}
	return r, err
}

// ErrNoKey is the error of Keyed.Report for a key that has no model.
var ErrNoKey = errors.New("no model for this key")
