package experts

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

var (
	_ online.Learner    = (*WeightedMajority)(nil)
	_ online.Guaranteed = (*WeightedMajority)(nil)
	_ online.Guaranteed = (*Hedge)(nil)
	_ online.Domained   = (*WeightedMajority)(nil)
)

// HedgeConfig configures Weighted-Majority (Hedge). The zero value is
// valid: unknown horizon (doubling trick), η derived, seed 0.
type HedgeConfig struct {
	// Horizon is the number of rounds T if known: η = √(2 ln d / T). 0
	// (the default) means unknown: the doubling trick.
	Horizon int `yaml:"horizon"`
	// Eta, when > 0, fixes the learning rate for every round instead of
	// deriving it (no doubling trick). Default 0: derived.
	Eta float64 `yaml:"eta"`
	// Seed seeds the PCG that draws the realized predictions. Default 0.
	Seed uint64 `yaml:"seed"`
}

// Validate checks the config; messages name the key.
func (c HedgeConfig) Validate() error {
	if c.Horizon < 0 {
		return fmt.Errorf("horizon: %d, want ≥ 0 (0: unknown, doubling trick)", c.Horizon)
	}
	if math.IsNaN(c.Eta) || math.IsInf(c.Eta, 0) || c.Eta < 0 {
		return fmt.Errorf("eta: %v, want a finite value ≥ 0 (0: derived)", c.Eta)
	}
	return nil
}

// pcgStream is the second PCG word, fixed so that a seed alone picks the
// stream: the ASCII bytes of "hedgerng" read big-endian.
const pcgStream = 0x6865646765726e67

// hedge is the Weighted-Majority algorithm of Section 21.2.1 over d
// experts whose advice arrives as the set pos of experts saying +1.
//
// Weights: w̃_i = e^{-η L_i} for the epoch's cumulative loss L_i, stored
// scaled by e^{η m} where m is the epoch's smallest L_i, so the best expert
// has weight exactly 1 and Z ∈ [1, d] never underflows. A round multiplies
// the erring experts' weights by e^{-η}; when the round raises m, every
// weight is recomputed as e^{-η(L_i - m)} from the exact integer losses, so
// an expert whose weight had underflowed to 0 gets it back exactly when it
// matters. The epoch's losses are plain counters (a recomputation reads
// them all); the total losses, of which only the minimum is read, a
// bestLoss.
type hedge struct {
	d      int
	cfg    HedgeConfig
	full   Set
	rounds uint64 // updates so far
	// Epochs: the doubling trick runs epoch m = 0, 1, 2, ... over rounds
	// [2^m - 1, 2^{m+1} - 1); otherwise one epoch of unbounded length.
	epoch      int
	epochStart uint64
	eta, f     float64 // η of the epoch, e^{-η}
	// pows[k] is e^{-ηk} as math.Exp(-η·k) gives it, for the k below
	// len(pows) (at most cap(pows)): filled as a recomputation needs them.
	pows   []float64
	weight []float64
	z      float64 // Σ weight, summed in index order
	// The epoch's losses L_i, their minimum m and the experts at it.
	epLoss []uint64
	min    uint64
	atMin  Set
	total  bestLoss
	mis    Set
	rng    rand.PCG
}

// powsCap is the most powers e^{-ηk} a hedge keeps (and 4d at most over
// d experts, for a few experts would not use them): a recomputation
// computes those of experts further behind the best.
const powsCap = 256

func newHedge(d int, cfg HedgeConfig) (hedge, error) {
	if d < 1 {
		return hedge{}, fmt.Errorf("weighted-majority: %d experts, want at least 1", d)
	}
	if d > MaxHypotheses {
		return hedge{}, fmt.Errorf("weighted-majority: %d experts, want at most %d", d, MaxHypotheses)
	}
	if err := cfg.Validate(); err != nil {
		return hedge{}, err
	}
	full := make(Set, words(d))
	full.setRange(0, d)
	h := hedge{d: d, cfg: cfg, full: full, pows: make([]float64, 0, min(powsCap, 4*d)), weight: make([]float64, d),
		epLoss: make([]uint64, d), atMin: make(Set, len(full)), mis: make(Set, len(full))}
	h.total = newBestLoss(full, d)
	h.rng = *rand.NewPCG(cfg.Seed, pcgStream)
	h.startEpoch(0, 0)
	return h, nil
}

func (h *hedge) doubling() bool { return h.cfg.Horizon == 0 && h.cfg.Eta == 0 }

