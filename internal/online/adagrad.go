package online

import (
	"fmt"
	"math"
)

// Defaults of AdaGradConfig's zero fields.
const (
	DefaultAdaGradLoss = LossHinge
	DefaultAdaGradEta  = 1
)

// AdaGradConfig configures AdaGrad (learner keys of algorithm "adagrad").
// The zero value works: hinge loss, η = 1, normalized, no bias.
type AdaGradConfig struct {
	// Loss is the surrogate loss of the score: "hinge" (default),
	// "logistic" or "squared", as OGD's.
	Loss string `yaml:"loss"`
	// Eta is the step size η > 0; 0 means DefaultAdaGradEta (1).
	Eta float64 `yaml:"eta"`
	// Bias adds a constant feature 1 at an extra slot. Default false.
	Bias bool `yaml:"bias"`
	// Normalized scales each feature's step by the largest value it has
	// seen (Ross, Mineiro and Langford's NAG); nil means true, the
	// default. False is AdaGrad as Duchi, Hazan and Singer define it, whose
	// regret bound the tracker checks.
	Normalized *bool `yaml:"normalized"`
}

// IsNormalized reports whether c is normalized (Normalized nil or true).
func (c AdaGradConfig) IsNormalized() bool { return c.Normalized == nil || *c.Normalized }

func (c AdaGradConfig) withDefaults() AdaGradConfig {
	if c.Loss == "" {
		c.Loss = DefaultAdaGradLoss
	}
	if c.Eta == 0 {
		c.Eta = DefaultAdaGradEta
	}
	return c
}

// Validate reports a configuration error, naming the key at fault.
func (c AdaGradConfig) Validate() error {
	switch c.Loss {
	case "", LossHinge, LossLogistic, LossSquared:
	default:
		return fmt.Errorf("adagrad: loss: unknown loss %q (want hinge, logistic or squared)", c.Loss)
	}
	if !finite(c.Eta) || c.Eta < 0 {
		return fmt.Errorf("adagrad: eta: %v is not a finite number > 0", c.Eta)
	}
	return nil
}

// AdaGrad is online gradient descent with a step per coordinate, on a
// linear model over 2^bits hashed slots (and a bias slot with Bias, whose
// feature is the constant 1). With g_t = c_t·x_t the loss gradient at
// w(t) (c_t = ∂loss/∂s, as OGD's) and G_{t,i} = Σ_{s≤t} g_{s,i}²:
//
// Plain (Duchi, Hazan & Singer 2011, "Adaptive subgradient methods for
// online learning and stochastic optimization", the diagonal composite
// mirror-descent update (4) with φ = 0 and δ = 0):
//
//	w_{t+1,i} = w_{t,i} − η·g_{t,i}/√G_{t,i}     (coordinates with g_{t,i} ≠ 0)
//
// Normalized (the default; Ross, Mineiro & Langford 2013, "Normalized
// online learning", Algorithm 2, NAG): each feature keeps the largest |x_i|
// it has seen, s_i; N_t = Σ_{s≤t} Σ_i (x_{s,i}/s_i)² counts the normalized
// squared features seen, and
//
//	w_{t+1,i} = w_{t,i} − η·√(t/N_t)·g_{t,i}/(s_i·√G_{t,i}).
//
// g_{t,i} and √G_{t,i} grow with x_i together, so a step is scale-free but
// for its 1/s_i: when |x_i| exceeds s_i, w_i is first multiplied by
// s_i/|x_i|, once, the weight its steps would have made had s_i been |x_i|
// all along, and s_i becomes |x_i|. (The square, (s_i/|x_i|)², is the rule
// of the paper's non-adaptive NG, whose step has 1/s_i²; Vowpal Wabbit's
// normalized update rescales by the same rules.)
//
// (computed with 1/s_i, kept beside s_i: (x_i·(1/s_i))² and
// η·√(t/N_t)·g_{t,i}·(1/s_i)/√G_{t,i}).
//
// Multiplying a feature by a constant then changes nothing the learner
// predicts, which is what keeps features with small values from being
// ignored. NAG rescales before it predicts; Predict is pure here, so it
// computes the same score with the rescaled weights without storing them,
// and Learn rescales.
//
// Guarantee (plain only), at round T, Kind RegretBound against u = 0, by
// Theorem 5 of Duchi et al. (the composite mirror-descent bound, with
// D_∞ ≥ ‖w_t − u‖_∞ for every t):
//
//	Σ_t ℓ_t(w_t) − ℓ_t(u) ≤ (D_∞²/(2η) + η)·Σ_i ‖g_{1:T,i}‖₂
//
// where D_∞ is the largest |w_{t,i}| the learner has held and
// Σ_i ‖g_{1:T,i}‖₂ = Σ_i √G_{T,i} is kept as the updates come, each adding
// √G_new − √G_old ≥ 0. As for OGD without a ball, D_∞ is known after the
// fact and bounds the rounds so far. The bound never decreases
// (Monotone). NAG's analysis bounds regret against comparators of
// bounded normalized weights, a class the tracker cannot follow online:
// the normalized learner reports no bound.
//
// Arithmetic. Sums over x run in the canonical order of Vector (four
// interleaved partial sums; an entry that counts as 0 adds 0), and every
// product is rounded before it is added (no fused multiply-add), so that
// a state is the same bits on every machine. x must be canonical
// (strictly increasing indices, as decoded events are): normalized, a
// slot given twice would be rescaled twice by Round and once by Predict.
// A subnormal value (|x_i| < 2^-1022, whose inverse overflows) counts as
// 0 in the normalized learner. A gradient coordinate whose square
// underflows to 0 (a logistic loss far
// beyond its margin gives gradients of 1e-190) counts as 0: with no sum
// of squares to divide by, AdaGrad's formula would step by η·sign(g) on a
// feature's first such gradient. A step that would make a weight not
// finite is skipped and counted in Violations. Every index of x must be below 2^bits (a larger one
// panics). AdaGrad is not safe for concurrent use and retains no x.
type AdaGrad struct {
	cfg    AdaGradConfig
	bits   uint
	dim    int // the bias's slot: 2^bits, or 0, its number, over a Space
	sp     *Space
	loss   int
	stride int // 2 plain, 4 normalized

	// p holds each slot's state side by side, so that a feature reads one
	// cache line: p[i*stride] is w_i, p[i*stride+1] G_i, and normalized
	// p[i*stride+2] s_i and p[i*stride+3] 1/s_i (0 while s_i is), which
	// spares a division per feature and round. Slot dim is the bias's
	// with Bias.
	p []float64

	rounds uint64
	n      float64 // normalized: N_t
	sumG   float64 // plain: Σ_i √G_i
	maxW   float64 // plain: the largest |w_i| held
	viol   uint64
}

