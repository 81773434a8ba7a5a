package online

import (
	"errors"
	"fmt"
	"math"
)

// Kernels of the kernel Perceptron, the values of KernelPerceptronConfig.Kernel.
const (
	KernelPolynomial = "polynomial" // (⟨x, z⟩ + coef)^degree
	KernelGaussian   = "gaussian"   // exp(−‖x − z‖²/(2σ²))
)

// KernelPerceptronConfig configures the kernel Perceptron (learner keys of
// algorithm "kernel-perceptron"). The zero value works: the polynomial
// kernel (⟨x, z⟩ + 1)², no budget.
type KernelPerceptronConfig struct {
	// Kernel is "polynomial" (default) or "gaussian".
	Kernel string `yaml:"kernel"`
	// Degree d ≥ 1 of the polynomial kernel; 0 means 2.
	Degree int `yaml:"degree"`
	// Coef c ≥ 0 of the polynomial kernel; nil means 1.
	Coef *float64 `yaml:"coef"`
	// Sigma σ > 0 of the Gaussian kernel; 0 means 1.
	Sigma float64 `yaml:"sigma"`
	// Margin γ > 0: the margin of a unit-norm separator in the kernel's
	// feature space the user assumes; with it the tracker checks
	// mistakes ≤ R²/γ² (R² = the largest K(x, x)). 0: no mistake bound.
	Margin float64 `yaml:"margin"`
	// MaxSupport B > 0 keeps at most B support vectors, forgetting the
	// oldest; 0 keeps them all. A budget voids the mistake bound.
	MaxSupport int `yaml:"max_support"`
}

func (c KernelPerceptronConfig) withDefaults() KernelPerceptronConfig {
	if c.Kernel == "" {
		c.Kernel = KernelPolynomial
	}
	if c.Kernel == KernelPolynomial {
		if c.Degree == 0 {
			c.Degree = 2
		}
		if c.Coef == nil {
			one := 1.0
			c.Coef = &one
		}
	}
	if c.Kernel == KernelGaussian && c.Sigma == 0 {
		c.Sigma = 1
	}
	return c
}

// Validate reports a configuration error, naming the key at fault.
func (c KernelPerceptronConfig) Validate() error {
	switch c.Kernel {
	case "", KernelPolynomial, KernelGaussian:
	default:
		return fmt.Errorf("kernel-perceptron: kernel: unknown kernel %q (want polynomial or gaussian)", c.Kernel)
	}
	gaussian := c.Kernel == KernelGaussian
	switch {
	case c.Degree < 0 || c.Degree > 10:
		return fmt.Errorf("kernel-perceptron: degree: %d is not from 1 to 10", c.Degree)
	case c.Degree != 0 && gaussian:
		return errors.New("kernel-perceptron: degree: set for the gaussian kernel")
	case c.Coef != nil && (!finite(*c.Coef) || *c.Coef < 0):
		return fmt.Errorf("kernel-perceptron: coef: %v is not a finite number ≥ 0", *c.Coef)
	case c.Coef != nil && gaussian:
		return errors.New("kernel-perceptron: coef: set for the gaussian kernel")
	case !finite(c.Sigma) || c.Sigma < 0:
		return fmt.Errorf("kernel-perceptron: sigma: %v is not a finite number > 0", c.Sigma)
	case c.Sigma != 0 && !gaussian:
		return errors.New("kernel-perceptron: sigma: set for the polynomial kernel")
	case !finite(c.Margin) || c.Margin < 0:
		return fmt.Errorf("kernel-perceptron: margin: %v is not a finite number ≥ 0", c.Margin)
	case c.MaxSupport < 0 || c.MaxSupport > maxSupport:
		return fmt.Errorf("kernel-perceptron: max_support: %d is not from 0 to %d", c.MaxSupport, maxSupport)
	case c.MaxSupport > 0 && c.Margin > 0:
		return errors.New("kernel-perceptron: margin: a budget (max_support) voids the mistake bound")
	}
	return nil
}

// maxSupport bounds max_support, and a decoded state's support vectors.
const maxSupport = 1 << 24

