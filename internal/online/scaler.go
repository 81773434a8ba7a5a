package online

import (
	"fmt"
	"iter"
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
// A sparse Scaler (NewSparseScaler) reads the same hashed vectors and
// holds statistics for the slots it met only, in the numbers of a Space;
// it is the dense one bit for bit, its encoding included.
//
// A Scaler is not safe for concurrent use; its methods do not retain x or
// dst.
type Scaler struct {
	kind   string
	bits   uint
	events uint64      // standard: the events observed
	stats  []slotStats // standard: per slot (per number over a Space), the three statistics side by side
	sp     *Space      // a sparse scaler's, nil for a dense one
	local  []uint32    // a sparse scaler's scratch: x's slots in sp's numbers
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
	s, err := newScaler(bits, kind)
	if err != nil {
		return nil, err
	}
	if s.kind == ScaleStandard {
		s.stats = make([]slotStats, 1<<bits)
	}
	return s, nil
}

// NewSparseScaler returns a Scaler of the given kind over sp's hashed
// slots that keeps statistics for the slots it observes only, in sp's
// numbers (numbering them): it reads and writes hashed vectors, as the
// dense one. sp may be the Space of the model the scaler feeds, which
// meets those slots anyway.
func NewSparseScaler(sp *Space, kind string) (*Scaler, error) {
	s, err := newScaler(sp.bits, kind)
	if err != nil {
		return nil, err
	}
	s.sp = sp
	return s, nil
}

// newScaler returns a Scaler with no statistics yet.
func newScaler(bits uint, kind string) (*Scaler, error) {
	s := &Scaler{kind: kind, bits: bits}
	switch kind {
	case "":
		s.kind = ScaleNone
	case ScaleNone, ScaleL2, ScaleStandard:
	default:
		return nil, fmt.Errorf("scaler: unknown kind %q (want none, standard or l2)", kind)
	}
	return s, nil
}

// Space returns the Space of a sparse Scaler, nil for a dense one.
func (s *Scaler) Space() *Space { return s.sp }

// Bytes returns the bytes of s's statistics and scratch (Sizer).
func (s *Scaler) Bytes() int {
	return 24*cap(s.stats) + 4*cap(s.local) // a slotStats is 24 bytes
}

// numbers returns where the statistics of the slots idx are, in their
// order: idx for a dense scaler (which pays a nil check, inlined); for a
// sparse one their numbers (spaceNumbers).
func (s *Scaler) numbers(idx []uint32, observe bool) []uint32 {
	if s.sp == nil {
		return idx
	}
	return s.spaceNumbers(idx, observe)
}

// spaceNumbers returns the numbers of the slots idx in a sparse scaler's
// space, given now to the slots it has not met when observe, else 0 for
// those (a number that never has statistics: the bias's), and makes room
// in the statistics for every number. The result is valid until the next
// call.
func (s *Scaler) spaceNumbers(idx []uint32, observe bool) []uint32 {
	s.local = s.local[:0]
	for _, i := range idx {
		if i>>s.sp.bits != 0 {
			panic(fmt.Sprintf("online: slot %d of a space of 2^%d", i, s.sp.bits))
		}
		n, ok := s.sp.index.find(i)
		if !ok && observe {
			n = s.sp.add(i)
		}
		s.local = append(s.local, n)
	}
	for len(s.stats) < s.sp.Len() {
		s.stats = append(s.stats, slotStats{})
	}
	return s.local
}

// Kind returns the scaler's kind.
func (s *Scaler) Kind() string { return s.kind }

// Transform updates the statistics with x (Observe) and writes the scaled x
// into dst (Scale), reusing dst's slices: it allocates only while they
// grow. dst gets x's indices, so it is canonical when x is.
func (s *Scaler) Transform(dst *Vector, x Vector) { s.transform(dst, x, nil) }

// TransformMapped is Transform of x by a sparse Scaler, given num, the
// numbers of x's slots in its space (the indices Space.Map of x wrote):
// for a pipeline that maps each event for its sparse learners anyway, so
// that the slots are looked up once, not twice. A dense Scaler ignores
// num.
func (s *Scaler) TransformMapped(dst *Vector, x Vector, num []uint32) {
	if s.sp == nil || len(num) != len(x.Idx) {
		num = nil
	}
	s.transform(dst, x, num)
}

// transform is Transform, with x's numbers num when not nil.
func (s *Scaler) transform(dst *Vector, x Vector, num []uint32) {
	if s.kind != ScaleStandard || !increasing(x.Idx) {
		s.Observe(x)
		s.Scale(dst, x)
		return
	}
	// Every slot occurs once: observing and scaling slot by slot in one
	// pass is the same as observing all of x, then scaling.
	s.events++
	idx := num
	if idx == nil {
		idx = s.numbers(x.Idx, true) // as long as x.Idx
	} else {
		for len(s.stats) < s.sp.Len() {
			s.stats = append(s.stats, slotStats{})
		}
	}
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	val := dst.Val[:len(idx)]
	for k, i := range idx {
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
	idx := s.numbers(x.Idx, true)
	val := x.Val[:len(idx)]
	for k, i := range idx {
		s.stats[i].observe(val[k])
	}
}

// Scale writes the scaled x into dst without updating the statistics.
func (s *Scaler) Scale(dst *Vector, x Vector) {
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val...)
	switch s.kind {
	case ScaleStandard:
		idx := s.numbers(x.Idx, false)
		val := dst.Val[:len(idx)]
		for k, i := range idx {
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
	if s.sp != nil {
		n, ok := s.sp.index.find(i)
		if !ok || int(n) >= len(s.stats) {
			return 0, 0, 0
		}
		i = n
	}
	st := s.stats[i]
	return st.count, st.mean, st.vari
}

// observed yields the slot and statistics of every slot observed, in
// increasing slot order.
func (s *Scaler) observed() iter.Seq2[int, *slotStats] {
	return func(yield func(int, *slotStats) bool) {
		if s.sp == nil {
			for i := range s.stats {
				if st := &s.stats[i]; st.count != 0 && !yield(i, st) {
					return
				}
			}
			return
		}
		for k, slot := range s.sp.inOrder(len(s.stats)) {
			if st := &s.stats[k]; st.count != 0 && !yield(slot, st) {
				return
			}
		}
	}
}

// slots is the number of slots a scaler may hold statistics for: 2^bits
// for standard, 0 for the others.
func (s *Scaler) slots() int {
	if s.kind != ScaleStandard {
		return 0
	}
	return 1 << s.bits
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
	for range s.observed() {
		used++
	}
	e := newEncoder(scalerMagic, scalerEventsVersion, 40+len(s.kind)+used*32)
	e.String(s.kind)
	e.U64(uint64(s.bits))
	e.U64(s.events)
	e.U64(uint64(used))
	for i, st := range s.observed() {
		e.U64(uint64(i))
		e.U64(st.count)
		e.F64(st.mean)
		e.F64(st.vari)
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
	used, n := d.U64(), s.slots()
	if d.Err() == nil && used > uint64(n) {
		d.Fail("%d observed slots in a space of %d", used, n)
	}
	if d.Err() != nil {
		return finish("scaler", d)
	}
	var stats []slotStats
	if s.sp == nil {
		stats = make([]slotStats, n)
	}
	prev := -1
	for range used {
		i := d.U64()
		c, m, v := d.U64(), d.F64(), d.F64()
		if d.Err() != nil {
			break
		}
		if i >= uint64(n) || int(i) <= prev || c == 0 || !finite(m) || !(v >= 0) || math.IsInf(v, 0) {
			d.Fail("bad slot record %d", i)
			break
		}
		prev = int(i)
		j := int(i)
		if s.sp != nil {
			j = int(s.sp.number(uint32(i)))
			for len(stats) <= j {
				stats = append(stats, slotStats{})
			}
		}
		stats[j] = slotStats{count: c, mean: m, vari: v}
		if version < scalerEventsVersion {
			events = max(events, c)
		}
	}
	if err := finish("scaler", d); err != nil {
		return err
	}
	s.stats, s.events = stats, events
	if s.sp != nil && s.kind == ScaleStandard {
		s.numbers(nil, false) // room for every number
	}
	return nil
}