var (
	_ Learner    = (*AdaGrad)(nil)
	_ Rounder    = (*AdaGrad)(nil)
	_ Guaranteed = (*AdaGrad)(nil)
)

// NewAdaGrad returns AdaGrad over 2^bits slots with w(1) = 0.
func NewAdaGrad(bits uint, cfg AdaGradConfig) (*AdaGrad, error) {
	if err := checkBits("adagrad", bits); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := newAdaGrad(bits, cfg)
	a.dim = 1 << bits
	a.p = make([]float64, a.size()*a.stride)
	return a, nil
}

// NewSparseAdaGrad returns AdaGrad over s with w(1) = 0: it reads vectors
// in s's numbers (Space.Map) and holds state for those only.
func NewSparseAdaGrad(s *Space, cfg AdaGradConfig) (*AdaGrad, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := newAdaGrad(s.bits, cfg.withDefaults())
	a.sp = s
	a.fit()
	return a, nil
}

// newAdaGrad returns AdaGrad of cfg (with defaults) without its state.
func newAdaGrad(bits uint, cfg AdaGradConfig) *AdaGrad {
	a := &AdaGrad{cfg: cfg, bits: bits, stride: 2}
	a.loss = lossKind(cfg.Loss)
	if cfg.IsNormalized() {
		a.stride = 4
	}
	return a
}

// Space returns the Space of a sparse AdaGrad, nil for a dense one.
func (a *AdaGrad) Space() *Space { return a.sp }

// size is the number of slots of the dense state: 2^bits, and the bias.
func (a *AdaGrad) size() int {
	if a.cfg.Bias {
		return 1<<a.bits + 1
	}
	return 1 << a.bits
}

// fit grows a sparse AdaGrad's state to its space's numbers.
func (a *AdaGrad) fit() {
	if a.sp != nil && len(a.p) < len(a.sp.slots)*a.stride {
		a.p = fit(a.p, len(a.sp.slots)*a.stride)
	}
}

// Config returns the configuration with defaults applied.
func (a *AdaGrad) Config() AdaGradConfig { return a.cfg }

func (a *AdaGrad) normalized() bool { return a.stride == 4 }

