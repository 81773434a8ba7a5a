package experts

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// runHedge plays T rounds; advice and labels come from gen, which may look
// at the current Score (an adaptive adversary that does not see the coin).
// It checks regret ≤ the published bound on every round and returns the
// final regret, bound and realized mistakes.
func runHedge(t *testing.T, h *Hedge, T int, gen func(t int, advice []int8) (score func(float64) int8)) (regret, bound float64, mistakes int) {
	t.Helper()
	d := h.h.d
	advice := make([]int8, d)
	var loss float64
	for k := range T {
		yOf := gen(k, advice)
		p := h.Predict(advice)
		y := yOf(p.Score)
		loss += h.Loss(p, y)
		if p.Label != y {
			mistakes++
		}
		h.Learn(advice, p, y)
		g := h.Guarantee()
		regret = loss - g.ComparatorLoss
		if regret > g.Value+1e-9 {
			t.Fatalf("round %d: regret %v > published bound %v", k+1, regret, g.Value)
		}
		if g.RegretBound != g.Value || g.Kind != online.RegretBound || g.Comparator != "best_expert" {
			t.Fatalf("round %d: guarantee %+v", k+1, g)
		}
		bound = g.Value
	}
	return regret, bound, mistakes
}

// adversarial: random advice, label against the learner's expected
// prediction. random: advice and labels i.i.d., expert 0 right 70%.
func adversarial(r *rand.Rand) func(int, []int8) func(float64) int8 {
	return func(_ int, a []int8) func(float64) int8 {
		for i := range a {
			a[i] = int8(2*r.IntN(2) - 1)
		}
		return func(s float64) int8 {
			if s >= 0.5 {
				return online.Negative
			}
			return online.Positive
		}
	}
}

func random(r *rand.Rand) func(int, []int8) func(float64) int8 {
	return func(_ int, a []int8) func(float64) int8 {
		y := int8(2*r.IntN(2) - 1)
		for i := range a {
			a[i] = int8(2*r.IntN(2) - 1)
		}
		if r.Float64() < 0.7 {
			a[0] = y
		} else {
			a[0] = -y
		}
		return func(float64) int8 { return y }
	}
}

