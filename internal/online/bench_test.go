package online_test

import (
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// hashedStream is the benchmark workload: 256 vectors of 40 non-zeros in
// 2^18 slots (a hashed bag of words), labeled by a random halfspace, and
// stored back to back (packed).
func hashedStream() ([]online.Vector, []int8) {
	const bits, nnz, n = 18, 40, 256
	r := rand.New(rand.NewPCG(42, 42))
	u := make([]float64, 1<<bits)
	for i := range u {
		u[i] = r.NormFloat64()
	}
	xs := make([]online.Vector, n)
	ys := make([]int8, n)
	for k := range xs {
		xs[k] = onlinetest.RandomVector(r, bits, nnz)
		ys[k] = online.Positive
		if xs[k].Dot(u) < 0 {
			ys[k] = online.Negative
		}
	}
	return packed(xs), ys
}

// packed returns copies of xs stored back to back in two arrays. The
// service learns each event right after decoding it into buffers it
// reuses, so the vector is in cache; 256 vectors allocated one by one and
// cycled would instead be fetched from memory every round (their lines and
// the weights' exceed L2), a cost of the benchmark's own making (~15% of a
// Perceptron round). Packed, they stream in order, as the hardware
// prefetcher expects.
func packed(xs []online.Vector) []online.Vector {
	var n int
	for _, x := range xs {
		n += x.Len()
	}
	idx, val := make([]uint32, 0, n), make([]float64, 0, n)
	out := make([]online.Vector, len(xs))
	for k, x := range xs {
		i := len(idx)
		idx, val = append(idx, x.Idx...), append(val, x.Val...)
		out[k] = online.Vector{Idx: idx[i:len(idx):len(idx)], Val: val[i:len(val):len(val)]}
	}
	return out
}

func learners(tb testing.TB) []struct {
	name string
	l    online.Learner
} {
	mk := func(l online.Learner, err error) online.Learner {
		if err != nil {
			tb.Fatal(err)
		}
		return l
	}
	return []struct {
		name string
		l    online.Learner
	}{
		{"perceptron", mk(online.NewPerceptron(18, online.PerceptronConfig{Bias: true}))},
		{"perceptron-avg", mk(online.NewPerceptron(18, online.PerceptronConfig{Bias: true, Average: true}))},
		{"ogd-hinge", mk(online.NewOGD(18, online.OGDConfig{Loss: online.LossHinge, Eta: 0.1, Bias: true}))},
		{"ogd-logistic", mk(online.NewOGD(18, online.OGDConfig{Loss: online.LossLogistic, Eta: 0.1, Bias: true}))},
		{"ogd-logistic-ball", mk(online.NewOGD(18, online.OGDConfig{Loss: online.LossLogistic, Eta: 0.1, Radius: 10, Bias: true}))},
		{"ogd-squared-fixed", mk(online.NewOGD(18, online.OGDConfig{Loss: online.LossSquared, Eta: 0.01, Schedule: online.ScheduleFixed}))},
		{"adagrad-hinge", mk(online.NewAdaGrad(18, online.AdaGradConfig{Bias: true}))},
		{"adagrad-logistic", mk(online.NewAdaGrad(18, online.AdaGradConfig{Loss: online.LossLogistic, Bias: true}))},
		{"adagrad-hinge-plain", mk(online.NewAdaGrad(18, online.AdaGradConfig{Bias: true, Normalized: new(bool)}))},
		{"pegasos", mk(online.NewPegasos(18, online.PegasosConfig{Bias: true}))},
	}
}

// BenchmarkPredictLearn measures one round (Predict, Loss, Learn) of
// each learner on the hashed workload: ns/op is the time per event.
func BenchmarkPredictLearn(b *testing.B) {
	xs, ys := hashedStream()
	for _, tc := range learners(b) {
		b.Run(tc.name, func(b *testing.B) {
			l := tc.l
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				x, y := xs[k&255], ys[k&255]
				k++
				p := l.Predict(x)
				_ = l.Loss(p, y)
				l.Learn(x, p, y)
			}
		})
	}
}

