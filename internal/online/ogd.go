package online

import (
	"errors"
	"fmt"
	"math"
)

// OGD losses, the values of OGDConfig.Loss.
const (
	LossHinge    = "hinge"    // max(0, 1 - y·s)
	LossLogistic = "logistic" // ln(1 + e^(-y·s))
	LossSquared  = "squared"  // ½(s - y)²
)

// OGD step-size schedules, the values of OGDConfig.Schedule.
const (
	ScheduleSqrt  = "sqrt"  // η_t = η/√t
	ScheduleFixed = "fixed" // η_t = η
)

// Defaults of OGDConfig's zero fields.
const (
	DefaultOGDLoss     = LossHinge
	DefaultOGDEta      = 0.1
	DefaultOGDSchedule = ScheduleSqrt
)

// OGDConfig configures OGD (learner keys of algorithm "ogd"). The zero
// value works: hinge loss, η = 0.1, η_t = η/√t, no projection, no bias.
type OGDConfig struct {
	// Loss is the surrogate loss of the score s = ⟨w,x⟩ and label y:
	// "hinge" (default), "logistic" or "squared".
	Loss string `yaml:"loss"`
	// Eta is the base step size η > 0; 0 means DefaultOGDEta (0.1).
	Eta float64 `yaml:"eta"`
	// Schedule is "sqrt" (η_t = η/√t on round t, the default) or "fixed"
	// (η_t = η).
	Schedule string `yaml:"schedule"`
	// Radius B > 0 projects w onto the L2 ball of radius B after every
	// step; 0 (the default) does not project.
	Radius float64 `yaml:"radius"`
	// Bias adds a constant feature 1 at an extra slot. Default false.
	Bias bool `yaml:"bias"`
	// BiasEta is the base step of the bias coordinate (η_b, scheduled like
	// η); 0 means Eta. A different value makes OGD a diagonally
	// preconditioned OGD; it exists to express River's LogisticRegression,
	// whose intercept has its own learning rate (0.01 by default), and
	// requires Radius 0 (the projected analysis needs one step size).
	BiasEta float64 `yaml:"bias_eta"`
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c OGDConfig) withDefaults() OGDConfig {
	if c.Loss == "" {
		c.Loss = DefaultOGDLoss
	}
	if c.Eta == 0 {
		c.Eta = DefaultOGDEta
	}
	if c.Schedule == "" {
		c.Schedule = DefaultOGDSchedule
	}
	if c.BiasEta == 0 && c.Bias {
		c.BiasEta = c.Eta
	}
	return c
}

// Validate reports a configuration error, naming the key at fault.
func (c OGDConfig) Validate() error {
	switch c.Loss {
	case "", LossHinge, LossLogistic, LossSquared:
	default:
		return fmt.Errorf("ogd: loss: unknown loss %q (want hinge, logistic or squared)", c.Loss)
	}
	switch c.Schedule {
	case "", ScheduleSqrt, ScheduleFixed:
	default:
		return fmt.Errorf("ogd: schedule: unknown schedule %q (want sqrt or fixed)", c.Schedule)
	}
	if !finite(c.Eta) || c.Eta < 0 {
		return fmt.Errorf("ogd: eta: %v is not a finite number > 0", c.Eta)
	}
	if !finite(c.Radius) || c.Radius < 0 {
		return fmt.Errorf("ogd: radius: %v is not a finite number ≥ 0", c.Radius)
	}
	if !finite(c.BiasEta) || c.BiasEta < 0 {
		return fmt.Errorf("ogd: bias_eta: %v is not a finite number > 0", c.BiasEta)
	}
	if c.BiasEta != 0 && !c.Bias {
		return errors.New("ogd: bias_eta: set without bias: true")
	}
	if d := c.withDefaults(); c.Bias && d.BiasEta != d.Eta && c.Radius > 0 {
		return errors.New("ogd: bias_eta: a bias step different from eta requires radius 0")
	}
	return nil
}

// renormBelow is the scale under which OGD folds its scale factor back
// into the weights (an O(2^bits) pass, made rarely and deterministically).
const renormBelow = 1e-100

