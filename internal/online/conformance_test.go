package online_test

import (
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// makers are a learner configuration's constructors: dense, and sparse
// over a Space when the learner has one.
type makers struct {
	dense  func() online.Learner
	sparse func(*online.Space) online.Learner
}

// must returns l, failing t on err.
func must[L online.Learner](t *testing.T) func(l L, err error) online.Learner {
	return func(l L, err error) online.Learner {
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// linear returns the constructors of each learner configuration of this
// package the conformance tests cover, by name.
func linear(t *testing.T, bits uint) map[string]makers {
	ls := map[string]makers{}
	for _, cfg := range []online.PerceptronConfig{
		{},
		{Bias: true},
		{Average: true},
		{Bias: true, Average: true},
		{Margin: 0.1, Bias: true},
	} {
		ls[fmt.Sprintf("perceptron%+v", cfg)] = makers{
			func() online.Learner { return must[*online.Perceptron](t)(online.NewPerceptron(bits, cfg)) },
			func(s *online.Space) online.Learner {
				return must[*online.Perceptron](t)(online.NewSparsePerceptron(s, cfg))
			},
		}
	}
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, cfg := range []online.OGDConfig{
			{Eta: 0.1},
			{Eta: 0.5, Schedule: online.ScheduleFixed, Bias: true},
			{Eta: 1, Radius: 0.5, Bias: true},
			{Eta: 0.1, Schedule: online.ScheduleFixed, Bias: true, BiasEta: 0.01},
		} {
			cfg.Loss = loss
			ls[fmt.Sprintf("ogd%+v", cfg)] = makers{
				func() online.Learner { return must[*online.OGD](t)(online.NewOGD(bits, cfg)) },
				func(s *online.Space) online.Learner { return must[*online.OGD](t)(online.NewSparseOGD(s, cfg)) },
			}
		}
	}
	two := 2.0
	for _, cfg := range []online.KernelPerceptronConfig{
		{},
		{Degree: 3, Coef: &two, Margin: 0.5},
		{Kernel: online.KernelGaussian, Sigma: 2},
		{Kernel: online.KernelGaussian, MaxSupport: 16},
		{MaxSupport: 5},
	} {
		ls[fmt.Sprintf("kernel-perceptron{%s %d %v %v %v}", cfg.Kernel, cfg.Degree, cfg.Sigma, cfg.Margin, cfg.MaxSupport)] = makers{
			func() online.Learner { return must[*online.KernelPerceptron](t)(online.NewKernelPerceptron(bits, cfg)) },
			nil,
		}
	}
	for _, cfg := range []online.PegasosConfig{{}, {Lambda: 0.1, Bias: true}, {Lambda: 10}} {
		ls[fmt.Sprintf("pegasos%+v", cfg)] = makers{
			func() online.Learner { return must[*online.Pegasos](t)(online.NewPegasos(bits, cfg)) },
			func(s *online.Space) online.Learner { return must[*online.Pegasos](t)(online.NewSparsePegasos(s, cfg)) },
		}
	}
	no := false
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, cfg := range []online.AdaGradConfig{
			{Eta: 0.5},
			{Eta: 0.1, Bias: true},
			{Eta: 0.5, Normalized: &no},
			{Eta: 1, Bias: true, Normalized: &no},
		} {
			cfg.Loss = loss
			ls[fmt.Sprintf("adagrad{Loss:%s Eta:%v Bias:%v Normalized:%v}", loss, cfg.Eta, cfg.Bias, cfg.IsNormalized())] = makers{
				func() online.Learner { return must[*online.AdaGrad](t)(online.NewAdaGrad(bits, cfg)) },
				func(s *online.Space) online.Learner {
					return must[*online.AdaGrad](t)(online.NewSparseAdaGrad(s, cfg))
				},
			}
		}
	}
	return ls
}

// TestConformance runs every learner configuration of this package through
// the onlinetest suite.
func TestConformance(t *testing.T) {
	const bits = 8
	stream := onlinetest.LinearStream(bits, 300, 12, 0.1)
	for name, mk := range linear(t, bits) {
		onlinetest.Run(t, name, mk.dense, stream)
	}
}

// TestSparse: every learner configuration that has a sparse constructor
// is, over a Space, the dense learner bit for bit (onlinetest.Sparse), on
// a small space and on a wide one with a few slots touched.
func TestSparse(t *testing.T) {
	for _, bits := range []uint{4, 8, 18} {
		stream := onlinetest.LinearStream(bits, 300, 12, 0.1)
		for name, mk := range linear(t, bits) {
			if mk.sparse != nil {
				onlinetest.Sparse(t, fmt.Sprintf("%s/bits=%d", name, bits), bits, mk.dense, mk.sparse, stream)
			}
		}
	}
}

// TestLearnLater: a label that comes after another round was learned is
// learned from the prediction served for it, not from what the model would
// predict now. Two examples on the same slot are both predicted at w = 0
// (score 0); the second is learned first. The Perceptron then updates on
// the first too (y·served score = 0 ≤ 0), though its weights now score it
// 1; OGD (hinge, fixed η = 1) steps again at the served score 0, though
// the hinge at its score now, 1, has no gradient.
func TestLearnLater(t *testing.T) {
	x := online.Vector{Idx: []uint32{3}, Val: []float64{1}}
	p, err := online.NewPerceptron(4, online.PerceptronConfig{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := online.NewOGD(4, online.OGDConfig{Loss: online.LossHinge, Eta: 1, Schedule: online.ScheduleFixed})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []online.Learner{p, o} {
		first, second := l.Predict(x), l.Predict(x)
		l.Learn(x, second, online.Positive)
		if now := l.Predict(x); now.Score != 1 {
			t.Fatalf("%T: score %v after one step, want 1", l, now.Score)
		}
		l.Learn(x, first, online.Positive)
	}
	if w := p.Weights()[3]; w != 2 || p.Updates() != 2 {
		t.Errorf("Perceptron: w[3] = %v after %d updates, want 2 after 2", w, p.Updates())
	}
	if w := o.Weights(nil)[3]; w != 2 {
		t.Errorf("OGD: w[3] = %v, want 2 (two steps at the served score 0)", w)
	}
}

func marshal(t *testing.T, l online.Learner) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