// etaFor returns η for epoch m.
func (h *hedge) etaFor(m int) float64 {
	lnd := math.Log(float64(h.d))
	switch {
	case h.cfg.Eta > 0:
		return h.cfg.Eta
	case h.cfg.Horizon > 0:
		return math.Sqrt(2 * lnd / float64(h.cfg.Horizon))
	}
	return math.Sqrt(2 * lnd / math.Ldexp(1, m))
}

func (h *hedge) startEpoch(m int, start uint64) {
	h.epoch, h.epochStart = m, start
	h.eta = h.etaFor(m)
	h.f = math.Exp(-h.eta)
	h.pows = h.pows[:0]
	for i := range h.weight {
		h.weight[i] = 1
	}
	h.z = float64(h.d)
	clear(h.epLoss)
	h.min = 0
	copy(h.atMin, h.full)
}

// pow returns e^{-ηk}, exactly what math.Exp(-η·k) returns.
func (h *hedge) pow(k uint64) float64 {
	if k < uint64(len(h.pows)) {
		return h.pows[k]
	}
	if k >= uint64(cap(h.pows)) {
		return math.Exp(-h.eta * float64(k))
	}
	for j := len(h.pows); j <= int(k); j++ {
		h.pows = append(h.pows, math.Exp(-h.eta*float64(j)))
	}
	return h.pows[k]
}

// predict returns P(label = +1) = Σ_{i ∈ pos} w_i(t) and the realized
// label: Positive when a uniform draw u ∈ [0, 1) from the PCG (its next
// Uint64 >> 11, times 2^-53) is below it.
func (h *hedge) predict(pos Set) online.Prediction {
	var s float64
	for k, w := range pos {
		w &= h.full[k]
		for w != 0 {
			s += h.weight[k<<6+bits.TrailingZeros64(w)]
			w &= w - 1
		}
	}
	score := s / h.z
	// The draw of this round, from a copy: Predict leaves the generator
	// as it is, and update advances it past the draw.
	rng := h.rng
	u := float64(rng.Uint64()>>11) * 0x1p-53
	if u < score {
		return online.Prediction{Label: online.Positive, Score: score}
	}
	return online.Prediction{Label: online.Negative, Score: score}
}

// update charges v_{t,i} = 1[advice_i ≠ y], reweights, and advances the
// generator past the round's draw.
func (h *hedge) update(pos Set, y int8) {
	h.rng.Uint64()
	if y == online.Positive {
		for k := range h.mis {
			h.mis[k] = h.full[k] &^ pos[k]
		}
	} else {
		for k := range h.mis {
			h.mis[k] = h.full[k] & pos[k]
		}
	}
	h.total.add(h.mis)
	grew := true // the round raised m: every expert at it erred
	for k, w := range h.mis {
		h.atMin[k] &^= w
		if h.atMin[k] != 0 {
			grew = false
		}
		for w != 0 {
			i := k<<6 + bits.TrailingZeros64(w)
			h.epLoss[i]++
			h.weight[i] *= h.f
			w &= w - 1
		}
	}
	if grew {
		h.min++
		h.reweigh()
	}
	h.z = h.sum()
	h.rounds++
	if h.doubling() && h.rounds-h.epochStart == uint64(1)<<h.epoch {
		h.startEpoch(h.epoch+1, h.rounds)
	}
}

// reweigh recomputes every weight as e^{-η(L_i - m)} and the experts at
// m.
func (h *hedge) reweigh() {
	clear(h.atMin)
	for i, l := range h.epLoss {
		h.weight[i] = h.pow(l - h.min)
		if l == h.min {
			h.atMin.Add(i)
		}
	}
}

func (h *hedge) sum() float64 {
	var z float64
	for _, w := range h.weight {
		z += w
	}
	return z
}

// loss is the expected 0-1 loss ⟨w(t), v_t⟩ = P(prediction ≠ y).
func (h *hedge) loss(p online.Prediction, y int8) float64 {
	if y == online.Positive {
		return 1 - p.Score
	}
	return p.Score
}

// epochBound is Theorem 21.11's bound √(2 T ln d) for an epoch of T
// rounds, capped at T (regret per round is at most 1), which is also what
// holds when T ≤ 2 ln d and the theorem's condition fails.
func epochBound(T, lnd float64) float64 { return min(T, math.Sqrt(2*T*lnd)) }

