package experts

import (
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

const testBits = 12

func mustClass(t testing.TB, s ClassSpec) *Class {
	t.Helper()
	c, err := NewClass(s, testBits)
	if err != nil {
		t.Fatalf("NewClass(%+v): %v", s, err)
	}
	return c
}

// figureTable is the class of Figure 21.1 (depth-2 shattered tree) over
// v1, v2, v3 = 1, 2, 3, with the figure's '*' entries given by star (bit
// 0..3: h1(v3), h2(v3), h3(v2), h4(v2)).
func figureTable(star int) ClassSpec {
	b := func(k int) int { return star >> k & 1 }
	return ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2, 3},
		Hypotheses: [][]int{
			{0, 0, b(0)}, // h1: v1 0, v2 0, v3 *
			{0, 1, b(1)}, // h2: v1 0, v2 1, v3 *
			{1, b(2), 0}, // h3: v1 1, v2 *, v3 0
			{1, b(3), 1}, // h4: v1 1, v2 *, v3 1
		}}
}

// singletonTable is Example 21.3's class over domain 1..d, plus the all-0
// hypothesis when zero is set.
func singletonTable(d int, zero bool) ClassSpec {
	s := ClassSpec{Kind: KindTable, Feature: "v"}
	for i := range d {
		s.Domain = append(s.Domain, float64(i+1))
		row := make([]int, d)
		row[i] = 1
		s.Hypotheses = append(s.Hypotheses, row)
	}
	if zero {
		s.Hypotheses = append(s.Hypotheses, make([]int, d))
	}
	return s
}

func randomTable(r *rand.Rand, hyps, points int) ClassSpec {
	s := ClassSpec{Kind: KindTable, Feature: "v"}
	for i := range points {
		s.Domain = append(s.Domain, float64(10*i+3))
	}
	for range hyps {
		row := make([]int, points)
		for i := range row {
			row[i] = int(r.IntN(2))
		}
		s.Hypotheses = append(s.Hypotheses, row)
	}
	return s
}

// testClasses are small classes of every kind, with an exact generic or
// closed-form Ldim.
func testClasses(t testing.TB) map[string]*Class {
	r := rand.New(rand.NewPCG(7, 7))
	m := map[string]*Class{
		"thresholds64":  mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 64}),
		"intervals8":    mustClass(t, ClassSpec{Kind: KindIntervals, Feature: "v", Min: -1, Max: 1, Points: 8}),
		"table12x10":    mustClass(t, randomTable(r, 12, 10)),
		"figure":        mustClass(t, figureTable(0)),
		"singletons20":  mustClass(t, singletonTable(20, true)),
		"stumps2x4":     mustClass(t, ClassSpec{Kind: KindStumps, Features: []string{"a", "b"}, Min: 0, Max: 1, Points: 4}),
		"conjunctions3": mustClass(t, ClassSpec{Kind: KindConjunctions, Features: []string{"a", "b", "c"}}),
	}
	for name, c := range m {
		if err := c.PrepareLdim(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return m
}

// randomEvent returns an event of c's features: usually on a random
// effective point, sometimes a random real value (grid kinds), plus an
// unrelated feature.
func randomEvent(r *rand.Rand, c *Class) online.Vector {
	x := c.pointVector(r.IntN(c.numPointsOrGrid()))
	if (c.kind == KindThresholds || c.kind == KindIntervals || c.kind == KindStumps) && r.IntN(2) == 0 {
		lo, hi := c.grid[0]-0.2, c.grid[len(c.grid)-1]+0.2
		x = online.Vector{}
		for _, s := range sortedSlots(c) {
			x.Idx = append(x.Idx, s)
			x.Val = append(x.Val, lo+(hi-lo)*r.Float64())
		}
	}
	return x
}

func (c *Class) numPointsOrGrid() int {
	if c.np > 0 {
		return c.np
	}
	return 1
}

func sortedSlots(c *Class) []uint32 {
	var out []uint32
	for _, s := range c.slots {
		i := 0
		for i < len(out) && out[i] < s {
			i++
		}
		if i < len(out) && out[i] == s {
			continue
		}
		out = append(out[:i], append([]uint32{s}, out[i:]...)...)
	}
	return out
}

// label returns h_i(x) as ±1.
func label(c *Class, i int, x online.Vector) int8 {
	s := c.NewSet()
	c.Labels(s, x)
	if s.Has(i) {
		return online.Positive
	}
	return online.Negative
}

type vsLearner interface {
	online.Learner
	online.Guaranteed
	VersionSpace() Set
}

func realizableLearners(c *Class) map[string]vsLearner {
	return map[string]vsLearner{"consistent": NewConsistent(c), "halving": NewHalving(c), "soa": NewSOA(c)}
}

// vec returns an event with c's single feature equal to v.
func vec(c *Class, v float64) online.Vector { return vecN(c, v) }

// vecN returns an event with c's features (in spec order) equal to vals.
func vecN(c *Class, vals ...float64) online.Vector { return c.vector(vals) }
