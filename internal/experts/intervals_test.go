package experts

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

func intervalsClass(t testing.TB, k int) *Class {
	t.Helper()
	c := mustClass(t, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: float64(max(k-1, 1)), Points: k})
	if err := c.PrepareLdim(); err != nil {
		t.Fatal(err)
	}
	if c.ld.mode != modeIntervals {
		t.Fatalf("intervals(%d): mode %d", k, c.ld.mode)
	}
	return c
}

// reachable returns every non-empty version space reachable from H by
// labeled points, the recovery sets {h : h(x) = y} (and H) included, by
// breadth-first search over the effective domain.
func reachable(c *Class) []Set {
	seen := map[string]bool{}
	var out []Set
	key := make([]byte, 8*c.w)
	add := func(v Set) {
		if v.empty() {
			return
		}
		if k := string(keyOf(key, v)); !seen[k] {
			seen[k] = true
			out = append(out, slices.Clone(v))
		}
	}
	col, v1, v0 := c.NewSet(), c.NewSet(), c.NewSet()
	add(c.full)
	for p := range c.np {
		c.column(col, p)
		split(v1, v0, c.full, col)
		add(v1)
		add(v0)
	}
	for i := 0; i < len(out); i++ {
		for p := range c.np {
			c.column(col, p)
			split(v1, v0, out[i], col)
			add(v1)
			add(v0)
		}
	}
	return out
}

// Every version space a learner can reach on intervals of k ≤ 10 points
// is a rectangle or a gap union, and its structured Ldim equals the
// generic bitset recursion. Arbitrary subsets are either not recognized or
// get the generic value too.
func TestIntervalsLdimExhaustive(t *testing.T) {
	kmax := 10
	if testing.Short() || raceEnabled {
		kmax = 8
	}
	r := rand.New(rand.NewPCG(8, 9))
	total := 0
	for k := 1; k <= kmax; k++ {
		c := intervalsClass(t, k)
		e := newEngine(c, false) // its memo holds exact values; shared
		vs := reachable(c)
		for _, v := range vs {
			l, ok := c.ld.ivl.ldim(v)
			if !ok {
				t.Fatalf("intervals(%d): reachable V=%b not recognized", k, v)
			}
			if g := e.run(v); g != l {
				t.Fatalf("intervals(%d): V=%b structured Ldim %d, generic %d", k, v, l, g)
			}
		}
		total += len(vs)
		if l, _ := c.ld.ivl.ldim(c.NewSet()); l != -1 {
			t.Fatalf("intervals(%d): Ldim(∅) = %d", k, l)
		}
		for range 200 {
			v := randomSubset(r, c, r.Float64())
			if l, ok := c.ld.ivl.ldim(v); ok {
				if g := e.run(v); g != l {
					t.Fatalf("intervals(%d): random V=%b structured Ldim %d, generic %d", k, v, l, g)
				}
			}
			if g, l := e.run(v), c.Ldim(v); g != l {
				t.Fatalf("intervals(%d): random V=%b Ldim %d, generic %d", k, v, l, g)
			}
		}
		t.Logf("intervals(%d): %d reachable version spaces, Ldim(H) = %d", k, len(vs), c.Dim())
	}
	if total < 1000 {
		t.Fatalf("only %d version spaces checked", total)
	}
}

// multisetLdim is the exact recursion over gap unions U(T), T a sorted
// multiset of gap sizes (intervals.go), with no two-gap reduction.
type multisetLdim map[string]int8

func (m multisetLdim) f(T []int) int {
	if len(T) == 0 {
		return -1
	}
	if len(T) == 1 && T[0] == 1 {
		return 0
	}
	key := make([]byte, len(T))
	for i, x := range T {
		key[i] = byte(x)
	}
	if v, ok := m[string(key)]; ok {
		return int(v)
	}
	best := 0
	for idx, tt := range T {
		if idx > 0 && T[idx-1] == tt {
			continue
		}
		rest := slices.Delete(slices.Clone(T), idx, idx+1)
		try := func(v1, a, b int) {
			if 1+v1 <= best {
				return
			}
			n := slices.Clone(rest)
			if a > 0 {
				n = append(n, a)
			}
			if b > 0 {
				n = append(n, b)
			}
			if len(n) == 0 {
				return
			}
			slices.Sort(n)
			best = max(best, 1+min(v1, m.f(n)))
		}
		for j := range tt {
			try(floorLog2(j+1)+floorLog2(tt-j), j, tt-1-j)
		}
		for j := 0; j+1 < tt; j++ {
			try(floorLog2(j+1)+floorLog2(tt-1-j), j+1, tt-1-j)
		}
	}
	m[string(key)] = int8(best)
	return best
}

// The two-largest-gaps lemma of intervals.go: the pair table equals the
// full multiset recursion on every multiset of gap sizes with sum ≤ S.
func TestIntervalsTwoGapLemma(t *testing.T) {
	S := 26
	if testing.Short() || raceEnabled {
		S = 20
	}
	il := newIntervalLdim(S)
	m := multisetLdim{}
	n := 0
	var rec func(T []int, maxp, rem int)
	rec = func(T []int, maxp, rem int) { // T non-increasing
		if len(T) > 0 {
			s := slices.Clone(T)
			slices.Reverse(s)
			t2 := 0
			if len(T) > 1 {
				t2 = T[1]
			}
			if got, want := il.pair(T[0], t2), m.f(s); got != want {
				t.Fatalf("gaps %v: pair table %d, multiset recursion %d", T, got, want)
			}
			n++
		}
		for p := min(maxp, rem); p >= 1; p-- {
			rec(append(T, p), p, rem-p)
		}
	}
	rec(nil, S, S)
	t.Logf("%d multisets of gap sizes with sum ≤ %d checked", n, S)
}

