package online

import (
	"fmt"
	"math"
)

// Scaling kinds, the values of the config key features.scale.
const (
	ScaleNone     = "none"
	ScaleStandard = "standard"
	ScaleL2       = "l2"
)

// Scaler rescales feature vectors before the learners see them
// (features.scale in the config):
//
//   - "none" copies x;
//   - "standard" keeps, per slot, the running mean and population variance
//     of the values seen at that slot, and maps v to (v - mean)/sd, or to 0
//     while sd is 0. Only the slots present in x are observations: a missing
//     feature is not a zero observation (an explicit 0 in x is). The
//     statistics are updated with x before x is transformed ("updated before
//     use"), so the first value seen at a slot maps to 0;
//   - "l2" maps x to x/‖x‖ (the zero vector to itself) and keeps no state.
//
// The standard update is Welford's, written in the form River's
// preprocessing.StandardScaler uses (mean += (v-mean)/n;
// var += ((v-mean_old)(v-mean_new) - var)/n), so that the two agree to the
// last bit.
//
// A Scaler is not safe for concurrent use; its methods do not retain x or
// dst.
type Scaler struct {
	kind  string
	bits  uint
	count []uint64  // standard: observations per slot
	mean  []float64 // standard: running mean per slot
	vari  []float64 // standard: running population variance per slot
}

// NewScaler returns a Scaler of the given kind over 2^bits slots. The
// empty kind means "none".
func NewScaler(bits uint, kind string) (*Scaler, error) {
	if err := checkBits("scaler", bits); err != nil {
		return nil, err
	}
	s := &Scaler{kind: kind, bits: bits}
	switch kind {
	case "":
		s.kind = ScaleNone
	case ScaleNone, ScaleL2:
	case ScaleStandard:
		n := 1 << bits
		s.count = make([]uint64, n)
		s.mean = make([]float64, n)
		s.vari = make([]float64, n)
	default:
		return nil, fmt.Errorf("scaler: unknown kind %q (want none, standard or l2)", kind)
	}
	return s, nil
}

// Kind returns the scaler's kind.
func (s *Scaler) Kind() string { return s.kind }

// Transform updates the statistics with x (Observe) and writes the scaled x
// into dst (Scale), reusing dst's slices: it allocates only while they
// grow. dst gets x's indices, so it is canonical when x is.
func (s *Scaler) Transform(dst *Vector, x Vector) {
	s.Observe(x)
	s.Scale(dst, x)
}

// Observe adds the values of x to the running statistics of their slots
// (a no-op unless the kind is standard).
func (s *Scaler) Observe(x Vector) {
	if s.kind != ScaleStandard {
		return
	}
	for k, i := range x.Idx {
		v := x.Val[k]
		s.count[i]++
		n := float64(s.count[i])
		old := s.mean[i]
		s.mean[i] += (v - old) / n
		s.vari[i] += ((v-old)*(v-s.mean[i]) - s.vari[i]) / n
	}
}

// Scale writes the scaled x into dst without updating the statistics.
func (s *Scaler) Scale(dst *Vector, x Vector) {
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	switch s.kind {
	case ScaleStandard:
		for k, i := range dst.Idx {
			if sd := math.Sqrt(s.vari[i]); sd != 0 {
				dst.Val[k] = (dst.Val[k] - s.mean[i]) / sd
			} else {
				dst.Val[k] = 0
			}
		}
	case ScaleL2:
		if n := x.Norm(); n != 0 {
			for k := range dst.Val {
				dst.Val[k] /= n
			}
		}
	}
}

// Stats returns the count, mean and population variance of slot i (zeros
// unless the kind is standard).
func (s *Scaler) Stats(i uint32) (n uint64, mean, variance float64) {
	if s.kind != ScaleStandard {
		return 0, 0, 0
	}
	return s.count[i], s.mean[i], s.vari[i]
}

const scalerMagic = "SLSC"

// MarshalBinary encodes the kind, the bits and, for standard, the
// statistics of every observed slot in increasing slot order.
func (s *Scaler) MarshalBinary() ([]byte, error) {
	used := 0
	for _, c := range s.count {
		if c != 0 {
			used++
		}
	}
	e := newEncoder(scalerMagic, 32+len(s.kind)+used*32)
	e.str(s.kind)
	e.u64(uint64(s.bits))
	e.u64(uint64(used))
	for i, c := range s.count {
		if c != 0 {
			e.u64(uint64(i))
			e.u64(c)
			e.f64(s.mean[i])
			e.f64(s.vari[i])
		}
	}
	return e.b, nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the kind and
// bits must match the receiver's.
func (s *Scaler) UnmarshalBinary(b []byte) error {
	d := newDecoder("scaler", scalerMagic, b)
	kind := d.str(16)
	bits := d.u64()
	if d.err == nil && (kind != s.kind || bits != uint64(s.bits)) {
		d.fail("encoding is of a %q scaler over %d bits, not %q over %d", kind, bits, s.kind, s.bits)
	}
	used := d.u64()
	if d.err == nil && used > uint64(len(s.count)) {
		d.fail("%d observed slots in a space of %d", used, len(s.count))
	}
	if d.err != nil {
		return d.finish()
	}
	count := make([]uint64, len(s.count))
	mean := make([]float64, len(s.mean))
	vari := make([]float64, len(s.vari))
	prev := -1
	for range used {
		i := d.u64()
		c, m, v := d.u64(), d.f64(), d.f64()
		if d.err != nil {
			break
		}
		if i >= uint64(len(count)) || int(i) <= prev || c == 0 || !finite(m) || !(v >= 0) || math.IsInf(v, 0) {
			d.fail("bad slot record %d", i)
			break
		}
		prev = int(i)
		count[i], mean[i], vari[i] = c, m, v
	}
	if err := d.finish(); err != nil {
		return err
	}
	s.count, s.mean, s.vari = count, mean, vari
	return nil
}
