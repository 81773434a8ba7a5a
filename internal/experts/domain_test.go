package experts

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// The domain terms of every kind, and classes of equal terms accept the
// same events: each term is what InDomain checks of one feature, and the
// grid kinds, which refuse only NaN (no decoded event holds one), have
// none.
func TestDomainTerms(t *testing.T) {
	for _, tc := range []struct {
		spec ClassSpec
		want []string
	}{
		{ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 5}, nil},
		{ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 3}, nil},
		{ClassSpec{Kind: KindStumps, Features: []string{"w", "v", "w"}, Min: 0, Max: 1, Points: 3}, nil},
		{ClassSpec{Kind: KindConjunctions, Features: []string{"b", "a"}}, []string{`boolean "a"`, `boolean "b"`}},
		{ClassSpec{Kind: KindTable, Feature: "t", Domain: []float64{2, 0.5, -1}, Hypotheses: [][]int{{0, 1, 1}}}, []string{`table "t" -1 0.5 2`}},
		{ClassSpec{Kind: KindTable, Feature: "t", Domain: []float64{1, math.Copysign(0, -1)}, Hypotheses: [][]int{{0, 1}}}, []string{`table "t" 0 1`}},
		// Names with spaces cannot run into the values.
		{ClassSpec{Kind: KindTable, Feature: "t 1", Domain: []float64{2}, Hypotheses: [][]int{{1}}}, []string{`table "t 1" 2`}},
		{ClassSpec{Kind: KindTable, Feature: "t", Domain: []float64{1, 2}, Hypotheses: [][]int{{0, 1}}}, []string{`table "t" 1 2`}},
	} {
		if got := tc.spec.DomainTerms(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.spec.Kind, got, tc.want)
		}
	}

	// Thresholds and intervals over one feature: the same terms, the
	// same domain, on in- and out-of-domain points.
	const bits = 8
	a, err := NewClass(ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 5}, bits)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewClass(ClassSpec{Kind: KindIntervals, Feature: "v", Min: -3, Max: 3, Points: 2}, bits)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := NewClass(ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{0, 1}, Hypotheses: [][]int{{0, 1}}}, bits)
	if err != nil {
		t.Fatal(err)
	}
	mask := online.Mask(bits)
	for _, v := range []float64{0, 0.3, 1, -7} {
		x := online.Vector{Idx: []uint32{online.Slot("v", mask)}, Val: []float64{v}}
		if a.InDomain(x) != b.InDomain(x) {
			t.Errorf("v=%g: equal terms, InDomain %v and %v", v, a.InDomain(x), b.InDomain(x))
		}
		if want := v == 0 || v == 1; tab.InDomain(x) != want {
			t.Errorf("table: v=%g in domain %v, want %v", v, tab.InDomain(x), want)
		}
	}
}

// gridPosition, which guesses from the grid's spacing, against the binary
// search it replaces, on values at, between, beside and far from grid
// values, for grids of one point, of spacings that do not divide evenly,
// and of huge and tiny ranges.
func TestGridPosition(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, spec := range []ClassSpec{
		{Min: 0, Max: 1, Points: 101}, {Min: 0.3, Max: 0.3, Points: 1}, {Min: -7, Max: 1e-3, Points: 3},
		{Min: 0.1, Max: 0.7, Points: 1000}, {Min: -1e300, Max: 1e300, Points: 17}, {Min: 1, Max: 1 + 1e-12, Points: 50},
		{Min: -3, Max: 5, Points: 2},
	} {
		spec.Kind, spec.Feature = KindThresholds, "v"
		c := mustClass(t, spec)
		g := c.grid
		vs := []float64{math.Inf(-1), math.Inf(1), math.NaN(), -math.MaxFloat64, math.MaxFloat64, 0, math.Copysign(0, -1)}
		for _, a := range g {
			vs = append(vs, a, math.Nextafter(a, math.Inf(-1)), math.Nextafter(a, math.Inf(1)))
		}
		for range 2000 {
			lo, hi := g[0], g[len(g)-1]
			vs = append(vs, lo+(hi-lo)*(r.Float64()*1.4-0.2))
		}
		for _, v := range vs {
			if got, want := c.gridPosition(v), position(g, v); got != want {
				t.Fatalf("%+v: gridPosition(%v) = %d, want %d", spec, v, got, want)
			}
		}
	}
}