// Weights appends w (the bias last, with Bias) to dst and returns it.
func (a *AdaGrad) Weights(dst []float64) []float64 {
	p := a.p
	if a.sp != nil {
		p = make([]float64, a.size()*a.stride)
		for k := range a.sp.slots[:len(a.p)/a.stride] {
			i := int(a.sp.slots[k]) * a.stride
			if i < len(p) {
				copy(p[i:i+a.stride], a.p[k*a.stride:])
			}
		}
	}
	for j := 0; j < len(p); j += a.stride {
		dst = append(dst, p[j])
	}
	return dst
}

// Predict returns the score ⟨w(t),x⟩(+b) and its sign, -1 at 0; when
// normalized, with each w_i rescaled to a larger |x_i| as Learn will.
func (a *AdaGrad) Predict(x Vector) Prediction {
	a.fit()
	var d float64
	if !a.normalized() {
		d = a.plainDot(x)
	} else {
		d = a.normalizedDot(x)
	}
	if a.cfg.Bias {
		d += a.p[a.dim*a.stride]
	}
	return Prediction{Label: sign(d), Score: d}
}

// plainDot is ⟨w, x⟩ of the plain learner, in the canonical order of
// sums over x (four interleaved partial sums, see Vector).
func (a *AdaGrad) plainDot(x Vector) float64 {
	idx, p := x.Idx, a.p
	val := x.Val[:len(idx)]
	var d0, d1, d2, d3 float64
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		i := idx[k : k+4 : k+4]
		v := val[k : k+4 : k+4]
		d0 += float64(p[int(i[0])*2] * v[0])
		d1 += float64(p[int(i[1])*2] * v[1])
		d2 += float64(p[int(i[2])*2] * v[2])
		d3 += float64(p[int(i[3])*2] * v[3])
	}
	i, v := idx[k:], val[k:]
	if len(i) > 0 {
		d0 += float64(p[int(i[0])*2] * v[0])
	}
	if len(i) > 1 {
		d1 += float64(p[int(i[1])*2] * v[1])
	}
	if len(i) > 2 {
		d2 += float64(p[int(i[2])*2] * v[2])
	}
	return (d0 + d1) + (d2 + d3)
}

// normalizedDot is the normalized learner's score before the bias: each
// w_i·x_i with w_i rescaled to |x_i| when it is larger than s_i, as
// rescale will, in the canonical order of sums over x (entry k into
// partial sum k mod 4, see Vector); 0 for a value under minScale.
func (a *AdaGrad) normalizedDot(x Vector) float64 {
	idx := x.Idx
	val := x.Val[:len(idx)]
	var dd [4]float64
	for k, i := range idx {
		q := a.p[int(i)*4 : int(i)*4+3 : int(i)*4+3]
		v := val[k]
		av := math.Abs(v)
		if av < minScale {
			continue // adds 0
		}
		w := q[0]
		if s := q[2]; av > s && s > 0 {
			w *= s / av
		}
		dd[k&3] += float64(w * v)
	}
	return (dd[0] + dd[1]) + (dd[2] + dd[3])
}

// Loss returns the surrogate loss of the score in p.
func (a *AdaGrad) Loss(p Prediction, y int8) float64 { return lossOf(a.loss, p.Score, y) }

// Learn takes the step on the loss gradient at the served score.
func (a *AdaGrad) Learn(x Vector, served Prediction, y int8) {
	a.fit()
	a.rounds++
	if a.normalized() {
		a.rescale(x)
	}
	a.step(x, dlossOf(a.loss, served.Score, y))
}

// Round is Predict, Loss and Learn in one call (see Rounder): when
// normalized, it rescales first and scores on the rescaled weights, the
// score Predict computes, in one pass.
func (a *AdaGrad) Round(x Vector, y int8) (Prediction, float64) {
	a.fit()
	a.rounds++
	var d float64
	if a.normalized() {
		d = a.rescale(x)
	} else {
		d = a.plainDot(x)
		if a.cfg.Bias {
			d += a.p[a.dim*2]
		}
	}
	a.step(x, dlossOf(a.loss, d, y))
	return Prediction{Label: sign(d), Score: d}, lossOf(a.loss, d, y)
}

// rescale brings the slots of x (and the bias's) to the scales of x's
// values, adds their normalized squares to N, and returns the score on
// the rescaled weights. Both sums are in the canonical order: N grows by
// this round's sum.
func (a *AdaGrad) rescale(x Vector) float64 {
	idx := x.Idx
	val := x.Val[:len(idx)]
	var dd, nn [4]float64
	for k, i := range idx {
		q := a.p[int(i)*4 : int(i)*4+4 : int(i)*4+4]
		v := val[k]
		av := math.Abs(v)
		if av > q[2] {
			if av < minScale {
				continue
			}
			grow(q, av) // a new largest value: rare once under way
		} else if av < minScale {
			continue // adds 0 to both sums
		}
		r := av * q[3]
		dd[k&3] += float64(q[0] * v)
		nn[k&3] += float64(r * r)
	}
	d, n := (dd[0]+dd[1])+(dd[2]+dd[3]), (nn[0]+nn[1])+(nn[2]+nn[3])
	if a.cfg.Bias {
		q := a.p[a.dim*4 : a.dim*4+4]
		q[2], q[3] = 1, 1
		n++
		d += q[0]
	}
	a.n += n
	return d
}

