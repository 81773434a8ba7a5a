package online

import (
	"encoding"
	"fmt"
	"math"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// Multiclass learners. With K classes, a label is a class index 0..K−1
// (an int8) and a prediction's Label is the class predicted, its Score
// that class's score. Loss is the 0-1 loss. Each learner also counts, per
// true class, the rounds and the mistakes (ClassCounts).

// ClassCounter is implemented by multiclass learners: per class, the
// rounds whose label was that class and the mistakes on them.
type ClassCounter interface {
	ClassCounts() (rounds, mistakes []uint64)
}

// classCounts are the per-class counters of a multiclass learner.
type classCounts struct {
	rounds, mistakes []uint64
}

func newClassCounts(k int) classCounts {
	return classCounts{rounds: make([]uint64, k), mistakes: make([]uint64, k)}
}

func (c *classCounts) count(served, y int8) {
	c.rounds[y]++
	if served != y {
		c.mistakes[y]++
	}
}

// ClassCounts returns copies of the counters.
func (c *classCounts) ClassCounts() (rounds, mistakes []uint64) {
	return append([]uint64(nil), c.rounds...), append([]uint64(nil), c.mistakes...)
}

func (c *classCounts) clone() classCounts {
	return classCounts{rounds: slices.Clone(c.rounds), mistakes: slices.Clone(c.mistakes)}
}

func (c *classCounts) encode(e *codec.Encoder) {
	for i := range c.rounds {
		e.U64(c.rounds[i])
		e.U64(c.mistakes[i])
	}
}

func (c *classCounts) decode(d *codec.Decoder) classCounts {
	n := newClassCounts(len(c.rounds))
	for i := range n.rounds {
		n.rounds[i], n.mistakes[i] = d.U64(), d.U64()
		if d.Err() == nil && n.mistakes[i] > n.rounds[i] {
			d.Fail("class %d: %d mistakes in %d rounds", i, n.mistakes[i], n.rounds[i])
		}
	}
	return n
}

// MulticlassPerceptronConfig configures a MulticlassPerceptron (learner
// keys of algorithm "multiclass-perceptron").
type MulticlassPerceptronConfig struct {
	// Bias adds a constant feature 1 per class. Default false.
	Bias bool `yaml:"bias"`
	// Margin is the multiclass margin γ > 0 the user asserts the stream
	// is separable with by unit-norm class vectors (Σ_c ‖u_c‖² = 1, and
	// ⟨u_y,x⟩ − ⟨u_c,x⟩ ≥ γ for every other class c): it enables the
	// published mistake bound 2R²/γ². 0 (the default) publishes only the
	// margin certificate.
	Margin float64 `yaml:"margin"`
}

// Validate reports a configuration error, naming the key at fault.
func (c MulticlassPerceptronConfig) Validate() error {
	if !finite(c.Margin) || c.Margin < 0 {
		return fmt.Errorf("multiclass-perceptron: margin: %v is not a finite number ≥ 0", c.Margin)
	}
	return nil
}

// MulticlassPerceptron is the multiclass Perceptron (Kesler's
// construction; Crammer and Singer 2003, "Ultraconservative online
// algorithms for multiclass problems", the max-score update): a weight
// vector w_c per class, all 0 at first; it predicts the class of the
// highest score ⟨w_c,x⟩ (+b_c), the lowest such class on a tie, and on a
// round whose label y is not the class ŷ predicted, w_y ← w_y + x and
// w_ŷ ← w_ŷ − x.
//
// Guarantee: with R = max ‖x‖ (the bias coordinate included) and M the
// updates, the Perceptron's proof on the stacked vector (w_1, …, w_K),
// whose update Ψ(x,y) − Ψ(x,ŷ) has norm √2·‖x‖, gives
//
//   - with Margin γ: Kind MistakeBound, Value 2R²/γ²; a round whose
//     update makes M exceed it is counted in Violations;
//   - once M > 0: CertificateKind "max_margin", Certificate R·√(2/M):
//     no unit-norm stack of class vectors separates the rounds seen with
//     a larger multiclass margin.
//
// Every index of x must be below 2^bits (a larger one panics); over a
// Space (NewSparseMulticlassPerceptron), x is in the space's numbers
// (Space.Map) and the learner is the dense one bit for bit, its encoding
// included.
type MulticlassPerceptron struct {
	cfg     MulticlassPerceptronConfig
	bits    uint
	dim     int // the bias's slot: 2^bits, or 0, its number, over a Space
	stride  int // dim, +1 with Bias; over a Space, room for numbers ≥ its Len
	sp      *Space
	k       int
	w       []float64 // class c's weights at [c·stride, (c+1)·stride)
	rounds  uint64
	updates uint64
	maxR2   float64
	viol    uint64
	counts  classCounts
}

var (
	_ Learner      = (*MulticlassPerceptron)(nil)
	_ Guaranteed   = (*MulticlassPerceptron)(nil)
	_ ClassCounter = (*MulticlassPerceptron)(nil)
)

// NewMulticlassPerceptron returns a MulticlassPerceptron of k classes
// over 2^bits slots, all weights 0.
func NewMulticlassPerceptron(bits uint, k int, cfg MulticlassPerceptronConfig) (*MulticlassPerceptron, error) {
	if err := checkBits("multiclass-perceptron", bits); err != nil {
		return nil, err
	}
	p, err := newMulticlassPerceptron(bits, k, cfg)
	if err != nil {
		return nil, err
	}
	p.dim, p.stride = 1<<bits, p.size()
	p.w = make([]float64, k*p.stride)
	return p, nil
}

// NewSparseMulticlassPerceptron returns a MulticlassPerceptron of k
// classes over s, all weights 0: it reads vectors in s's numbers
// (Space.Map) and holds each class's weights for those only.
func NewSparseMulticlassPerceptron(s *Space, k int, cfg MulticlassPerceptronConfig) (*MulticlassPerceptron, error) {
	p, err := newMulticlassPerceptron(s.bits, k, cfg)
	if err != nil {
		return nil, err
	}
	p.sp = s
	p.fit()
	return p, nil
}

// newMulticlassPerceptron returns a MulticlassPerceptron with no weights
// yet.
func newMulticlassPerceptron(bits uint, k int, cfg MulticlassPerceptronConfig) (*MulticlassPerceptron, error) {
	// The encoding's positions, class·(2^bits+1) + slot, are below 2^32.
	if k > 0 && uint64(k)*(1<<bits+1) > math.MaxUint32 {
		return nil, fmt.Errorf("multiclass-perceptron: %d classes over 2^%d slots: more than 2^32 weights", k, bits)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if k < 2 || k > math.MaxInt8 {
		return nil, fmt.Errorf("multiclass-perceptron: %d classes: want 2 to %d", k, math.MaxInt8)
	}
	return &MulticlassPerceptron{cfg: cfg, bits: bits, k: k, counts: newClassCounts(k)}, nil
}

// Space returns the Space of a sparse MulticlassPerceptron, nil for a
// dense one.
func (p *MulticlassPerceptron) Space() *Space { return p.sp }

// Bytes returns the bytes of p's weight array (Sizer).
func (p *MulticlassPerceptron) Bytes() int { return 8 * cap(p.w) }

// size is the length of a class's dense weight vector: 2^bits, and the
// bias.
func (p *MulticlassPerceptron) size() int { return weightsLen(p.bits, p.cfg.Bias) }

// fit makes room in a sparse learner's classes for its space's numbers.
// A dense one pays a nil check, inlined; the rest stays out of line.
func (p *MulticlassPerceptron) fit() {
	if p.sp != nil {
		p.fitSpace()
	}
}

// fitSpace gives each class of a sparse learner room for every number of
// its space, doubling the room when it grows, and keeps the weights.
//
//go:noinline
func (p *MulticlassPerceptron) fitSpace() {
	if p.stride >= len(p.sp.slots) {
		return
	}
	stride := max(len(p.sp.slots), 2*p.stride)
	w := make([]float64, p.k*stride)
	for c := range p.k {
		copy(w[c*stride:], p.class(c))
	}
	p.w, p.stride = w, stride
}

func (p *MulticlassPerceptron) class(c int) []float64 {
	return p.w[c*p.stride : (c+1)*p.stride]
}

func (p *MulticlassPerceptron) score(c int, x Vector) float64 {
	w := p.class(c)
	s := dot(x.Idx, x.Val, w)
	if p.cfg.Bias {
		s += w[p.dim]
	}
	return s
}

// Predict returns the class of the highest score, the lowest one on a
// tie.
func (p *MulticlassPerceptron) Predict(x Vector) Prediction {
	p.fit()
	best, bestScore := 0, p.score(0, x)
	for c := 1; c < p.k; c++ {
		if s := p.score(c, x); s > bestScore {
			best, bestScore = c, s
		}
	}
	return Prediction{Label: int8(best), Score: bestScore}
}

// Learn updates w_y and w_ŷ when the class served is not y.
func (p *MulticlassPerceptron) Learn(x Vector, served Prediction, y int8) {
	p.fit()
	p.rounds++
	p.counts.count(served.Label, y)
	r2 := norm2(x.Val[:len(x.Idx)])
	if p.cfg.Bias {
		r2++
	}
	p.maxR2 = max(p.maxR2, r2)
	if served.Label == y {
		return
	}
	p.updates++
	for _, u := range []struct {
		c int
		a float64
	}{{int(y), 1}, {int(served.Label), -1}} {
		w := p.class(u.c)
		axpy(w, u.a, x.Idx, x.Val)
		if p.cfg.Bias {
			w[p.dim] += u.a
		}
	}
	if p.cfg.Margin > 0 && float64(p.updates) > 2*p.maxR2/(p.cfg.Margin*p.cfg.Margin) {
		p.viol++
	}
}

// Loss is the 0-1 loss.
func (p *MulticlassPerceptron) Loss(pr Prediction, y int8) float64 {
	if pr.Label != y {
		return 1
	}
	return 0
}

// Guarantee returns 2R²/γ² with Margin, and the certificate R·√(2/M).
func (p *MulticlassPerceptron) Guarantee() Guarantee {
	g := Guarantee{RegretBound: math.NaN(), Violations: p.viol, Monotone: true}
	if p.cfg.Margin > 0 {
		g.Kind = MistakeBound
		g.Value = 2 * p.maxR2 / (p.cfg.Margin * p.cfg.Margin)
		// The margin is the user's word until an update exceeds the bound.
		g.Premise = PremiseAssumed
		if p.viol > 0 {
			g.Premise = PremiseFalse
		}
	}
	if p.updates > 0 {
		g.CertificateKind = "max_margin"
		g.Certificate = math.Sqrt(2 * p.maxR2 / float64(p.updates))
	}
	return g
}

// ClassCounts returns the rounds and mistakes per true class.
func (p *MulticlassPerceptron) ClassCounts() (rounds, mistakes []uint64) {
	return p.counts.ClassCounts()
}

const multiclassPerceptronMagic = "SLMP"

// MarshalBinary encodes the configuration, counters and weights.
func (p *MulticlassPerceptron) MarshalBinary() ([]byte, error) {
	e := newEncoder(multiclassPerceptronMagic, 1, 64+16*p.k+weightsSize(nil, len(p.w)))
	e.U64(uint64(p.bits))
	e.U32(uint32(p.k))
	e.Bool(p.cfg.Bias)
	e.F64(p.cfg.Margin)
	e.U64(p.rounds)
	e.U64(p.updates)
	e.F64(p.maxR2)
	e.U64(p.viol)
	p.counts.encode(e)
	if p.sp == nil {
		e.SparseF64s(p.w)
		return e.Bytes(), nil
	}
	// The dense classes one after the other, each's slots in order.
	n := p.size()
	var pos []int
	var vals []float64
	for c := range p.k {
		w := p.class(c)
		for k, slot := range p.sp.inOrder(p.stride) {
			if slot < n {
				pos, vals = append(pos, c*n+slot), append(vals, w[k])
			}
		}
	}
	e.SparseEntries(p.k*n, pos, vals)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary, of the
// receiver's bits, classes and configuration.
func (p *MulticlassPerceptron) UnmarshalBinary(b []byte) error {
	d, _ := newDecoder("multiclass-perceptron", multiclassPerceptronMagic, b, 1)
	bits, k := d.U64(), d.U32()
	cfg := MulticlassPerceptronConfig{Bias: d.Bool(), Margin: d.F64()}
	if d.Err() == nil && (bits != uint64(p.bits) || int(k) != p.k || cfg != p.cfg) {
		d.Fail("encoding is of a multiclass perceptron over %d bits and %d classes with %+v, not %d bits and %d classes with %+v", bits, k, cfg, p.bits, p.k, p.cfg)
	}
	rounds, updates, maxR2, viol := d.U64(), d.U64(), d.F64(), d.U64()
	if d.Err() == nil && (updates > rounds || viol > updates || !(maxR2 >= 0) || math.IsInf(maxR2, 0)) {
		d.Fail("inconsistent counters")
	}
	counts := p.counts.decode(d)
	w, stride := p.decodeWeights(d)
	if err := finish("multiclass-perceptron", d); err != nil {
		return err
	}
	p.rounds, p.updates, p.maxR2, p.viol, p.counts, p.w, p.stride = rounds, updates, maxR2, viol, counts, w, stride
	p.fit()
	return nil
}

// decodeWeights reads the classes' dense weights and returns them in the
// receiver's layout, and its stride: over a Space, in its numbers (the
// slots of the weights numbered).
func (p *MulticlassPerceptron) decodeWeights(d *codec.Decoder) ([]float64, int) {
	n := p.size()
	if p.sp == nil {
		w := make([]float64, p.k*n)
		d.SparseF64sInto(w)
		return w, n
	}
	// The stride is known once every slot is numbered.
	type entry struct {
		c, k int // class, number
		v    float64
	}
	var es []entry
	d.SparseF64sEach(p.k*n, func(i int, v float64) {
		es = append(es, entry{i / n, int(p.sp.number(uint32(i % n))), v})
	})
	stride := p.sp.Len()
	w := make([]float64, p.k*stride)
	for _, e := range es {
		w[e.c*stride+e.k] = e.v
	}
	return w, stride
}

// OneVsRest runs a binary learner per class: learner c learns label +1
// on the rounds of class c and −1 on the others. It predicts, of the
// classes whose learner says +1, the one of the highest score, or, when
// none does, the class of the highest score (the lowest class on a tie).
// For the linear learners, whose label is their score's sign, that is
// the class of the highest score.
//
// Guarantee: when every learner has a mistake bound, their sum. A round
// the multiclass prediction is wrong has a learner wrong: were every
// learner right, the true class's alone would say +1, and it would be
// predicted. So mistakes ≤ Σ_c mistakes_c ≤ Σ_c bound_c. Otherwise none.
type OneVsRest struct {
	learners []Learner
	preds    []Prediction // scratch of Learn
	counts   classCounts
	// Each class learner's record on its own labels (+1 on its class's
	// rounds, −1 on the others'): its mistakes and cumulative loss.
	binMistakes []uint64
	binLoss     []float64
}

// ClassRecord is one class learner's record on its own labels, with its
// guarantee (Guarantee's zero value, Kind NoBound, when it has none).
type ClassRecord struct {
	Mistakes  uint64
	Loss      float64
	Guarantee Guarantee
}

// ClassRecords returns every class learner's record, in class order.
func (o *OneVsRest) ClassRecords() []ClassRecord {
	out := make([]ClassRecord, len(o.learners))
	for c, l := range o.learners {
		out[c] = ClassRecord{Mistakes: o.binMistakes[c], Loss: o.binLoss[c], Guarantee: Guarantee{RegretBound: math.NaN()}}
		if g, ok := l.(Guaranteed); ok {
			out[c].Guarantee = g.Guarantee()
		}
	}
	return out
}

var (
	_ Learner      = (*OneVsRest)(nil)
	_ Guaranteed   = (*OneVsRest)(nil)
	_ ClassCounter = (*OneVsRest)(nil)
)

// NewOneVsRest returns the one-versus-rest learner of the binary learners
// ls, one per class, in class order.
func NewOneVsRest(ls []Learner) (*OneVsRest, error) {
	if len(ls) < 2 || len(ls) > math.MaxInt8 {
		return nil, fmt.Errorf("one-vs-rest: %d classes: want 2 to %d", len(ls), math.MaxInt8)
	}
	return &OneVsRest{learners: ls, preds: make([]Prediction, len(ls)), counts: newClassCounts(len(ls)),
		binMistakes: make([]uint64, len(ls)), binLoss: make([]float64, len(ls))}, nil
}

// Learners returns the binary learners, in class order (the learner's
// own: do not modify them).
func (o *OneVsRest) Learners() []Learner { return o.learners }

// Predict returns, of the classes whose learner says +1, the one of the
// highest score; when none says +1, the class of the highest score.
func (o *OneVsRest) Predict(x Vector) Prediction {
	best, bestPos := Prediction{}, false
	for c, l := range o.learners {
		p := l.Predict(x)
		pos := p.Label == Positive
		switch {
		case c == 0, pos && !bestPos,
			pos == bestPos && (p.Score > best.Score || math.IsNaN(best.Score) && !math.IsNaN(p.Score)):
			best, bestPos = Prediction{Label: int8(c), Score: p.Score}, pos
		}
	}
	return best
}

// Learn teaches every class's learner its binary label: +1 for y's, −1
// for the others', with the prediction it serves now (the one it served,
// since nothing learned since).
func (o *OneVsRest) Learn(x Vector, served Prediction, y int8) {
	o.counts.count(served.Label, y)
	for c, l := range o.learners {
		o.preds[c] = l.Predict(x)
	}
	for c, l := range o.learners {
		yc := Negative
		if c == int(y) {
			yc = Positive
		}
		if o.preds[c].Label != yc {
			o.binMistakes[c]++
		}
		o.binLoss[c] += l.Loss(o.preds[c], yc)
		l.Learn(x, o.preds[c], yc)
	}
}

// Loss is the 0-1 loss.
func (o *OneVsRest) Loss(pr Prediction, y int8) float64 {
	if pr.Label != y {
		return 1
	}
	return 0
}

// Guarantee returns the sum of the learners' mistake bounds when each
// has one.
func (o *OneVsRest) Guarantee() Guarantee {
	g := Guarantee{Kind: MistakeBound, RegretBound: math.NaN(), Monotone: true}
	for _, l := range o.learners {
		gl, ok := l.(Guaranteed)
		if !ok {
			return Guarantee{RegretBound: math.NaN()}
		}
		lg := gl.Guarantee()
		if lg.Kind != MistakeBound {
			return Guarantee{RegretBound: math.NaN()}
		}
		g.Value += lg.Value
		g.Violations += lg.Violations
		g.Monotone = g.Monotone && lg.Monotone
		// The sum's premise is every class model's: false when one is,
		// the user's word when one is and none is false.
		g.Premise = max(g.Premise, lg.Premise)
	}
	return g
}

// ClassCounts returns the rounds and mistakes per true class.
func (o *OneVsRest) ClassCounts() (rounds, mistakes []uint64) { return o.counts.ClassCounts() }

const oneVsRestMagic = "SLOR"

// MarshalBinary encodes the per-class counters and every learner's
// state.
func (o *OneVsRest) MarshalBinary() ([]byte, error) {
	states := make([]encoding.BinaryMarshaler, len(o.learners))
	for c, l := range o.learners {
		states[c] = l
	}
	return marshalOneVsRest(states, &o.counts, o.binMistakes, o.binLoss)
}

// marshalOneVsRest encodes a OneVsRest of the class learners' states
// (the learners, or their copies: Freeze) and counters.
func marshalOneVsRest(states []encoding.BinaryMarshaler, counts *classCounts, binMistakes []uint64, binLoss []float64) ([]byte, error) {
	enc := make([][]byte, len(states))
	size := 16 + 16*len(states)
	for c, l := range states {
		b, err := l.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("one-vs-rest: class %d: %w", c, err)
		}
		enc[c], size = b, size+len(b)+8
	}
	e := newEncoder(oneVsRestMagic, 1, size)
	e.U32(uint32(len(states)))
	counts.encode(e)
	for c, b := range enc {
		e.U64(binMistakes[c])
		e.F64(binLoss[c])
		e.Blob(b)
	}
	return e.Bytes(), nil
}

// UnmarshalBinary restores a MarshalBinary of a OneVsRest of as many
// learners of the same kinds; on error o is unchanged.
func (o *OneVsRest) UnmarshalBinary(b []byte) error {
	d, _ := newDecoder("one-vs-rest", oneVsRestMagic, b, 1)
	if k := d.U32(); d.Err() == nil && int(k) != len(o.learners) {
		d.Fail("encoding is of %d classes, not %d", k, len(o.learners))
	}
	counts := o.counts.decode(d)
	states := make([][]byte, len(o.learners))
	binMistakes, binLoss := make([]uint64, len(o.learners)), make([]float64, len(o.learners))
	for c := range states {
		binMistakes[c], binLoss[c] = d.U64(), d.F64()
		states[c] = d.Blob()
	}
	if err := finish("one-vs-rest", d); err != nil {
		return err
	}
	// Each learner decodes into itself only once every one is known to
	// decode: restore copies first.
	olds := make([][]byte, len(o.learners))
	for c, l := range o.learners {
		old, err := l.MarshalBinary()
		if err != nil {
			return err
		}
		olds[c] = old
	}
	for c, l := range o.learners {
		if err := l.UnmarshalBinary(states[c]); err != nil {
			for j := range c {
				o.learners[j].UnmarshalBinary(olds[j]) // restores what it encoded
			}
			return fmt.Errorf("one-vs-rest: class %d: %w", c, err)
		}
	}
	o.counts, o.binMistakes, o.binLoss = counts, binMistakes, binLoss
	return nil
}
