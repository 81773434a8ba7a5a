package online

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// PerceptronConfig configures a Perceptron (learner keys of algorithm
// "perceptron"). The zero value is the plain Perceptron of the seeds.
type PerceptronConfig struct {
	// Bias adds a constant feature 1 at an extra slot, so the learned
	// halfspace need not pass through the origin (the "Perceptron with
	// offset"). Its coordinate counts in R. Default false.
	Bias bool `yaml:"bias"`
	// Average predicts with the average of the weight vectors w(1..t+1)
	// (the averaged Perceptron, Freund & Schapire 1999), maintained in O(nnz)
	// per update with Daumé's lazy trick. The updates are still those of the
	// plain Perceptron. No mistake bound is published with averaging: the
	// theorem bounds the plain Perceptron's mistakes, not those of the
	// average that predicts. The margin certificate, a statement about the
	// data made from the plain updates, is still published. Default false.
	Average bool `yaml:"average"`
	// Margin is the margin γ > 0 the user asserts the stream is separable
	// with: by a unit-norm w, y⟨w,x⟩ ≥ γ on every round, or with Bias by a
	// hyperplane of unit-norm normal w and any offset b, y(⟨w,x⟩+b) ≥ γ
	// (the usual margin of a hyperplane with offset, not the margin of
	// (w,b) in the space extended by the bias feature). It does not change
	// the algorithm; it enables the published mistake bound. 0 (the
	// default) publishes only the margin certificate. Incompatible with
	// Average.
	Margin float64 `yaml:"margin"`
}

// Validate reports a configuration error, naming the key at fault.
func (c PerceptronConfig) Validate() error {
	if !finite(c.Margin) || c.Margin < 0 {
		return fmt.Errorf("perceptron: margin: %v is not a finite number ≥ 0", c.Margin)
	}
	if c.Margin > 0 && c.Average {
		return errors.New("perceptron: margin: the mistake bound holds for the plain Perceptron, not with average: true")
	}
	return nil
}

// Perceptron is Rosenblatt's Perceptron over 2^bits hashed slots, run
// online as in the seeds (lecture notes, "Lecture 4 – Perceptron",
// Algorithm 1 and Theorem 3): w(1) = 0, and on a round where
// y·⟨w,x⟩ ≤ 0, w ← w + y·x.
//
// Prediction: the score is ⟨w,x⟩ (+ b with Bias; the averaged weights with
// Average) and the label is +1 when the score is > 0 and -1 otherwise: a
// zero score predicts -1. This is also River's tie rule (its Perceptron
// returns the first of {False, True} when both have probability ½). A zero
// score is always an update, whichever label is right, as in the seeds.
//
// Loss is the 0-1 loss of the predicted label. Every round the label is
// wrong has y·score ≤ 0 and is an update, so mistakes ≤ updates ≤ the
// published bound.
//
// Guarantee (Guaranteed): with R = max ‖x‖ over the rounds learned so far
// (including the bias coordinate 1) and M the number of updates,
//
//   - if Margin γ > 0: Kind MistakeBound, Value (R/γ)² (Novikoff 1962; the
//     seeds' Theorem 3 is the case R = 1: at most 1/γ² updates). Since R is
//     the maximum so far, the bound holds at every round for the prefix.
//     With Bias, Value is R²·max(1, (1+(ρ−γ)⁺²)/γ²), ρ = max ‖x‖ without
//     the bias coordinate (R² = ρ²+1): see biasBound. The premise is the
//     user's word (Premise PremiseAssumed) until an update round
//     disproves it: M exceeds Value, or, with Bias, the updates have had
//     both labels and γ > ρ, or ‖w‖ < M·γ (normDisproved, checked at some
//     updates). Those rounds are counted in Violations, and from the
//     first one Premise is PremiseFalse;
//   - once M > 0: CertificateKind "max_margin", Certificate R/√M. The same
//     proof shows every unit-norm u has min_t y_t⟨u,x_t⟩ ≤ R/√M over the
//     update rounds, so no separator of the stream seen so far has a larger
//     margin.
//
// Every index of x must be below 2^bits (decoders mask hashed slots);
// a larger one panics. The Perceptron is not safe for concurrent use and
// retains no x.
type Perceptron struct {
	cfg  PerceptronConfig
	bits uint
	dim  int // the bias's slot: 2^bits, or 0, its number, over a Space
	sp   *Space

	w []float64 // weights, w[dim] is the bias when cfg.Bias
	u []float64 // Average: Σ c_k·y_k·x_k over updates k (lazy averaging)

	rounds  uint64  // rounds learned (Learn calls)
	updates uint64  // M
	maxR2   float64 // R²
	viol    uint64

	// The Guarantee of the current updates, maxR2 and viol, valid while
	// gOK: the tracker asks every round, it changes only on some.
	g   Guarantee
	gOK bool
	// dg is DelayedGuarantee(dgD), valid while dgOK; it goes stale with g.
	dg   Guarantee
	dgD  uint64
	dgOK bool
}