// BenchmarkRound is a round as the pipeline plays it (Round) over the
// hashed workload's vectors, on two streams. "learned" has the workload's
// labels, which the learners fit within a few passes: after that no round
// changes the weights, as for a model that has converged. "noisy" flips
// each label with probability 0.1 (a sequence of 4,096 labels over the
// 256 vectors), so the learners keep learning: the Perceptron updates on
// ~18% of the rounds, OGD hinge steps on ~21%. steps/round is the share
// of rounds with a positive loss: for the 0-1 and hinge losses, the
// rounds that change the weights; logistic and squared change them on
// every round.
func BenchmarkRound(b *testing.B) {
	xs, ys := hashedStream()
	r := rand.New(rand.NewPCG(7, 7))
	noisy := make([]int8, 4096)
	for k := range noisy {
		noisy[k] = ys[k&255]
		if r.Float64() < 0.1 {
			noisy[k] = -noisy[k]
		}
	}
	for _, stream := range []struct {
		name   string
		labels []int8 // a power of two long
	}{{"learned", ys}, {"noisy", noisy}} {
		for _, tc := range learners(b) {
			b.Run(stream.name+"/"+tc.name, func(b *testing.B) {
				l, ok := tc.l.(online.Rounder)
				if !ok {
					b.Skip("not an online.Rounder")
				}
				ls, mask := stream.labels, len(stream.labels)-1
				for k := range 20 * len(ls) { // past the first passes
					l.Round(xs[k&255], ls[k&mask])
				}
				b.ReportAllocs()
				k, steps := 0, 0
				for b.Loop() {
					_, loss := l.Round(xs[k&255], ls[k&mask])
					k++
					if loss > 0 {
						steps++
					}
				}
				b.ReportMetric(float64(steps)/float64(b.N), "steps/round")
			})
		}
	}
}

func BenchmarkScaler(b *testing.B) {
	xs, _ := hashedStream()
	for _, kind := range []string{online.ScaleStandard, online.ScaleL2} {
		b.Run(kind, func(b *testing.B) {
			sc, _ := online.NewScaler(18, kind)
			var z online.Vector
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				sc.Transform(&z, xs[k&255])
				k++
			}
		})
	}
}

// TestHotPathAllocs: one round of every learner (its three calls, and
// Round), and the scaler, allocate nothing in steady state on the
// benchmark workload.
func TestHotPathAllocs(t *testing.T) {
	xs, ys := hashedStream()
	for _, tc := range learners(t) {
		for k := range xs {
			tc.l.Predict(xs[k])
			tc.l.Learn(xs[k], tc.l.Predict(xs[k]), ys[k])
		}
		k := 0
		n := testing.AllocsPerRun(1000, func() {
			x, y := xs[k&255], ys[k&255]
			k++
			p := tc.l.Predict(x)
			_ = tc.l.Loss(p, y)
			tc.l.Learn(x, p, y)
			if g, ok := tc.l.(online.Guaranteed); ok {
				_ = g.Guarantee()
			}
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per round", tc.name, n)
		}
		if r, ok := tc.l.(online.Rounder); ok {
			n := testing.AllocsPerRun(1000, func() {
				r.Round(xs[k&255], ys[k&255])
				k++
			})
			if n != 0 {
				t.Errorf("%s: %v allocations per Round", tc.name, n)
			}
		}
	}
}

// BenchmarkSlot measures hashing one feature name into 2^18 slots: a
// decimal name (no hash), short and medium named features and a text
// bigram, as string and as []byte (the decoders' two paths).
func BenchmarkSlot(b *testing.B) {
	m := online.Mask(18)
	for _, tc := range []struct{ name, s string }{
		{"decimal", "1234567"},
		{"short", "len"},
		{"medium", "sender=bulk.example"},
		{"long", "the quick brown fox jumps over the lazy dog"},
	} {
		b.Run(tc.name+"/string", func(b *testing.B) {
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += online.Slot(tc.s, m)
			}
			_ = sink
		})
		bs := []byte(tc.s)
		b.Run(tc.name+"/bytes", func(b *testing.B) {
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += online.Slot(bs, m)
			}
			_ = sink
		})
	}
}
