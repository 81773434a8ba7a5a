package online_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// adagradStream returns n sparse examples over 2^bits slots whose features
// have scales from 1e-3 to 1e3 (feature i's values are around 10^(i%7-3)),
// labeled by a noisy linear rule.
func adagradStream(seed uint64, bits uint, n int) ([]online.Vector, []int8) {
	r := rand.New(rand.NewPCG(seed, 99))
	dim := 1 << bits
	u := make([]float64, dim)
	for i := range u {
		u[i] = r.NormFloat64()
	}
	xs, ys := make([]online.Vector, n), make([]int8, n)
	for t := range n {
		var x online.Vector
		var s float64
		for i := range dim {
			if r.IntN(4) != 0 {
				continue
			}
			scale := math.Pow(10, float64(i%7-3))
			v := scale * r.NormFloat64()
			if r.IntN(10) == 0 {
				v = 0 // an explicit zero
			}
			x.Idx, x.Val = append(x.Idx, uint32(i)), append(x.Val, v)
			s += u[i] * v / scale
		}
		y := int8(1)
		if s+0.3*r.NormFloat64() <= 0 {
			y = -1
		}
		xs[t], ys[t] = x, y
	}
	return xs, ys
}

// refAdaGrad is AdaGrad written from the papers' pseudocode, with maps:
// Duchi, Hazan & Singer's diagonal update, and Ross, Mineiro & Langford's
// NAG (Algorithm 2), rescaling before it predicts, a weight by s_i/|x_i|
// when its feature's value outgrows s_i.
type refAdaGrad struct {
	loss       string
	eta        float64
	bias       bool
	normalized bool
	w, G, s    map[int]float64
	t          float64
	N          float64
}

const refBias = -1

func (r *refAdaGrad) round(x online.Vector, y int8) float64 {
	type f struct {
		i int
		v float64
	}
	var fs []f
	for k, i := range x.Idx {
		fs = append(fs, f{int(i), x.Val[k]})
	}
	if r.bias {
		fs = append(fs, f{refBias, 1})
	}
	r.t++
	if r.normalized {
		for _, e := range fs {
			if av := math.Abs(e.v); av >= 0x1p-1022 && av > r.s[e.i] {
				if r.s[e.i] > 0 {
					r.w[e.i] *= r.s[e.i] / av // Algorithm 2: w_i·s_i/|x_i|
				}
				r.s[e.i] = av
			}
		}
	}
	// Sums over x in the canonical order: four interleaved partial sums
	// ((s0 + s1) + (s2 + s3)), an entry that counts as 0 adding 0; the
	// bias after.
	sum4 := func(term func(e f) float64) float64 {
		var p [4]float64
		for k, e := range fs[:len(x.Idx)] {
			p[k%4] += term(e)
		}
		return (p[0] + p[1]) + (p[2] + p[3])
	}
	tiny := func(v float64) bool { return r.normalized && math.Abs(v) < 0x1p-1022 }
	score := sum4(func(e f) float64 {
		if tiny(e.v) {
			return 0
		}
		return r.w[e.i] * e.v
	})
	if r.bias {
		score += r.w[refBias]
	}
	var c float64
	fy := float64(y)
	switch r.loss {
	case online.LossHinge:
		if fy*score < 1 {
			c = -fy
		}
	case online.LossLogistic:
		c = -fy / (math.Exp(fy*score) + 1)
	default:
		c = score - fy
	}
	if r.normalized {
		n := sum4(func(e f) float64 {
			if tiny(e.v) {
				return 0
			}
			q := math.Abs(e.v) * (1 / r.s[e.i])
			return q * q
		})
		if r.bias {
			n++
		}
		r.N += n
	}
	if c == 0 || r.normalized && r.N == 0 {
		return score
	}
	rate := r.eta
	if r.normalized {
		rate = r.eta * math.Sqrt(r.t/r.N)
	}
	for _, e := range fs {
		if r.normalized && math.Abs(e.v) < 0x1p-1022 {
			continue
		}
		g := c * e.v
		if g*g == 0 { // a gradient too small to square counts as 0
			continue
		}
		r.G[e.i] += g * g
		if r.normalized {
			r.w[e.i] -= rate * g * (1 / r.s[e.i]) / math.Sqrt(r.G[e.i])
		} else {
			r.w[e.i] -= rate * g / math.Sqrt(r.G[e.i])
		}
	}
	return score
}

