package experts

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

// bestLoss's bit-sliced counts against one counter per hypothesis: the
// minimum, the set at it, every count and its encoding, after rounds of
// sets of every density (the empty set, the full one, single members, runs
// of carries), across sets.
func TestBestLossCounts(t *testing.T) {
	for _, n := range []int{1, 2, 63, 64, 65, 101, 200} {
		r := rand.New(rand.NewPCG(uint64(n), 9))
		full := make(Set, words(n))
		full.setRange(0, n)
		b := newBestLoss(full, n)
		want := make([]uint64, n)
		check := func(when string) {
			t.Helper()
			got := make([]uint64, n)
			b.counts(got)
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d %s: counts %v, want %v", n, when, got, want)
			}
			m := slices.Min(want)
			if b.min != m {
				t.Fatalf("n=%d %s: min %d, want %d", n, when, b.min, m)
			}
			at := make(Set, len(full))
			for i, l := range want {
				if l == m {
					at.Add(i)
				}
			}
			if !slices.Equal(b.atMin, at) {
				t.Fatalf("n=%d %s: at the minimum %x, want %x", n, when, b.atMin, at)
			}
			var e, ew codec.Encoder
			b.appendTo(&e)
			for _, l := range want {
				ew.U64(l)
			}
			if string(e.Bytes()) != string(ew.Bytes()) {
				t.Fatalf("n=%d %s: encoding differs", n, when)
			}
		}
		mis := make(Set, len(full))
		for k := range 3000 {
			clear(mis)
			switch p := r.IntN(10); {
			case p == 0: // nobody
			case p == 1: // everybody: the minimum grows
				copy(mis, full)
			case p == 2: // one
				mis.Add(r.IntN(n))
			case p < 6: // all but a few, so that the minimum grows often
				copy(mis, full)
				for range 1 + r.IntN(3) {
					mis.Remove(r.IntN(n))
				}
			default:
				for i := range n {
					if r.IntN(2) == 0 {
						mis.Add(i)
					}
				}
			}
			m := slices.Min(want)
			for i := range want {
				if mis.Has(i) {
					want[i]++
				}
			}
			if grew := b.add(mis); grew != (slices.Min(want) > m) {
				t.Fatalf("n=%d round %d: add says the minimum grew: %v", n, k, grew)
			}
			check("after a round")
			if k == 1500 {
				for i := range want {
					want[i] += uint64(r.IntN(5)) << uint(r.IntN(40)) // counts of many planes
				}
				b.set(want)
				check("after set")
			}
		}
		clear(want)
		b.set(want)
		check("after a set to zeros")
	}
}

// refHedge is the weight arithmetic of Weighted-Majority as it was first
// written: every recomputation calls math.Exp, the losses are plain
// counters. hedge must give the same bits.
type refHedge struct {
	d          int
	eta, f     float64
	weight     []float64
	loss       []uint64
	rounds     uint64
	epoch      int
	epochStart uint64
	fixed      float64
}

func (h *refHedge) start(m int, at uint64) {
	h.epoch, h.epochStart = m, at
	if h.fixed > 0 {
		h.eta = h.fixed
	} else {
		h.eta = math.Sqrt(2 * math.Log(float64(h.d)) / math.Ldexp(1, m))
	}
	h.f = math.Exp(-h.eta)
	for i := range h.weight {
		h.weight[i], h.loss[i] = 1, 0
	}
}

func (h *refHedge) learn(advice []int8, y int8) {
	m := slices.Min(h.loss)
	for i, a := range advice {
		if a != y {
			h.loss[i]++
		}
	}
	if m2 := slices.Min(h.loss); m2 > m {
		for i, l := range h.loss {
			h.weight[i] = math.Exp(-h.eta * float64(l-m2))
		}
	} else {
		for i, a := range advice {
			if a != y {
				h.weight[i] *= h.f
			}
		}
	}
	h.rounds++
	if h.fixed == 0 && h.rounds-h.epochStart == uint64(1)<<h.epoch {
		h.start(h.epoch+1, h.rounds)
	}
}

// Weighted-Majority's weights, bit for bit, against refHedge: experts far
// behind the best (past the table of powers), underflowed ones, and the
// doubling trick's epochs.
func TestHedgeWeightsExact(t *testing.T) {
	for _, tc := range []struct {
		d   int
		eta float64
	}{{3, 0}, {101, 0}, {130, 0}, {5, 0.01}, {40, 2}} {
		h, err := NewHedge(tc.d, HedgeConfig{Eta: tc.eta, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		ref := &refHedge{d: tc.d, weight: make([]float64, tc.d), loss: make([]uint64, tc.d), fixed: tc.eta}
		ref.start(0, 0)
		r := rand.New(rand.NewPCG(uint64(tc.d), 3))
		advice := make([]int8, tc.d)
		for k := range 20000 {
			y := int8(2*r.IntN(2) - 1)
			for i := range advice {
				// Expert i is right with probability 1 - i/(2d): the last
				// ones fall far behind.
				if r.IntN(2*tc.d) < i {
					advice[i] = -y
				} else {
					advice[i] = y
				}
			}
			if k%1000 < 3 { // a run where everybody errs
				for i := range advice {
					advice[i] = -y
				}
			}
			h.Learn(advice, h.Predict(advice), y)
			ref.learn(advice, y)
			for i, w := range ref.weight {
				if math.Float64bits(h.h.weight[i]) != math.Float64bits(w) {
					t.Fatalf("d=%d eta=%v round %d: weight %d is %v, want %v", tc.d, tc.eta, k, i, h.h.weight[i], w)
				}
			}
		}
		if lag := slices.Max(ref.loss) - slices.Min(ref.loss); tc.d > 100 && lag < powsCap {
			t.Errorf("d=%d: the last expert is %d behind, want past the %d powers kept", tc.d, lag, powsCap)
		}
	}
}

// A round of the learners over a class allocates nothing, on average: a
// bit plane of the mistake counts now and then (at most 64 in a learner's
// life).
func TestBestLossNoAllocs(t *testing.T) {
	c := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 101})
	wm, _ := NewWeightedMajority(c, HedgeConfig{Seed: 1})
	ls := []online.Learner{NewConsistent(c), NewHalving(c), NewSOA(c), wm}
	r := rand.New(rand.NewPCG(1, 1))
	xs := make([]online.Vector, 512)
	for i := range xs {
		xs[i] = randomEvent(r, c)
	}
	k := 0
	if a := testing.AllocsPerRun(5000, func() {
		x, y := xs[k%len(xs)], int8(2*(k%2)-1)
		for _, l := range ls {
			l.Learn(x, l.Predict(x), y)
		}
		k++
	}); a != 0 {
		t.Errorf("%v allocations a round", a)
	}
}
