package online

import (
	"encoding"
	"slices"
)

// A Freezer is a learner whose state is large: the dense weight vectors of
// the linear learners, 8 to 32 bytes a slot over 2^bits slots. Freeze
// copies that state, a memmove of the weights, so that the goroutine that
// owns the learner spends on a checkpoint no more than the copy, however
// dense the weights, and the copy is encoded (MarshalBinary, a scan of
// every slot) and digested on another goroutine.
type Freezer interface {
	// Freeze returns a copy of the learner's state whose MarshalBinary
	// returns what the learner's returns now, whatever the learner does
	// afterwards. into, when not nil, is an earlier Freeze of this
	// learner or of one of the same type and size, whose memory the copy
	// reuses (it is not the caller's anymore): a copy into memory already
	// paged in, and no garbage; every field of the copy is the learner's,
	// none is into's. The
	// goroutine that owns the learner calls it; the copy is the caller's,
	// to use on any goroutine.
	Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler
}

// Freeze returns a copy of m's state for encoding later, on any goroutine
// (see Freezer): m's own Freeze, into an earlier copy when into is one,
// or, for a state small enough to encode at once, its encoding now.
func Freeze(m, into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if f, ok := m.(Freezer); ok {
		return f.Freeze(into)
	}
	b, err := m.MarshalBinary()
	return Encoded{State: b, Err: err}
}

// Encoded is a state encoded already: its MarshalBinary returns State and
// Err.
type Encoded struct {
	State []byte
	Err   error
}

// MarshalBinary returns e.State and e.Err.
func (e Encoded) MarshalBinary() ([]byte, error) { return e.State, e.Err }

// encodeNow is the Freeze of a sparse learner: its encoding costs what
// its weights hold, no more than a copy would.
func encodeNow(m encoding.BinaryMarshaler) Encoded {
	b, err := m.MarshalBinary()
	return Encoded{State: b, Err: err}
}

// reuse returns into as a *T when it is one, else a new T.
func reuse[T any](into encoding.BinaryMarshaler) *T {
	if c, ok := any(into).(*T); ok && c != nil {
		return c
	}
	return new(T)
}

// Freeze returns a copy of p's state (Freezer).
func (p *Perceptron) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if p.sp != nil {
		return encodeNow(p)
	}
	c := reuse[Perceptron](into)
	w, u := c.w, c.u
	*c = *p
	c.w, c.u = append(w[:0], p.w...), append(u[:0], p.u...)
	return c
}

// Freeze returns a copy of o's state (Freezer).
func (o *OGD) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if o.sp != nil {
		return encodeNow(o)
	}
	c := reuse[OGD](into)
	v := c.v
	*c = *o
	c.v = append(v[:0], o.v...)
	return c
}

// Freeze returns a copy of a's state (Freezer).
func (a *AdaGrad) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if a.sp != nil {
		return encodeNow(a)
	}
	c := reuse[AdaGrad](into)
	p := c.p
	*c = *a
	c.p = append(p[:0], a.p...)
	return c
}

// Freeze returns a copy of p's state (Freezer).
func (p *Pegasos) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if p.sp != nil {
		return encodeNow(p)
	}
	c := reuse[Pegasos](into)
	v := c.v
	*c = *p
	c.v = append(v[:0], p.v...)
	return c
}

// Freeze returns a copy of p's state (Freezer).
func (p *MulticlassPerceptron) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if p.sp != nil {
		return encodeNow(p)
	}
	c := reuse[MulticlassPerceptron](into)
	w := c.w
	*c = *p
	c.w, c.counts = append(w[:0], p.w...), p.counts.clone()
	return c
}

// Freeze returns a copy of s's state (Freezer).
func (s *Scaler) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	if s.sp != nil {
		return encodeNow(s)
	}
	c := reuse[Scaler](into)
	stats := c.stats
	*c = *s
	c.stats = append(stats[:0], s.stats...)
	return c
}

// Freeze returns a copy of o's state (Freezer): each class learner's
// copy, or its encoding now.
func (o *OneVsRest) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	f := reuse[frozenOneVsRest](into)
	if len(f.states) != len(o.learners) {
		f.states = make([]encoding.BinaryMarshaler, len(o.learners))
	}
	for c, l := range o.learners {
		f.states[c] = Freeze(l, f.states[c])
	}
	f.counts = o.counts.clone()
	f.binMistakes, f.binLoss = slices.Clone(o.binMistakes), slices.Clone(o.binLoss)
	return f
}

type frozenOneVsRest struct {
	states      []encoding.BinaryMarshaler
	counts      classCounts
	binMistakes []uint64
	binLoss     []float64
}

func (f *frozenOneVsRest) MarshalBinary() ([]byte, error) {
	return marshalOneVsRest(f.states, &f.counts, f.binMistakes, f.binLoss)
}