// grow rescales the slot q to a new largest value av: w_i·s_i/av, and
// s_i = av with its inverse.
//
//go:noinline
func grow(q []float64, av float64) {
	if s := q[2]; s > 0 {
		q[0] *= s / av
	}
	q[2], q[3] = av, 1/av
}

// step takes the step with gradient c·x of round a.rounds.
func (a *AdaGrad) step(x Vector, c float64) {
	if c == 0 {
		return
	}
	val := x.Val[:len(x.Idx)]
	if !a.normalized() {
		for k, i := range x.Idx {
			a.plainStep(int(i)*2, c*val[k])
		}
		if a.cfg.Bias {
			a.plainStep(a.dim*2, c)
		}
		return
	}
	if a.n == 0 {
		return
	}
	rate := a.cfg.Eta * math.Sqrt(float64(a.rounds)/a.n)
	for k, i := range x.Idx {
		j := int(i) * 4
		q := a.p[j : j+4 : j+4]
		v := val[k]
		if math.Abs(v) < minScale {
			continue
		}
		g := c * v
		if g*g == 0 {
			continue
		}
		G := q[1] + float64(g*g)
		w := q[0] - rate*g*q[3]/math.Sqrt(G)
		if w-w != 0 || G-G != 0 { // not finite
			a.viol++
			continue
		}
		q[0], q[1] = w, G
	}
	if a.cfg.Bias && c*c != 0 {
		q := a.p[a.dim*4 : a.dim*4+4]
		G := q[1] + float64(c*c)
		if w := q[0] - rate*c/math.Sqrt(G); w-w == 0 && G-G == 0 {
			q[0], q[1] = w, G
		} else {
			a.viol++
		}
	}
}

// plainStep is Duchi et al.'s step on the slot at j with gradient g.
func (a *AdaGrad) plainStep(j int, g float64) {
	if g*g == 0 {
		return
	}
	q := a.p[j : j+2 : j+2]
	old := q[1]
	G := old + float64(g*g)
	r := math.Sqrt(G)
	w := q[0] - a.cfg.Eta*g/r
	if w-w != 0 || G-G != 0 { // not finite
		a.viol++
		return
	}
	q[0], q[1] = w, G
	a.sumG += r - math.Sqrt(old)
	if aw := math.Abs(w); aw > a.maxW {
		a.maxW = aw
	}
}

// lossKind returns the kind of a validated loss name.
func lossKind(name string) int {
	switch name {
	case LossLogistic:
		return lossLogistic
	case LossSquared:
		return lossSquared
	}
	return lossHinge
}

// lossOf is the surrogate loss of score s for the loss kind (OGD's and
// AdaGrad's): hinge max(0, 1−y·s), logistic ln(1+e^(−y·s)) computed
// without overflow, squared ½(s−y)².
func lossOf(kind int, s float64, y int8) float64 {
	switch kind {
	case lossHinge:
		return max0(1 - float64(float64(y)*s))
	case lossLogistic:
		return logistic(float64(y) * s)
	default:
		d := s - float64(y)
		return 0.5 * d * d
	}
}

// dlossOf is ∂loss/∂s at score s for the loss kind.
func dlossOf(kind int, s float64, y int8) float64 {
	fy := float64(y)
	switch kind {
	case lossHinge:
		if fy*s < 1 {
			return -fy
		}
		return 0
	case lossLogistic:
		return -fy / (math.Exp(fy*s) + 1)
	default:
		return s - fy
	}
}

// Guarantee returns Duchi et al.'s bound against u = 0 when plain; no
// bound when normalized (see AdaGrad).
func (a *AdaGrad) Guarantee() Guarantee {
	g := Guarantee{RegretBound: math.NaN(), Violations: a.viol, Monotone: true}
	if a.normalized() {
		return g
	}
	g.Kind, g.Comparator = RegretBound, "zero_vector"
	if a.viol > 0 {
		// A step refused (not finite) is not the algorithm the theorem
		// is about: it says nothing of this run any more.
		g.Premise = PremiseFalse
	}
	g.ComparatorLoss = float64(a.rounds) * lossOf(a.loss, 0, Positive)
	g.RegretBound = (a.maxW*a.maxW/(2*a.cfg.Eta) + a.cfg.Eta) * a.sumG
	g.Value = g.RegretBound
	return g
}

