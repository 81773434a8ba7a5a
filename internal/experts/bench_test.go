package experts

import (
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// benchLearner runs Predict+Loss+Update over a noisy stream of 4096 events
// on 1024 thresholds (or c), cycling.
func benchLearner(b *testing.B, c *Class, l online.Learner) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 4096
	xs, ys := make([]online.Vector, n), make([]int8, n)
	target := c.Len() / 3
	for i := range xs {
		xs[i] = randomEvent(r, c)
		ys[i] = label(c, target, xs[i])
		if r.IntN(20) == 0 {
			ys[i] = -ys[i]
		}
	}
	for i := range n { // steady state
		l.Predict(xs[i])
		l.Update(xs[i], ys[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		x, y := xs[i%n], ys[i%n]
		p := l.Predict(x)
		_ = l.Loss(p, y)
		l.Update(x, y)
	}
}

func thresholds1024(b *testing.B) *Class {
	return mustClass(b, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 1024})
}

func BenchmarkSOAThresholds1024(b *testing.B) {
	c := thresholds1024(b)
	benchLearner(b, c, NewSOA(c))
}

func BenchmarkHalvingThresholds1024(b *testing.B) {
	c := thresholds1024(b)
	benchLearner(b, c, NewHalving(c))
}

func BenchmarkConsistentThresholds1024(b *testing.B) {
	c := thresholds1024(b)
	benchLearner(b, c, NewConsistent(c))
}

func BenchmarkWeightedMajorityThresholds1024(b *testing.B) {
	c := thresholds1024(b)
	l, _ := NewWeightedMajority(c, HedgeConfig{Seed: 1})
	benchLearner(b, c, l)
}

// SOA over a class without a closed form: memo lookups.
func BenchmarkSOAIntervals12(b *testing.B) {
	c := mustClass(b, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 12})
	benchLearner(b, c, NewSOA(c))
}

func BenchmarkHedge8(b *testing.B) {
	h, _ := NewHedge(8, HedgeConfig{Seed: 1})
	r := rand.New(rand.NewPCG(1, 2))
	const n = 4096
	adv, ys := make([][]int8, n), make([]int8, n)
	for i := range adv {
		adv[i] = make([]int8, 8)
		ys[i] = random(r)(0, adv[i])(0)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a, y := adv[i%n], ys[i%n]
		p := h.Predict(a)
		_ = h.Loss(p, y)
		h.Update(a, y)
	}
}
