package onlinetest_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// tiny is a minimal conforming learner: a Perceptron over 2^bits slots
// with a trivial fixed-size encoding.
type tiny struct{ w []float64 }

func (l *tiny) Predict(x online.Vector) online.Prediction {
	s := x.Dot(l.w)
	if s > 0 {
		return online.Prediction{Label: online.Positive, Score: s}
	}
	return online.Prediction{Label: online.Negative, Score: s}
}

func (l *tiny) Update(x online.Vector, y int8) {
	if float64(y)*x.Dot(l.w) <= 0 {
		for k, i := range x.Idx {
			l.w[i] += float64(y) * x.Val[k]
		}
	}
}

func (l *tiny) Loss(p online.Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}

func (l *tiny) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 8*len(l.w))
	for _, v := range l.w {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b, nil
}

func (l *tiny) UnmarshalBinary(b []byte) error {
	if len(b) != 8*len(l.w) {
		return errors.New("tiny: bad length")
	}
	for i := range l.w {
		l.w[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return nil
}

func TestRunTiny(t *testing.T) {
	const bits = 8
	onlinetest.Run(t, "tiny", func() online.Learner { return &tiny{w: make([]float64, 1<<bits)} },
		onlinetest.LinearStream(bits, 300, 10, 0.05))
}

func TestRandomVector(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		bits uint
		nnz  int
		want int
	}{{18, 40, 40}, {4, 10, 10}, {3, 20, 8}, {0, 1, 1}, {10, 0, 0}} {
		for range 50 {
			x := onlinetest.RandomVector(r, tc.bits, tc.nnz)
			if x.Len() != tc.want || len(x.Val) != tc.want {
				t.Fatalf("bits %d nnz %d: got %d entries, want %d", tc.bits, tc.nnz, x.Len(), tc.want)
			}
			for k, i := range x.Idx {
				if i >= 1<<tc.bits || (k > 0 && i <= x.Idx[k-1]) {
					t.Fatalf("bits %d: Idx %v not canonical in the space", tc.bits, x.Idx)
				}
				if v := x.Val[k]; v < -1 || v >= 1 {
					t.Fatalf("value %v out of [-1,1)", v)
				}
			}
		}
	}
}
