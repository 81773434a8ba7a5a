package pipeline

import (
	"math"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// A global model beside the models per key (models.global): the
// partition's global model learns every event of the partition, each
// key's model its key's, and each learner's prediction for a key is the
// key's model's or the global model's, chosen per key by the
// deterministic Weighted-Majority of Littlestone and Warmuth over those
// two experts with β = ½ — the one of fewer mistakes on the key's rounds
// so far predicts, the global model on a tie (so a new key starts with
// the global filter, and its own takes over once it is better on it).
//
// Bound, per key and learner: the weight of the experts is 2 at first
// and at least β^m* at the end, m* the fewer of the two experts'
// mistakes; a mistake of the choice is one of at least half the weight
// (the expert chosen weighs at least as much as the other), which then
// shrinks by (1+β)/2 = ¾. So mistakes ≤ (ln 2 + m*·ln 2)/ln(4/3) =
// mixBoundFactor·(1 + m*), whatever the labels.

// mixBoundFactor is ln 2 / ln(4/3) ≈ 2.41.
var mixBoundFactor = math.Ln2 / math.Log(4.0/3)

// MixCounts are one learner's record on one key's labeled rounds (or,
// in a partition's totals, on all of them): the mistakes of the key's
// model (Own), of the global model (Global), and of the choice between
// them (Mixed). Terms is Σ (1 + m*) over the keys counted: the bound is
// mixBoundFactor·Terms.
type MixCounts struct {
	Rounds, Own, Global, Mixed uint64
}

// own reports whether the key's model predicts next.
func (m *MixCounts) own() bool { return m.Own < m.Global }

// terms is 1 + m*.
func (m *MixCounts) terms() uint64 { return 1 + min(m.Own, m.Global) }

// MixReport is a learner's MixCounts in a report, with the bound.
type MixReport struct {
	Learner        string `json:"learner"`
	Rounds         uint64 `json:"rounds"`
	Mistakes       uint64 `json:"mistakes"`
	OwnMistakes    uint64 `json:"own_mistakes"`
	GlobalMistakes uint64 `json:"global_mistakes"`
	// Bound is mixBoundFactor·(1 + the fewer of the two experts'
	// mistakes), summed over the keys in a partition's totals; Holds
	// says Mistakes is within it.
	Bound float64 `json:"bound"`
	Holds bool    `json:"holds"`
	// Next is the model that predicts the key's next event, "own" or
	// "global" (absent in a partition's totals).
	Next string `json:"next,omitempty"`
}

func mixReport(name string, m MixCounts, terms uint64, next string) MixReport {
	b := mixBoundFactor * float64(terms)
	return MixReport{Learner: name, Rounds: m.Rounds, Mistakes: m.Mixed, OwnMistakes: m.Own, GlobalMistakes: m.Global,
		Bound: b, Holds: float64(m.Mixed) <= b, Next: next}
}

// Mixed says where the predictions of a Keyed's last Process with a
// global model come from, learner by learner: the key's model or the
// global one. It is what the prediction messages are made of
// (Pipeline's methods of the same names).
type Mixed struct {
	own, global *Pipeline
	fromGlobal  []bool
}

// Seen is the key's model's.
func (m *Mixed) Seen() uint64            { return m.own.Seen() }
func (m *Mixed) Name(i int) string       { return m.own.Name(i) }
func (m *Mixed) LabelName(y int8) string { return m.own.LabelName(y) }

// Answer is the key's model's: the index of the learner that answers.
func (m *Mixed) Answer() int { return m.own.Answer() }

// From returns which model learner i's prediction came from: "own" (the
// key's) or "global".
func (m *Mixed) From(i int) string {
	if m.fromGlobal[i] {
		return "global"
	}
	return "own"
}

// ServedProbability is the chosen model's.
func (m *Mixed) ServedProbability(i int) (float64, bool) {
	if m.fromGlobal[i] {
		return m.global.ServedProbability(i)
	}
	return m.own.ServedProbability(i)
}

// mix chooses, learner by learner, between the key's predictions and
// the global model's (k.gpreds) of ev, and scores the choice on a
// labeled ev; it returns the predictions chosen.
func (k *Keyed) mix(st *KeyStats, own *Pipeline, preds []online.Prediction, ev *event.Event) []online.Prediction {
	k.mixed.own, k.mixed.global = own, k.global
	for i := range preds {
		m := &st.Mix[i]
		k.mixed.fromGlobal[i] = !m.own()
		k.mixPreds[i] = preds[i]
		if k.mixed.fromGlobal[i] {
			k.mixPreds[i] = k.gpreds[i]
		}
		if !ev.Labeled {
			continue
		}
		y := ev.Label
		before := m.terms()
		m.Rounds++
		t := &k.mixTotals[i]
		t.Rounds++
		if preds[i].Label != y {
			m.Own++
			t.Own++
		}
		if k.gpreds[i].Label != y {
			m.Global++
			t.Global++
		}
		if k.mixPreds[i].Label != y {
			m.Mixed++
			t.Mixed++
		}
		k.mixTerms[i] += m.terms() - before
	}
	return k.mixPreds
}

// Mixed returns where the predictions of the last Process came from;
// nil without a global model.
func (k *Keyed) Mixed() *Mixed {
	if k.global == nil {
		return nil
	}
	return &k.mixed
}

// Global returns the global model; nil without one.
func (k *Keyed) Global() *Pipeline { return k.global }

// mixReports returns st's mix reports, or the totals' with st nil.
func (k *Keyed) mixReports(st *KeyStats) []MixReport {
	if k.global == nil {
		return nil
	}
	out := make([]MixReport, len(k.names))
	for i, name := range k.names {
		if st == nil {
			out[i] = mixReport(name, k.mixTotals[i], k.mixTerms[i], "")
			continue
		}
		next := "global"
		if st.Mix[i].own() {
			next = "own"
		}
		out[i] = mixReport(name, st.Mix[i], st.Mix[i].terms(), next)
	}
	return out
}

func encodeMix(e *codec.Encoder, m MixCounts) {
	e.U64(m.Rounds)
	e.U64(m.Own)
	e.U64(m.Global)
	e.U64(m.Mixed)
}

func decodeMix(d *codec.Decoder) MixCounts {
	m := MixCounts{Rounds: d.U64(), Own: d.U64(), Global: d.U64(), Mixed: d.U64()}
	if d.Err() == nil && (m.Own > m.Rounds || m.Global > m.Rounds || m.Mixed > m.Rounds) {
		d.Fail("mix counts %+v: more mistakes than rounds", m)
	}
	return m
}

// Mixes returns every key's KeyMix: for serving copies. Nil without a
// global model.
func (k *Keyed) Mixes() map[string][]MixReport {
	if k.global == nil {
		return nil
	}
	out := make(map[string][]MixReport, len(k.stats))
	for key, st := range k.stats {
		out[key] = k.mixReports(st)
	}
	return out
}

// KeyMix returns key's choices between its model and the global one, per
// learner; nil without a global model or a model of key.
func (k *Keyed) KeyMix(key string) []MixReport {
	st, ok := k.stats[key]
	if !ok {
		return nil
	}
	return k.mixReports(st)
}
