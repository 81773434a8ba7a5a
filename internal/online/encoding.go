package online

import (
	"fmt"
	"math"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// The learners' canonical encodings share one layout: a four-byte magic
// naming the type, a version byte, then fixed-width little-endian fields
// written with package codec (float64 as its IEEE-754 bits, so equal
// states give equal bytes, NaN payloads included). Decoders reject wrong
// magic, versions, lengths and trailing bytes.

const codecVersion = 1

// newEncoder returns an encoder that has written the header of magic,
// with room for size more bytes.
func newEncoder(magic string, size int) *codec.Encoder {
	e := codec.NewEncoder(5 + size)
	e.RawString(magic)
	e.U8(codecVersion)
	return e
}

// newDecoder returns a decoder positioned after the header of magic, or
// holding the header's error; name is the learner's, as in finish.
func newDecoder(name, magic string, b []byte) *codec.Decoder {
	d := codec.NewDecoder(b)
	h := d.Take(5)
	switch {
	case h == nil:
	case string(h[:4]) != magic:
		d.Fail("not a %s encoding (magic %q)", name, h[:4])
	case h[4] != codecVersion:
		d.Fail("unsupported version %d", h[4])
	}
	return d
}

// finish reports d's first error, or trailing bytes, prefixed with name.
func finish(name string, d *codec.Decoder) error {
	if err := d.Finish(); err != nil {
		return fmt.Errorf("%s: unmarshal: %w", name, err)
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
