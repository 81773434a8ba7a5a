package online

import (
	"fmt"
	"math"
)

// DefaultPegasosLambda is PegasosConfig.Lambda's default.
const DefaultPegasosLambda = 1e-4

// PegasosConfig configures Pegasos (learner keys of algorithm "pegasos").
type PegasosConfig struct {
	// Lambda is the regularization λ > 0 of (λ/2)‖w‖²; 0 means
	// DefaultPegasosLambda (1e-4).
	Lambda float64 `yaml:"lambda"`
	// Bias adds a constant feature 1 at an extra slot, regularized like
	// the others. Default false.
	Bias bool `yaml:"bias"`
}

func (c PegasosConfig) withDefaults() PegasosConfig {
	if c.Lambda == 0 {
		c.Lambda = DefaultPegasosLambda
	}
	return c
}

// Validate reports a configuration error, naming the key at fault.
func (c PegasosConfig) Validate() error {
	if !finite(c.Lambda) || c.Lambda < 0 || c.Lambda != 0 && (c.Lambda < minPegasosLambda || c.Lambda > maxPegasosLambda) {
		return fmt.Errorf("pegasos: lambda: %v is not from %v to %v", c.Lambda, minPegasosLambda, maxPegasosLambda)
	}
	return nil
}

// The range of λ: with feature values up to 1e100 (input.max_abs_value's
// limit), every quantity of a round stays finite: steps 1/(λt) ≤ 1e12,
// ‖w‖² ≤ 1/λ, λ²·‖w‖² ≤ λ.
const (
	minPegasosLambda = 1e-12
	maxPegasosLambda = 1e6
)

// Pegasos is online gradient descent on the λ-strongly convex regularized
// hinge loss (Shalev-Shwartz, Singer, Srebro & Cotter, "Pegasos: primal
// estimated sub-gradient solver for SVM", 2011; the notes on convex
// learning and SGD), over 2^bits hashed slots:
//
//	f_t(w) = (λ/2)‖w‖² + max(0, 1 − y_t⟨w, x_t⟩),
//	w_{t+1} = Π( (1 − 1/t)·w_t + (1/(λt))·y_t·x_t·[y_t⟨w_t, x_t⟩ < 1] ),
//
// the step 1/(λt) and Π the projection onto the ball of radius 1/√λ,
// which holds the minimizer of Σ f_t. w is stored as σ·v with a scalar
// σ, so that the shrinking by 1 − 1/t and the projection cost O(1) and a
// round O(nnz(x)); ‖w‖² is kept as the updates come and made afresh every
// 2^bits rounds, and σ is folded into v when it falls under 1e-100. With
// Bias the constant feature 1 is part of x and its weight part of w.
//
// Prediction: the score ⟨w_t, x⟩(+b) and its sign, -1 at 0. Loss: the
// hinge max(0, 1 − y·s), the report's `loss`.
//
// Guarantee (Guaranteed), Kind RegretBound against u = 0: OGD with steps
// 1/(λt) on λ-strongly convex functions whose gradients are at most G
// (Hazan, Agarwal & Kale 2007, "Logarithmic regret algorithms for online
// convex optimization", Theorem 1) has
//
//	Σ_t f_t(w_t) − f_t(u) ≤ G²·(1 + ln T)/(2λ)      for every u of the ball,
//
// with G² the largest ‖∇f_t(w_t)‖² = ‖λw_t − y_t·x_t·[active]‖² seen.
// The tracker measures the hinge loss, Σ_t hinge_t(w_t) − T·hinge(0), which
// is at most Σ_t f_t(w_t) − f_t(0) (the regularizer is ≥ 0 at w_t and 0 at
// u = 0), so the same value bounds it. It never decreases (Monotone).
//
// Every index of x must be below 2^bits (a larger one panics); over a
// Space (NewSparsePegasos), x is in the space's numbers (Space.Map) and
// Pegasos is the dense one bit for bit, its encoding included. Pegasos is
// not safe for concurrent use and retains no x.
type Pegasos struct {
	cfg  PegasosConfig
	bits uint
	dim  int // the bias's slot: 2^bits, or 0, its number, over a Space
	sp   *Space

	s  float64   // w = s·v
	v  []float64 // v[dim] is the bias with Bias
	w2 float64   // ‖w‖² of the non-bias weights

	rounds  uint64
	maxG2   float64
	dimMask uint64
}

var (
	_ Learner    = (*Pegasos)(nil)
	_ Rounder    = (*Pegasos)(nil)
	_ Guaranteed = (*Pegasos)(nil)
)

// NewPegasos returns Pegasos over 2^bits slots with w_1 = 0.
func NewPegasos(bits uint, cfg PegasosConfig) (*Pegasos, error) {
	if err := checkBits("pegasos", bits); err != nil {
		return nil, err
	}
	p, err := newPegasos(bits, cfg)
	if err != nil {
		return nil, err
	}
	p.dim = 1 << bits
	p.v = make([]float64, p.size())
	return p, nil
}

