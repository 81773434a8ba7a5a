package experts

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Realizable streams (target drawn from H with a fixed seed): each learner
// stays within its mistake bound, never violates, and keeps the target.
func TestMistakeBoundsRealizable(t *testing.T) {
	for name, c := range testClasses(t) {
		for seed := uint64(1); seed <= 6; seed++ {
			r := rand.New(rand.NewPCG(seed, 99))
			target := r.IntN(c.Len())
			ls := realizableLearners(c)
			mistakes := map[string]int{}
			for range 400 {
				x := randomEvent(r, c)
				y := label(c, target, x)
				for ln, l := range ls {
					if l.Predict(x).Label != y {
						mistakes[ln]++
					}
					l.Learn(x, l.Predict(x), y)
				}
			}
			bounds := map[string]float64{
				"consistent": float64(c.Len() - 1),
				"halving":    math.Log2(float64(c.Len())),
				"soa":        float64(c.Dim()),
			}
			for ln, l := range ls {
				g := l.Guarantee()
				if g.Value != bounds[ln] {
					t.Errorf("%s/%s: published bound %v, want %v", name, ln, g.Value, bounds[ln])
				}
				if float64(mistakes[ln]) > bounds[ln] {
					t.Errorf("%s/%s seed %d: %d mistakes > bound %v", name, ln, seed, mistakes[ln], bounds[ln])
				}
				if g.Violations != 0 || g.ComparatorLoss != 0 || !math.IsNaN(g.RegretBound) || g.Comparator != "best_hypothesis" {
					t.Errorf("%s/%s seed %d: guarantee %+v on a realizable stream", name, ln, seed, g)
				}
				if !l.VersionSpace().Has(target) {
					t.Errorf("%s/%s seed %d: target h%d left the version space", name, ln, seed, target)
				}
			}
		}
	}
}

// A stream on which Consistent makes exactly |H|-1 mistakes (Exercise
// 21.1): thresholds, target the last one, x walking up the grid, so that
// Consistent's first hypothesis says 1 and is the only one removed.
func TestConsistentWorstCase(t *testing.T) {
	const k = 50
	c := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 49, Points: k})
	l, h := NewConsistent(c), NewHalving(c)
	mc, mh := 0, 0
	for j := range k - 1 {
		x := vec(c, float64(j)) // = a_j: h_0..h_j say 1, the target h_49 says 0
		y := label(c, k-1, x)
		if y != online.Negative {
			t.Fatal("bad stream")
		}
		if l.Predict(x).Label != y {
			mc++
		}
		if h.Predict(x).Label != y {
			mh++
		}
		l.Learn(x, l.Predict(x), y)
		h.Learn(x, h.Predict(x), y)
	}
	if mc != k-1 {
		t.Errorf("Consistent: %d mistakes, want |H|-1 = %d", mc, k-1)
	}
	if mh > 5 { // ⌊log₂ 50⌋
		t.Errorf("Halving: %d mistakes on the same stream, want ≤ 5", mh)
	}
}

