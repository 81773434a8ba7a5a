package learners

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

// NoParams are the parameters of an algorithm that has none.
type NoParams struct{}

func init() {
	Register(&Algorithm{
		Name:    "majority",
		Summary: "baseline: predicts the label seen most often so far (ties and the first round -1); reads no feature",
		Params:  func() any { return new(NoParams) },
		New:     func(any, Env) (online.Learner, error) { return new(Majority), nil },
	})
}

// Majority is the majority-class baseline of stream evaluation: it
// predicts the label it has learned most often (ties, the first round
// included, -1), with Score the difference of the two counts. Its 0-1 loss
// beside a learner's shows what the features add. It has no theorem.
type Majority struct {
	pos, neg uint64
}

// Predict returns the majority label so far; it changes nothing.
func (m *Majority) Predict(online.Vector) online.Prediction {
	p := online.Prediction{Label: online.Negative, Score: float64(m.pos) - float64(m.neg)}
	if m.pos > m.neg {
		p.Label = online.Positive
	}
	return p
}

// Learn counts y.
func (m *Majority) Learn(_ online.Vector, _ online.Prediction, y int8) {
	if y == online.Positive {
		m.pos++
	} else {
		m.neg++
	}
}

// Loss is the 0-1 loss.
func (m *Majority) Loss(p online.Prediction, y int8) float64 { return zeroOne(p, y) }

const (
	encodingVersion = 1
	tagMajority     = 'M'
	tagLastLabel    = 'L'
)

// MarshalBinary encodes the two counts: version, tag 'M', then the
// positive and negative counts (u64 each).
func (m *Majority) MarshalBinary() ([]byte, error) {
	e := codec.NewEncoder(18)
	e.U8(encodingVersion)
	e.U8(tagMajority)
	e.U64(m.pos)
	e.U64(m.neg)
	return e.Bytes(), nil
}

// UnmarshalBinary restores what MarshalBinary encoded; on error m is
// unchanged.
func (m *Majority) UnmarshalBinary(b []byte) error {
	d := codec.NewDecoder(b)
	if err := header(d, tagMajority); err != nil {
		return err
	}
	pos, neg := d.U64(), d.U64()
	if err := d.Finish(); err != nil {
		return fmt.Errorf("majority: %w", err)
	}
	m.pos, m.neg = pos, neg
	return nil
}

func zeroOne(p online.Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}

func header(d *codec.Decoder, tag byte) error {
	v, t := d.U8(), d.U8()
	switch {
	case d.Err() != nil:
		return fmt.Errorf("learners: %w", d.Err())
	case v != encodingVersion:
		return fmt.Errorf("learners: encoding version %d, want %d", v, encodingVersion)
	case t != tag:
		return fmt.Errorf("learners: encoding of learner %q, want %q", t, tag)
	}
	return nil
}