// NewSparsePegasos returns Pegasos over s with w_1 = 0: it reads vectors
// in s's numbers (Space.Map) and holds weights for those only.
func NewSparsePegasos(s *Space, cfg PegasosConfig) (*Pegasos, error) {
	p, err := newPegasos(s.bits, cfg)
	if err != nil {
		return nil, err
	}
	p.sp = s
	p.fit()
	return p, nil
}

// newPegasos returns Pegasos over 2^bits slots with no weights yet.
func newPegasos(bits uint, cfg PegasosConfig) (*Pegasos, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Pegasos{cfg: cfg.withDefaults(), bits: bits, s: 1, dimMask: 1<<bits - 1}, nil
}

// Space returns the Space of a sparse Pegasos, nil for a dense one.
func (p *Pegasos) Space() *Space { return p.sp }

// Bytes returns the bytes of p's weight array (Sizer).
func (p *Pegasos) Bytes() int { return 8 * cap(p.v) }

// size is the length of the dense weight vector: 2^bits, and the bias.
func (p *Pegasos) size() int { return weightsLen(p.bits, p.cfg.Bias) }

// fit grows a sparse Pegasos's weights to its space's numbers.
// A dense one pays a nil check, inlined; the growing stays out of line,
// so that it does not weigh on the dense rounds' code.
func (p *Pegasos) fit() {
	if p.sp != nil {
		p.fitSpace()
	}
}

//go:noinline
func (p *Pegasos) fitSpace() { p.v = fit(p.v, len(p.sp.slots)) }

// Config returns the configuration with defaults applied.
func (p *Pegasos) Config() PegasosConfig { return p.cfg }

// Weights appends w (the bias last, with Bias) to dst and returns it.
func (p *Pegasos) Weights(dst []float64) []float64 {
	return scaledWeights(dst, p.s, p.v, p.sp, p.size())
}

func (p *Pegasos) bias() float64 {
	if p.cfg.Bias {
		return p.s * p.v[p.dim]
	}
	return 0
}

// Predict returns the score ⟨w_t, x⟩(+b) and its sign, -1 at 0.
func (p *Pegasos) Predict(x Vector) Prediction {
	p.fit()
	d := p.score(dot(x.Idx, x.Val, p.v))
	return Prediction{Label: sign(d), Score: d}
}

// score returns the score s·(d + v_b) of d = ⟨v,x⟩.
func (p *Pegasos) score(d float64) float64 {
	if p.cfg.Bias {
		d += p.v[p.dim]
	}
	return p.s * d
}

// Loss returns the hinge loss of the score in pr.
func (p *Pegasos) Loss(pr Prediction, y int8) float64 {
	return max0(1 - float64(float64(y)*pr.Score))
}

// Learn takes the step of round t on the hinge at the served score. The
// gradient's norm, for the guarantee, is taken at the current weights.
func (p *Pegasos) Learn(x Vector, served Prediction, y int8) {
	p.fit()
	d, xn2 := dotNorm2(x.Idx, x.Val, p.v)
	p.learn(x, p.score(d), xn2, served.Score, y)
}

// Round is Predict, Loss and Learn in one call (see Rounder).
func (p *Pegasos) Round(x Vector, y int8) (Prediction, float64) {
	p.fit()
	d, xn2 := dotNorm2(x.Idx, x.Val, p.v)
	score := p.score(d)
	p.learn(x, score, xn2, score, y)
	pr := Prediction{Label: sign(score), Score: score}
	return pr, p.Loss(pr, y)
}

// learn is round t's update: now is the score at w_t (for the gradient's
// norm), served the score the hinge is taken at, xn2 = ‖x‖².
func (p *Pegasos) learn(x Vector, now, xn2, served float64, y int8) {
	p.rounds++
	t, lambda := float64(p.rounds), p.cfg.Lambda
	fy := float64(y)
	active := fy*served < 1
	b := p.bias()
	norm2 := p.w2 + float64(b*b)
	// ‖λw − y·x̃‖² = λ²‖w‖² − 2λy⟨w,x̃⟩ + ‖x̃‖², x̃ = x (and 1 for the bias).
	g2 := float64(float64(lambda*lambda) * norm2)
	if active {
		xt2 := xn2
		if p.cfg.Bias {
			xt2++
		}
		g2 = max0(g2 - float64(2*lambda*fy*now) + xt2)
	}
	if g2 > p.maxG2 {
		p.maxG2 = g2
	}
	// w ← (1 − 1/t)·w: w_1 = 0, so the first round has nothing to shrink.
	if p.rounds > 1 {
		f := 1 - 1/t
		p.s *= f
		p.w2 *= f * f
		b *= f
	}
	if active {
		eta := 1 / (lambda * t)
		c := -fy // the hinge's gradient is c·x̃
		inv := 1 / p.s
		p.w2 = max0(p.w2 + stepScaled(p.v, p.s, inv, eta, c, x.Idx, x.Val))
		if p.cfg.Bias {
			b -= float64(eta * c)
			p.v[p.dim] = b * inv
		}
	}
	// Π: onto the ball of radius 1/√λ.
	if n2 := p.w2 + float64(b*b); n2 > 1/lambda {
		f := 1 / math.Sqrt(lambda*n2)
		p.s *= f
		p.w2 *= f * f
	}
	if p.s < renormBelow || p.rounds&p.dimMask == 0 {
		p.w2 = renormalize(&p.s, p.v, p.dim, p.sp)
	}
}