var (
	_ Learner    = (*Perceptron)(nil)
	_ Rounder    = (*Perceptron)(nil)
	_ Guaranteed = (*Perceptron)(nil)
)

// NewPerceptron returns a Perceptron over 2^bits slots with all weights 0.
func NewPerceptron(bits uint, cfg PerceptronConfig) (*Perceptron, error) {
	if err := checkBits("perceptron", bits); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Perceptron{cfg: cfg, bits: bits, dim: 1 << bits}
	n := p.size()
	p.w = make([]float64, n)
	if cfg.Average {
		p.u = make([]float64, n)
	}
	return p, nil
}

// NewSparsePerceptron returns a Perceptron over s with all weights 0: it
// reads vectors in s's numbers (Space.Map) and holds weights for those
// only.
func NewSparsePerceptron(s *Space, cfg PerceptronConfig) (*Perceptron, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Perceptron{cfg: cfg, bits: s.bits, sp: s}
	p.fit()
	return p, nil
}

// Space returns the Space of a sparse Perceptron, nil for a dense one.
func (p *Perceptron) Space() *Space { return p.sp }

// size is the length of the dense weight vector: 2^bits, and the bias.
func (p *Perceptron) size() int {
	if p.cfg.Bias {
		return 1<<p.bits + 1
	}
	return 1 << p.bits
}

// fit grows a sparse Perceptron's weights to its space's numbers.
func (p *Perceptron) fit() {
	if p.sp != nil && len(p.w) < len(p.sp.slots) {
		p.w = fit(p.w, len(p.sp.slots))
		if p.cfg.Average {
			p.u = fit(p.u, len(p.sp.slots))
		}
	}
}

// Config returns the configuration.
func (p *Perceptron) Config() PerceptronConfig { return p.cfg }

// Weights returns the current (not averaged) weights; the bias, with Bias,
// is the last element. The slice is the dense learner's own (a sparse
// one's is made): do not modify it.
func (p *Perceptron) Weights() []float64 {
	if p.sp != nil {
		return p.sp.dense(p.w, p.size())
	}
	return p.w
}

// Updates returns M, the number of updates so far.
func (p *Perceptron) Updates() uint64 { return p.updates }

// Predict returns the sign of the score, -1 at 0. It does not change the
// Perceptron.
func (p *Perceptron) Predict(x Vector) Prediction {
	p.fit()
	raw := p.raw(x)
	score := raw
	if p.cfg.Average {
		score = p.averaged(x, raw)
	}
	return Prediction{Label: sign(score), Score: score}
}

// raw returns the plain score ⟨w,x⟩(+b).
func (p *Perceptron) raw(x Vector) float64 {
	raw := dot(x.Idx, x.Val, p.w)
	if p.cfg.Bias {
		raw += p.w[p.dim]
	}
	return raw
}

// averaged returns the score of the average of w(1..c), c = rounds+1
// weight vectors: w - u/c, raw being the plain score.
func (p *Perceptron) averaged(x Vector, raw float64) float64 {
	ux := dot(x.Idx, x.Val, p.u)
	if p.cfg.Bias {
		ux += p.u[p.dim]
	}
	return raw - ux/float64(p.rounds+1)
}

// sign is the tie rule of the linear learners: +1 iff s > 0.
func sign(s float64) int8 {
	if s > 0 {
		return Positive
	}
	return Negative
}

// Learn adds y·x to w when y·score ≤ 0, score being the plain score
// served.Score was, or, with Average (whose served score is the average's),
// the plain score ⟨w,x⟩(+b) now: the same on a round whose label comes
// before the next update.
func (p *Perceptron) Learn(x Vector, served Prediction, y int8) {
	p.fit()
	raw := served.Score
	if p.cfg.Average {
		raw = p.raw(x)
	}
	p.learn(x, raw, norm2(x.Val[:len(x.Idx)]), y)
}