const adagradMagic = "SLAG"

// minScale is the smallest |x_i| the normalized learner scales by: the
// smallest normal float64, whose inverse is finite.
const minScale = 0x1p-1022

// MarshalBinary encodes the configuration, the counters and every slot's
// state as it is held (weight, sum of squared gradients, scale).
func (a *AdaGrad) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends MarshalBinary's encoding to b
// (encoding.BinaryAppender): a digest of the state hashes it from a
// buffer used again, not a new encoding each time.
func (a *AdaGrad) AppendBinary(b []byte) ([]byte, error) {
	e := appendEncoder(b, adagradMagic, sparseVersion, 80+weightsSize(a.sp, len(a.p)))
	e.U64(uint64(a.bits))
	e.String(a.cfg.Loss)
	e.F64(a.cfg.Eta)
	e.Bool(a.cfg.Bias)
	e.Bool(a.cfg.IsNormalized())
	e.U64(a.rounds)
	e.F64(a.n)
	e.F64(a.sumG)
	e.F64(a.maxW)
	e.U64(a.viol)
	writeWeights(e, a.sp, a.size()*a.stride, a.p, a.stride)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the bits and
// configuration must match the receiver's.
func (a *AdaGrad) UnmarshalBinary(b []byte) error {
	d, _ := newDecoder("adagrad", adagradMagic, b, sparseVersion)
	bits := d.U64()
	loss, eta, bias, normalized := d.String(16), d.F64(), d.Bool(), d.Bool()
	c := a.cfg
	if d.Err() == nil && (bits != uint64(a.bits) || loss != c.Loss || eta != c.Eta || bias != c.Bias || normalized != c.IsNormalized()) {
		d.Fail("encoding is of adagrad over %d bits with loss %s, eta %v, bias %v, normalized %v, not %d bits with loss %s, eta %v, bias %v, normalized %v",
			bits, loss, eta, bias, normalized, a.bits, c.Loss, c.Eta, c.Bias, c.IsNormalized())
	}
	rounds, n, sumG, maxW, viol := d.U64(), d.F64(), d.F64(), d.F64(), d.U64()
	if d.Err() == nil && !(n >= 0 && sumG >= 0 && maxW >= 0 && finite(n) && finite(sumG) && finite(maxW)) {
		d.Fail("inconsistent state")
	}
	p := decodeWeights(d, sparseVersion, a.sp, a.size()*a.stride, a.stride)
	if err := finish("adagrad", d); err != nil {
		return err
	}
	var heldG, heldW float64
	for j := 0; j < len(p); j += a.stride {
		q := p[j : j+a.stride]
		bad := !finite(q[0]) || !(q[1] >= 0) || !finite(q[1])
		if a.stride == 4 {
			// A scale is 0 (and the weight with it) or normal, with its
			// inverse beside it.
			bad = bad || q[2] == 0 && (q[3] != 0 || q[0] != 0) ||
				q[2] != 0 && !(q[2] >= minScale && finite(q[2]) && q[3] == 1/q[2])
		} else {
			heldG += math.Sqrt(q[1])
			heldW = max(heldW, math.Abs(q[0]))
		}
		if bad {
			slot := j / a.stride
			if a.sp != nil {
				slot = int(a.sp.slots[slot])
			}
			return fmt.Errorf("adagrad: unmarshal: slot %d: inconsistent state", slot)
		}
	}
	// The bound's running quantities cannot be below what the weights and
	// sums hold (the sum of square roots is kept as it grew: it may differ
	// from a sum made afresh in its last bits).
	if a.stride == 2 && (maxW < heldW || sumG < heldG*(1-1e-9)) {
		return fmt.Errorf("adagrad: unmarshal: largest weight %v or sum of gradient norms %v below the weights' %v and %v", maxW, sumG, heldW, heldG)
	}
	a.rounds, a.n, a.sumG, a.maxW, a.viol, a.p = rounds, n, sumG, maxW, viol, p
	a.fit()
	return nil
}

// Probability is σ(score) when AdaGrad minimizes the logistic loss: the
// model is then a logistic regression.
func (a *AdaGrad) Probability(p Prediction) (float64, bool) {
	if a.loss != lossLogistic {
		return 0, false
	}
	return Sigmoid(p.Score), true
}

var _ Prober = (*AdaGrad)(nil)