// TestAdaGradReference: AdaGrad scores every round as the papers'
// pseudocode does, bit for bit, plain and normalized, with each loss,
// through Round and through Predict and Learn.
func TestAdaGradReference(t *testing.T) {
	const bits = 5
	xs, ys := adagradStream(1, bits, 600)
	no := false
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, normalized := range []bool{true, false} {
			for _, bias := range []bool{false, true} {
				for _, fused := range []bool{false, true} {
					name := fmt.Sprintf("%s/normalized=%v/bias=%v/round=%v", loss, normalized, bias, fused)
					cfg := online.AdaGradConfig{Loss: loss, Eta: 0.3, Bias: bias}
					if !normalized {
						cfg.Normalized = &no
					}
					a, err := online.NewAdaGrad(bits, cfg)
					if err != nil {
						t.Fatal(err)
					}
					ref := &refAdaGrad{loss: loss, eta: 0.3, bias: bias, normalized: normalized,
						w: map[int]float64{}, G: map[int]float64{}, s: map[int]float64{}}
					for k, x := range xs {
						want := ref.round(x, ys[k])
						var got float64
						if fused {
							p, _ := a.Round(x, ys[k])
							got = p.Score
						} else {
							p := a.Predict(x)
							a.Learn(x, p, ys[k])
							got = p.Score
						}
						if math.Float64bits(got) != math.Float64bits(want) {
							t.Fatalf("%s: round %d: score %v, reference %v", name, k+1, got, want)
						}
					}
				}
			}
		}
	}
}

// TestAdaGradScaleInvariance: normalized, a feature multiplied by a power
// of two on every event changes no score, bit for bit (every quantity
// scales exactly); plain, it does.
func TestAdaGradScaleInvariance(t *testing.T) {
	const bits = 5
	xs, ys := adagradStream(2, bits, 500)
	scaled := make([]online.Vector, len(xs))
	for k, x := range xs {
		v := append([]float64(nil), x.Val...)
		for j, i := range x.Idx {
			if i == 3 {
				v[j] *= 1 << 20
			}
		}
		scaled[k] = online.Vector{Idx: x.Idx, Val: v}
	}
	no := false
	for _, normalized := range []bool{true, false} {
		cfg := online.AdaGradConfig{Loss: online.LossLogistic, Bias: true}
		if !normalized {
			cfg.Normalized = &no
		}
		a, _ := online.NewAdaGrad(bits, cfg)
		b, _ := online.NewAdaGrad(bits, cfg)
		differ := 0
		for k := range xs {
			pa, _ := a.Round(xs[k], ys[k])
			pb, _ := b.Round(scaled[k], ys[k])
			if math.Float64bits(pa.Score) != math.Float64bits(pb.Score) {
				differ++
			}
		}
		if normalized && differ != 0 {
			t.Errorf("normalized: %d of %d scores changed when a feature was scaled by 2^20", differ, len(xs))
		}
		if !normalized && differ == 0 {
			t.Error("plain: no score changed when a feature was scaled by 2^20: the test does not test")
		}
	}
}

