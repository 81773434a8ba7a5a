package online

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The learners' canonical encodings share one layout: a four-byte magic
// naming the type, a version byte, then fixed-width little-endian fields
// (float64 as its IEEE-754 bits, so equal states give equal bytes, NaN
// payloads included). Decoders reject wrong magic, versions, lengths and
// trailing bytes.

const codecVersion = 1

// encoder appends fields to b.
type encoder struct{ b []byte }

func newEncoder(magic string, size int) *encoder {
	e := &encoder{b: make([]byte, 0, 5+size)}
	e.b = append(e.b, magic...)
	e.b = append(e.b, codecVersion)
	return e
}

func (e *encoder) u8(v uint8)    { e.b = append(e.b, v) }
func (e *encoder) u64(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) f64(v float64) { e.u64(math.Float64bits(v)) }
func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) f64s(v []float64) {
	e.u64(uint64(len(v)))
	for _, x := range v {
		e.f64(x)
	}
}

var errShort = errors.New("truncated encoding")

// decoder reads fields from b; the first error sticks.
type decoder struct {
	name string
	b    []byte
	err  error
}

func newDecoder(name, magic string, b []byte) *decoder {
	d := &decoder{name: name, b: b}
	if len(b) < 5 {
		d.err = errShort
		return d
	}
	if string(b[:4]) != magic {
		d.err = fmt.Errorf("not a %s encoding (magic %q)", name, b[:4])
		return d
	}
	if b[4] != codecVersion {
		d.err = fmt.Errorf("unsupported version %d", b[4])
		return d
	}
	d.b = b[5:]
	return d
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = errShort
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bad boolean")
		return false
	}
}

func (d *decoder) str(max int) string {
	n := d.u64()
	if d.err == nil && n > uint64(max) {
		d.fail("string of %d bytes", n)
	}
	return string(d.take(int(n)))
}

// f64sInto reads a float64 slice that must have exactly len(dst) elements.
func (d *decoder) f64sInto(dst []float64) {
	if n := d.u64(); d.err == nil && n != uint64(len(dst)) {
		d.fail("vector of %d values, want %d", n, len(dst))
	}
	p := d.take(8 * len(dst))
	if p == nil {
		return
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
	}
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// finish reports the first error, or trailing bytes.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%s: unmarshal: %w", d.name, d.err)
	}
	return nil
}

func checkBits(name string, bits uint) error {
	if bits > MaxBits {
		return fmt.Errorf("%s: bits %d exceeds the maximum %d", name, bits, MaxBits)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
