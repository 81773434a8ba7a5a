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
	stats []slotStats // standard: per slot, the three statistics side by side
}

// slotStats are the running statistics of one slot.
type slotStats struct {
	count uint64  // observations
	mean  float64 // running mean
	vari  float64 // running population variance
}

// observe adds v to st (Welford, River's rounding: see Scaler).
func (st *slotStats) observe(v float64) {
	st.count++
	n := float64(st.count)
	old := st.mean
	st.mean = old + (v-old)/n
	st.vari += (float64((v-old)*(v-st.mean)) - st.vari) / n
}

// scale returns v standardized with st: (v - mean)/sd, 0 while sd is 0.
func (st *slotStats) scale(v float64) float64 {
	if sd := math.Sqrt(st.vari); sd != 0 {
		return (v - st.mean) / sd
	}
	return 0
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
		s.stats = make([]slotStats, 1<<bits)
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
	if s.kind != ScaleStandard || !increasing(x.Idx) {
		s.Observe(x)
		s.Scale(dst, x)
		return
	}
	// Every slot occurs once: observing and scaling slot by slot in one
	// pass is the same as observing all of x, then scaling.
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	val := dst.Val[:len(dst.Idx)]
	for k, i := range dst.Idx {
		st := &s.stats[i]
		st.observe(val[k])
		val[k] = st.scale(val[k])
	}
}

// increasing reports whether idx is strictly increasing.
func increasing(idx []uint32) bool {
	for k := 1; k < len(idx); k++ {
		if idx[k] <= idx[k-1] {
			return false
		}
	}
	return true
}

// Observe adds the values of x to the running statistics of their slots
// (a no-op unless the kind is standard).
func (s *Scaler) Observe(x Vector) {
	if s.kind != ScaleStandard {
		return
	}
	val := x.Val[:len(x.Idx)]
	for k, i := range x.Idx {
		s.stats[i].observe(val[k])
	}
}

// Scale writes the scaled x into dst without updating the statistics.
func (s *Scaler) Scale(dst *Vector, x Vector) {
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	switch s.kind {
	case ScaleStandard:
		val := dst.Val[:len(dst.Idx)]
		for k, i := range dst.Idx {
			val[k] = s.stats[i].scale(val[k])
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
	st := s.stats[i]
	return st.count, st.mean, st.vari
}

const scalerMagic = "SLSC"

// MarshalBinary encodes the kind, the bits and, for standard, the
// statistics of every observed slot in increasing slot order.
func (s *Scaler) MarshalBinary() ([]byte, error) {
	used := 0
	for i := range s.stats {
		if s.stats[i].count != 0 {
			used++
		}
	}
	e := newEncoder(scalerMagic, denseVersion, 32+len(s.kind)+used*32)
	e.String(s.kind)
	e.U64(uint64(s.bits))
	e.U64(uint64(used))
	for i := range s.stats {
		if st := &s.stats[i]; st.count != 0 {
			e.U64(uint64(i))
			e.U64(st.count)
			e.F64(st.mean)
			e.F64(st.vari)
		}
	}
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary; the kind and
// bits must match the receiver's.
func (s *Scaler) UnmarshalBinary(b []byte) error {
	d, _ := newDecoder("scaler", scalerMagic, b, denseVersion)
	kind := d.String(16)
	bits := d.U64()
	if d.Err() == nil && (kind != s.kind || bits != uint64(s.bits)) {
		d.Fail("encoding is of a %q scaler over %d bits, not %q over %d", kind, bits, s.kind, s.bits)
	}
	used := d.U64()
	if d.Err() == nil && used > uint64(len(s.stats)) {
		d.Fail("%d observed slots in a space of %d", used, len(s.stats))
	}
	if d.Err() != nil {
		return finish("scaler", d)
	}
	stats := make([]slotStats, len(s.stats))
	prev := -1
	for range used {
		i := d.U64()
		c, m, v := d.U64(), d.F64(), d.F64()
		if d.Err() != nil {
			break
		}
		if i >= uint64(len(stats)) || int(i) <= prev || c == 0 || !finite(m) || !(v >= 0) || math.IsInf(v, 0) {
			d.Fail("bad slot record %d", i)
			break
		}
		prev = int(i)
		stats[i] = slotStats{count: c, mean: m, vari: v}
	}
	if err := finish("scaler", d); err != nil {
		return err
	}
	s.stats = stats
	return nil
}