// An adaptive adversary walking a deepest shattered tree (found from the
// class: a point whose both sides keep Ldim(V)-1) and answering the
// opposite of SOA forces exactly Ldim(H) mistakes, while the stream stays
// realizable.
func TestSOAAdversary(t *testing.T) {
	classes := testClasses(t)
	classes["thresholds1024"] = mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 1024})
	classes["figure-stars"] = mustClass(t, figureTable(0b1010))
	classes["intervals32"] = intervalsClass(t, 32)
	classes["intervals64"] = intervalsClass(t, 64)
	for name, c := range classes {
		soa := NewSOA(c)
		v := c.All()
		v0, v1, col := c.NewSet(), c.NewSet(), c.NewSet()
		type ex struct {
			x online.Vector
			y int8
		}
		var stream []ex
		mistakes := 0
		for L := c.Ldim(v); L > 0; L = c.Ldim(v) {
			node := -1
			for p := range c.np {
				c.column(col, p)
				c1, c0 := split(v1, v0, v, col)
				if c1 > 0 && c0 > 0 && min(c.Ldim(v1), c.Ldim(v0)) == L-1 {
					node = p
					break
				}
			}
			if node < 0 {
				t.Fatalf("%s: no point splits V (Ldim %d) into two sides of Ldim %d", name, L, L-1)
			}
			x := c.pointVector(node)
			p := soa.Predict(x)
			y := -p.Label
			mistakes++
			soa.Learn(x, p, y)
			stream = append(stream, ex{x, y})
			c.column(col, node)
			if y == online.Positive {
				split(v, v0, v, col)
			} else {
				split(v1, v, v, col)
			}
			if got := c.Ldim(v); got != L-1 {
				t.Fatalf("%s: after a mistake Ldim(V) = %d, want %d", name, got, L-1)
			}
		}
		if mistakes != c.Dim() {
			t.Errorf("%s: adversary forced %d mistakes, want Ldim(H) = %d", name, mistakes, c.Dim())
		}
		if !equalSets(v, soa.VersionSpace()) || v.empty() {
			t.Fatalf("%s: SOA's version space %b, adversary's %b", name, soa.VersionSpace(), v)
		}
		h := v.First()
		for k, e := range stream {
			if label(c, h, e.x) != e.y {
				t.Fatalf("%s: round %d not realized by h%d", name, k, h)
			}
		}
		if g := soa.Guarantee(); g.Violations != 0 || float64(mistakes) > g.Value {
			t.Errorf("%s: guarantee %+v after %d mistakes", name, g, mistakes)
		}
	}
}

// SOA never predicts a label no hypothesis of V gives.
func TestSOANeverPredictsAbsentLabel(t *testing.T) {
	for name, c := range testClasses(t) {
		r := rand.New(rand.NewPCG(5, 5))
		l := NewSOA(c)
		lab := c.NewSet()
		for range 300 {
			x := randomEvent(r, c)
			c.Labels(lab, x)
			c1, c0 := countSplit(l.v, lab)
			p := l.Predict(x)
			if (p.Label == online.Positive && c1 == 0) || (p.Label == online.Negative && c0 == 0) {
				t.Fatalf("%s: SOA predicted %d with |V^(1)|=%d |V^(0)|=%d", name, p.Label, c1, c0)
			}
			l.Learn(x, p, label(c, r.IntN(c.Len()), x)) // not realizable: exercises recovery
		}
	}
}

func TestViolationRecovery(t *testing.T) {
	c := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 9, Points: 10})
	for name, l := range realizableLearners(c) {
		l.Predict(vec(c, 5))
		l.Learn(vec(c, 5), l.Predict(vec(c, 5)), online.Positive) // V = h0..h5
		l.Predict(vec(c, 2))
		l.Learn(vec(c, 2), l.Predict(vec(c, 2)), online.Negative) // V = h3..h5
		l.Predict(vec(c, 7))
		l.Learn(vec(c, 7), l.Predict(vec(c, 7)), online.Negative) // h3..h5 say 1: V empty
		g := l.Guarantee()
		if g.Violations != 1 {
			t.Errorf("%s: %d violations, want 1", name, g.Violations)
		}
		want := c.NewSet()
		want.setRange(8, 10) // {h ∈ H : h(7) = 0}
		if !equalSets(l.VersionSpace(), want) {
			t.Errorf("%s: recovered V = %b, want %b", name, l.VersionSpace(), want)
		}
		// h3, h4, h5 err once (at 7), h8, h9 once (at 5); the rest twice.
		if g.ComparatorLoss != 1 {
			t.Errorf("%s: best hypothesis loss %v, want 1", name, g.ComparatorLoss)
		}
		if p := l.Predict(vec(c, 9)); p.Label != online.Positive {
			t.Errorf("%s: after recovery predicts %d at 9, want +1 (h8, h9 say 1)", name, p.Label)
		}
		l.Learn(vec(c, 9), l.Predict(vec(c, 9)), online.Positive)
		if g := l.Guarantee(); g.Violations != 1 {
			t.Errorf("%s: %d violations after a consistent round", name, g.Violations)
		}
	}
	// No hypothesis gives the label at all: V = H.
	tab := mustClass(t, ClassSpec{Kind: KindTable, Feature: "v", Domain: []float64{1, 2}, Hypotheses: [][]int{{1, 0}, {1, 1}}})
	for name, l := range realizableLearners(tab) {
		l.Predict(vec(tab, 1))
		l.Learn(vec(tab, 1), l.Predict(vec(tab, 1)), online.Negative)
		if g := l.Guarantee(); g.Violations != 1 || !equalSets(l.VersionSpace(), tab.All()) {
			t.Errorf("%s: violations %d, V %b; want 1 and H", name, g.Violations, l.VersionSpace())
		}
	}
}

