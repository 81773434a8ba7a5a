package experts

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// genericLdim computes Ldim(v) by the generic recursion, bypassing any
// closed form and the class memo.
func genericLdim(c *Class, v Set) int {
	if c.np < 0 {
		panic("not enumerable")
	}
	return newEngine(c, false).run(v)
}

func randomSubset(r *rand.Rand, c *Class, p float64) Set {
	v := c.NewSet()
	for i := range c.n {
		if r.Float64() < p {
			v.Add(i)
		}
	}
	return v
}

func TestLdimTextbookExamples(t *testing.T) {
	// Thresholds on a grid: Ldim = ⌊log₂ n⌋ (closed form, Example 21.4
	// discretized; Example 21.2's log₂|H| bound is attained).
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1000, 1024, 1025} {
		c := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: n})
		if got, want := c.Dim(), bits.Len(uint(n))-1; got != want {
			t.Errorf("thresholds(%d): Ldim %d, want %d", n, got, want)
		}
		if n <= 16 {
			if got := genericLdim(c, c.All()); got != c.Dim() {
				t.Errorf("thresholds(%d): generic Ldim %d, closed form %d", n, got, c.Dim())
			}
		}
	}
	// Singletons (Example 21.3): Ldim 1 however large |H|.
	for _, d := range []int{2, 3, 10, 100, 2000} {
		for _, zero := range []bool{false, true} {
			c := mustClass(t, singletonTable(d, zero))
			if err := c.PrepareLdim(); err != nil || c.ld.mode != modeSingletons {
				t.Errorf("singletons(%d): closed form not detected", d)
			}
			if c.Dim() != 1 {
				t.Errorf("singletons(%d, zero=%v): Ldim %d, want 1", d, zero, c.Dim())
			}
		}
	}
	if c := mustClass(t, singletonTable(1, false)); c.Dim() != 0 {
		t.Errorf("one singleton: Ldim %d, want 0", c.Dim())
	}
	// Figure 21.1: the depth-2 tree is shattered by {h1..h4} whatever the
	// '*' entries, and 4 hypotheses shatter no depth-3 tree.
	for star := range 16 {
		c := mustClass(t, figureTable(star))
		if c.Dim() != 2 {
			t.Errorf("figure 21.1 with stars %04b: Ldim %d, want 2", star, c.Dim())
		}
	}
	// Empty set: -1. A single hypothesis: 0.
	c := mustClass(t, figureTable(0))
	if got := c.Ldim(c.NewSet()); got != -1 {
		t.Errorf("Ldim(∅) = %d, want -1", got)
	}
	for i := range c.Len() {
		v := c.NewSet()
		v.Add(i)
		if got := c.Ldim(v); got != 0 {
			t.Errorf("Ldim({h%d}) = %d, want 0", i+1, got)
		}
	}
	one := mustClass(t, ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2}, Hypotheses: [][]int{{1, 0}}})
	if one.Dim() != 0 {
		t.Errorf("single-hypothesis class: Ldim %d, want 0", one.Dim())
	}
	th := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 8})
	if got := th.Ldim(th.NewSet()); got != -1 {
		t.Errorf("thresholds: Ldim(∅) = %d, want -1", got)
	}
	// Duplicated hypotheses split nowhere: Ldim 0.
	dup := mustClass(t, ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2}, Hypotheses: [][]int{{1, 0}, {1, 0}, {1, 0}}})
	if dup.Dim() != 0 {
		t.Errorf("three copies of one hypothesis: Ldim %d, want 0", dup.Dim())
	}
	// VCdim ≤ Ldim (Theorem 21.9): the full table over 3 points has VCdim 3
	// and 8 hypotheses, so Ldim = 3 = log₂ 8.
	full := ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2, 3}}
	for h := range 8 {
		full.Hypotheses = append(full.Hypotheses, []int{h & 1, h >> 1 & 1, h >> 2 & 1})
	}
	if c := mustClass(t, full); c.Dim() != 3 {
		t.Errorf("all 8 functions on 3 points: Ldim %d, want 3", c.Dim())
	}
}

func TestLdimClosedFormsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	// Thresholds: every contiguous run and random subsets.
	for n := 1; n <= 14; n++ {
		c := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: -3, Max: 5, Points: n})
		for lo := 0; lo < n; lo++ {
			for hi := lo; hi <= n; hi++ {
				v := c.NewSet()
				v.setRange(lo, hi)
				if g, f := genericLdim(c, v), c.Ldim(v); g != f {
					t.Fatalf("thresholds(%d) V=[%d,%d): generic %d, closed form %d", n, lo, hi, g, f)
				}
				checked++
			}
		}
		for range 30 {
			v := randomSubset(r, c, r.Float64())
			if g, f := genericLdim(c, v), c.Ldim(v); g != f {
				t.Fatalf("thresholds(%d) V=%b: generic %d, closed form %d", n, v, g, f)
			}
			checked++
		}
	}
	// Singleton-like tables: random positive point or none per hypothesis,
	// duplicates allowed.
	for trial := range 60 {
		hyps, points := 1+r.IntN(9), 1+r.IntN(7)
		s := ClassSpec{Kind: KindTable, Feature: "v"}
		for i := range points {
			s.Domain = append(s.Domain, float64(i))
		}
		for range hyps {
			row := make([]int, points)
			if p := r.IntN(points + 1); p < points {
				row[p] = 1
			}
			s.Hypotheses = append(s.Hypotheses, row)
		}
		c := mustClass(t, s)
		if err := c.PrepareLdim(); err != nil || c.ld.mode != modeSingletons {
			t.Fatalf("trial %d: singleton-like table not detected", trial)
		}
		for range 20 {
			v := randomSubset(r, c, r.Float64())
			if g, f := genericLdim(c, v), c.Ldim(v); g != f {
				t.Fatalf("trial %d %v V=%b: generic %d, closed form %d", trial, s.Hypotheses, v, g, f)
			}
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d version spaces checked", checked)
	}
}