// TestAdaGradRegretBound: plain AdaGrad's regret against u = 0 stays within
// the bound it reports, and so does its regret against random u with the
// bound of Duchi et al.'s Theorem 5 for that u (D_∞ = max_t ‖w_t − u‖_∞,
// measured here); with each loss, on streams where it learns and where
// the labels are noise.
func TestAdaGradRegretBound(t *testing.T) {
	const bits = 4
	dim := 1 << bits
	no := false
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for seed := range uint64(4) {
			xs, ys := adagradStream(10+seed, bits, 2000)
			if seed%2 == 1 {
				r := rand.New(rand.NewPCG(seed, 5))
				for k := range ys {
					if r.IntN(2) == 0 {
						ys[k] = -ys[k]
					}
				}
			}
			a, _ := online.NewAdaGrad(bits, online.AdaGradConfig{Loss: loss, Eta: 0.5, Bias: true, Normalized: &no})
			r := rand.New(rand.NewPCG(seed, 6))
			us := make([][]float64, 5)
			for j := range us {
				us[j] = make([]float64, dim+1)
				for i := range us[j] {
					us[j][i] = r.NormFloat64() * float64(j) / 2
				}
			}
			lossU := make([]float64, len(us))
			dU := make([]float64, len(us)+1) // the last: u = 0
			G := make([]float64, dim+1)
			var L float64
			var w []float64
			zero := make([]float64, dim+1)
			ref, _ := online.NewOGD(bits, online.OGDConfig{Loss: loss, Bias: true}) // the loss of u's scores
			for k, x := range xs {
				w = a.Weights(w[:0])
				for j, u := range append(us, zero) {
					for i := range u {
						dU[j] = math.Max(dU[j], math.Abs(w[i]-u[i]))
					}
					if j == len(us) {
						break
					}
					s := u[dim]
					for q, i := range x.Idx {
						s += u[i] * x.Val[q]
					}
					lossU[j] += ref.Loss(online.Prediction{Score: s}, ys[k])
				}
				p, l := a.Round(x, ys[k])
				L += l
				c := dloss(loss, p.Score, ys[k])
				for q, i := range x.Idx {
					G[i] += c * x.Val[q] * c * x.Val[q]
				}
				G[dim] += c * c
			}
			w = a.Weights(w[:0])
			var S float64
			for _, g := range G {
				S += math.Sqrt(g)
			}
			for j, u := range append(us, zero) {
				for i := range w {
					dU[j] = math.Max(dU[j], math.Abs(w[i]-u[i]))
				}
				bound := (dU[j]*dU[j]/(2*0.5) + 0.5) * S
				if j == len(us) {
					g := a.Guarantee()
					if g.Kind != online.RegretBound || math.Abs(g.Value-bound) > 1e-9*bound || !(L-g.ComparatorLoss <= g.Value) {
						t.Errorf("%s seed %d: regret against 0 %v, reported %+v, want the bound %v", loss, seed, L-g.ComparatorLoss, g, bound)
					}
					continue
				}
				if L-lossU[j] > bound*(1+1e-9) {
					t.Errorf("%s seed %d u%d: regret %v above the theorem's %v", loss, seed, j, L-lossU[j], bound)
				}
			}
		}
	}
}

// dloss is ∂loss/∂s at score s, from the losses' definitions.
func dloss(loss string, s float64, y int8) float64 {
	fy := float64(y)
	switch loss {
	case online.LossHinge:
		if fy*s < 1 {
			return -fy
		}
		return 0
	case online.LossLogistic:
		return -fy / (1 + math.Exp(fy*s))
	}
	return s - fy
}

// TestAdaGradSubnormal: normalized, subnormal values count as 0: they
// neither make N infinite (which would stop all learning) nor a state that
// fails to restore.
func TestAdaGradSubnormal(t *testing.T) {
	cfg := online.AdaGradConfig{Loss: online.LossLogistic, Bias: true}
	a, _ := online.NewAdaGrad(4, cfg)
	for _, v := range []float64{4e-309, 2e-309, -3e-320} {
		a.Round(online.Vector{Idx: []uint32{1}, Val: []float64{v}}, 1)
	}
	x := online.Vector{Idx: []uint32{1, 2}, Val: []float64{1, 2}}
	before := a.Predict(x).Score
	for range 5 {
		a.Round(x, 1)
	}
	if after := a.Predict(x).Score; !(after > before) {
		t.Errorf("score %v, then %v after five rounds of label 1: not learning", before, after)
	}
	b, _ := a.MarshalBinary()
	c, _ := online.NewAdaGrad(4, cfg)
	if err := c.UnmarshalBinary(b); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if c.Predict(x) != a.Predict(x) {
		t.Error("the restored learner predicts otherwise")
	}
}

