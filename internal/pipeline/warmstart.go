package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// warmBase is what a pipeline had counted when it started from a model
// file (StartFromTracked): its reports count the records after apart, as
// what they count now less it (WarmStartReport.After).
type warmBase struct {
	learned, predicted, invalid uint64
	// learners has, for each node, its tracker's scores against real
	// labels and against the default label at the start.
	learners []learnerBase
}

// learnerBase is one learner's scores at a warm start.
type learnerBase struct{ real, def regret.Scores }

// StartFromTracked is StartFrom, and p's reports also count the records
// after the start apart from the file's (WarmStartReport.After): the
// figures of the new records alone, a held-out score of the model the
// file holds, which the states p encodes from now on keep (state format
// version 6). The service starts a partition's model with it; a key's
// model (models per key) starts with StartFrom, and keeps no more per
// key.
func (p *Pipeline) StartFromTracked(state []byte, sha [32]byte) error {
	if err := p.StartFrom(state, sha); err != nil {
		return err
	}
	b := &warmBase{learned: p.counts.Learned, predicted: p.counts.Predicted, invalid: p.counts.Invalid, learners: make([]learnerBase, len(p.nodes))}
	for i := range p.nodes {
		b.learners[i] = learnerBase{
			real: regret.Scores{Rounds: p.tracker.Rounds(i), Mistakes: p.tracker.Mistakes(i), Loss: p.tracker.Loss(i)},
			def:  p.tracker.Defaults(i),
		}
	}
	p.warm.base = b
	return nil
}

// AfterReport is what a model started from a model file has seen since:
// the records after the start alone, beside the report's figures, which
// count the file's records too. Each figure is the report's less what
// the file held; a learner's loss the difference of two sums (exact to
// the rounding of the larger).
type AfterReport struct {
	Events    uint64 `json:"events"`
	Labeled   uint64 `json:"labeled"`
	Predicted uint64 `json:"predicted"`
	Invalid   uint64 `json:"invalid"`
	// Learners has each learner's rounds, mistakes, accuracy and loss
	// on the records after the start, in the configuration's order.
	Learners []AfterLearner `json:"learners"`
}

// AfterLearner is one learner's record on the records after a warm start:
// Accuracy is 1 − Mistakes/Rounds, NaN (null in JSON) when there was no
// round; Loss the sum of the rounds' losses. DefaultLabeled, when
// expired events are learned with a default label, are the rounds scored
// against it.
type AfterLearner struct {
	Name           string                       `json:"name"`
	Algorithm      string                       `json:"algorithm"`
	Rounds         uint64                       `json:"rounds"`
	Mistakes       uint64                       `json:"mistakes"`
	Accuracy       float64                      `json:"accuracy"`
	Loss           float64                      `json:"loss"`
	DefaultLabeled *regret.DefaultLabeledReport `json:"default_labeled,omitempty"`
}

// MarshalJSON writes a non-finite accuracy or loss as null (which, as a
// LearnerReport's, decodes as 0).
func (l AfterLearner) MarshalJSON() ([]byte, error) {
	type plain AfterLearner
	return json.Marshal(struct {
		plain
		Accuracy *float64 `json:"accuracy"`
		Loss     *float64 `json:"loss"`
	}{plain(l), regret.FiniteOrNil(l.Accuracy), regret.FiniteOrNil(l.Loss)})
}

// after returns the report of the records after the warm start, of the
// learners' reports ls; nil when p did not count them apart.
func (p *Pipeline) after(ls []regret.LearnerReport) *AfterReport {
	if p.warm == nil || p.warm.base == nil {
		return nil
	}
	b := p.warm.base
	r := &AfterReport{Events: p.counts.Events - p.warm.events, Labeled: p.counts.Learned - b.learned,
		Predicted: p.counts.Predicted - b.predicted, Invalid: p.counts.Invalid - b.invalid, Learners: make([]AfterLearner, len(ls))}
	for i, l := range ls {
		var lb learnerBase
		if i < len(b.learners) {
			lb = b.learners[i]
		}
		a := AfterLearner{Name: l.Name, Algorithm: l.Algorithm, Rounds: l.Rounds - lb.real.Rounds, Mistakes: l.Mistakes - lb.real.Mistakes, Loss: l.Loss - lb.real.Loss}
		a.Accuracy = regret.Accuracy(a.Rounds, a.Mistakes)
		if d := l.DefaultLabeled; d != nil {
			rounds, mistakes := d.Rounds-lb.def.Rounds, d.Mistakes-lb.def.Mistakes
			a.DefaultLabeled = &regret.DefaultLabeledReport{Rounds: rounds, Mistakes: mistakes, Accuracy: regret.Accuracy(rounds, mistakes), Loss: d.Loss - lb.def.Loss}
		}
		r.Learners[i] = a
	}
	return r
}

// encode writes b for n learners (state format version 6).
func (b *warmBase) encode(e *codec.Encoder) {
	e.U64(b.learned)
	e.U64(b.predicted)
	e.U64(b.invalid)
	e.U32(uint32(len(b.learners)))
	for _, l := range b.learners {
		for _, s := range [2]regret.Scores{l.real, l.def} {
			e.U64(s.Rounds)
			e.U64(s.Mistakes)
			e.F64(s.Loss)
		}
	}
}

// decodeWarmBase reads a warmBase of the state's learners and returns it
// for q's nodes, node i's the state's learner from[i]'s (a learner that
// starts afresh, from[i] < 0, counts every round of its own as after
// the start). What it says is checked against q's counts and tracker,
// restored before.
func (q *Pipeline) decodeWarmBase(d *codec.Decoder, learners int, from []int) (*warmBase, error) {
	b := &warmBase{learned: d.U64(), predicted: d.U64(), invalid: d.U64()}
	if n := d.U32(); d.Err() == nil && int(n) != learners {
		return nil, fmt.Errorf("a warm start's counts of %d learners, of %d", n, learners)
	}
	all := make([]learnerBase, learners)
	for k := range all {
		for _, s := range [2]*regret.Scores{&all[k].real, &all[k].def} {
			s.Rounds, s.Mistakes, s.Loss = d.U64(), d.U64(), d.F64()
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	c := &q.counts
	if b.learned > c.Learned || b.predicted > c.Predicted || b.invalid > c.Invalid {
		return nil, fmt.Errorf("a warm start at %d learned, %d predicted, %d invalid, more than the %d, %d, %d counted", b.learned, b.predicted, b.invalid, c.Learned, c.Predicted, c.Invalid)
	}
	b.learners = make([]learnerBase, len(from))
	for i, k := range from {
		if k < 0 {
			continue
		}
		l := all[k]
		def := q.tracker.Defaults(i)
		if l.real.Rounds > q.tracker.Rounds(i) || l.real.Mistakes > q.tracker.Mistakes(i) || l.def.Rounds > def.Rounds || l.def.Mistakes > def.Mistakes ||
			l.real.Mistakes > l.real.Rounds || l.def.Mistakes > l.def.Rounds {
			return nil, fmt.Errorf("learner %q: a warm start at %d rounds, %d mistakes (%d, %d against the default label), past its %d, %d (%d, %d)",
				q.nodes[i].name, l.real.Rounds, l.real.Mistakes, l.def.Rounds, l.def.Mistakes, q.tracker.Rounds(i), q.tracker.Mistakes(i), def.Rounds, def.Mistakes)
		}
		b.learners[i] = l
	}
	return b, nil
}