// OGD is Online Gradient Descent (Zinkevich 2003; the textbook's chapter
// 21.3) on a linear model over 2^bits hashed slots:
//
//	w(1) = 0,  w(t+1) = Π_B( w(t) − η_t·∇ℓ_t(w(t)) ),
//
// where ℓ_t(w) = loss(⟨w,x_t⟩(+b), y_t) and Π_B is the Euclidean projection
// onto {‖w‖ ≤ B} (the identity when Radius is 0). The gradient is
// ∇ℓ_t = c_t·x_t with c_t = ∂loss/∂s: hinge -y when y·s < 1, else 0 (a
// subgradient; 0 at the kink); logistic -y/(1+e^(y·s)); squared s − y.
// With Bias the constant feature 1 is part of x and the bias part of w (and
// of ‖w‖); with BiasEta ≠ Eta its step is η_b,t instead of η_t.
//
// Every step is O(nnz(x)): w is stored as s·v with a scalar s, so the
// projection only rescales s, and ‖w‖² is kept incrementally (recomputed
// exactly every 2^bits rounds and whenever s falls under 1e-100 and is
// folded back into v). All of it is deterministic.
//
// Prediction: score ⟨w(t),x⟩(+b), label +1 when the score is > 0 and -1
// otherwise (a zero score predicts -1, as the Perceptron and River do).
// Loss is the surrogate loss at w(t), the report's `loss`: hinge
// max(0, 1−y·s), logistic ln(1+e^(−y·s)) computed without overflow,
// squared ½(s−y)².
//
// Guarantee (Guaranteed), at round T with G the largest gradient norm
// ‖∇ℓ_t(w(t))‖ seen in rounds 1..T, Kind RegretBound. Value (= RegretBound)
// bounds the regret the tracker measures, against u = 0, and with a ball the
// certificate "ball_regret_bound" bounds the regret against every u of it:
//
//	                            Value (u = 0)                     certificate (every ‖u‖ ≤ B)
//	schedule fixed, radius B:   η·G²·T/2                          B²/(2η) + η·G²·T/2
//	schedule fixed, no radius:  η·G²·T/2                          —
//	schedule sqrt,  radius B:   B²·√T/(2η) + η·G²·(√T − ½)        (2B)²·√T/(2η) + η·G²·(√T − ½)
//	schedule sqrt,  no radius:  D²·√T/(2η) + η·G²·(√T − ½)        —
//
// The fixed-step rows are the textbook's OGD theorem (Theorem 21.15:
// regret(u) ≤ ‖u‖²/(2η) + (η/2)Σ‖v_t‖²); the sqrt rows are Zinkevich 2003,
// Theorem 1 with step η/√t, diameter bound D ≥ ‖w(t) − u‖ and
// Σ_{t≤T} 1/√t ≤ 2√T − 1 (also the lecture notes' stochastic sub-gradient
// descent bound, Theorem 5): ‖w(t) − 0‖ ≤ B inside a ball, ‖w(t) − u‖ ≤ 2B
// for every u of it; without a ball D is the largest ‖w(t)‖ seen, a bound
// known only after the fact but still implied by the theorem for the rounds
// so far.
//
// The tracker can only measure regret against a comparator it can compute
// online, so the Guarantee's comparator is "zero_vector": ComparatorLoss =
// Σ_t ℓ_t(0) = T·loss(0, y) (hinge 1, logistic ln 2, squared ½ per round),
// and `bound.holds` compares that regret with the u = 0 bound. The best
// comparator in hindsight over the ball is a convex program over all
// rounds, not an O(nnz) online quantity (the tests solve it offline and
// check the certificate); regret against 0 never exceeds regret against
// the best u, so a violation seen live is a true violation of the theorem.
//
// With BiasEta ≠ Eta (no ball), all norms are those of the preconditioned
// analysis: G measures ‖g‖_A = √(Σ a_i g_i²) and D measures
// ‖w‖_{A⁻¹} with a = BiasEta/Eta on the bias coordinate and 1 elsewhere.
//
// An update that would overflow (the squared loss diverges when η‖x‖² > 2
// without a ball) is skipped and counted in Violations.
//
// Every index of x must be below 2^bits (a larger one panics); over a
// Space (NewSparseOGD), x is in the space's numbers (Space.Map) and OGD
// is the dense one bit for bit, its encoding included. OGD is not safe for
// concurrent use and retains no x.
type OGD struct {
	cfg  OGDConfig // with defaults applied
	bits uint
	dim  int // the bias's slot: 2^bits, or 0, its number, over a Space
	sp   *Space
	loss int // lossHinge...

	s  float64   // w = s·v
	v  []float64 // v[dim] is the bias when cfg.Bias
	w2 float64   // ‖w‖² of the non-bias weights

	rounds uint64
	maxG2  float64 // G², A-norm
	maxD2  float64 // max ‖w(t)‖²_{A⁻¹} over t ≤ rounds
	viol   uint64

	// Derived from cfg: η_t = η/√t; a, the bias step relative to η (0
	// without a bias); 2^bits − 1, for t mod 2^bits.
	sqrtSched bool
	a         float64
	dimMask   uint64
}