// bound is the regret bound published after the rounds so far; see the
// package doc.
func (h *hedge) bound() float64 {
	if h.d == 1 {
		return 0 // the one expert is the comparator: regret is exactly 0
	}
	t := float64(h.rounds)
	lnd := math.Log(float64(h.d))
	// anytime is the proof's bound ln d/η + η t/2, valid for every η > 0.
	anytime := func() float64 { return min(t, lnd/h.eta+h.eta*t/2) }
	switch {
	case h.cfg.Eta > 0:
		return anytime()
	case h.cfg.Horizon > 0:
		if h.rounds <= uint64(h.cfg.Horizon) {
			return min(t, epochBound(float64(h.cfg.Horizon), lnd))
		}
		return anytime()
	}
	var b float64
	for m := range h.epoch {
		b += epochBound(math.Ldexp(1, m), lnd)
	}
	return b + min(float64(h.rounds-h.epochStart), epochBound(math.Ldexp(1, h.epoch), lnd))
}

// delayedGuarantee is the guarantee for labels at most d learned rounds
// late: the regret bound plus a drift, capped at the rounds (an expected
// loss is at most 1 a round):
//
//	Σ over epochs m of (rounds of m)·min(1, d·(1 − e^(−η_m))) + d·(epochs − 1)
//
// Proof. Number the learned rounds in the order their labels come. The
// weights are updated with each round's expert losses, whatever was
// served, so they follow the Hedge run on that sequence, and the immediate
// bound holds for the regret of its distributions p_k. The distribution
// served, p_a, is at most d updates older. One update of an epoch of step
// η moves the distribution by at most 1 − e^(−η) in total variation (the
// experts that err lose a factor e^(−η) of their mass, the others gain what
// they lose), so ⟨p_a − p_k, ℓ_k⟩ ≤ min(1, d·(1 − e^(−η))) with losses in
// [0, 1]. A round whose served distribution is of an earlier epoch (reset
// at the epoch's start) moves by at most 1; at most d rounds after each
// epoch start are such.
func (h *hedge) delayedGuarantee(d uint64) online.Guarantee {
	g := h.guarantee()
	if d == 0 || h.d == 1 || h.rounds == 0 {
		return g
	}
	D := float64(d)
	drift := func(rounds uint64, eta float64) float64 {
		return float64(rounds) * min(1, D*(-math.Expm1(-eta)))
	}
	var total float64
	if h.cfg.Eta > 0 || h.cfg.Horizon > 0 {
		total = drift(h.rounds, h.eta)
	} else {
		for m := range h.epoch {
			total += drift(uint64(1)<<m, h.etaFor(m))
		}
		total += drift(h.rounds-h.epochStart, h.eta) + D*float64(h.epoch)
	}
	b := min(float64(h.rounds), g.Value+total)
	g.Value, g.RegretBound = b, b
	return g
}

func (h *hedge) guarantee() online.Guarantee {
	b := h.bound()
	return online.Guarantee{
		Kind:           online.RegretBound,
		Value:          b,
		Comparator:     "best_expert",
		ComparatorLoss: float64(h.total.min),
		RegretBound:    b,
		// With a horizon, the bound changes formula past it.
		Monotone: h.cfg.Horizon == 0,
	}
}

// appendState encodes: d (u32), horizon, η config bits, seed, rounds
// (u64), the d weights (float64 bits), the d epoch losses and the d total
// losses (u64), and the PCG state (its 20-byte MarshalBinary).
func (h *hedge) appendState(e *codec.Encoder) {
	e.U32(uint32(h.d))
	e.U64(uint64(h.cfg.Horizon))
	e.F64(h.cfg.Eta)
	e.U64(h.cfg.Seed)
	e.U64(h.rounds)
	for _, w := range h.weight {
		e.F64(w)
	}
	for _, l := range h.epLoss {
		e.U64(l)
	}
	h.total.appendTo(e)
	r, _ := h.rng.MarshalBinary() // cannot fail
	e.Raw(r)
}

// pcgStateLen is the length of rand.PCG's MarshalBinary.
const pcgStateLen = 20