// The best-hypothesis comparator equals a brute-force count on noisy
// streams, for every kind.
func TestComparatorLossExact(t *testing.T) {
	for name, c := range testClasses(t) {
		r := rand.New(rand.NewPCG(11, 12))
		l := NewHalving(c)
		wm, err := NewWeightedMajority(c, HedgeConfig{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		loss := make([]int, c.Len())
		target := r.IntN(c.Len())
		for k := range 500 {
			x := randomEvent(r, c)
			y := label(c, target, x)
			if r.IntN(5) == 0 {
				y = -y
			}
			l.Predict(x)
			l.Learn(x, l.Predict(x), y)
			wm.Predict(x)
			wm.Learn(x, wm.Predict(x), y)
			best := math.MaxInt
			for i := range loss {
				if label(c, i, x) != y {
					loss[i]++
				}
				best = min(best, loss[i])
			}
			if g := l.Guarantee(); g.ComparatorLoss != float64(best) {
				t.Fatalf("%s round %d: comparator loss %v, want %d", name, k, g.ComparatorLoss, best)
			}
			if g := wm.Guarantee(); g.ComparatorLoss != float64(best) {
				t.Fatalf("%s round %d: WM comparator loss %v, want %d", name, k, g.ComparatorLoss, best)
			}
		}
		if l.Guarantee().Violations == 0 {
			t.Errorf("%s: a 20%% noisy stream never emptied the version space", name)
		}
	}
}

func TestOutsideDomain(t *testing.T) {
	c := mustClass(t, figureTable(0))
	outside := vec(c, 7)
	for name, l := range realizableLearners(c) {
		before, _ := l.MarshalBinary()
		if p := l.Predict(outside); p.Label != online.Negative || p.Score != 0 {
			t.Errorf("%s: prediction outside the domain %+v", name, p)
		}
		l.Learn(outside, l.Predict(outside), online.Positive)
		after, _ := l.MarshalBinary()
		if !bytes.Equal(before, after) {
			t.Errorf("%s: an event outside the domain changed the state", name)
		}
		if l.(online.Domained).InDomain(outside) {
			t.Errorf("%s: InDomain(7) true", name)
		}
	}
}

// Checkpoint mid-stream, restore into a fresh learner, continue: identical
// predictions and final bytes. Also: corrupted encodings are rejected.
func TestMarshalRoundTrip(t *testing.T) {
	for name, c := range testClasses(t) {
		mk := map[string]func() online.Learner{
			"consistent": func() online.Learner { return NewConsistent(c) },
			"halving":    func() online.Learner { return NewHalving(c) },
			"soa":        func() online.Learner { return NewSOA(c) },
			"wm": func() online.Learner {
				l, _ := NewWeightedMajority(c, HedgeConfig{Seed: 9})
				return l
			},
			"wm-horizon": func() online.Learner {
				l, _ := NewWeightedMajority(c, HedgeConfig{Seed: 9, Horizon: 300})
				return l
			},
		}
		for ln, newL := range mk {
			r := rand.New(rand.NewPCG(21, 22))
			var xs []online.Vector
			var ys []int8
			for range 300 {
				x := randomEvent(r, c)
				xs = append(xs, x)
				y := label(c, 0, x)
				if r.IntN(6) == 0 {
					y = -y
				}
				ys = append(ys, y)
			}
			a := newL()
			for k := range 150 {
				a.Predict(xs[k])
				a.Learn(xs[k], a.Predict(xs[k]), ys[k])
			}
			snap, _ := a.MarshalBinary()
			b := newL()
			if err := b.UnmarshalBinary(snap); err != nil {
				t.Fatalf("%s/%s: %v", name, ln, err)
			}
			for k := 150; k < 300; k++ {
				pa, pb := a.Predict(xs[k]), b.Predict(xs[k])
				if pa != pb {
					t.Fatalf("%s/%s round %d: %+v vs restored %+v", name, ln, k, pa, pb)
				}
				a.Learn(xs[k], a.Predict(xs[k]), ys[k])
				b.Learn(xs[k], b.Predict(xs[k]), ys[k])
			}
			ba, _ := a.MarshalBinary()
			bb, _ := b.MarshalBinary()
			if !bytes.Equal(ba, bb) {
				t.Fatalf("%s/%s: final bytes differ", name, ln)
			}
			for _, bad := range [][]byte{nil, ba[:1], ba[:len(ba)-1], append(bytes.Clone(ba), 0)} {
				if err := newL().UnmarshalBinary(bad); err == nil {
					t.Errorf("%s/%s: accepted a %d-byte encoding", name, ln, len(bad))
				}
			}
		}
	}
	// A checkpoint of another class is refused.
	c1 := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 8})
	c2 := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 2, Points: 8})
	b, _ := NewSOA(c1).MarshalBinary()
	if err := NewSOA(c2).UnmarshalBinary(b); err == nil {
		t.Error("SOA restored a checkpoint of a different class")
	}
	if err := NewHalving(c1).UnmarshalBinary(b); err == nil {
		t.Error("Halving restored an SOA checkpoint")
	}
}