const (
	lossHinge = iota
	lossLogistic
	lossSquared
)

var (
	_ Learner    = (*OGD)(nil)
	_ Rounder    = (*OGD)(nil)
	_ Guaranteed = (*OGD)(nil)
)

// NewOGD returns OGD over 2^bits slots with w(1) = 0.
func NewOGD(bits uint, cfg OGDConfig) (*OGD, error) {
	if err := checkBits("ogd", bits); err != nil {
		return nil, err
	}
	o, err := newOGD(bits, cfg)
	if err != nil {
		return nil, err
	}
	o.dim = 1 << bits
	o.v = make([]float64, o.size())
	return o, nil
}

// NewSparseOGD returns OGD over s with w(1) = 0: it reads vectors in s's
// numbers (Space.Map) and holds weights for those only.
func NewSparseOGD(s *Space, cfg OGDConfig) (*OGD, error) {
	o, err := newOGD(s.bits, cfg)
	if err != nil {
		return nil, err
	}
	o.sp = s
	o.fit()
	return o, nil
}

// newOGD returns OGD over 2^bits slots with no weights yet.
func newOGD(bits uint, cfg OGDConfig) (*OGD, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	o := &OGD{cfg: cfg, bits: bits, s: 1}
	o.loss = lossKind(cfg.Loss)
	o.sqrtSched = cfg.Schedule == ScheduleSqrt
	if cfg.Bias {
		o.a = cfg.BiasEta / cfg.Eta
	}
	o.dimMask = 1<<bits - 1
	return o, nil
}

// Space returns the Space of a sparse OGD, nil for a dense one.
func (o *OGD) Space() *Space { return o.sp }

// Bytes returns the bytes of o's weight array (Sizer).
func (o *OGD) Bytes() int { return 8 * cap(o.v) }

// size is the length of the dense weight vector: 2^bits, and the bias.
func (o *OGD) size() int { return weightsLen(o.bits, o.cfg.Bias) }

// fit grows a sparse OGD's weights to its space's numbers.
// A dense one pays a nil check, inlined; the growing stays out of line,
// so that it does not weigh on the dense rounds' code.
func (o *OGD) fit() {
	if o.sp != nil {
		o.fitSpace()
	}
}

//go:noinline
func (o *OGD) fitSpace() { o.v = fit(o.v, len(o.sp.slots)) }

// Config returns the configuration with defaults applied.
func (o *OGD) Config() OGDConfig { return o.cfg }

// Weights appends w (the bias last, with Bias) to dst and returns it.
func (o *OGD) Weights(dst []float64) []float64 { return scaledWeights(dst, o.s, o.v, o.sp, o.size()) }

func (o *OGD) bias() float64 {
	if o.cfg.Bias {
		return o.s * o.v[o.dim]
	}
	return 0
}

// Predict returns the score ⟨w(t),x⟩(+b) and its sign, -1 at 0. It does
// not change the learner.
func (o *OGD) Predict(x Vector) Prediction {
	o.fit()
	raw := o.scale(dot(x.Idx, x.Val, o.v))
	return Prediction{Label: sign(raw), Score: raw}
}

// scale returns the score s·(d + v_b) of d = ⟨v,x⟩.
func (o *OGD) scale(d float64) float64 {
	if o.cfg.Bias {
		d += o.v[o.dim]
	}
	if o.s == 1 {
		return d
	}
	return o.s * d
}

// Loss returns the surrogate loss at w(t) of the score in p.
func (o *OGD) Loss(p Prediction, y int8) float64 { return lossOf(o.loss, p.Score, y) }

// logistic returns ln(1+e^(−z)) without overflow or cancellation.
func logistic(z float64) float64 {
	if z >= 0 {
		return math.Log1p(math.Exp(-z))
	}
	return -z + math.Log1p(math.Exp(z))
}