func (h *hedge) decodeState(d *codec.Decoder) error {
	n, horizon, eta, seed := d.U32(), d.U64(), d.U64(), d.U64()
	if d.Err() == nil && (int(n) != h.d || horizon != uint64(h.cfg.Horizon) ||
		eta != math.Float64bits(h.cfg.Eta) || seed != h.cfg.Seed) {
		return errors.New("experts: encoding is for a different weighted-majority configuration")
	}
	rounds := d.U64()
	weight := make([]float64, h.d)
	for i := range weight {
		weight[i] = d.F64()
	}
	epl, tot := make([]uint64, h.d), make([]uint64, h.d)
	for i := range epl {
		epl[i] = d.U64()
	}
	for i := range tot {
		tot[i] = d.U64()
	}
	var rng rand.PCG
	if p := d.Take(pcgStateLen); p != nil {
		if err := rng.UnmarshalBinary(p); err != nil {
			return fmt.Errorf("experts: rng state: %w", err)
		}
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("experts: %w", err)
	}
	// Replay the epoch arithmetic to find the epoch of round `rounds`
	// (epoch m starts at round 2^m − 1, so m < 64 for any uint64 count).
	m, start := 0, uint64(0)
	if h.doubling() {
		for m < 63 && rounds-start >= uint64(1)<<m {
			start += uint64(1) << m
			m++
		}
	}
	for i, w := range weight {
		if !(w >= 0 && w <= 1) {
			return fmt.Errorf("experts: weight %d is %v, want in [0, 1]", i, w)
		}
		if epl[i] > rounds-start || tot[i] > rounds || epl[i] > tot[i] {
			return errors.New("experts: expert losses inconsistent with the round count")
		}
	}
	h.startEpoch(m, start)
	h.rounds = rounds
	copy(h.weight, weight)
	h.z = h.sum()
	copy(h.epLoss, epl)
	h.min = slices.Min(epl)
	clear(h.atMin)
	for i, l := range epl {
		if l == h.min {
			h.atMin.Add(i)
		}
	}
	h.total.set(tot)
	h.rng = rng
	return nil
}

// Hedge is Weighted-Majority over d experts whose advice, a label ±1 per
// expert, the caller passes on each round: OverLearners runs it over other
// learners' predicted labels. Advice other than +1 counts as -1. Not safe
// for concurrent use.
type Hedge struct {
	h   hedge
	pos Set
}

// NewHedge returns Weighted-Majority over d ≥ 1 experts.
func NewHedge(d int, cfg HedgeConfig) (*Hedge, error) {
	h, err := newHedge(d, cfg)
	if err != nil {
		return nil, err
	}
	return &Hedge{h: h, pos: make(Set, len(h.full))}, nil
}

func (e *Hedge) advise(advice []int8) {
	if len(advice) != e.h.d {
		panic(fmt.Sprintf("experts: %d advice labels for %d experts", len(advice), e.h.d))
	}
	clear(e.pos)
	for i, a := range advice {
		if a == online.Positive {
			e.pos.Add(i)
		}
	}
}

// Predict returns Score = P(label = +1) = Σ_i w_i(t)·1[advice_i = +1] and a
// Label drawn with that probability from the seeded PCG. len(advice) must
// be d. Predict does not retain advice and does not allocate.
func (e *Hedge) Predict(advice []int8) online.Prediction {
	e.advise(advice)
	return e.h.predict(e.pos)
}

// Learn charges v_{t,i} = 1[advice_i ≠ y] and sets w̃_i ← w̃_i e^{-η v_i},
// advice being the experts' labels of the round whose prediction served
// was (each expert is charged its advice, whatever was drawn). It does not
// allocate, but when an expert's mistakes first reach a power of two (a
// bit plane of the counts: at most 64 times).
func (e *Hedge) Learn(advice []int8, _ online.Prediction, y int8) {
	e.advise(advice)
	e.h.update(e.pos, y)
}

// Loss is the expected loss ⟨w(t), v_t⟩: 1 - Score when y = +1, else
// Score.
func (e *Hedge) Loss(p online.Prediction, y int8) float64 { return e.h.loss(p, y) }

// Guarantee returns the regret bound against the best expert (package doc).
func (e *Hedge) Guarantee() online.Guarantee { return e.h.guarantee() }

// DelayedGuarantee returns the regret bound for labels at most d learned
// rounds late (see hedge.delayedGuarantee).
func (e *Hedge) DelayedGuarantee(d uint64) (online.Guarantee, bool) {
	return e.h.delayedGuarantee(d), true
}

// Weights returns the distribution w(t) over the experts, appended to dst.
func (e *Hedge) Weights(dst []float64) []float64 { return e.h.weights(dst) }

func (h *hedge) weights(dst []float64) []float64 {
	for _, w := range h.weight {
		dst = append(dst, w/h.z)
	}
	return dst
}

