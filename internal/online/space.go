package online

import (
	"fmt"
	"math"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// Space is the slot space of a sparse model: the hashed slots (below
// 2^bits) the model has met, numbered 1, 2, ... in the order it met them,
// and the bias's slot, numbered 0. A learner built over a Space
// (NewSparsePerceptron, NewSparseOGD, NewSparsePegasos, NewSparseAdaGrad)
// holds state for those slots only, so that a model costs what it has
// seen rather than 2^bits slots, and reads vectors whose indices are the
// space's numbers (Map), not hashed slots.
//
// A sparse learner is the dense one, bit for bit: every sum over a vector
// runs over its entries in their order whatever the indices are, and a
// sum over the weights runs in the order of the hashed slots; it encodes
// (MarshalBinary) to the bytes the dense learner of the same events
// encodes, so their digests are equal and either decodes the other's
// encoding.
//
// The learners of one model share its Space, so that an event is mapped
// once for all of them. A Space only grows: a number once given stays.
// It is not safe for concurrent use.
type Space struct {
	bits  uint
	index numbers  // hashed slot → number
	slots []uint32 // number → hashed slot; slots[0] is 2^bits, the bias's
	order []uint32 // the numbers by increasing slot, while len(order) == len(slots)
}

// NewSpace returns a Space of 2^bits hashed slots that has met none.
func NewSpace(bits uint) (*Space, error) {
	if err := checkBits("space", bits); err != nil {
		return nil, err
	}
	s := &Space{bits: bits, slots: make([]uint32, 0, 16)}
	s.add(1 << bits)
	return s, nil
}

// Bits returns the bits of the hashed slots.
func (s *Space) Bits() uint { return s.bits }

// Len returns how many numbers are given, the bias's included.
func (s *Space) Len() int { return len(s.slots) }

// Map makes dst the vector x of hashed slots in the space's numbers,
// numbering the slots it has not met; dst.Val is x.Val, shared. The
// entries keep their order, so sums over dst are those over x. Every
// index of x must be below 2^bits, as for a dense learner (decoders mask
// hashed slots): a larger one panics.
func (s *Space) Map(dst *Vector, x Vector) {
	// dst is a model's scratch: grown once to the event's size, not
	// entry by entry (a model per key is new at a key's first event).
	idx := slices.Grow(dst.Idx[:0], len(x.Idx))
	for _, i := range x.Idx {
		if i>>s.bits != 0 {
			panic(fmt.Sprintf("online: slot %d of a space of 2^%d", i, s.bits))
		}
		n, ok := s.index.find(i)
		if !ok {
			n = s.add(i)
		}
		idx = append(idx, n)
	}
	dst.Idx, dst.Val = idx, x.Val[:len(x.Idx)]
}

// number returns slot's number, given now when the space has not met it.
func (s *Space) number(slot uint32) uint32 {
	if n, ok := s.index.find(slot); ok {
		return n
	}
	return s.add(slot)
}

func (s *Space) add(slot uint32) uint32 {
	n := uint32(len(s.slots))
	s.index.insert(slot, n)
	if len(s.slots) == cap(s.slots) {
		s.slots = slices.Grow(s.slots, len(s.slots)) // doubling
	}
	s.slots = append(s.slots, slot)
	return n
}

// numbers is a hash table of hashed slots to numbers, open addressing
// with linear probing in one slice: a cell is (slot+1)<<32 | number, 0
// when empty. It holds at most half as many entries as cells. A model
// per key holds one: it costs 16 to 32 bytes a slot, and a lookup is a
// multiply and, mostly, one load.
type numbers struct {
	cells []uint64
	n     int
}

// home returns slot's first cell of a table of mask+1 cells (Fibonacci
// hashing: the slots of a hashed space are uniform already, but a
// table's size is far below the space's).
func home(slot uint32, mask uint32) uint32 {
	return uint32(uint64(slot)*0x9e3779b97f4a7c15>>32) & mask
}

func (t *numbers) find(slot uint32) (uint32, bool) {
	if len(t.cells) == 0 {
		return 0, false
	}
	mask := uint32(len(t.cells) - 1)
	want := uint64(slot) + 1
	for i := home(slot, mask); ; i = (i + 1) & mask {
		c := t.cells[i]
		if c>>32 == want {
			return uint32(c), true
		}
		if c == 0 {
			return 0, false
		}
	}
}

// insert adds slot, which t does not hold, with number n.
func (t *numbers) insert(slot, n uint32) {
	if 2*(t.n+1) > len(t.cells) {
		old := t.cells
		t.cells = make([]uint64, max(16, 2*len(old)))
		t.n = 0
		for _, c := range old {
			if c != 0 {
				t.insert(uint32(c>>32-1), uint32(c))
			}
		}
	}
	mask := uint32(len(t.cells) - 1)
	i := home(slot, mask)
	for t.cells[i] != 0 {
		i = (i + 1) & mask
	}
	t.cells[i] = (uint64(slot)+1)<<32 | uint64(n)
	t.n++
}

// sorted returns the numbers in the order of their slots: the bias's, the
// largest slot, last.
func (s *Space) sorted() []uint32 {
	if len(s.order) != len(s.slots) {
		// Sorted as slot<<32 | number, one integer a number: the slots
		// are distinct, so that is their order, and no comparison calls.
		keys := make([]uint64, len(s.slots))
		for n, slot := range s.slots {
			keys[n] = uint64(slot)<<32 | uint64(n)
		}
		slices.Sort(keys)
		s.order = slices.Grow(s.order[:0], len(keys))
		for _, k := range keys {
			s.order = append(s.order, uint32(k))
		}
	}
	return s.order
}

// Bytes returns an estimate of the memory the space holds: its index and
// numbers.
func (s *Space) Bytes() int {
	return 8*len(s.index.cells) + 4*cap(s.slots) + 4*cap(s.order)
}

// fit returns w with at least n values, the new ones zero: a sparse
// learner's arrays only grow, so the capacity past their length is as
// allocated, zero.
// The room doubles, so that a key's arrays, grown a few numbers at a
// time, are copied O(log n) times (append grows large slices by a
// quarter).
func fit(w []float64, n int) []float64 {
	switch {
	case len(w) >= n:
		return w
	case cap(w) >= n:
		return w[:n]
	}
	g := make([]float64, n, max(n, 2*cap(w), 8))
	copy(g, w)
	return g
}

// writeVector writes what SparseF64s writes for the dense vector of n
// values whose value at slots[k]·stride + j is w[k·stride + j], the others
// zero (w may be shorter than the space: its missing values are zero).
func (s *Space) writeVector(e *codec.Encoder, n int, w []float64, stride int) {
	e.Grow(16 + 12*len(w)) // the values, and the runs' headers: one per few values, mostly
	runs := e.Sparse(n)
	for _, k := range s.sorted() {
		base := int(s.slots[k]) * stride
		for j := range stride {
			if i := int(k)*stride + j; base+j < n && i < len(w) {
				runs.Add(base+j, w[i])
			}
		}
	}
	runs.End()
}

// readVector reads a vector of n values written by an encoding of version
// (writeVector's, or SparseF64s' or F64s' of the dense vector) and
// returns it in the space's numbers (writeVector's layout), numbering the
// slots of its values.
func (s *Space) readVector(d *codec.Decoder, version uint8, n, stride int) []float64 {
	var w []float64
	set := func(i int, v float64) {
		k := int(s.number(uint32(i / stride)))
		w = fit(w, (k+1)*stride)
		w[k*stride+i%stride] = v
	}
	if version == denseVersion {
		dense := make([]float64, n)
		d.F64sInto(dense)
		for i, v := range dense {
			if math.Float64bits(v) != 0 {
				set(i, v)
			}
		}
	} else {
		d.SparseF64sEach(n, set)
	}
	return fit(w, len(s.slots)*stride)
}

// norm2 returns norm2 of the dense vector of n values w stands for
// (writeVector's layout, stride 1): the canonical order puts the value at
// slot i in partial sum i mod 4, and the zeros it skips add nothing.
func (s *Space) norm2(w []float64, n int) float64 {
	var p [4]float64
	for _, k := range s.sorted() {
		if i := int(s.slots[k]); i < n && int(k) < len(w) {
			v := w[k]
			p[i&3] += float64(v * v)
		}
	}
	return (p[0] + p[1]) + (p[2] + p[3])
}

// dense returns the dense vector of n values w stands for (writeVector's
// layout, stride 1).
func (s *Space) dense(w []float64, n int) []float64 {
	out := make([]float64, n)
	for k, v := range w {
		if i := int(s.slots[k]); i < n {
			out[i] = v
		}
	}
	return out
}

// writeWeights writes w, a vector of n values, dense (sp nil) or in sp's
// numbers (stride values a slot), as SparseF64s writes the dense vector.
func writeWeights(e *codec.Encoder, sp *Space, n int, w []float64, stride int) {
	if sp == nil {
		e.SparseF64s(w)
		return
	}
	sp.writeVector(e, n, w, stride)
}

// decodeWeights reads a vector of n values written by an encoding of
// version, dense (sp nil) or into sp's numbers (stride values a slot).
func decodeWeights(d *codec.Decoder, version uint8, sp *Space, n, stride int) []float64 {
	if sp == nil {
		w := make([]float64, n)
		readWeights(d, version, w)
		return w
	}
	return sp.readVector(d, version, n, stride)
}

// A Spaced learner may be sparse: Space returns the Space it was built
// over, nil when it is dense. A sparse learner reads vectors in its
// space's numbers (Space.Map), a dense one hashed slots.
type Spaced interface {
	Space() *Space
}

// Space returns the Space of o's class learners, nil when they are dense
// (every class's learner is of one kind).
func (o *OneVsRest) Space() *Space {
	if s, ok := o.learners[0].(Spaced); ok {
		return s.Space()
	}
	return nil
}

// A Sizer tells the bytes of memory its state's arrays hold (their
// capacity), not counting the few fixed fields: what a learner's
// footprint grows with.
type Sizer interface {
	Bytes() int
}

// Bytes returns the bytes of p's weight arrays (Sizer).
func (p *Perceptron) Bytes() int { return 8 * (cap(p.w) + cap(p.u)) }

// Bytes returns the bytes of a's state array (Sizer).
func (a *AdaGrad) Bytes() int { return 8 * cap(a.p) }

// Bytes returns the bytes of o's class learners' arrays, of those that
// tell them (Sizer).
func (o *OneVsRest) Bytes() int {
	n := 0
	for _, l := range o.learners {
		if s, ok := l.(Sizer); ok {
			n += s.Bytes()
		}
	}
	return n
}