// learn is a round's learning: raw the plain score, xn2 = ‖x‖².
func (p *Perceptron) learn(x Vector, raw, xn2 float64, y int8) {
	p.rounds++
	if p.cfg.Bias {
		xn2++
	}
	if xn2 > p.maxR2 {
		p.maxR2 = xn2
		p.gOK, p.dgOK = false, false
	}
	if fy := float64(y); fy*raw <= 0 {
		p.update(x, fy)
	}
}

// Round is Predict, Loss and Learn in one call (see Rounder). It repeats
// their few lines rather than calling helpers for them: the calls would
// cost half of what fusing the round saves.
func (p *Perceptron) Round(x Vector, y int8) (Prediction, float64) {
	p.fit()
	if p.cfg.Average {
		raw, xn2 := dotNorm2(x.Idx, x.Val, p.w)
		if p.cfg.Bias {
			raw += p.w[p.dim]
		}
		score := p.averaged(x, raw)
		p.learn(x, raw, xn2, y)
		pr := Prediction{Label: sign(score), Score: score}
		return pr, p.Loss(pr, y)
	}
	raw, r2 := dotNorm2(x.Idx, x.Val, p.w)
	if p.cfg.Bias {
		raw += p.w[p.dim]
		r2++
	}
	p.rounds++
	if r2 > p.maxR2 {
		p.maxR2 = r2
		p.gOK, p.dgOK = false, false
	}
	if fy := float64(y); fy*raw <= 0 {
		p.update(x, fy)
	}
	pr := Prediction{Label: sign(raw), Score: raw}
	return pr, p.Loss(pr, y)
}

// update adds fy·x to w, a mistake's update.
func (p *Perceptron) update(x Vector, fy float64) {
	p.updates++
	p.gOK, p.dgOK = false, false
	axpy(p.w, fy, x.Idx, x.Val)
	if p.cfg.Bias {
		p.w[p.dim] += fy
	}
	if p.cfg.Average {
		// The update enters the weight vectors w(rounds+1), ..., so it is
		// weighted by c = rounds in u (Daumé, "A Course in Machine
		// Learning", Algorithm 7).
		c := fy * float64(p.rounds)
		axpy(p.u, c, x.Idx, x.Val)
		if p.cfg.Bias {
			p.u[p.dim] += c
		}
	}
	if p.cfg.Margin > 0 && (p.disproved() || p.viol == 0 && normCheckAt(p.updates) && p.normDisproved()) {
		p.viol++
	}
}

// normCheckAt reports whether the update count m is one at which update
// checks normDisproved, a pass over the weights: 1, 2, 4, 8, then 4 evenly
// spaced per doubling of m (16, 20, 24, 28, 32, 40, ...), so that the
// passes cost O(2^bits · log M) over a run (about 0.3 ms each at 2^18
// slots, a dozen by the 64th update), and a margin the weights disprove
// is found within a quarter more updates.
func normCheckAt(m uint64) bool {
	if m < 16 {
		return m&(m-1) == 0
	}
	return m&(1<<(bits.Len64(m)-3)-1) == 0
}

// normDisproved reports whether the weights now disprove Margin γ, from
// the proof of the bound itself: for a unit separator u of margin γ, each
// update adds at least γ to ⟨u,w⟩, so M·γ ≤ ⟨u,w⟩ ≤ ‖w‖. A weight vector
// shorter than M·γ proves that no unit vector separates the updates with
// margin γ. This is the certificate R/√M < γ made exact: ‖w‖ ≤ R√M, and on
// a stream that is not separable the updates cancel, so ‖w‖ falls far
// below R√M long before M reaches the bound. It needs no assumption on
// the order of the labels, so it holds with delayed labels too.
//
// With Bias, w is the extended (w, b) and a separator of margin γ with
// offset b, |b| ≤ d = (ρ−γ)⁺ once the updates have had both labels, is the
// extended unit vector (w*, b)/√(1+b²) of margin γ/√(1+d²) at least
// (biasBound); while they have all had one label, ‖w‖ ≥ |b| = M and
// nothing is disproved.
//
// w is the sum of the updates y_k·x_k as rounded: within M²·u·R of the
// exact sum (u the unit roundoff), and ‖w‖ is computed within a relative
// 2^28·u; the comparison leaves that much room, so that it never claims
// what exact arithmetic would not.
func (p *Perceptron) normDisproved() bool {
	m, gamma := float64(p.updates), p.cfg.Margin
	if p.cfg.Bias {
		if math.Abs(p.w[p.dim]) >= m {
			return false
		}
		d := max(0, math.Sqrt(max(0, p.maxR2-1))-gamma)
		gamma /= math.Sqrt(1 + d*d)
	}
	n2 := 0.0
	if p.sp != nil {
		n2 = p.sp.norm2(p.w, p.size())
	} else {
		n2 = norm2(p.w)
	}
	norm := math.Sqrt(n2)
	return norm*(1+1e-7)+1e-15*m*m*math.Sqrt(p.maxR2) < m*gamma
}

