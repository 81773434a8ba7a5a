package online

import (
	"fmt"
	"math"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// The learners' canonical encodings share one layout: a four-byte magic
// naming the type, a version byte, then fixed-width little-endian fields
// written with package codec (float64 as its IEEE-754 bits, so equal
// states give equal bytes, NaN payloads included). Decoders reject wrong
// magic, versions, lengths and trailing bytes.

// Versions: 1 wrote weight vectors dense (codec F64s); 2 writes them
// sparse (codec SparseF64s: only the runs of non-zero weights, which is
// what a model over a hashed space mostly learns, so encoding, digesting
// and checkpointing it costs what was learned rather than 2^bits slots).
// Decoders read both; the scaler, already sparse, stays at 1.
const (
	denseVersion  = 1
	sparseVersion = 2
)

// newEncoder returns an encoder that has written the header of magic and
// version, with room for size more bytes.
func newEncoder(magic string, version uint8, size int) *codec.Encoder {
	return appendEncoder(nil, magic, version, size)
}

// appendEncoder is newEncoder appending to b (AppendBinary), with room
// for the header and size bytes more.
func appendEncoder(b []byte, magic string, version uint8, size int) *codec.Encoder {
	e := codec.AppendEncoder(slices.Grow(b, 5+size))
	e.RawString(magic)
	e.U8(version)
	return e
}

// newDecoder returns a decoder positioned after the header of magic, or
// holding the header's error, and the header's version, from 1 to latest;
// name is the learner's, as in finish.
func newDecoder(name, magic string, b []byte, latest uint8) (*codec.Decoder, uint8) {
	d := codec.NewDecoder(b)
	h := d.Take(5)
	switch {
	case h == nil:
		return d, 0
	case string(h[:4]) != magic:
		d.Fail("not a %s encoding (magic %q)", name, h[:4])
	case h[4] < denseVersion || h[4] > latest:
		d.Fail("unsupported version %d", h[4])
	}
	return d, h[4]
}

// readWeights reads into dst (all zero) a weight vector written by an
// encoding of version.
func readWeights(d *codec.Decoder, version uint8, dst []float64) {
	if version == denseVersion {
		d.F64sInto(dst)
		return
	}
	d.SparseF64sInto(dst)
}

// weightsSize is the room an encoder reserves for a weight vector of n
// slots: at most 4 KiB, since learned weights are sparse (a9a's
// Perceptron encodes 2^18 slots in 1.3 KB); the encoder grows when more
// is learned. Reserving for every slot would clear that much memory for
// each encoding. Over a Space (sp not nil), n is the values held, all
// of which may be written, and the room is what writeVector makes for
// them: the encoder is allocated once.
func weightsSize(sp *Space, n int) int {
	if sp != nil {
		return 32 + 12*n
	}
	return 8 + min(n, 4<<10)
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