// Learn takes the projected gradient step on the loss of the served score
// (the score at w(t) when the label comes before the next step).
func (o *OGD) Learn(x Vector, served Prediction, y int8) {
	o.fit()
	o.rounds++
	b := o.bias()
	o.trackD2(b)
	// A zero gradient (hinge beyond the margin) changes nothing else: G²
	// grows by c²·(‖x‖²+a) = 0 (or NaN, which is not larger).
	if c := dlossOf(o.loss, served.Score, y); c != 0 {
		o.step(x, c, b, -1)
	}
	o.maintain()
}

// Round is Predict, Loss and Learn in one call (see Rounder). It repeats
// their lines instead of calling them or a helper shared with Learn: on
// the hinge rounds that take no step, such calls cost 5–10% of the round.
func (o *OGD) Round(x Vector, y int8) (Prediction, float64) {
	o.fit()
	var d, xn2 float64
	if o.loss == lossHinge {
		d, xn2 = dot(x.Idx, x.Val, o.v), -1
	} else {
		d, xn2 = dotNorm2(x.Idx, x.Val, o.v)
	}
	raw := o.scale(d)
	o.rounds++
	b := o.bias()
	o.trackD2(b)
	var loss, c float64
	if fy := float64(y); o.loss == lossHinge {
		loss = max0(1 - fy*raw)
		if fy*raw < 1 {
			c = -fy
		}
	} else {
		loss, c = lossOf(o.loss, raw, y), dlossOf(o.loss, raw, y)
	}
	if c != 0 {
		o.step(x, c, b, xn2)
	}
	o.maintain()
	return Prediction{Label: sign(raw), Score: raw}, loss
}

// trackD2 takes ‖w(t)‖²_{A⁻¹} into D², b the bias at w(t).
func (o *OGD) trackD2(b float64) {
	if d2 := o.w2 + bias2(b, o.a); d2 > o.maxD2 {
		o.maxD2 = d2
	}
}

// step is the step with gradient c·x on round o.rounds, b the bias at
// w(t) and xn2 = ‖x‖² (-1: not computed).
func (o *OGD) step(x Vector, c, b, xn2 float64) {
	a := o.a
	if xn2 < 0 {
		xn2 = norm2(x.Val[:len(x.Idx)])
	}
	if g2 := c * c * (xn2 + a); g2 > o.maxG2 {
		o.maxG2 = g2
	}
	eta, etaB := o.cfg.Eta, o.cfg.BiasEta
	if o.sqrtSched {
		r := math.Sqrt(float64(o.rounds))
		eta, etaB = eta/r, etaB/r
	}
	// Refuse a step that would overflow: ‖w(t+1)‖ ≤ ‖w(t)‖ + η_t|c|‖x‖.
	if step := math.Sqrt(o.w2+float64(b*b)) + float64(max(eta, etaB)*math.Abs(c)*math.Sqrt(xn2+1)); !(step < 1e150) {
		o.viol++
		return
	}
	// The step w_i ← w_i − η_t·(c·x_i) is computed in w's scale, rounded as
	// River computes it (exactly so while s = 1); the change of ‖w‖² is
	// summed in the canonical order of every sum over x (see Vector).
	var dw2 float64
	if s := o.s; s == 1 {
		dw2 = stepUnscaled(o.v, eta, c, x.Idx, x.Val)
		if o.cfg.Bias {
			o.v[o.dim] = b - float64(etaB*c)
		}
	} else {
		inv := 1 / s
		dw2 = stepScaled(o.v, s, inv, eta, c, x.Idx, x.Val)
		if o.cfg.Bias {
			o.v[o.dim] = float64((b - float64(etaB*c)) * inv)
		}
	}
	o.w2 = max0(o.w2 + dw2)
	if B := o.cfg.Radius; B > 0 {
		b = o.bias()
		if n2 := o.w2 + float64(b*b); n2 > B*B {
			f := B / math.Sqrt(n2)
			o.s *= f
			o.w2 *= f * f
		}
	}
}

// bias2 returns b²/a, the bias's part of ‖w‖²_{A⁻¹}: b² when a is 1 (the
// same bits: x/1 is x) or 0 (no bias, b = 0), with no division on the
// rounds of the usual configurations.
func bias2(b, a float64) float64 {
	if a == 1 || a == 0 {
		return b * b
	}
	return b * b / a
}