// TestAdaGradNormalizedRescale: when a feature's value outgrows its scale
// s_i, NAG (Ross, Mineiro & Langford's Algorithm 2) multiplies its weight
// by s_i/|x_i| once, not squared: the step η·√(t/N)·g_i/(s_i·√G_i) is
// scale-free but for its 1/s_i (g_i and √G_i grow with x_i together), so a
// weight learned at scale s_i is worth s_i/|x_i| of itself at |x_i|; the
// square is the rule of the non-adaptive NG, whose step has 1/s_i². Three
// rounds of hinge loss, η = 1, no bias, over features 0 and 1, worked by
// hand:
//
// Round 1, x = (1, 1), y = +1. s = (1, 1); w = (0, 0), score 0 (a
// mistake: sign(0) is −1), so c = ∂hinge/∂score = −1. N = 1² + 1² = 2,
// t = 1, rate √(t/N) = 1/√2. g = (−1, −1), G = (1, 1):
// w_i = 0 − (1/√2)·(−1)·(1/1)/√1 = 1/√2 ≈ 0.70711 each.
//
// Round 2, x = (2, 1), y = −1. Feature 0 grows from 1 to 2: w_0 becomes
// (1/√2)·(1/2) = 1/(2√2) (squared: (1/√2)·(1/4) = 1/(4√2)), s_0 = 2.
// Score 2·1/(2√2) + 1/√2 = √2 ≈ 1.41421 (squared: 1.5/√2 ≈ 1.06066),
// a mistake, c = +1. N = 2 + (2/2)² + (1/1)² = 4, rate √(2/4) = 1/√2.
// g_0 = 2, G_0 = 1 + 4 = 5: w_0 −= (1/√2)·2·(1/2)/√5 = 1/√10, so
// w_0 = 1/(2√2) − 1/√10 ≈ 0.03733 (squared: 1/(4√2) − 1/√10 ≈ −0.13945).
// g_1 = 1, G_1 = 2: w_1 = 1/√2 − (1/√2)·1·1/√2 = 1/√2 − 1/2 ≈ 0.20711.
//
// Round 3, x = (1, 3), y = +1. Feature 1 grows from 1 to 3: w_1 becomes
// (1/√2 − 1/2)/3 ≈ 0.06904 (squared: /9, ≈ 0.02301), s_1 = 3. Score
// w_0 + 3·w_1 = 1/(2√2) − 1/√10 + 1/√2 − 1/2 ≈ 0.24443, right (squared:
// ≈ −0.07042, a third mistake), c = −1. N = 4 + (1/2)² + (3/3)² = 5.25,
// rate √(3/5.25) = 2/√7. g_0 = −1, G_0 = 6: w_0 += (2/√7)·(1/2)/√6 =
// 1/√42, w_0 ≈ 0.03733 + 0.15430 = 0.19163. g_1 = −3, G_1 = 11:
// w_1 += (2/√7)·3·(1/3)/√11 = 2/√77, w_1 ≈ 0.06904 + 0.22792 = 0.29696.
func TestAdaGradNormalizedRescale(t *testing.T) {
	r2, r10 := math.Sqrt(2), math.Sqrt(10)
	w0 := 1/(2*r2) - 1/r10 // after round 2
	w1 := 1/r2 - 0.5
	rounds := []struct {
		x     []float64
		y     int8
		score float64    // served, on the rescaled weights
		w     [2]float64 // after the round
	}{
		{[]float64{1, 1}, 1, 0, [2]float64{1 / r2, 1 / r2}},
		{[]float64{2, 1}, -1, r2, [2]float64{w0, w1}},
		{[]float64{1, 3}, 1, w0 + w1, [2]float64{w0 + 1/math.Sqrt(42), w1/3 + 2/math.Sqrt(77)}},
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-15*max(1, math.Abs(want)) }
	for _, fused := range []bool{false, true} {
		a, err := online.NewAdaGrad(1, online.AdaGradConfig{})
		if err != nil {
			t.Fatal(err)
		}
		mistakes := 0
		for k, r := range rounds {
			x := online.Vector{Idx: []uint32{0, 1}, Val: r.x}
			var p online.Prediction
			if fused {
				p, _ = a.Round(x, r.y)
			} else {
				p = a.Predict(x)
				a.Learn(x, p, r.y)
			}
			if p.Label != r.y {
				mistakes++
			}
			w := a.Weights(nil)
			if !near(p.Score, r.score) || !near(w[0], r.w[0]) || !near(w[1], r.w[1]) {
				t.Errorf("round=%v: round %d: score %.17g, w (%.17g, %.17g); want %.17g, (%.17g, %.17g)",
					fused, k+1, p.Score, w[0], w[1], r.score, r.w[0], r.w[1])
			}
		}
		if mistakes != 2 {
			t.Errorf("round=%v: %d mistakes, want 2 (rounds 1 and 2)", fused, mistakes)
		}
	}
}