// KernelPerceptron is the Perceptron in the feature space of a kernel K
// (the seeds' lecture notes on kernels): it keeps the examples it erred on,
// its support vectors (x_s, y_s), and predicts the sign of
//
//	score(x) = Σ_s y_s·K(x_s, x)
//
// (-1 at 0, as the Perceptron). Learning from a served score updates iff
// y·score ≤ 0, by adding (x, y) to the support. That is the Perceptron on
// φ(x) with w = Σ_s y_s·φ(x_s), for the feature map φ with ⟨φ(x), φ(z)⟩ =
// K(x, z), which the kernel never builds.
//
// Guarantee, with Margin γ and no budget, Kind MistakeBound: if a
// unit-norm w* of the feature space has y⟨w*, φ(x)⟩ ≥ γ on every example,
// mistakes ≤ R²/γ² with R² the largest K(x, x) seen (Novikoff's theorem
// in the feature space; with labels d rounds late, (2d+1)·R²/γ², the
// Perceptron's delayed bound, whose proof uses only inner products). It
// always publishes, without a budget, the certificate "every unit-norm
// separator has margin ≤ R/√M" (M the updates).
//
// With MaxSupport B, past B support vectors the oldest is forgotten (the
// budgeted Perceptron that removes the oldest; Forgetron-style
// shrinking is not done). The weight vector then no longer sums every
// update, the Perceptron's analysis breaks, and no bound or certificate is
// published. Memory: a support vector takes 32 bytes plus 12 bytes a
// non-zero of its x; with a budget B, the arrays hold at most
// 2·max(B, 64) + 1 vectors (forgotten ones are reclaimed when they fill
// half), so about (2·max(B, 64) + 1)·(32 + 12·nnz) bytes.
//
// A prediction costs O(Σ_s nnz(x_s) + |S|·nnz(x)) (a merge of sorted
// indices per support vector): the kernel trades speed for the feature
// space. Inputs must be canonical (strictly increasing indices).
type KernelPerceptron struct {
	cfg      KernelPerceptronConfig
	bits     uint
	gaussian bool
	degree   int
	coef     float64
	inv2s2   float64 // 1/(2σ²)

	// The support vectors in arrival order, from head: their indices and
	// values in two arenas, appended to and compacted when the forgotten
	// ones fill half of them, so that rounds allocate only while the
	// arenas grow.
	sup   []supportVector
	head  int
	count int // support vectors kept
	idx   []uint32
	val   []float64

	rounds  uint64
	updates uint64
	maxR2   float64
	viol    uint64
}

type supportVector struct {
	off, n int     // x in the arenas
	n2     float64 // ‖x‖²
	y      int8
}

func (k *KernelPerceptron) vec(sv *supportVector) Vector {
	return Vector{Idx: k.idx[sv.off : sv.off+sv.n], Val: k.val[sv.off : sv.off+sv.n]}
}

var (
	_ Learner         = (*KernelPerceptron)(nil)
	_ Guaranteed      = (*KernelPerceptron)(nil)
	_ DelayGuaranteed = (*KernelPerceptron)(nil)
)

// NewKernelPerceptron returns a kernel Perceptron with no support vectors.
func NewKernelPerceptron(bits uint, cfg KernelPerceptronConfig) (*KernelPerceptron, error) {
	if err := checkBits("kernel-perceptron", bits); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	k := &KernelPerceptron{cfg: cfg, bits: bits, gaussian: cfg.Kernel == KernelGaussian}
	if k.gaussian {
		k.inv2s2 = 1 / (2 * cfg.Sigma * cfg.Sigma)
	} else {
		k.degree, k.coef = cfg.Degree, *cfg.Coef
	}
	return k, nil
}

// Config returns the configuration with defaults applied.
func (k *KernelPerceptron) Config() KernelPerceptronConfig { return k.cfg }

// Support returns the number of support vectors kept.
func (k *KernelPerceptron) Support() int { return k.count }

// sparseDot is ⟨x, z⟩ of two canonical vectors, summed in x's order.
func sparseDot(x, z Vector) float64 {
	var d float64
	i, j := 0, 0
	for i < len(x.Idx) && j < len(z.Idx) {
		switch a, b := x.Idx[i], z.Idx[j]; {
		case a == b:
			d += float64(x.Val[i] * z.Val[j])
			i++
			j++
		case a < b:
			i++
		default:
			j++
		}
	}
	return d
}