// bound returns the mistake bound for Margin γ > 0 and R² = maxR2.
//
// Without Bias it is Novikoff's R²/γ². With Bias the Perceptron runs on
// x' = (x, 1), ‖x'‖ ≤ R, and the user's γ is the margin of a hyperplane
// (w, b) with ‖w‖ = 1, whose extended vector (w, b) has norm √(1+b²)
// and margin γ/√(1+b²) on x': M ≤ R²(1+b²)/γ². The offset b is bounded
// by the data (biasBound): the bound is R²·max(1, (1+(ρ−γ)⁺²)/γ²).
func (p *Perceptron) bound() float64 {
	g2 := p.cfg.Margin * p.cfg.Margin
	if !p.cfg.Bias {
		return p.maxR2 / g2
	}
	return biasBound(p.maxR2, p.cfg.Margin)
}

// biasBound is the mistake bound of a Perceptron with a bias on a stream
// separable with margin γ by a hyperplane (w, b), ‖w‖ = 1, any b, where R²
// = r2 is the largest ‖(x, 1)‖² so far and ρ = √(R²−1) the largest ‖x‖:
// R²·max(1, (1+d²)/γ²), d = max(0, ρ−γ).
//
// Proof. Novikoff's argument uses only the update rounds. If they all
// had the same label y₀, the unit vector (0, y₀) separates them in the
// extended space with margin 1: M ≤ R². Otherwise two update rounds x₊,
// x₋ have opposite labels, and ⟨w,x₊⟩+b ≥ γ, ⟨w,x₋⟩+b ≤ −γ give
// γ−ρ ≤ γ−⟨w,x₊⟩ ≤ b ≤ −γ−⟨w,x₋⟩ ≤ ρ−γ: |b| ≤ d (and γ ≤ ρ), so
// (w, b)/√(1+b²) has margin ≥ γ/√(1+d²) and M ≤ R²(1+d²)/γ². Each case's
// bound is at most the maximum. The bound grows with R, as Monotone asks.
func biasBound(r2, gamma float64) float64 {
	rho := math.Sqrt(max(0, r2-1))
	d := max(0, rho-gamma)
	return r2 * max(1, (1+d*d)/(gamma*gamma))
}

// disproved reports whether the rounds so far disprove the premise of
// Margin, at an update: M exceeds the bound, or offsetDisproved.
func (p *Perceptron) disproved() bool {
	return float64(p.updates) > p.bound() || p.offsetDisproved()
}

// offsetDisproved reports whether, with Bias, the updates have had both
// labels (|b| < M: the bias weight is the sum of their labels) and γ > ρ,
// which no hyperplane with offset allows (biasBound). The comparison
// leaves room for the rounding of R² − 1, so that it never claims what
// exact arithmetic would not. No delay changes it.
func (p *Perceptron) offsetDisproved() bool {
	return p.cfg.Bias && p.cfg.Margin > 0 && math.Abs(p.w[p.dim]) < float64(p.updates) &&
		p.cfg.Margin*p.cfg.Margin > (p.maxR2-1)*(1+1e-9)
}

// Loss is the 0-1 loss: 1 when the predicted label is not y.
func (p *Perceptron) Loss(pr Prediction, y int8) float64 {
	if pr.Label != y {
		return 1
	}
	return 0
}

// Guarantee returns the mistake bound (R/γ)² when Margin is set and the
// margin certificate R/√M once there was an update.
func (p *Perceptron) Guarantee() Guarantee {
	if !p.gOK {
		p.g, p.gOK = p.guarantee(), true
	}
	return p.g
}

func (p *Perceptron) guarantee() Guarantee {
	g := Guarantee{RegretBound: math.NaN(), Violations: p.viol, Monotone: true}
	if p.cfg.Margin > 0 {
		g.Kind = MistakeBound
		g.Value = p.bound()
		g.Premise = PremiseAssumed
		if p.viol > 0 {
			g.Premise = PremiseFalse
		}
	}
	if p.updates > 0 {
		g.CertificateKind = "max_margin"
		g.Certificate = math.Sqrt(p.maxR2 / float64(p.updates))
	}
	return g
}

