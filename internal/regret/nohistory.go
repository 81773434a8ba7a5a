package regret

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// WithoutHistory returns b, a tracker's MarshalBinary, without its
// history (the curves kept for the dashboard, EnableHistory): the encoding
// of the same tracker had its history not been enabled. A tracker's
// history is a record of how its counters got where they are, not part of
// what the model is, and a process keeps one only when it serves the
// dashboard. b itself is returned when it has none.
func WithoutHistory(b []byte) ([]byte, error) {
	d := codec.NewDecoder(b)
	hdr := d.Take(len(trackerMagic) + 1)
	switch {
	case hdr == nil:
		return nil, fmt.Errorf("regret: tracker: %w", d.Err())
	case string(hdr[:len(trackerMagic)]) != trackerMagic:
		return nil, fmt.Errorf("regret: not a tracker encoding (magic %q)", hdr[:len(trackerMagic)])
	case hdr[len(trackerMagic)] < 1 || hdr[len(trackerMagic)] > trackerVersion:
		return nil, fmt.Errorf("regret: tracker: unsupported format version %d (this build reads 1 to %d)", hdr[len(trackerMagic)], trackerVersion)
	}
	version := hdr[len(trackerMagic)]
	n := d.U32()
	if d.Err() == nil && uint64(n) > uint64(d.Len())/64 { // ≥ 64 bytes per learner, as decode
		return nil, fmt.Errorf("regret: tracker: %w", codec.ErrTruncated)
	}
	for range n { // the fields encodeLearners writes
		d.String(maxNameLen)
		d.String(maxNameLen)
		d.U64()
		d.U64()
		d.F64()
		d.Bool()
		d.U64()
		d.String(maxKindLen)
		d.F64()
		d.String(maxKindLen)
		d.F64()
		d.F64()
		d.String(maxKindLen)
		d.F64()
		d.U64()
		if version >= 2 {
			d.U8() // premise
		}
		if version >= 3 {
			d.U64() // default-labeled rounds, mistakes, loss
			d.U64()
			d.F64()
		}
	}
	head := len(b) - d.Len()
	if !d.Bool() {
		if err := d.Finish(); err != nil {
			return nil, fmt.Errorf("regret: tracker: %w", err)
		}
		return b, nil
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("regret: tracker: %w", err)
	}
	out := make([]byte, head+1)
	copy(out, b[:head]) // and a false "history present"
	return out, nil
}