// MarshalBinary encodes the state canonically: version byte, tag 'E', then
// the state described at appendState.
func (e *Hedge) MarshalBinary() ([]byte, error) {
	var enc codec.Encoder
	enc.U8(encodingVersion)
	enc.U8(tagHedge)
	e.h.appendState(&enc)
	return enc.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary with the same
// d and config; on error the state is unchanged.
func (e *Hedge) UnmarshalBinary(b []byte) error {
	d := codec.NewDecoder(b)
	if err := header(d, tagHedge); err != nil {
		return err
	}
	return e.h.decodeState(d)
}

func header(d *codec.Decoder, tag byte) error {
	v, t := d.U8(), d.U8()
	switch {
	case d.Err() != nil:
		return fmt.Errorf("experts: %w", d.Err())
	case v != encodingVersion:
		return fmt.Errorf("experts: encoding version %d, want %d", v, encodingVersion)
	case t != tag:
		return fmt.Errorf("experts: encoding of learner %q, want %q", t, tag)
	}
	return nil
}

// WeightedMajority is Weighted-Majority whose experts are the hypotheses
// of a finite class (Corollary 21.12): expected regret against the best
// hypothesis ≤ √(2 T ln |H|). Not safe for concurrent use.
type WeightedMajority struct {
	c   *Class
	h   hedge
	lab Set
}

// NewWeightedMajority returns Weighted-Majority over the hypotheses of c.
func NewWeightedMajority(c *Class, cfg HedgeConfig) (*WeightedMajority, error) {
	h, err := newHedge(c.n, cfg)
	if err != nil {
		return nil, err
	}
	return &WeightedMajority{c: c, h: h, lab: c.NewSet()}, nil
}

// Class returns the hypothesis class.
func (l *WeightedMajority) Class() *Class { return l.c }

// InDomain reports whether x lies in the class's domain.
func (l *WeightedMajority) InDomain(x online.Vector) bool { return l.c.InDomain(x) }

// Predict returns Score = P(label = +1) = Σ_{h(x) = 1} w_h(t) and a Label
// drawn with that probability. Outside the domain it returns Negative with
// Score 0 and draws nothing. It does not retain x and does not allocate.
func (l *WeightedMajority) Predict(x online.Vector) online.Prediction {
	if !l.c.Labels(l.lab, x) {
		return online.Prediction{Label: online.Negative}
	}
	return l.h.predict(l.lab)
}

// Learn charges every hypothesis with h(x) ≠ y and reweights; events
// outside the domain are ignored. It does not allocate, but when a
// hypothesis's mistakes first reach a power of two (at most 64 times).
func (l *WeightedMajority) Learn(x online.Vector, _ online.Prediction, y int8) {
	if !l.c.Labels(l.lab, x) {
		return
	}
	l.h.update(l.lab, y)
}

// Loss is the expected loss ⟨w(t), v_t⟩ (1 - Score when y = +1, else
// Score).
func (l *WeightedMajority) Loss(p online.Prediction, y int8) float64 { return l.h.loss(p, y) }

// Guarantee returns the regret bound against the best hypothesis.
func (l *WeightedMajority) Guarantee() online.Guarantee { return l.h.guarantee() }

// DelayedGuarantee returns the regret bound for labels at most d learned
// rounds late (see hedge.delayedGuarantee).
func (l *WeightedMajority) DelayedGuarantee(d uint64) (online.Guarantee, bool) {
	return l.h.delayedGuarantee(d), true
}

// Weights returns the distribution w(t) over the hypotheses, appended to
// dst.
func (l *WeightedMajority) Weights(dst []float64) []float64 { return l.h.weights(dst) }

// MarshalBinary encodes the state canonically: version byte, tag 'W',
// class fingerprint (u64), then the state described at appendState.
func (l *WeightedMajority) MarshalBinary() ([]byte, error) {
	var e codec.Encoder
	e.U8(encodingVersion)
	e.U8(tagWeightedMajority)
	e.U64(l.c.fp)
	l.h.appendState(&e)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary for the same
// class and config; on error the state is unchanged.
func (l *WeightedMajority) UnmarshalBinary(b []byte) error {
	d := codec.NewDecoder(b)
	if err := header(d, tagWeightedMajority); err != nil {
		return err
	}
	if fp := d.U64(); d.Err() == nil && fp != l.c.fp {
		return errors.New("experts: encoding is for a different class")
	}
	return l.h.decodeState(d)
}

// Probability is the prediction's score: the weight of the hypotheses
// saying Positive, the probability of the label drawn.
func (l *WeightedMajority) Probability(p online.Prediction) (float64, bool) { return p.Score, true }

var _ online.Prober = (*WeightedMajority)(nil)