// DelayedGuarantee returns the guarantee for labels at most d learned
// rounds late, for the Perceptron without averaging (ok is false with
// averaging: its Learn reads the plain score at label time). With a
// margin γ: mistakes ≤ (2d+1)·R²/γ², and the certificate "every unit
// separator has margin ≤ R·√((2d+1)/M)".
//
// Proof: an update on a label y of x whose served score was s = ⟨w',x⟩,
// y·s ≤ 0, is applied to the weights w now, which differ from w' by at
// most d updates ±x_j with ‖x_j‖ ≤ R: y⟨w,x⟩ ≤ y·s + d·R² ≤ d·R². So
// ‖w‖² grows by at most R² + 2dR² per update, while ⟨w,u⟩ grows by at
// least γ for a unit separator u of margin γ, as in the immediate case:
// M·γ ≤ ⟨w,u⟩ ≤ ‖w‖ ≤ R·√(M(2d+1)), that is M ≤ (2d+1)R²/γ². With d = 0
// it is the immediate bound. (The bias is the extra constant feature in
// R², as there, and b is bounded as there: biasBound.)
//
// With d > 0 the rounds counted in Violations, against the immediate
// bound, do not disprove the margin: Premise is then PremiseFalse only
// while M exceeds the delayed bound, or, with Bias, while the updates
// have had both labels and γ > ρ, or, after a round counted, while the
// weights disprove it (normDisproved, which no delay changes).
func (p *Perceptron) DelayedGuarantee(d uint64) (Guarantee, bool) {
	if p.cfg.Average {
		return Guarantee{}, false
	}
	if p.gOK && p.dgOK && p.dgD == d {
		return p.dg, true
	}
	g := p.Guarantee()
	f := 2*float64(d) + 1
	if g.Kind == MistakeBound {
		g.Value *= f
		if d > 0 {
			g.Premise = PremiseAssumed
			if float64(p.updates) > g.Value || p.offsetDisproved() || p.viol > 0 && p.normDisproved() {
				g.Premise = PremiseFalse
			}
		}
	}
	if g.CertificateKind != "" {
		g.Certificate *= math.Sqrt(f)
	}
	p.dg, p.dgD, p.dgOK = g, d, true
	return g, true
}

const perceptronMagic = "SLPC"

// MarshalBinary encodes the configuration, counters and weights.
func (p *Perceptron) MarshalBinary() ([]byte, error) { return p.AppendBinary(nil) }

// AppendBinary appends MarshalBinary's encoding to b
// (encoding.BinaryAppender): a digest of the state hashes it from a
// buffer used again, not a new encoding each time.
func (p *Perceptron) AppendBinary(b []byte) ([]byte, error) {
	e := appendEncoder(b, perceptronMagic, sparseVersion, 80+weightsSize(p.sp, len(p.w)+len(p.u)))
	e.U64(uint64(p.bits))
	e.Bool(p.cfg.Bias)
	e.Bool(p.cfg.Average)
	e.F64(p.cfg.Margin)
	e.U64(p.rounds)
	e.U64(p.updates)
	e.F64(p.maxR2)
	e.U64(p.viol)
	writeWeights(e, p.sp, p.size(), p.w, 1)
	if p.cfg.Average {
		writeWeights(e, p.sp, p.size(), p.u, 1)
	}
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the bits and
// configuration must match the receiver's.
func (p *Perceptron) UnmarshalBinary(b []byte) error {
	d, version := newDecoder("perceptron", perceptronMagic, b, sparseVersion)
	bits := d.U64()
	cfg := PerceptronConfig{Bias: d.Bool(), Average: d.Bool(), Margin: d.F64()}
	if d.Err() == nil && (bits != uint64(p.bits) || cfg != p.cfg) {
		d.Fail("encoding is of a perceptron over %d bits with %+v, not %d bits with %+v", bits, cfg, p.bits, p.cfg)
	}
	rounds, updates, maxR2, viol := d.U64(), d.U64(), d.F64(), d.U64()
	if d.Err() == nil && (updates > rounds || viol > updates || !(maxR2 >= 0) || math.IsInf(maxR2, 0)) {
		d.Fail("inconsistent counters")
	}
	w := decodeWeights(d, version, p.sp, p.size(), 1)
	var u []float64
	if p.cfg.Average {
		u = decodeWeights(d, version, p.sp, p.size(), 1)
	}
	if err := finish("perceptron", d); err != nil {
		return err
	}
	p.rounds, p.updates, p.maxR2, p.viol = rounds, updates, maxR2, viol
	p.gOK, p.dgOK = false, false
	p.w, p.u = w, u
	p.fit()
	return nil
}
