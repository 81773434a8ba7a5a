package onlinetest_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
	"github.com/streamlearn/streamlearn/internal/testproc"
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

func (l *tiny) Learn(x online.Vector, served online.Prediction, y int8) {
	if float64(y)*served.Score <= 0 {
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

// counting counts its predictions in its state: its Predict is not pure.
type counting struct {
	tiny
	n uint64
}

func (l *counting) Predict(x online.Vector) online.Prediction {
	l.n++
	return l.tiny.Predict(x)
}

func (l *counting) MarshalBinary() ([]byte, error) {
	b, _ := l.tiny.MarshalBinary()
	return binary.LittleEndian.AppendUint64(b, l.n), nil
}

func (l *counting) UnmarshalBinary(b []byte) error {
	if len(b) < 8 {
		return errors.New("counting: bad length")
	}
	l.n = binary.LittleEndian.Uint64(b[len(b)-8:])
	return l.tiny.UnmarshalBinary(b[:len(b)-8])
}

// remembering keeps the last score it predicted, outside its encoding, and
// learns from that rather than from the prediction served: right only when
// every label comes before the next prediction.
type remembering struct {
	tiny
	last online.Prediction
}

func (l *remembering) Predict(x online.Vector) online.Prediction {
	l.last = l.tiny.Predict(x)
	return l.last
}

func (l *remembering) Learn(x online.Vector, _ online.Prediction, y int8) {
	l.tiny.Learn(x, l.last, y)
}

// TestRunCatches runs the suite on learners that break the contract, each
// in a process of its own (the suite fails its test), and checks that it
// fails them with the check that applies.
func TestRunCatches(t *testing.T) {
	const bits = 8
	if name := os.Getenv("ONLINETEST_BROKEN"); name != "" {
		newLearner := map[string]func() online.Learner{
			"counting":    func() online.Learner { return &counting{tiny: tiny{w: make([]float64, 1<<bits)}} },
			"remembering": func() online.Learner { return &remembering{tiny: tiny{w: make([]float64, 1<<bits)}} },
		}[name]
		onlinetest.Run(t, name, newLearner, onlinetest.LinearStream(bits, 300, 10, 0.05))
		return
	}
	for name, want := range map[string]string{
		"counting":    "Predict changed the learner's encoding",
		"remembering": "predicting an extra example",
	} {
		cmd := testproc.Command(t, os.Args[0], "-test.run=^TestRunCatches$", "-test.v")
		cmd.Env = append(os.Environ(), "ONLINETEST_BROKEN="+name)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("the suite on %s: err %v, want a failure saying %q; output:\n%s", name, err, want, out)
		}
	}
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
