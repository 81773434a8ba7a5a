package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrTruncated is the error of a read past the end of the encoding.
var ErrTruncated = errors.New("truncated encoding")

// Encoder appends little-endian fields to a byte slice. The zero value is
// ready to use.
type Encoder struct{ b []byte }

// NewEncoder returns an Encoder whose buffer has room for size bytes.
func NewEncoder(size int) *Encoder { return &Encoder{b: make([]byte, 0, size)} }

// AppendEncoder returns an Encoder that appends to b: b's bytes stay
// first, and its room past them is used before any allocation.
func AppendEncoder(b []byte) *Encoder { return &Encoder{b: b} }

// Bytes returns the encoding written so far. It aliases the Encoder's
// buffer until the next write.
func (e *Encoder) Bytes() []byte { return e.b }

// Raw appends p verbatim.
func (e *Encoder) Raw(p []byte) { e.b = append(e.b, p...) }

// RawString appends the bytes of s verbatim, with no length prefix.
func (e *Encoder) RawString(s string) { e.b = append(e.b, s...) }

// U8 appends one byte.
func (e *Encoder) U8(v uint8) { e.b = append(e.b, v) }

// U32 appends v in 4 bytes.
func (e *Encoder) U32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }

// U64 appends v in 8 bytes.
func (e *Encoder) U64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

// F64 appends the IEEE-754 bits of v in 8 bytes.
func (e *Encoder) F64(v float64) { e.U64(math.Float64bits(v)) }

// Bool appends 1 for true, 0 for false.
func (e *Encoder) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}

// String appends len(s) as a uint64, then the bytes of s.
func (e *Encoder) String(s string) {
	e.U64(uint64(len(s)))
	e.b = append(e.b, s...)
}

// F64s appends len(v) as a uint64, then each element as F64 does.
func (e *Encoder) F64s(v []float64) {
	e.U64(uint64(len(v)))
	for _, x := range v {
		e.F64(x)
	}
}

// SparseF64s appends len(v) as a uint64, then v as runs: each run is the
// number of zero values before it (uint32), the number of values in it
// (uint32) and those values as F64 does, until the runs and the zeros
// between them cover v; trailing zeros are a last run of no values. Zero
// is +0 (all bits clear): -0 and NaN payloads are values. Runs are
// maximal, so equal vectors give equal bytes. A model's weights over a
// hashed feature space are mostly zero unless the stream is wide: this
// writes (and a digest reads) the part that was learned, and never more
// than 8 bytes beyond F64s. len(v) must be below 2^32.
func (e *Encoder) SparseF64s(v []float64) {
	e.U64(uint64(len(v)))
	pos := 0
	for pos < len(v) {
		i := skipZeros(v, pos)
		j := i
		for j < len(v) && math.Float64bits(v[j]) != 0 {
			j++
		}
		e.U32(uint32(i - pos))
		e.U32(uint32(j - i))
		for _, x := range v[i:j] {
			e.F64(x)
		}
		pos = j
	}
}

// SparseEntries appends what SparseF64s appends for a vector of n values
// that is zero but at the positions pos, strictly increasing and below n,
// where it holds vals (a +0 of vals is a zero like the others). A model
// that keeps only the slots it met writes with it the bytes the same
// model kept dense writes, in time proportional to its entries rather
// than to n.
func (e *Encoder) SparseEntries(n int, pos []int, vals []float64) {
	r := e.Sparse(n)
	for k, i := range pos {
		r.Add(i, vals[k])
	}
	r.End()
}

// SparseRuns writes what SparseEntries writes an entry at a time, with
// no slices of the entries: Encoder.Sparse begins it, Add gives each
// entry, at strictly increasing positions below n, and End ends it.
type SparseRuns struct {
	e    *Encoder
	n    int
	at   int // the positions before at are written
	mark int // where the open run's count goes; -1 when no run is open
	run  uint32
}

// Sparse appends n and returns the writer of the runs that follow.
func (e *Encoder) Sparse(n int) SparseRuns {
	e.U64(uint64(n))
	return SparseRuns{e: e, n: n, mark: -1}
}

// Add writes the entry v at position i (a +0 is a zero like the others).
func (r *SparseRuns) Add(i int, v float64) {
	switch {
	case math.Float64bits(v) == 0:
		r.close()
	case r.mark >= 0 && i == r.at:
		r.e.F64(v)
		r.run++
		r.at++
	default:
		r.close()
		r.e.U32(uint32(i - r.at))
		r.mark = len(r.e.b)
		r.e.U32(0) // the count, once the run ends
		r.e.F64(v)
		r.run, r.at = 1, i+1
	}
}

// close writes the open run's count.
func (r *SparseRuns) close() {
	if r.mark >= 0 {
		binary.LittleEndian.PutUint32(r.e.b[r.mark:], r.run)
		r.mark = -1
	}
}

// End writes the last run's count and the zeros after it.
func (r *SparseRuns) End() {
	r.close()
	if r.at < r.n {
		r.e.U32(uint32(r.n - r.at))
		r.e.U32(0)
	}
}