// Guarantee returns Hazan, Agarwal & Kale's bound against u = 0 (see
// Pegasos).
func (p *Pegasos) Guarantee() Guarantee {
	T := float64(p.rounds)
	g := Guarantee{Kind: RegretBound, Comparator: "zero_vector", ComparatorLoss: T, Monotone: true}
	if p.rounds > 0 {
		g.RegretBound = p.maxG2 * (1 + math.Log(T)) / (2 * p.cfg.Lambda)
	}
	g.Value = g.RegretBound
	return g
}

const pegasosMagic = "SLPG"

// MarshalBinary encodes the configuration, counters and weights w = s·v
// (as s and v: the representation is part of the deterministic state).
func (p *Pegasos) MarshalBinary() ([]byte, error) { return p.AppendBinary(nil) }

// AppendBinary appends MarshalBinary's encoding to b
// (encoding.BinaryAppender): a digest of the state hashes it from a
// buffer used again, not a new encoding each time.
func (p *Pegasos) AppendBinary(b []byte) ([]byte, error) {
	e := appendEncoder(b, pegasosMagic, sparseVersion, 64+weightsSize(p.sp, len(p.v)))
	e.U64(uint64(p.bits))
	e.F64(p.cfg.Lambda)
	e.Bool(p.cfg.Bias)
	e.U64(p.rounds)
	e.F64(p.maxG2)
	e.F64(p.s)
	e.F64(p.w2)
	writeWeights(e, p.sp, p.size(), p.v, 1)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the bits and
// configuration must match the receiver's.
func (p *Pegasos) UnmarshalBinary(b []byte) error {
	d, version := newDecoder("pegasos", pegasosMagic, b, sparseVersion)
	if d.Err() == nil && version != sparseVersion {
		d.Fail("unsupported version %d", version)
	}
	bits := d.U64()
	var cfg PegasosConfig
	cfg.Lambda = d.F64()
	cfg.Bias = d.Bool()
	if d.Err() == nil && (bits != uint64(p.bits) || cfg != p.cfg) {
		d.Fail("encoding is of pegasos over %d bits with %+v, not %d bits with %+v", bits, cfg, p.bits, p.cfg)
	}
	rounds, maxG2, s, w2 := d.U64(), d.F64(), d.F64(), d.F64()
	if d.Err() == nil && !(s > 0 && s <= 1 && w2 >= 0 && maxG2 >= 0 && finite(w2) && finite(maxG2)) {
		d.Fail("inconsistent state")
	}
	v := decodeWeights(d, version, p.sp, p.size(), 1)
	if err := finish("pegasos", d); err != nil {
		return err
	}
	n2, err := p.checkWeights(v, s, rounds)
	if err != nil {
		return err
	}
	// ‖w‖² is kept as the updates come: it may differ from a sum made
	// afresh in its last bits, and w stays in the ball of radius 1/√λ.
	b2 := 0.0
	if cfg.Bias {
		b2 = s * v[p.dim] * s * v[p.dim]
	}
	if tol := 1e-6 * (1 + n2); math.Abs(w2-n2) > tol || w2+b2 > (1+1e-6)/cfg.Lambda {
		return fmt.Errorf("pegasos: unmarshal: ‖w‖² %v, the weights hold %v (ball %v)", w2, n2, 1/cfg.Lambda)
	}
	p.rounds, p.maxG2, p.s, p.w2, p.v = rounds, maxG2, s, w2, v
	p.fit()
	return nil
}

// checkWeights reports a weight of v (dense, or in p's space's numbers)
// that is not finite, or not 0 after 0 rounds, and returns ‖s·v‖² of the
// non-bias weights, summed in the order of the slots.
func (p *Pegasos) checkWeights(v []float64, s float64, rounds uint64) (float64, error) {
	var n2 float64
	check := func(slot int, x float64) error {
		if !finite(x) || rounds == 0 && x != 0 {
			return fmt.Errorf("pegasos: unmarshal: slot %d: weight %v after %d rounds", slot, x, rounds)
		}
		if slot < 1<<p.bits {
			n2 += float64(s * x * s * x)
		}
		return nil
	}
	if p.sp != nil {
		for k, slot := range p.sp.inOrder(len(v)) {
			if err := check(slot, v[k]); err != nil {
				return 0, err
			}
		}
		return n2, nil
	}
	for i, x := range v {
		if err := check(i, x); err != nil {
			return 0, err
		}
	}
	return n2, nil
}