func TestAllocsZero(t *testing.T) {
	classes := testClasses(t)
	classes["thresholds1024"] = mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 1024})
	classes["intervals64"] = intervalsClass(t, 64)
	for name, c := range classes {
		r := rand.New(rand.NewPCG(1, 1))
		xs := make([]online.Vector, 64)
		for i := range xs {
			xs[i] = randomEvent(r, c)
		}
		wm, _ := NewWeightedMajority(c, HedgeConfig{Seed: 1})
		for ln, l := range map[string]online.Learner{"soa": NewSOA(c), "halving": NewHalving(c), "consistent": NewConsistent(c), "wm": wm} {
			k := 0
			step := func() {
				x := xs[k%len(xs)]
				k++
				p := l.Predict(x)
				y := label(c, 1%c.Len(), x)
				if k%7 == 0 {
					y = -y
				}
				_ = l.Loss(p, y)
				l.Learn(x, p, y)
			}
			for range 200 {
				step()
			}
			// label() allocates; measure the learner alone.
			ys := make([]int8, len(xs))
			for i, x := range xs {
				ys[i] = label(c, 1%c.Len(), x)
			}
			if n := testing.AllocsPerRun(500, func() {
				x := xs[k%len(xs)]
				y := ys[k%len(xs)]
				if k%7 == 0 {
					y = -y
				}
				k++
				p := l.Predict(x)
				_ = l.Loss(p, y)
				l.Learn(x, p, y)
			}); n != 0 {
				t.Errorf("%s/%s: %v allocs per Predict+Learn", name, ln, n)
			}
		}
	}
}