// maintain folds s into v when it gets tiny and refreshes ‖w‖² exactly
// every 2^bits rounds, bounding the drift of the incremental norm.
func (o *OGD) maintain() {
	if o.s < renormBelow || o.rounds&o.dimMask == 0 { // rounds mod 2^bits
		o.w2 = renormalize(&o.s, o.v, o.dim, o.sp) // O(2^bits) (the space's numbers), out of the round's line
	}
}

// renormalize is the pass of a learner that keeps its weights as w = s·v
// (OGD, Pegasos): it folds s into v when s is under renormBelow, and
// returns ‖w‖² of the non-bias weights, made afresh: of the first dim
// weights of a dense v, of all but number 0 of a v in sp's numbers,
// summed in the order of their slots (the dense sum's bits). It stays out
// of line: rounds call it rarely.
//
//go:noinline
func renormalize(s *float64, v []float64, dim int, sp *Space) float64 {
	if *s < renormBelow {
		for i := range v {
			v[i] *= *s
		}
		*s = 1
	}
	var w2 float64
	if sp != nil {
		for k := range sp.inOrder(len(v)) {
			if k != 0 {
				w := *s * v[k]
				w2 += float64(w * w)
			}
		}
		return w2
	}
	for _, x := range v[:dim] {
		w := *s * x
		w2 += float64(w * w)
	}
	return w2
}

// scaledWeights appends w = s·v to dst and returns it: the dense vector
// of n values v stands for in sp's numbers when sp is not nil.
func scaledWeights(dst []float64, s float64, v []float64, sp *Space, n int) []float64 {
	if sp != nil {
		v = sp.dense(v, n)
	}
	for _, x := range v {
		dst = append(dst, s*x)
	}
	return dst
}

// weightsLen is the length of a dense weight vector over 2^bits slots:
// one more with a bias.
func weightsLen(bits uint, bias bool) int {
	if bias {
		return 1<<bits + 1
	}
	return 1 << bits
}

// zeroLoss is ℓ_t(0), the same on every round: loss(0, ±1).
func (o *OGD) zeroLoss() float64 {
	switch o.loss {
	case lossHinge:
		return 1
	case lossLogistic:
		return math.Ln2
	default:
		return 0.5
	}
}

// Guarantee returns the regret bound of the configured schedule at the
// current round and the zero-vector comparator (see OGD).
func (o *OGD) Guarantee() Guarantee {
	g := Guarantee{Kind: RegretBound, Comparator: "zero_vector", Violations: o.viol, Monotone: true}
	if o.viol > 0 {
		// A step refused (it would overflow) is not the algorithm the
		// theorem is about: it says nothing of this run any more.
		g.Premise = PremiseFalse
	}
	T := float64(o.rounds)
	g.ComparatorLoss = T * o.zeroLoss()
	if o.rounds == 0 {
		return g
	}
	// Value is the bound on the regret the tracker measures (against u = 0),
	// so `holds` compares like with like; the bound against every u of the
	// ball is published as a certificate.
	eta, G2, B := o.cfg.Eta, o.maxG2, o.cfg.Radius
	var ball float64
	switch o.cfg.Schedule {
	case ScheduleFixed:
		g.RegretBound = eta * G2 * T / 2
		if B > 0 {
			ball = B*B/(2*eta) + g.RegretBound
		}
	default:
		r := math.Sqrt(T)
		grad := eta * G2 * (r - 0.5)
		if B > 0 {
			g.RegretBound = B*B*r/(2*eta) + grad
			ball = 4*B*B*r/(2*eta) + grad
		} else {
			g.RegretBound = o.maxD2*r/(2*eta) + grad
		}
	}
	g.Value = g.RegretBound
	if B > 0 {
		g.CertificateKind, g.Certificate = "ball_regret_bound", ball
	}
	return g
}

