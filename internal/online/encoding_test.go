package online

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// trainSparse plays n rounds of random sparse examples (a handful of the
// 2^bits slots each) on l.
func trainSparse(l Learner, bits uint, n int) {
	r := rand.New(rand.NewPCG(3, 4))
	for range n {
		var x Vector
		for i := uint32(r.IntN(40)); i < 1<<bits; i += 1 + uint32(r.IntN(1<<bits/5)) {
			x.Idx = append(x.Idx, i)
			x.Val = append(x.Val, r.NormFloat64())
		}
		y := int8(1)
		if r.IntN(2) == 0 {
			y = -1
		}
		l.Learn(x, l.Predict(x), y)
	}
}

// TestWeightsEncodings: a model is written with its weights sparse
// (version 2), much smaller than dense when little was learned, and a
// dense encoding of the previous version (1) still restores the same
// model, so checkpoints written before survive an upgrade.
func TestWeightsEncodings(t *testing.T) {
	const bits = 16
	pct, err := NewPerceptron(bits, PerceptronConfig{Bias: true, Average: true})
	if err != nil {
		t.Fatal(err)
	}
	ogd, err := NewOGD(bits, OGDConfig{Loss: "logistic", Eta: 0.5, Schedule: "sqrt", Bias: true})
	if err != nil {
		t.Fatal(err)
	}
	trainSparse(pct, bits, 20)
	trainSparse(ogd, bits, 20)

	// Version 1: the same fields, the vectors as F64s.
	v1pct := newEncoder(perceptronMagic, denseVersion, 0)
	v1pct.U64(uint64(pct.bits))
	v1pct.Bool(pct.cfg.Bias)
	v1pct.Bool(pct.cfg.Average)
	v1pct.F64(pct.cfg.Margin)
	v1pct.U64(pct.rounds)
	v1pct.U64(pct.updates)
	v1pct.F64(pct.maxR2)
	v1pct.U64(pct.viol)
	v1pct.F64s(pct.w)
	v1pct.F64s(pct.u)
	v1ogd := newEncoder(ogdMagic, denseVersion, 0)
	v1ogd.U64(uint64(ogd.bits))
	v1ogd.String(ogd.cfg.Loss)
	v1ogd.F64(ogd.cfg.Eta)
	v1ogd.String(ogd.cfg.Schedule)
	v1ogd.F64(ogd.cfg.Radius)
	v1ogd.Bool(ogd.cfg.Bias)
	v1ogd.F64(ogd.cfg.BiasEta)
	v1ogd.U64(ogd.rounds)
	v1ogd.F64(ogd.maxG2)
	v1ogd.F64(ogd.maxD2)
	v1ogd.U64(ogd.viol)
	v1ogd.F64(ogd.s)
	v1ogd.F64(ogd.w2)
	v1ogd.F64s(ogd.v)

	for _, c := range []struct {
		name  string
		l     Learner
		v1    []byte
		fresh func() Learner
	}{
		{"perceptron", pct, v1pct.Bytes(), func() Learner {
			l, _ := NewPerceptron(bits, pct.cfg)
			return l
		}},
		{"ogd", ogd, v1ogd.Bytes(), func() Learner {
			l, _ := NewOGD(bits, ogd.cfg)
			return l
		}},
	} {
		v2, err := c.l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if v2[4] != sparseVersion {
			t.Fatalf("%s: version %d, want %d", c.name, v2[4], sparseVersion)
		}
		if len(v2) >= len(c.v1)/4 {
			t.Errorf("%s: %d bytes sparse, %d dense: want under a quarter", c.name, len(v2), len(c.v1))
		}
		for version, enc := range map[int][]byte{1: c.v1, 2: v2} {
			l := c.fresh()
			if err := l.UnmarshalBinary(enc); err != nil {
				t.Fatalf("%s: version %d: %v", c.name, version, err)
			}
			got, _ := l.MarshalBinary()
			if !bytes.Equal(got, v2) {
				t.Errorf("%s: restored from version %d, the model encodes differently", c.name, version)
			}
		}
		bad := bytes.Clone(v2)
		bad[4] = 3
		if err := c.fresh().UnmarshalBinary(bad); err == nil {
			t.Errorf("%s: version 3 accepted", c.name)
		}
	}
}

// AppendBinary appends MarshalBinary's bytes after what the buffer held,
// for every linear learner, dense and over a Space, after rounds that
// changed it: a state digest hashes those bytes from a buffer used
// again (regret's report).
func TestAppendBinaryIsMarshalBinary(t *testing.T) {
	type appender interface {
		Learner
		AppendBinary([]byte) ([]byte, error)
	}
	for _, sparse := range []bool{false, true} {
		sp, err := NewSpace(10)
		if err != nil {
			t.Fatal(err)
		}
		var ls []appender
		if sparse {
			p, _ := NewSparsePerceptron(sp, PerceptronConfig{Bias: true, Average: true})
			a, _ := NewSparseAdaGrad(sp, AdaGradConfig{Bias: true})
			o, _ := NewSparseOGD(sp, OGDConfig{Bias: true})
			g, _ := NewSparsePegasos(sp, PegasosConfig{Bias: true})
			ls = append(ls, p, a, o, g)
		} else {
			p, _ := NewPerceptron(10, PerceptronConfig{Bias: true, Average: true})
			a, _ := NewAdaGrad(10, AdaGradConfig{Bias: true})
			o, _ := NewOGD(10, OGDConfig{Bias: true})
			g, _ := NewPegasos(10, PegasosConfig{Bias: true})
			ls = append(ls, p, a, o, g)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		var mapped Vector
		for range 50 {
			x := Vector{}
			for j := range 6 {
				x.Idx = append(x.Idx, uint32(rng.IntN(1<<10)&^7|j))
				x.Val = append(x.Val, rng.NormFloat64())
			}
			if sparse {
				sp.Map(&mapped, x)
				x = mapped
			}
			y := int8(1 - 2*rng.IntN(2))
			for _, l := range ls {
				p := l.Predict(x)
				l.Learn(x, p, y)
			}
		}
		for _, l := range ls {
			want, err := l.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("kept")
			got, err := l.AppendBinary(prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:4], prefix) || !bytes.Equal(got[4:], want) {
				t.Errorf("sparse %v, %T: AppendBinary(%q) is not the prefix then MarshalBinary's %d bytes (%d bytes)", sparse, l, prefix, len(want), len(got))
			}
		}
	}
}