// Grow makes room for n more bytes.
func (e *Encoder) Grow(n int) { e.b = slices.Grow(e.b, n) }

// skipZeros returns the index of the first value of v from i on that is
// not +0, or len(v); it looks at four values at a time, since most of a
// wide vector is zero.
func skipZeros(v []float64, i int) int {
	for ; i+4 <= len(v); i += 4 {
		if math.Float64bits(v[i])|math.Float64bits(v[i+1])|math.Float64bits(v[i+2])|math.Float64bits(v[i+3]) != 0 {
			break
		}
	}
	for i < len(v) && math.Float64bits(v[i]) == 0 {
		i++
	}
	return i
}

// Blob appends len(p) as a uint64, then p: an embedded encoding, such as a
// learner's MarshalBinary inside a pipeline's.
func (e *Encoder) Blob(p []byte) {
	e.U64(uint64(len(p)))
	e.b = append(e.b, p...)
}

// Decoder reads little-endian fields from a byte slice. The first error
// sticks: every later read returns a zero value (nil for Take) and leaves
// the error in place.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder reading b from its start.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Len returns the number of unread bytes (0 after an error).
func (d *Decoder) Len() int { return len(d.b) }

// Take returns the next n bytes, aliasing the input, or nil (setting
// ErrTruncated) when fewer remain.
func (d *Decoder) Take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = ErrTruncated
		d.b = nil
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

// U8 reads one byte.
func (d *Decoder) U8() uint8 {
	if p := d.Take(1); p != nil {
		return p[0]
	}
	return 0
}

// U32 reads a 4-byte unsigned integer.
func (d *Decoder) U32() uint32 {
	if p := d.Take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

// U64 reads an 8-byte unsigned integer.
func (d *Decoder) U64() uint64 {
	if p := d.Take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// F64 reads a float64 from its 8-byte IEEE-754 bits.
func (d *Decoder) F64() float64 { return math.Float64frombits(d.U64()) }

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	switch d.U8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.Fail("bad boolean")
		return false
	}
}

// String reads a string written by Encoder.String, failing when it is
// longer than max bytes.
func (d *Decoder) String(max int) string {
	n := d.U64()
	if d.err == nil && n > uint64(max) {
		d.Fail("string of %d bytes", n)
	}
	return string(d.Take(int(n)))
}

// Blob reads bytes written by Encoder.Blob. The result aliases the input;
// a length past the end of the input sets ErrTruncated (it never
// allocates the claimed length).
func (d *Decoder) Blob() []byte {
	n := d.U64()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = ErrTruncated
		d.b = nil
		return nil
	}
	return d.Take(int(n))
}

// F64sInto reads a slice written by Encoder.F64s into dst; the encoded
// length must be exactly len(dst).
func (d *Decoder) F64sInto(dst []float64) {
	if n := d.U64(); d.err == nil && n != uint64(len(dst)) {
		d.Fail("vector of %d values, want %d", n, len(dst))
	}
	p := d.Take(8 * len(dst))
	if p == nil {
		return
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
	}
}

// SparseF64sInto reads a vector written by Encoder.SparseF64s into dst,
// which must be all zero; the encoded length must be exactly len(dst), and
// the runs canonical (maximal, each but the last holding values, none
// holding a zero).
func (d *Decoder) SparseF64sInto(dst []float64) {
	d.SparseF64sEach(len(dst), func(i int, v float64) { dst[i] = v })
}

// SparseF64sEach reads a vector of n values written by
// Encoder.SparseF64s (or SparseEntries), calling f with the position and
// value of each value that is not +0, in increasing positions. The
// encoded length must be exactly n, and the runs canonical, as for
// SparseF64sInto; on a fault f may have been called for the values
// before it.
func (d *Decoder) SparseF64sEach(n int, f func(i int, v float64)) {
	if m := d.U64(); d.err == nil && m != uint64(n) {
		d.Fail("vector of %d values, want %d", m, n)
	}
	pos := 0
	for d.err == nil && pos < n {
		gap, count := uint64(d.U32()), uint64(d.U32())
		rest := uint64(n - pos)
		switch {
		case d.err != nil:
			return
		case gap > rest || count > rest-gap:
			d.Fail("run of %d values after %d zeros at %d of %d", count, gap, pos, n)
			return
		case gap == 0 && pos > 0, count == 0 && gap != rest:
			d.Fail("run at %d of %d is not canonical", pos, n)
			return
		}
		pos += int(gap)
		p := d.Take(8 * int(count))
		if p == nil {
			return
		}
		for i := range int(count) {
			bits := binary.LittleEndian.Uint64(p[8*i:])
			if bits == 0 {
				d.Fail("zero inside a run at %d", pos+i)
				return
			}
			f(pos+i, math.Float64frombits(bits))
		}
		pos += int(count)
	}
}

// Fail records fmt.Errorf(format, args...) unless an error is already
// recorded.
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// Finish returns the first error or, when every read succeeded but bytes
// remain unread, an error counting them. Callers wrap it with the name of
// what they decode.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return d.err
}
