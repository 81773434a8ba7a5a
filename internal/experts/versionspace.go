package experts

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

var (
	_ online.Learner    = (*Consistent)(nil)
	_ online.Guaranteed = (*Consistent)(nil)
	_ online.Learner    = (*Halving)(nil)
	_ online.Guaranteed = (*Halving)(nil)
	_ online.Learner    = (*SOA)(nil)
	_ online.Guaranteed = (*SOA)(nil)
	_ online.Domained   = (*Consistent)(nil)
	_ online.Domained   = (*Halving)(nil)
	_ online.Domained   = (*SOA)(nil)
)

// versionSpace is the state the realizable-case learners share: the
// version space V_t, the per-hypothesis mistake counts for the
// best-hypothesis comparator, and the counters.
type versionSpace struct {
	c          *Class
	tag        byte
	v          Set // V_t, never empty
	lab, mis   Set // scratch: hypotheses saying 1 on x; hypotheses wrong on x
	v0, v1     Set // scratch: V^(0), V^(1)
	key        []byte
	best       bestLoss
	rounds     uint64 // labeled in-domain rounds learned from
	violations uint64
}

func newVersionSpace(c *Class, tag byte) versionSpace {
	return versionSpace{
		c: c, tag: tag, v: c.All(),
		lab: c.NewSet(), mis: c.NewSet(), v0: c.NewSet(), v1: c.NewSet(),
		key:  make([]byte, 8*c.w),
		best: newBestLoss(c.full, c.n),
	}
}

// Class returns the hypothesis class.
func (s *versionSpace) Class() *Class { return s.c }

// InDomain reports whether x lies in the class's domain (Class.InDomain).
func (s *versionSpace) InDomain(x online.Vector) bool { return s.c.InDomain(x) }

// VersionSpace returns a copy of the current version space V_t.
func (s *versionSpace) VersionSpace() Set { return slices.Clone(s.v) }

// Learn learns the label y of x: V ← V^(y) = {h ∈ V : h(x) = y}, and
// charges a mistake to every hypothesis with h(x) ≠ y. When V^(y) is empty
// the stream is not realizable by H: the violation is counted and V
// becomes {h ∈ H : h(x) = y}, or H if that is empty too. The prediction
// served does not matter: the hypotheses that disagree with y go, whatever
// was predicted. Events outside the domain are ignored. Learn does not
// retain x and does not allocate, but when a hypothesis's mistakes first
// reach a power of two (a bit plane of the counts: at most 64 times).
func (s *versionSpace) Learn(x online.Vector, _ online.Prediction, y int8) {
	if !s.c.Labels(s.lab, x) {
		return
	}
	s.rounds++
	full := s.c.full
	if y == online.Positive {
		for k := range s.mis {
			s.mis[k] = full[k] &^ s.lab[k]
		}
	} else {
		copy(s.mis, s.lab)
	}
	s.best.add(s.mis)
	empty := true
	for k := range s.v {
		s.v[k] &^= s.mis[k]
		if s.v[k] != 0 {
			empty = false
		}
	}
	if !empty {
		return
	}
	// Recovery policy (see the package doc).
	s.violations++
	empty = true
	for k := range s.v {
		s.v[k] = full[k] &^ s.mis[k]
		if s.v[k] != 0 {
			empty = false
		}
	}
	if empty {
		copy(s.v, full)
	}
}

// Loss is the 0-1 loss: 1 when p.Label ≠ y.
func (s *versionSpace) Loss(p online.Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}

// guarantee returns the mistake bound bound against the best hypothesis.
// Its premise, a stream realizable by H, is established on the rounds so
// far while the version space never emptied, and false from the round it
// did (the stream is not realizable by H, whatever comes next).
func (s *versionSpace) guarantee(bound float64) online.Guarantee {
	premise := online.PremiseHolds
	if s.violations > 0 {
		premise = online.PremiseFalse
	}
	return online.Guarantee{
		Premise:        premise,
		Kind:           online.MistakeBound,
		Value:          bound,
		Comparator:     "best_hypothesis",
		ComparatorLoss: float64(s.best.min),
		RegretBound:    math.NaN(),
		Violations:     s.violations,
		Monotone:       true, // the bound is constant for a given delay
	}
}