// closedIntervalsLdim is the closed form stated in intervals.go.
func closedIntervalsLdim(t1, t2 int) int {
	if t1 == 0 {
		return -1
	}
	N := func(d int) int {
		switch {
		case d <= 2:
			return d + 1
		case d%2 == 1:
			return 5<<((d-1)/2-1) - 1
		}
		return 7<<((d-2)/2-1) - 1
	}
	A := func(d int) int {
		if d%2 == 1 {
			return 1<<((d-1)/2+1) - 1
		}
		return 3<<((d-2)/2) - 1
	}
	B := func(d int) int {
		if d <= 2 {
			return 1
		}
		return 3<<((d-1)/2-1) - 1
	}
	l := 0
	for N(l+1) <= t1 {
		l++
	}
	if t1 >= A(l+1) && t2 >= B(l+1) {
		l++
	}
	return l
}

func TestIntervalsClosedForm(t *testing.T) {
	k := 256
	if raceEnabled {
		k = 96
	}
	il := newIntervalLdim(k)
	for t1 := 0; t1 <= k; t1++ {
		for t2 := 0; t2 <= t1; t2++ {
			if got, want := il.pair(t1, t2), closedIntervalsLdim(t1, t2); got != want {
				t.Fatalf("gaps {%d, %d}: pair table %d, closed form %d", t1, t2, got, want)
			}
		}
	}
	for _, tc := range [][2]int{{1, 0}, {2, 1}, {4, 3}, {8, 4}, {13, 6}, {32, 8}, {64, 10}, {256, 14}} {
		if tc[0] <= k {
			if got := il.pair(tc[0], 0); got != tc[1] {
				t.Errorf("Ldim(intervals on %d points) = %d, want %d", tc[0], got, tc[1])
			}
		}
	}
}

// NewClass does none of the work of the exact Ldim of 64-point
// intervals; PrepareLdim does it. (How quick it is:
// BenchmarkPrepareLdimIntervals64.)
func TestIntervalsPrepareCost(t *testing.T) {
	c := mustClass(t, ClassSpec{Kind: KindIntervals, Feature: "v", Min: 0, Max: 1, Points: 64})
	if c.ld.mode != modeNone {
		t.Fatal("NewClass computed Ldim")
	}
	if err := c.PrepareLdim(); err != nil {
		t.Fatal(err)
	}
	if c.Dim() != 10 {
		t.Errorf("Ldim(intervals 64) = %d, want 10", c.Dim())
	}
}

// SOA on realizable streams over 32 and 64 grid points: mistakes ≤
// Ldim(H), no violation, the target kept; Halving and Consistent within
// their bounds too. Streams mix grid points, gaps and random values.
func TestSOAIntervalsMistakeBound(t *testing.T) {
	for _, k := range []int{32, 64} {
		c := intervalsClass(t, k)
		for seed := uint64(1); seed <= 20; seed++ {
			r := rand.New(rand.NewPCG(seed, uint64(k)))
			target := r.IntN(c.Len())
			if seed <= 3 { // short intervals: many negatives first
				i := r.IntN(k)
				target = intervalIndex(i, i, k)
			}
			soa := NewSOA(c)
			mistakes := 0
			for range 600 {
				x := randomEvent(r, c)
				y := label(c, target, x)
				if soa.Predict(x).Label != y {
					mistakes++
				}
				soa.Learn(x, soa.Predict(x), y)
			}
			g := soa.Guarantee()
			if g.Value != float64(c.Dim()) || float64(mistakes) > g.Value || g.Violations != 0 || !soa.VersionSpace().Has(target) {
				t.Errorf("intervals(%d) seed %d: %d mistakes, guarantee %+v", k, seed, mistakes, g)
			}
		}
	}
}

// A checkpoint holding a version space no learner reaches is refused by
// SOA on a class too big for the generic recursion.
func TestSOAIntervalsRejectsUnreachableState(t *testing.T) {
	c := intervalsClass(t, 64)
	a := NewSOA(c)
	a.Learn(vec(c, 10), a.Predict(vec(c, 10)), online.Negative)
	b, _ := a.MarshalBinary()
	if err := NewSOA(c).UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	// Flip one hypothesis of V: {(0,0)} ∪ ... no longer a gap union.
	off := 2 + 8 + 4 + 16
	bad := bytes.Clone(b)
	bad[off+1] ^= 1 // hypothesis 8 = (0, 8)
	if err := NewSOA(c).UnmarshalBinary(bad); err == nil {
		t.Error("SOA restored an unreachable version space")
	}
	if err := NewHalving(c).UnmarshalBinary(append([]byte{b[0], tagHalving}, bad[2:]...)); err != nil {
		t.Errorf("Halving refused an arbitrary version space: %v", err)
	}
}
