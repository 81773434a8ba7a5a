package learners

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

func init() {
	Register(&Algorithm{
		Name:    "last-label",
		Summary: "baseline: predicts the label it learned last (the first round -1); reads no feature",
		Params:  func() any { return new(NoParams) },
		New:     func(any, Env) (online.Learner, error) { return &LastLabel{last: online.Negative}, nil },
	})
}

// LastLabel is the persistence baseline of stream evaluation (the
// "no-change" classifier): it predicts the last label it learned, -1
// before the first, with Score ±1. On a stream whose labels come in runs
// (concept drift, Elec2) it is hard to beat. It has no theorem.
type LastLabel struct {
	last int8
}

// Predict returns the last label learned; it changes nothing.
func (l *LastLabel) Predict(online.Vector) online.Prediction {
	return online.Prediction{Label: l.last, Score: float64(l.last)}
}

// Learn remembers y.
func (l *LastLabel) Learn(_ online.Vector, _ online.Prediction, y int8) {
	l.last = online.Negative
	if y == online.Positive {
		l.last = online.Positive
	}
}

// Loss is the 0-1 loss.
func (l *LastLabel) Loss(p online.Prediction, y int8) float64 { return zeroOne(p, y) }

// MarshalBinary encodes the last label: version, tag 'L', then the label
// (one byte, +1 or -1 as two's complement).
func (l *LastLabel) MarshalBinary() ([]byte, error) {
	e := codec.NewEncoder(3)
	e.U8(encodingVersion)
	e.U8(tagLastLabel)
	e.U8(uint8(l.last))
	return e.Bytes(), nil
}

// UnmarshalBinary restores what MarshalBinary encoded; on error l is
// unchanged.
func (l *LastLabel) UnmarshalBinary(b []byte) error {
	d := codec.NewDecoder(b)
	if err := header(d, tagLastLabel); err != nil {
		return err
	}
	y := int8(d.U8())
	if err := d.Finish(); err != nil {
		return fmt.Errorf("last-label: %w", err)
	}
	if y != online.Positive && y != online.Negative {
		return fmt.Errorf("last-label: label %d, want ±1", y)
	}
	l.last = y
	return nil
}