// The memo NewClass fills (exhaustive) agrees with the pruned recursion on
// version spaces reached by labeled points and on arbitrary subsets.
func TestLdimMemoMatchesPruned(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for name, c := range testClasses(t) {
		if c.ld.mode != modeMemo {
			continue
		}
		key := make([]byte, 8*c.w)
		for range 40 {
			// Reachable: restrict H with random labeled points.
			v := c.All()
			lab := c.NewSet()
			for range r.IntN(6) {
				c.column(lab, r.IntN(c.np))
				var n Set = c.NewSet()
				for k := range v {
					if r.IntN(2) == 0 {
						n[k] = v[k] & lab[k]
					} else {
						n[k] = v[k] &^ lab[k]
					}
				}
				if n.empty() {
					break
				}
				v = n
			}
			if v.Count() >= 2 {
				if _, ok := c.ld.memo[string(keyOf(key, v))]; !ok {
					t.Fatalf("%s: reachable V=%b not memoized", name, v)
				}
			}
			if g, m := genericLdim(c, v), c.ldim(v, key); g != m {
				t.Fatalf("%s: V=%b memo %d, pruned %d", name, v, m, g)
			}
			u := randomSubset(r, c, r.Float64())
			if g, m := genericLdim(c, u), c.Ldim(u); g != m {
				t.Fatalf("%s: V=%b Ldim %d, pruned %d", name, u, m, g)
			}
		}
	}
}

// Classes too big for the exact Ldim are accepted by NewClass and by the
// learners that do not need Ldim; SOA refuses them with an error naming the
// class and the limit.
func TestLdimSizeLimits(t *testing.T) {
	for _, tc := range []struct {
		spec ClassSpec
		want string
	}{
		{ClassSpec{Kind: KindConjunctions, Features: []string{"a", "b", "c", "d", "e"}}, `class conjunctions on ["a" "b" "c" "d" "e"] (244 hypotheses): exact Littlestone dimension out of reach: more than 262144 version spaces, limit MaxVersionSpaces`},
		{ClassSpec{Kind: KindConjunctions, Features: strings.Split("abcdefg", "")}, "2188 hypotheses and no closed form, limit 512 (MaxGenericHypotheses)"},
		{ClassSpec{Kind: KindStumps, Features: []string{"a", "b", "c"}, Min: 0, Max: 1, Points: 40}, "too many effective domain points, limit 4096 (MaxGenericPoints"},
		{ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 1447}, `class intervals on "v" over 1447 points (1047628 hypotheses): exact Littlestone dimension out of reach: 1447 grid points, limit 512 (MaxIntervalLdimPoints)`},
		{ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2, 3, 4, 5, 6, 7, 8}, Hypotheses: func() (h [][]int) {
			for i := range 600 {
				h = append(h, []int{i & 1, i >> 1 & 1, i >> 2 & 1, i >> 3 & 1, i >> 4 & 1, i >> 5 & 1, i >> 6 & 1, i >> 7 & 1})
			}
			return h
		}()}, "class table on \"v\" (600 hypotheses × 8 domain values): exact Littlestone dimension out of reach: 600 hypotheses"},
		{ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 20}, ""},
	} {
		if raceEnabled && strings.Contains(tc.want, "MaxVersionSpaces") {
			continue // a second and a half of memo filling before the refusal
		}
		c, err := NewClass(tc.spec, testBits)
		if err != nil {
			t.Fatalf("NewClass(%s): %v", tc.spec.Kind, err)
		}
		for _, alg := range []string{"consistent", "halving", "weighted-majority"} {
			l, err := NewLearner(alg, c, HedgeConfig{Seed: 1})
			if err != nil || l == nil {
				t.Fatalf("%s over %s: %v", alg, c.describe(), err)
			}
			x := c.pointVector(c.numPointsOrGrid() - 1)
			l.Predict(x)
			l.Learn(x, l.Predict(x), online.Positive)
		}
		l, err := NewLearner("soa", c, HedgeConfig{})
		if tc.want == "" {
			if err != nil || l == nil {
				t.Errorf("soa over %s: %v", c.describe(), err)
			}
			continue
		}
		if err == nil || l != nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "soa: class ") {
			t.Errorf("soa over %s: error %v, want one containing %q", c.describe(), err, tc.want)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("NewSOA over %s: panic %v", c.describe(), r)
				}
			}()
			NewSOA(c)
		}()
	}
	// Closed forms have no such limit.
	if _, err := NewSOAChecked(mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 1 << 16})); err != nil {
		t.Errorf("thresholds(65536): %v", err)
	}
	if _, err := NewSOAChecked(mustClass(t, singletonTable(3000, true))); err != nil {
		t.Errorf("singletons(3000): %v", err)
	}
	if _, err := NewLearner("perceptron", mustClass(t, figureTable(0)), HedgeConfig{}); err == nil {
		t.Error("NewLearner accepted an unknown algorithm")
	}
}

func TestClassSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec ClassSpec
		key  string
	}{
		{ClassSpec{}, "class.kind"},
		{ClassSpec{Kind: "circles"}, "class.kind"},
		{ClassSpec{Kind: KindThresholds, Min: 0, Max: 1, Points: 4}, "class.feature"},
		{ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1}, "class.points"},
		{ClassSpec{Kind: KindThresholds, Feature: "v", Min: 1, Max: 1, Points: 4}, "class.max"},
		{ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 4, Domain: []float64{1}}, "class.domain"},
		{ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 5000}, "class.points"},
		{ClassSpec{Kind: KindTable, Feature: "v"}, "class.domain"},
		{ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 1}, Hypotheses: [][]int{{0, 1}}}, "class.domain[1]"},
		{ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2}}, "class.hypotheses"},
		{ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2}, Hypotheses: [][]int{{0}}}, "class.hypotheses[0]"},
		{ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2}, Hypotheses: [][]int{{0, 2}}}, "class.hypotheses[0][1]"},
		{ClassSpec{Kind: KindTable, Feature: "v", Points: 3, Domain: []float64{1}, Hypotheses: [][]int{{0}}}, "class.points"},
		{ClassSpec{Kind: KindStumps, Min: 0, Max: 1, Points: 3}, "class.features"},
		{ClassSpec{Kind: KindStumps, Features: []string{"a", "a"}, Min: 0, Max: 1, Points: 3}, "class.features"},
		{ClassSpec{Kind: KindConjunctions, Features: []string{"a"}, Points: 2}, "class.points"},
		{ClassSpec{Kind: KindConjunctions, Features: strings.Split("abcdefghijk", "")}, "class.features"},
	} {
		err := tc.spec.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("Validate(%+v) = %v, want an error about %s", tc.spec, err, tc.key)
		}
		if _, err := NewClass(tc.spec, testBits); err == nil {
			t.Errorf("NewClass(%+v) accepted an invalid spec", tc.spec)
		}
	}
}

func TestClassLabels(t *testing.T) {
	c := mustClass(t, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 3, Points: 4}) // grid 0 1 2 3
	lab := c.NewSet()
	for _, tc := range []struct {
		v    float64
		want [][2]int // intervals [i, j] saying 1
	}{
		{-1, nil},
		{0, [][2]int{{0, 0}, {0, 1}, {0, 2}, {0, 3}}},
		{1.5, [][2]int{{0, 2}, {0, 3}, {1, 2}, {1, 3}}},
		{3, [][2]int{{0, 3}, {1, 3}, {2, 3}, {3, 3}}},
		{3.5, nil},
	} {
		x := vec(c, tc.v)
		if !c.Labels(lab, x) {
			t.Fatalf("v=%v: not in domain", tc.v)
		}
		want := c.NewSet()
		for _, ij := range tc.want {
			want.Add(intervalIndex(ij[0], ij[1], 4))
		}
		if lab.Count() != want.Count() || !equalSets(lab, want) {
			t.Errorf("intervals at %v: %b, want %b", tc.v, lab, want)
		}
	}
	th := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 5}) // 0 .25 .5 .75 1
	th.Labels(lab[:th.w], vec(th, 0.5))
	if got := Set(lab[:th.w]).Count(); got != 3 || !Set(lab[:th.w]).Has(2) || Set(lab[:th.w]).Has(3) {
		t.Errorf("thresholds at 0.5: %b, want h0..h2", lab[:th.w])
	}
	tab := mustClass(t, figureTable(0))
	if tab.InDomain(vec(tab, 4)) || !tab.InDomain(vec(tab, 2)) || tab.InDomain(vec(tab, 0)) {
		t.Error("table InDomain wrong")
	}
	cj := mustClass(t, ClassSpec{Kind: KindConjunctions, Features: []string{"a", "b"}})
	if cj.InDomain(vecN(cj, 0.5, 1)) || !cj.InDomain(vecN(cj, 0, 1)) {
		t.Error("conjunctions InDomain wrong")
	}
	// x_a=1, x_b=0: true conjunctions are those with no ¬a and no b.
	cj.Labels(lab[:cj.w], vecN(cj, 1, 0))
	if got := Set(lab[:cj.w]).Count(); got != 4 { // {}, a, ¬b, a∧¬b
		t.Errorf("conjunctions at (1,0): %d true, want 4", got)
	}
}

func equalSets(a, b Set) bool {
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}
