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
//   - "standard" maps v to (v - mean)/sd, or to 0 while sd is 0, with the
//     mean and population variance of the slot over every event observed so
//     far, a feature missing from an event counting as a 0 there. A missing
//     feature stays 0 (rather than -mean/sd), so that sparse vectors stay
//     sparse. The statistics are updated with x before x is transformed
//     ("updated before use"), so the first value seen at a slot that has
//     been present in every event maps to 0;
//   - "l2" maps x to x/‖x‖ (the zero vector to itself) and keeps no state.
//
// Each slot keeps the count, mean and variance of the values present at
// it, by Welford's update in the form River's
// preprocessing.StandardScaler uses (mean += (v-mean)/n;
// var += ((v-mean_old)(v-mean_new) - var)/n), and the scaler counts the
// events. A slot present in every event (dense data, a CSV row) is scaled
// with those statistics as they are, so that it agrees with River to the
// last bit. A slot present in k of N events folds in the N - k zeros: with
// f = k/N, mean_N = f·mean_k and var_N = f·(var_k + mean_k²·(1 - f)).
// Without them, a sparse 0/1 feature (LIBSVM, text, a JSON map that leaves
// out its zeros) would have the value 1 every time it is seen, a variance
// of 0, and every event would scale to the zero vector.
//
// A Scaler is not safe for concurrent use; its methods do not retain x or
// dst.
type Scaler struct {
	kind   string
	bits   uint
	events uint64      // standard: the events observed
	stats  []slotStats // standard: per slot, the three statistics side by side
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

// scale returns v standardized with st after events events: (v -
// mean)/sd, 0 while sd is 0.
func (st *slotStats) scale(v float64, events uint64) float64 {
	return StandardScale(v, st.count, st.mean, st.vari, events)
}

// StandardScale returns v standardized with the statistics of a slot
// whose values were present in count of events events, with mean and
// population variance vari (see Scaler): (v - mean)/sd over every event,
// a missing value counting as 0; 0 while sd is 0. A count of events or
// more (a slot given twice in one vector counts twice) is a slot present
// in every event.
func StandardScale(v float64, count uint64, mean, vari float64, events uint64) float64 {
	if count < events {
		f := float64(count) / float64(events)
		mean, vari = f*mean, f*(vari+float64(mean*mean*(1-f)))
	}
	if sd := math.Sqrt(vari); sd != 0 {
		return (v - mean) / sd
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
	s.events++
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	val := dst.Val[:len(dst.Idx)]
	for k, i := range dst.Idx {
		st := &s.stats[i]
		st.observe(val[k])
		val[k] = st.scale(val[k], s.events)
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

// Observe counts the event x and adds its values to the running
// statistics of their slots (a no-op unless the kind is standard).
func (s *Scaler) Observe(x Vector) {
	if s.kind != ScaleStandard {
		return
	}
	s.events++
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
			val[k] = s.stats[i].scale(val[k], s.events)
		}
	case ScaleL2:
		if n := x.Norm(); n != 0 {
			for k := range dst.Val {
				dst.Val[k] /= n
			}
		}
	}
}

// Events returns the number of events observed (0 unless the kind is
// standard).
func (s *Scaler) Events() uint64 { return s.events }

// Stats returns the count, mean and population variance of the values
// present at slot i (zeros unless the kind is standard).
func (s *Scaler) Stats(i uint32) (n uint64, mean, variance float64) {
	if s.kind != ScaleStandard {
		return 0, 0, 0
	}
	st := s.stats[i]
	return st.count, st.mean, st.vari
}

const scalerMagic = "SLSC"

// scalerEventsVersion is the encoding with the count of events. Version 1
// has none: a version 1 state restores with the largest count of a slot,
// exact when some feature was present in every event.
const scalerEventsVersion = 2

// MarshalBinary encodes the kind, the bits, the events observed and, for
// standard, the statistics of every observed slot in increasing slot
// order.
func (s *Scaler) MarshalBinary() ([]byte, error) {
	used := 0
	for i := range s.stats {
		if s.stats[i].count != 0 {
			used++
		}
	}
	e := newEncoder(scalerMagic, scalerEventsVersion, 40+len(s.kind)+used*32)
	e.String(s.kind)
	e.U64(uint64(s.bits))
	e.U64(s.events)
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
	d, version := newDecoder("scaler", scalerMagic, b, scalerEventsVersion)
	kind := d.String(16)
	bits := d.U64()
	if d.Err() == nil && (kind != s.kind || bits != uint64(s.bits)) {
		d.Fail("encoding is of a %q scaler over %d bits, not %q over %d", kind, bits, s.kind, s.bits)
	}
	var events uint64
	if version >= scalerEventsVersion {
		events = d.U64()
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
		if version < scalerEventsVersion {
			events = max(events, c)
		}
	}
	if err := finish("scaler", d); err != nil {
		return err
	}
	s.stats, s.events = stats, events
	return nil
}