// MarshalBinary encodes the state canonically, little-endian: version
// byte, learner tag, class fingerprint (u64), |H| (u32), rounds and
// violations (u64), the version space (⌈|H|/64⌉ u64 words), then each
// hypothesis's mistakes (u64).
func (s *versionSpace) MarshalBinary() ([]byte, error) {
	e := codec.NewEncoder(2 + 8 + 4 + 16 + 8*s.c.w + 8*s.c.n)
	e.U8(encodingVersion)
	e.U8(s.tag)
	e.U64(s.c.fp)
	e.U32(uint32(s.c.n))
	e.U64(s.rounds)
	e.U64(s.violations)
	for _, w := range s.v {
		e.U64(w)
	}
	s.best.appendTo(e)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary for the same
// learner kind and class; on error the state is unchanged.
func (s *versionSpace) UnmarshalBinary(b []byte) error {
	d := codec.NewDecoder(b)
	if v := d.U8(); d.Err() == nil && v != encodingVersion {
		return fmt.Errorf("experts: encoding version %d, want %d", v, encodingVersion)
	}
	if t := d.U8(); d.Err() == nil && t != s.tag {
		return fmt.Errorf("experts: encoding of learner %q, want %q", t, s.tag)
	}
	if fp := d.U64(); d.Err() == nil && fp != s.c.fp {
		return errors.New("experts: encoding is for a different class")
	}
	if n := d.U32(); d.Err() == nil && int(n) != s.c.n {
		return fmt.Errorf("experts: encoding has %d hypotheses, want %d", n, s.c.n)
	}
	rounds, violations := d.U64(), d.U64()
	v := s.c.NewSet()
	for k := range v {
		v[k] = d.U64()
	}
	loss := make([]uint64, s.c.n)
	for i := range loss {
		loss[i] = d.U64()
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("experts: %w", err)
	}
	for k := range v {
		if v[k]&^s.c.full[k] != 0 {
			return errors.New("experts: version space has hypotheses outside the class")
		}
	}
	if v.empty() {
		return errors.New("experts: empty version space")
	}
	if violations > rounds {
		return errors.New("experts: more violations than rounds")
	}
	if s.tag == tagSOA && !s.c.ldimSupports(v) {
		return errors.New("experts: version space is not one a learner can reach")
	}
	for _, l := range loss {
		if l > rounds {
			return errors.New("experts: a hypothesis has more mistakes than rounds")
		}
	}
	s.v, s.rounds, s.violations = v, rounds, violations
	s.best.set(loss)
	return nil
}

// Consistent is the Consistent algorithm (Section 21.1): it predicts with
// the lowest-indexed hypothesis of the version space. Mistakes ≤ |H|-1 on
// a stream realizable by H (Corollary 21.2). Not safe for concurrent use.
type Consistent struct{ versionSpace }

// NewConsistent returns Consistent over c with V_1 = H.
func NewConsistent(c *Class) *Consistent {
	return &Consistent{newVersionSpace(c, tagConsistent)}
}

// Predict returns h(x) for the first hypothesis h of V; Score is ±1, the
// same label. Outside the domain it returns Negative with Score 0. It does
// not retain x and does not allocate.
func (l *Consistent) Predict(x online.Vector) online.Prediction {
	if !l.c.Labels(l.lab, x) {
		return online.Prediction{Label: online.Negative}
	}
	if l.lab.Has(l.v.First()) {
		return online.Prediction{Label: online.Positive, Score: 1}
	}
	return online.Prediction{Label: online.Negative, Score: -1}
}

// Guarantee returns the mistake bound |H|-1.
func (l *Consistent) Guarantee() online.Guarantee { return l.guarantee(float64(l.c.n - 1)) }

// DelayedGuarantee returns the mistake bound (d+1)(|H|-1) for labels at
// most d learned rounds late (see delayedBound).
func (l *Consistent) DelayedGuarantee(d uint64) (online.Guarantee, bool) {
	return l.guarantee(delayedBound(float64(l.c.n-1), d)), true
}

// Halving is the Halving algorithm (Section 21.1): it predicts the label
// the majority of the version space gives, ties 1. Mistakes ≤ log₂|H| on a
// stream realizable by H (Theorem 21.3). Not safe for concurrent use.
type Halving struct{ versionSpace }

// NewHalving returns Halving over c with V_1 = H.
func NewHalving(c *Class) *Halving { return &Halving{newVersionSpace(c, tagHalving)} }

// Predict returns the majority label of V on x (ties Positive) with Score
// |V^(1)| - |V^(0)|. Outside the domain it returns Negative with Score 0.
// It does not retain x and does not allocate.
func (l *Halving) Predict(x online.Vector) online.Prediction {
	if !l.c.Labels(l.lab, x) {
		return online.Prediction{Label: online.Negative}
	}
	c1, c0 := countSplit(l.v, l.lab)
	p := online.Prediction{Label: online.Positive, Score: float64(c1 - c0)}
	if c1 < c0 {
		p.Label = online.Negative
	}
	return p
}

// Guarantee returns the mistake bound log₂|H|.
func (l *Halving) Guarantee() online.Guarantee { return l.guarantee(math.Log2(float64(l.c.n))) }

// DelayedGuarantee returns the mistake bound (d+1)·log₂|H| for labels at
// most d learned rounds late (see delayedBound).
func (l *Halving) DelayedGuarantee(d uint64) (online.Guarantee, bool) {
	return l.guarantee(delayedBound(math.Log2(float64(l.c.n)), d)), true
}

// delayedBound is the mistake bound of Consistent, Halving and SOA when
// labels come at most d learned rounds late, from m, the bound with
// immediate labels: (d+1)·m, on a stream realizable by H.
//
// Proof. Give each learned round the interval from its prediction to its
// label. Call a chain a sequence of mistaken rounds each predicted after
// the label of the one before was learned. Along a chain the version
// space at each prediction is within the version space after the label
// of the one before, since version spaces only shrink on a realizable
// stream. So each mistake of the chain does to the version space what a
// mistake with immediate labels does: Halving's leaves at most half of
// the version space at its prediction, SOA's lowers its Littlestone
// dimension by at least 1, Consistent's removes the hypothesis it
// predicted with. A chain therefore has at most m mistakes (log₂|H|,
// Ldim(H), |H|-1), as the immediate-label proofs count. The mistaken
// rounds split into as many chains as the most intervals that share a
// point (intervals on a line: greedy colouring by label time). Of k
// intervals sharing a point, the one labeled last saw the other k-1
// labels learned during its wait, so k ≤ d+1, and there are at most d+1
// chains of at most m mistakes.
func delayedBound(m float64, d uint64) float64 { return (float64(d) + 1) * m }

// SOA is Littlestone's Standard Optimal Algorithm (Section 21.1.1): it
// predicts the label r whose version space V^(r) has the larger Littlestone
// dimension, ties 1. Mistakes ≤ Ldim(H) on a stream realizable by H (Lemma
// 21.7), which no algorithm beats (Lemma 21.6). Since Ldim(∅) = -1 it never
// predicts a label no hypothesis of V gives. Not safe for concurrent use.
type SOA struct{ versionSpace }

// NewSOA returns SOA over c with V_1 = H. It computes, once per class,
// what the exact Littlestone dimension needs (PrepareLdim) and panics with
// PrepareLdim's error when that is out of reach; NewSOAChecked returns the
// error instead.
func NewSOA(c *Class) *SOA {
	l, err := NewSOAChecked(c)
	if err != nil {
		panic("experts: " + err.Error())
	}
	return l
}

// NewSOAChecked returns SOA over c with V_1 = H, or an error naming the
// class and the limit when its exact Littlestone dimension is out of reach
// (PrepareLdim).
func NewSOAChecked(c *Class) (*SOA, error) {
	if err := c.PrepareLdim(); err != nil {
		return nil, fmt.Errorf("soa: %w", err)
	}
	return &SOA{newVersionSpace(c, tagSOA)}, nil
}

// NewLearner returns the learner algorithm (consistent, halving, soa or
// weighted-majority, as typed in the config) over c; cfg is used by
// weighted-majority only. Only soa needs the exact Littlestone dimension;
// it is the only one that can fail on a class NewClass accepted.
func NewLearner(algorithm string, c *Class, cfg HedgeConfig) (online.Learner, error) {
	switch algorithm {
	case "consistent":
		return NewConsistent(c), nil
	case "halving":
		return NewHalving(c), nil
	case "soa":
		l, err := NewSOAChecked(c)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return l, nil
	case "weighted-majority":
		l, err := NewWeightedMajority(c, cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("experts: unknown algorithm %q (want consistent, halving, soa or weighted-majority)", algorithm)
}

// Predict returns argmax_r Ldim(V^(r)) (ties Positive) with Score
// Ldim(V^(1)) - Ldim(V^(0)). Outside the domain it returns Negative with
// Score 0. Ldim comes from the class's closed form, structured recursion
// (intervals) or memo: Predict does not allocate, and does not retain x.
func (l *SOA) Predict(x online.Vector) online.Prediction {
	if !l.c.Labels(l.lab, x) {
		return online.Prediction{Label: online.Negative}
	}
	c1, c0 := split(l.v1, l.v0, l.v, l.lab)
	var l1, l0 int
	switch {
	case c1 == 0:
		l1, l0 = -1, l.c.ldimCount(l.v0, c0, l.key)
	case c0 == 0:
		l1, l0 = l.c.ldimCount(l.v1, c1, l.key), -1
	default:
		l1, l0 = l.c.ldimCount(l.v1, c1, l.key), l.c.ldimCount(l.v0, c0, l.key)
	}
	p := online.Prediction{Label: online.Positive, Score: float64(l1 - l0)}
	if l1 < l0 {
		p.Label = online.Negative
	}
	return p
}

// Guarantee returns the mistake bound Ldim(H).
func (l *SOA) Guarantee() online.Guarantee { return l.guarantee(float64(l.c.ld.dim)) }

// DelayedGuarantee returns the mistake bound (d+1)·Ldim(H) for labels at
// most d learned rounds late (see delayedBound).
func (l *SOA) DelayedGuarantee(d uint64) (online.Guarantee, bool) {
	return l.guarantee(delayedBound(float64(l.c.ld.dim), d)), true
}
