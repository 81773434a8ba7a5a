package experts

import (
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// benchLearner runs Predict+Loss+Learn over a noisy stream of 4096 events
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
		l.Learn(xs[i], l.Predict(xs[i]), ys[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		x, y := xs[i%n], ys[i%n]
		p := l.Predict(x)
		_ = l.Loss(p, y)
		l.Learn(x, p, y)
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
	c := mustClass(b, ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Hypotheses: intervalRows(12)})
	benchLearner(b, c, NewSOA(c))
}

// intervalRows is intervals over k points as an explicit table (generic
// memo), for comparison with the structured intervals Ldim.
func intervalRows(k int) [][]int {
	var rows [][]int
	for i := range k {
		for j := i; j < k; j++ {
			row := make([]int, k)
			for p := i; p <= j; p++ {
				row[p] = 1
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// SOA over 64-point intervals: the structured Ldim (shape recognition of
// V^(0) and V^(1) per Predict), 2080 hypotheses.
func BenchmarkSOAIntervals64(b *testing.B) {
	c := mustClass(b, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 64})
	benchLearner(b, c, NewSOA(c))
}

func BenchmarkHalvingIntervals64(b *testing.B) {
	c := mustClass(b, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 64})
	benchLearner(b, c, NewHalving(c))
}

func BenchmarkSOAIntervals256(b *testing.B) {
	c := mustClass(b, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 256})
	benchLearner(b, c, NewSOA(c))
}

// PrepareLdim of 64-point intervals: the pair table (once per class).
func BenchmarkPrepareLdimIntervals64(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newIntervalLdim(64)
	}
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
		h.Learn(a, p, y)
	}
}