// kernel returns K(s, x) given ⟨s, x⟩ and the squared norms.
func (k *KernelPerceptron) kernel(dot, sn2, xn2 float64) float64 {
	if k.gaussian {
		return math.Exp(-max0(sn2+xn2-float64(2*dot)) * k.inv2s2)
	}
	b := dot + k.coef
	r := b
	for range k.degree - 1 {
		r *= b
	}
	return r
}

func (k *KernelPerceptron) score(x Vector, xn2 float64) float64 {
	var s float64
	for i := range k.count {
		sv := &k.sup[k.head+i]
		s += float64(k.kernel(sparseDot(k.vec(sv), x), sv.n2, xn2) * float64(sv.y))
	}
	return s
}

// Predict returns Σ_s y_s·K(x_s, x) and its sign, -1 at 0.
func (k *KernelPerceptron) Predict(x Vector) Prediction {
	s := k.score(x, norm2(x.Val[:len(x.Idx)]))
	return Prediction{Label: sign(s), Score: s}
}

// Loss returns the zero-one loss of the prediction.
func (k *KernelPerceptron) Loss(p Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}

// Learn adds (x, y) to the support when y·score ≤ 0 at the served score.
func (k *KernelPerceptron) Learn(x Vector, served Prediction, y int8) {
	k.rounds++
	xn2 := norm2(x.Val[:len(x.Idx)])
	if r2 := k.kernel(xn2, xn2, xn2); r2 > k.maxR2 {
		k.maxR2 = r2
	}
	if float64(y)*served.Score > 0 {
		return
	}
	k.updates++
	if k.cfg.Margin > 0 && k.cfg.MaxSupport == 0 && float64(k.updates) > k.maxR2/(k.cfg.Margin*k.cfg.Margin) {
		k.viol++ // more updates than the theorem allows: the assumed margin is not there
	}
	if b := k.cfg.MaxSupport; b > 0 && k.count == b {
		k.head++ // forget the oldest
		k.count--
		if k.head >= 64 && k.head >= len(k.sup)/2 {
			k.compact()
		}
	}
	k.add(x, xn2, y)
}

// add appends (x, y) to the support.
func (k *KernelPerceptron) add(x Vector, xn2 float64, y int8) {
	n := len(x.Idx)
	k.sup = append(k.sup, supportVector{off: len(k.idx), n: n, n2: xn2, y: y})
	k.idx = append(k.idx, x.Idx...)
	k.val = append(k.val, x.Val[:n]...)
	k.count++
}

// compact moves the support vectors kept, and their arena entries, to the
// front, reusing the arrays.
func (k *KernelPerceptron) compact() {
	live := k.sup[k.head:]
	base := len(k.idx) // nothing kept (a budget of 1 between updates)
	if len(live) > 0 {
		base = live[0].off
	}
	n := copy(k.idx, k.idx[base:])
	copy(k.val, k.val[base:])
	k.idx, k.val = k.idx[:n], k.val[:n]
	for i := range live {
		live[i].off -= base
	}
	m := copy(k.sup, live)
	k.sup, k.head = k.sup[:m], 0
}

// Guarantee returns the mistake bound R²/γ² with a margin and no budget,
// and the max-margin certificate without a budget (see KernelPerceptron).
func (k *KernelPerceptron) Guarantee() Guarantee {
	g := Guarantee{RegretBound: math.NaN(), Violations: k.viol, Monotone: true}
	if k.cfg.MaxSupport > 0 {
		return g
	}
	if k.cfg.Margin > 0 {
		g.Kind, g.Value = MistakeBound, k.maxR2/(k.cfg.Margin*k.cfg.Margin)
		// The margin is the user's word until an update exceeds the bound.
		g.Premise = PremiseAssumed
		if k.viol > 0 {
			g.Premise = PremiseFalse
		}
	}
	if k.updates > 0 {
		g.CertificateKind, g.Certificate = "max_margin", math.Sqrt(k.maxR2/float64(k.updates))
	}
	return g
}