func TestHedgeKnownHorizon(t *testing.T) {
	for _, d := range []int{2, 8, 50} {
		for gname, gen := range map[string]func(*rand.Rand) func(int, []int8) func(float64) int8{"adversarial": adversarial, "random": random} {
			const T = 2000
			h, err := NewHedge(d, HedgeConfig{Horizon: T, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			regret, bound, _ := runHedge(t, h, T, gen(rand.New(rand.NewPCG(uint64(d), 1))))
			want := math.Sqrt(2 * T * math.Log(float64(d))) // Theorem 21.11
			if bound != want {
				t.Errorf("d=%d %s: published %v at T, want √(2T ln d) = %v", d, gname, bound, want)
			}
			if regret > want {
				t.Errorf("d=%d %s: regret %v > √(2T ln d) = %v", d, gname, regret, want)
			}
			t.Logf("d=%d %s: regret %.2f ≤ %.2f", d, gname, regret, want)
		}
	}
	// Horizon ≤ 2 ln d (theorem's condition fails): trivial bound t.
	h, _ := NewHedge(50, HedgeConfig{Horizon: 5})
	runHedge(t, h, 3, adversarial(rand.New(rand.NewPCG(1, 1))))
	if g := h.Guarantee(); g.Value != 3 {
		t.Errorf("T=5 ≤ 2 ln 50: bound %v after 3 rounds, want 3", g.Value)
	}
	// Past the horizon the anytime bound ln d/η + ηt/2 applies.
	h, _ = NewHedge(4, HedgeConfig{Horizon: 100})
	runHedge(t, h, 400, adversarial(rand.New(rand.NewPCG(2, 2))))
	eta := math.Sqrt(2 * math.Log(4) / 100)
	if g, want := h.Guarantee().Value, math.Log(4)/eta+eta*400/2; math.Abs(g-want) > 1e-9 {
		t.Errorf("past the horizon: bound %v, want %v", g, want)
	}
}

func TestHedgeDoublingTrick(t *testing.T) {
	for _, d := range []int{2, 8, 1000} {
		for gname, gen := range map[string]func(*rand.Rand) func(int, []int8) func(float64) int8{"adversarial": adversarial, "random": random} {
			h, _ := NewHedge(d, HedgeConfig{Seed: 2})
			const T = 3000
			advice := make([]int8, d)
			g := gen(rand.New(rand.NewPCG(uint64(d), 7)))
			var loss float64
			for k := 1; k <= T; k++ {
				yOf := g(k, advice)
				p := h.Predict(advice)
				y := yOf(p.Score)
				loss += h.Loss(p, y)
				h.Learn(advice, p, y)
				gu := h.Guarantee()
				closed := math.Sqrt2 / (math.Sqrt2 - 1) * math.Sqrt(2*float64(k)*math.Log(float64(d)))
				if loss-gu.ComparatorLoss > gu.Value+1e-9 {
					t.Fatalf("d=%d %s round %d: regret %v > bound %v", d, gname, k, loss-gu.ComparatorLoss, gu.Value)
				}
				if gu.Value > closed+1e-9 {
					t.Fatalf("d=%d round %d: bound %v > closed form %v", d, k, gu.Value, closed)
				}
			}
			// Epoch of round 3000: rounds 2048..4095 are epoch 11.
			if h.h.epoch != 11 || h.h.epochStart != 2047 {
				t.Errorf("after %d rounds: epoch %d from %d, want 11 from 2047", T, h.h.epoch, h.h.epochStart)
			}
		}
	}
}

func TestHedgeOneExpert(t *testing.T) {
	for _, cfg := range []HedgeConfig{{}, {Horizon: 100}, {Eta: 0.5}} {
		h, err := NewHedge(1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		regret, bound, _ := runHedge(t, h, 200, adversarial(rand.New(rand.NewPCG(3, 3))))
		if regret != 0 || bound != 0 {
			t.Errorf("d=1 %+v: regret %v, bound %v; want 0, 0", cfg, regret, bound)
		}
	}
}

func TestHedgeSeeds(t *testing.T) {
	run := func(seed uint64) []int8 {
		h, _ := NewHedge(3, HedgeConfig{Seed: seed, Horizon: 500})
		var out []int8
		a := []int8{1, -1, 1}
		for k := range 500 {
			a[k%3] = -a[k%3]
			p := h.Predict(a)
			out = append(out, p.Label)
			h.Learn(a, p, int8(1-2*(k/7%2)))
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	diff := 0
	for k := range a {
		if a[k] != b[k] {
			t.Fatalf("seed 1 twice: round %d differs", k)
		}
		if a[k] != c[k] {
			diff++
		}
	}
	if diff == 0 {
		t.Error("seeds 1 and 2 realized identical predictions")
	}
}

// Weights stay exactly e^{-η(L_i - m)} normalized, even through underflow:
// expert 1 is wrong 2000 times with η = 1 (weight e^-2000 underflows), then
// expert 0 is wrong 2100 times: expert 1 must win back its weight.
func TestHedgeUnderflowRecovery(t *testing.T) {
	h, _ := NewHedge(2, HedgeConfig{Eta: 1})
	for range 2000 {
		h.Predict([]int8{1, -1})
		h.Learn([]int8{1, -1}, h.Predict([]int8{1, -1}), 1)
	}
	if w := h.Weights(nil); w[1] != 0 || w[0] != 1 {
		t.Fatalf("weights %v, want [1 0] after underflow", w)
	}
	for range 2100 {
		h.Predict([]int8{1, -1})
		h.Learn([]int8{1, -1}, h.Predict([]int8{1, -1}), -1)
	}
	w := h.Weights(nil)
	want := 1 / (1 + math.Exp(-100)) // L = (2100, 2000)
	if math.Abs(w[1]-want) > 1e-15 || w[0] <= 0 {
		t.Errorf("weights %v, want [e^-100/(1+e^-100), 1/(1+e^-100)]", w)
	}
	if s := w[0] + w[1]; math.Abs(s-1) > 1e-15 {
		t.Errorf("weights sum to %v", s)
	}
}

// WeightedMajority over a class is Hedge over the class's hypotheses.
func TestWeightedMajorityIsHedge(t *testing.T) {
	c := mustClass(t, ClassSpec{Kind: KindThresholds, Feature: "v", Min: 0, Max: 1, Points: 40})
	cfg := HedgeConfig{Seed: 5}
	wm, _ := NewWeightedMajority(c, cfg)
	h, _ := NewHedge(c.Len(), cfg)
	r := rand.New(rand.NewPCG(4, 4))
	advice := make([]int8, c.Len())
	var loss float64
	for k := range 1000 {
		x := randomEvent(r, c)
		y := label(c, 17, x)
		if r.IntN(10) == 0 {
			y = -y
		}
		for i := range advice {
			advice[i] = label(c, i, x)
		}
		pw, ph := wm.Predict(x), h.Predict(advice)
		if pw != ph {
			t.Fatalf("round %d: WM %+v, Hedge %+v", k, pw, ph)
		}
		loss += wm.Loss(pw, y)
		wm.Learn(x, wm.Predict(x), y)
		h.Learn(advice, h.Predict(advice), y)
	}
	g := wm.Guarantee()
	if loss-g.ComparatorLoss > g.Value {
		t.Errorf("WM regret %v > bound %v", loss-g.ComparatorLoss, g.Value)
	}
	bw, _ := wm.MarshalBinary()
	bh, _ := h.MarshalBinary()
	if string(bw[10:]) != string(bh[2:]) {
		t.Error("WM and Hedge states differ")
	}
}

func TestHedgeConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		d   int
		cfg HedgeConfig
	}{{0, HedgeConfig{}}, {2, HedgeConfig{Horizon: -1}}, {2, HedgeConfig{Eta: math.NaN()}}, {2, HedgeConfig{Eta: -1}}} {
		if _, err := NewHedge(tc.d, tc.cfg); err == nil {
			t.Errorf("NewHedge(%d, %+v) accepted", tc.d, tc.cfg)
		}
	}
}

func TestHedgeMarshal(t *testing.T) {
	for _, cfg := range []HedgeConfig{{Seed: 1}, {Seed: 1, Horizon: 300}} {
		mk := func() *Hedge { h, _ := NewHedge(8, cfg); return h }
		a := mk()
		r := rand.New(rand.NewPCG(8, 8))
		gen := random(r)
		var rounds [][]int8
		var ys []int8
		for range 300 {
			adv := make([]int8, 8)
			ys = append(ys, gen(0, adv)(0))
			rounds = append(rounds, adv)
		}
		for k := range 137 {
			a.Predict(rounds[k])
			a.Learn(rounds[k], a.Predict(rounds[k]), ys[k])
		}
		snap, _ := a.MarshalBinary()
		b := mk()
		if err := b.UnmarshalBinary(snap); err != nil {
			t.Fatal(err)
		}
		if a.Guarantee() != b.Guarantee() {
			t.Fatalf("guarantees differ after restore")
		}
		for k := 137; k < 300; k++ {
			if pa, pb := a.Predict(rounds[k]), b.Predict(rounds[k]); pa != pb {
				t.Fatalf("round %d: %+v vs %+v", k, pa, pb)
			}
			a.Learn(rounds[k], a.Predict(rounds[k]), ys[k])
			b.Learn(rounds[k], b.Predict(rounds[k]), ys[k])
		}
		ba, _ := a.MarshalBinary()
		bb, _ := b.MarshalBinary()
		if string(ba) != string(bb) {
			t.Fatal("final bytes differ")
		}
		other, _ := NewHedge(8, HedgeConfig{Seed: 2})
		if err := other.UnmarshalBinary(ba); err == nil {
			t.Error("restored a checkpoint of another seed")
		}
	}
}

// A state claiming the largest round count is decoded or refused at once,
// never by looping: the epoch replay stops at m = 63.
func TestHedgeUnmarshalHugeRounds(t *testing.T) {
	h, err := NewHedge(3, HedgeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// version, tag, d (4), horizon, eta, seed (8 each), then rounds.
	const at = 2 + 4 + 3*8
	for i := at; i < at+8; i++ {
		b[i] = 0xff
	}
	done := make(chan error, 1)
	go func() { done <- h.UnmarshalBinary(b) }()
	select {
	case err := <-done:
		t.Logf("rounds 2^64-1: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("UnmarshalBinary of rounds 2^64-1 did not return")
	}
}

// Labels that come late: Hedge predicts on arrival (the adversary sees
// the served score) and learns each label 0..lag rounds later from the
// prediction served. After every learned round its regret stays within
// DelayedGuarantee(d), d the most rounds learned while a label waited so
// far; d = 0 is the immediate guarantee.
func TestHedgeDelayed(t *testing.T) {
	for _, cfg := range []HedgeConfig{{Horizon: 2000, Seed: 1}, {Seed: 2}, {Eta: 0.3, Seed: 3}} {
		for _, lag := range []int{3, 30} {
			for gname, gen := range map[string]func(*rand.Rand) func(int, []int8) func(float64) int8{"adversarial": adversarial, "random": random} {
				const experts, T = 8, 2000
				h, err := NewHedge(experts, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if g, _ := h.DelayedGuarantee(0); g != h.Guarantee() {
					t.Fatalf("DelayedGuarantee(0) %+v, want the guarantee", g)
				}
				g := gen(rand.New(rand.NewPCG(experts, uint64(lag))))
				advice, ys := make([][]int8, T), make([]int8, T)
				var loss float64
				learned := 0
				d := onlinetest.Delayed(T, lag, uint64(lag),
					func(k int) online.Prediction {
						a := make([]int8, experts)
						yOf := g(k, a)
						p := h.Predict(a)
						advice[k], ys[k] = a, yOf(p.Score)
						return p
					},
					func(k int, served online.Prediction, d int) {
						loss += h.Loss(served, ys[k])
						h.Learn(advice[k], served, ys[k])
						learned++
						gu, _ := h.DelayedGuarantee(uint64(d))
						if reg := loss - gu.ComparatorLoss; reg > gu.Value+1e-9 {
							t.Fatalf("%+v lag %d %s: after %d rounds (d=%d): regret %v > delayed bound %v", cfg, lag, gname, learned, d, reg, gu.Value)
						}
					})
				gu, _ := h.DelayedGuarantee(uint64(d))
				t.Logf("%+v lag %d %s: d=%d regret %.1f ≤ delayed bound %.1f (immediate %.1f)", cfg, lag, gname, d, loss-gu.ComparatorLoss, gu.Value, h.Guarantee().Value)
			}
		}
	}
}