// DelayedGuarantee returns the regret bound for labels at most d learned
// rounds late: the immediate bound plus the drift
//
//	d·η·G²·T            (schedule fixed)
//	d·η·G²·(d + 2√T)    (schedule sqrt)
//
// with η the larger of eta and bias_eta, added to the certificate too.
//
// Proof. Number the learned rounds k = 1..T in the order their labels
// come; round k steps from w_k along g_k, the loss gradient at the point
// v_k that served its prediction, which is w_a for some a ≥ k−d (at most d
// rounds were learned in between). By convexity f_k(v_k) − f_k(u) ≤
// ⟨g_k, v_k − u⟩ = ⟨g_k, w_k − u⟩ + ⟨g_k, v_k − w_k⟩. The first terms sum
// to at most the immediate bound: its proof takes any vectors g_k applied
// at w_k, with ‖g_k‖² ≤ G² (the largest squared gradient seen, which is
// what G² tracks) and non-increasing steps. For the second, each step
// moves w by at most η_j·‖g_j‖ (a projection onto the ball or a refused
// step moves it less), so ‖v_k − w_k‖ ≤ Σ_{j=a}^{k−1} η_j G ≤ d·η_a·G:
// with a fixed step d·η·G, with η/√j steps at most d·η·G/√max(1, k−d).
// Summed with |⟨g_k, ·⟩| ≤ G‖·‖: d·η·G²·T, and d·η·G²·Σ_k 1/√max(1, k−d)
// ≤ d·η·G²·(d + 2√T).
func (o *OGD) DelayedGuarantee(d uint64) (Guarantee, bool) {
	g := o.Guarantee()
	if d == 0 || o.rounds == 0 {
		return g, true
	}
	eta, D, T := max(o.cfg.Eta, o.cfg.BiasEta), float64(d), float64(o.rounds)
	drift := D * eta * o.maxG2 * T
	if o.cfg.Schedule != ScheduleFixed {
		drift = D * eta * o.maxG2 * (D + 2*math.Sqrt(T))
	}
	g.RegretBound += drift
	g.Value = g.RegretBound
	if g.CertificateKind != "" {
		g.Certificate += drift
	}
	return g, true
}

const ogdMagic = "SLOG"

// MarshalBinary encodes the configuration, counters and weights w = s·v
// (as s and v: the representation is part of the deterministic state).
func (o *OGD) MarshalBinary() ([]byte, error) { return o.AppendBinary(nil) }

// AppendBinary appends MarshalBinary's encoding to b
// (encoding.BinaryAppender): a digest of the state hashes it from a
// buffer used again, not a new encoding each time.
func (o *OGD) AppendBinary(b []byte) ([]byte, error) {
	e := appendEncoder(b, ogdMagic, sparseVersion, 120+weightsSize(o.sp, len(o.v)))
	e.U64(uint64(o.bits))
	e.String(o.cfg.Loss)
	e.F64(o.cfg.Eta)
	e.String(o.cfg.Schedule)
	e.F64(o.cfg.Radius)
	e.Bool(o.cfg.Bias)
	e.F64(o.cfg.BiasEta)
	e.U64(o.rounds)
	e.F64(o.maxG2)
	e.F64(o.maxD2)
	e.U64(o.viol)
	e.F64(o.s)
	e.F64(o.w2)
	writeWeights(e, o.sp, o.size(), o.v, 1)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the bits and
// configuration must match the receiver's.
func (o *OGD) UnmarshalBinary(b []byte) error {
	d, version := newDecoder("ogd", ogdMagic, b, sparseVersion)
	bits := d.U64()
	var cfg OGDConfig
	cfg.Loss = d.String(16)
	cfg.Eta = d.F64()
	cfg.Schedule = d.String(16)
	cfg.Radius = d.F64()
	cfg.Bias = d.Bool()
	cfg.BiasEta = d.F64()
	if d.Err() == nil && (bits != uint64(o.bits) || cfg != o.cfg) {
		d.Fail("encoding is of ogd over %d bits with %+v, not %d bits with %+v", bits, cfg, o.bits, o.cfg)
	}
	rounds, maxG2, maxD2, viol, s, w2 := d.U64(), d.F64(), d.F64(), d.U64(), d.F64(), d.F64()
	if d.Err() == nil && !(s > 0 && s <= 1 && w2 >= 0 && maxG2 >= 0 && maxD2 >= 0 && finite(w2) && finite(maxG2) && finite(maxD2)) {
		d.Fail("inconsistent state")
	}
	v := decodeWeights(d, version, o.sp, o.size(), 1)
	if err := finish("ogd", d); err != nil {
		return err
	}
	o.rounds, o.maxG2, o.maxD2, o.viol, o.s, o.w2, o.v = rounds, maxG2, maxD2, viol, s, w2, v
	o.fit()
	return nil
}

// Probability is σ(score) when OGD minimizes the logistic loss: the
// model is then a logistic regression.
func (o *OGD) Probability(p Prediction) (float64, bool) {
	if o.loss != lossLogistic {
		return 0, false
	}
	return Sigmoid(p.Score), true
}

var _ Prober = (*OGD)(nil)