// DelayedGuarantee returns the bound for labels at most d learned rounds
// late: (2d+1)·R²/γ², and the certificate R·√((2d+1)/M), as the
// Perceptron's; none with a budget.
func (k *KernelPerceptron) DelayedGuarantee(d uint64) (Guarantee, bool) {
	if k.cfg.MaxSupport > 0 {
		return Guarantee{}, false
	}
	g := k.Guarantee()
	f := 2*float64(d) + 1
	if g.Kind == MistakeBound {
		g.Value *= f
		if d > 0 {
			// Violations count updates past the immediate bound, which
			// do not disprove the margin when labels come late.
			g.Premise = PremiseAssumed
			if float64(k.updates) > g.Value {
				g.Premise = PremiseFalse
			}
		}
	}
	if g.CertificateKind != "" {
		g.Certificate *= math.Sqrt(f)
	}
	return g, true
}

const kernelPerceptronMagic = "SLKP"

// MarshalBinary encodes the configuration, the counters and the support
// vectors in arrival order.
func (k *KernelPerceptron) MarshalBinary() ([]byte, error) {
	size := 96
	for i := range k.count {
		size += 24 + 12*k.sup[k.head+i].n
	}
	e := newEncoder(kernelPerceptronMagic, 1, size)
	e.U64(uint64(k.bits))
	e.String(k.cfg.Kernel)
	e.U64(uint64(k.cfg.Degree))
	var coef float64
	if k.cfg.Coef != nil {
		coef = *k.cfg.Coef
	}
	e.F64(coef)
	e.F64(k.cfg.Sigma)
	e.F64(k.cfg.Margin)
	e.U64(uint64(k.cfg.MaxSupport))
	e.U64(k.rounds)
	e.U64(k.updates)
	e.F64(k.maxR2)
	e.U64(k.viol)
	e.U64(uint64(k.count))
	for i := range k.count {
		sv := &k.sup[k.head+i]
		x := k.vec(sv)
		e.U8(uint8(sv.y))
		e.U32(uint32(sv.n))
		for j, idx := range x.Idx {
			e.U32(idx)
			e.F64(x.Val[j])
		}
	}
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the bits and
// configuration must match the receiver's.
func (k *KernelPerceptron) UnmarshalBinary(b []byte) error {
	d, _ := newDecoder("kernel-perceptron", kernelPerceptronMagic, b, 1)
	bits, kernel, degree, coef, sigma, margin, budget := d.U64(), d.String(16), d.U64(), d.F64(), d.F64(), d.F64(), d.U64()
	c := k.cfg
	var cc float64
	if c.Coef != nil {
		cc = *c.Coef
	}
	if d.Err() == nil && (bits != uint64(k.bits) || kernel != c.Kernel || degree != uint64(c.Degree) || coef != cc ||
		sigma != c.Sigma || margin != c.Margin || budget != uint64(c.MaxSupport)) {
		d.Fail("encoding is of another kernel-perceptron configuration")
	}
	rounds, updates, maxR2, viol, n := d.U64(), d.U64(), d.F64(), d.U64(), d.U64()
	// maxR2 may be +Inf: a high degree overflows K(x, x) on large values.
	if d.Err() == nil && (!(maxR2 >= 0) || updates > rounds || viol > updates ||
		c.MaxSupport > 0 && n != min(updates, uint64(c.MaxSupport)) || c.MaxSupport == 0 && n != updates) {
		d.Fail("inconsistent state")
	}
	restored := &KernelPerceptron{}
	for range n {
		if d.Err() != nil {
			break
		}
		y, m := int8(d.U8()), d.U32()
		if int(m) > d.Len()/12 || y != Positive && y != Negative {
			d.Fail("bad support vector")
			break
		}
		x := Vector{Idx: make([]uint32, m), Val: make([]float64, m)}
		for j := range m {
			x.Idx[j], x.Val[j] = d.U32(), d.F64()
			if j > 0 && x.Idx[j] <= x.Idx[j-1] || x.Idx[j] >= 1<<k.bits || !finite(x.Val[j]) {
				d.Fail("bad support vector")
				break
			}
		}
		restored.add(x, norm2(x.Val), y)
	}
	if err := finish("kernel-perceptron", d); err != nil {
		return err
	}
	k.sup, k.head, k.count, k.idx, k.val = restored.sup, 0, restored.count, restored.idx, restored.val
	k.rounds, k.updates, k.maxR2, k.viol = rounds, updates, maxR2, viol
	return nil
}

// Bytes returns the bytes of k's support vectors' arenas (Sizer).
func (k *KernelPerceptron) Bytes() int {
	return 32*cap(k.sup) + 4*cap(k.idx) + 8*cap(k.val)
}
