package online_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// marginStream returns n examples in the unit ball of R^d (slots 0..d-1)
// separable by a random unit vector u with margin exactly ≥ gamma: each x
// is ±α·u plus a random orthogonal part of norm √(1−α²), α uniform in
// [gamma, 2·gamma] (hard streams: close to the margin, in many
// directions), labeled by the sign. With bias, the separator is the unit
// vector (u, u_b) of R^(d+1) acting on (x, 1): x is shifted by −u_b·u/‖u‖²
// restricted to R^d so that y·(⟨u,x⟩ + u_b) = α; then ‖x‖ ≤ 1 no longer
// holds and R is measured from the data. It returns the examples, u (with
// u_b last when bias) and the true margin min_t y_t⟨u,(x_t,1)⟩.
func marginStream(seed uint64, d, n int, gamma float64, bias bool) ([]online.Vector, []int8, []float64, float64) {
	r := rand.New(rand.NewPCG(seed, 99))
	dd := d
	if bias {
		dd++
	}
	u := make([]float64, dd)
	for {
		var n2 float64
		for i := range u {
			u[i] = r.NormFloat64()
			n2 += u[i] * u[i]
		}
		for i := range u {
			u[i] /= math.Sqrt(n2)
		}
		// Keep the bias part moderate so the shifted points stay near the ball.
		if !bias || math.Abs(u[d]) < 0.5 {
			break
		}
	}
	var uw2 float64
	for _, v := range u[:d] {
		uw2 += v * v
	}
	xs := make([]online.Vector, n)
	ys := make([]int8, n)
	margin := math.Inf(1)
	for k := range xs {
		alpha := math.Min(1, gamma*(1+r.Float64()))
		y := online.Positive
		if r.IntN(2) == 0 {
			y = online.Negative
		}
		// z: random direction orthogonal to u[:d].
		z := make([]float64, d)
		var zu float64
		for i := range z {
			z[i] = r.NormFloat64()
			zu += z[i] * u[i]
		}
		var z2 float64
		for i := range z {
			z[i] -= zu / uw2 * u[i]
			z2 += z[i] * z[i]
		}
		rho := math.Sqrt(1-alpha*alpha) / math.Sqrt(z2)
		x := online.Vector{Idx: make([]uint32, d), Val: make([]float64, d)}
		// ⟨u[:d], x⟩ must equal y·α − u_b (bias) or y·α (no bias).
		target := float64(y) * alpha
		if bias {
			target -= u[d]
		}
		for i := range x.Val {
			x.Idx[i] = uint32(i)
			x.Val[i] = target/uw2*u[i] + rho*z[i]
		}
		m := float64(y) * x.Dot(u)
		if bias {
			m += float64(y) * u[d]
		}
		margin = math.Min(margin, m)
		xs[k], ys[k] = x, y
	}
	return xs, ys, u, margin
}

// TestPerceptronMistakeBound: on streams separable with margin γ, the
// Perceptron's updates (hence its mistakes) stay within (R/γ)², 1/γ² when
// R ≤ 1 (the seeds' Theorem 3), the published bound is exactly R²/γ²
// (with a bias, the bound for a hyperplane with offset), and the
// certificate R/√M is at least the generating separator's margin.
func TestPerceptronMistakeBound(t *testing.T) {
	const d, n = 200, 5000
	for _, tc := range []struct {
		gamma float64
		bias  bool
	}{
		{0.05, false}, {0.1, false}, {0.2, false}, {0.4, false},
		{0.05, true}, {0.1, true}, {0.3, true},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			xs, ys, _, margin := marginStream(seed, d, n, tc.gamma, tc.bias)
			if margin < tc.gamma*(1-1e-12) {
				t.Fatalf("generator: margin %v < γ %v", margin, tc.gamma)
			}
			p, err := online.NewPerceptron(8, online.PerceptronConfig{Bias: tc.bias, Margin: tc.gamma})
			if err != nil {
				t.Fatal(err)
			}
			var r2 float64
			mistakes := 0
			for k, x := range xs {
				if p.Predict(x).Label != ys[k] {
					mistakes++
				}
				p.Learn(x, p.Predict(x), ys[k])
				r2n := x.Norm2()
				if tc.bias {
					r2n++
				}
				r2 = math.Max(r2, r2n)
			}
			g := p.Guarantee()
			M := p.Updates()
			if !tc.bias && r2 > 1+1e-12 {
				t.Fatalf("generator: R² = %v > 1", r2)
			}
			want := r2 / (tc.gamma * tc.gamma)
			if tc.bias {
				// The margin of a hyperplane with offset b, |b| ≤ ρ − γ:
				// R²·max(1, (1+(ρ−γ)²)/γ²), ρ = max ‖x‖ (see biasBound).
				d := max(0, math.Sqrt(max(0, r2-1))-tc.gamma)
				want = r2 * max(1, (1+d*d)/(tc.gamma*tc.gamma))
			}
			if g.Kind != online.MistakeBound || g.Value != want {
				t.Errorf("γ=%v bias=%v: bound %v %v, want mistakes %v", tc.gamma, tc.bias, g.Kind, g.Value, want)
			}
			if !tc.bias && g.Value > 1/(tc.gamma*tc.gamma)*(1+1e-12) {
				t.Errorf("γ=%v: bound %v exceeds 1/γ² with R ≤ 1", tc.gamma, g.Value)
			}
			if uint64(mistakes) > M || float64(M) > g.Value {
				t.Errorf("γ=%v bias=%v seed %d: mistakes %d, updates %d, bound %.1f", tc.gamma, tc.bias, seed, mistakes, M, g.Value)
			}
			if g.Violations != 0 {
				t.Errorf("γ=%v bias=%v: %d violations on a separable stream", tc.gamma, tc.bias, g.Violations)
			}
			if g.CertificateKind != "max_margin" || g.Certificate < margin {
				t.Errorf("γ=%v bias=%v: certificate %s = %v < true margin %v", tc.gamma, tc.bias, g.CertificateKind, g.Certificate, margin)
			}
			if seed == 1 {
				t.Logf("γ=%.2f bias=%-5v R²=%.3f mistakes=%4d updates=%4d bound=%7.1f certificate=%.3f ≥ margin=%.3f",
					tc.gamma, tc.bias, r2, mistakes, M, g.Value, g.Certificate, margin)
			}
		}
	}
}

// TestPerceptronViolation: a stream that is not separable with the
// configured margin is detected (updates exceed (R/γ)²) and counted.
func TestPerceptronViolation(t *testing.T) {
	xs, ys, _, _ := marginStream(7, 20, 5000, 0.05, false)
	r := rand.New(rand.NewPCG(1, 1))
	p, _ := online.NewPerceptron(6, online.PerceptronConfig{Margin: 0.5})
	for k, x := range xs {
		y := ys[k]
		if r.Float64() < 0.2 {
			y = -y
		}
		p.Predict(x)
		p.Learn(x, p.Predict(x), y)
	}
	g := p.Guarantee()
	if g.Violations == 0 || float64(p.Updates()) <= g.Value {
		t.Errorf("updates %d, bound %v, violations %d: want a violation", p.Updates(), g.Value, g.Violations)
	}
	// Violations count exactly the updates beyond the bound (R is 1 after
	// the first round here, up to rounding).
	if want := p.Updates() - uint64(math.Floor(g.Value)); g.Violations < want-1 || g.Violations > want+1 {
		t.Errorf("violations %d, want ≈ %d", g.Violations, want)
	}
}

// TestPerceptronGuaranteeCurrent: the Guarantee the tracker asks for every
// round (kept between the rounds that change it) is, on every round, the
// one a learner restored from the same state computes afresh: with and
// without a margin, as R grows, on updates and violations.
func TestPerceptronGuaranteeCurrent(t *testing.T) {
	for _, cfg := range []online.PerceptronConfig{{Margin: 0.3}, {Bias: true}, {Average: true}} {
		r := rand.New(rand.NewPCG(5, 5))
		p, _ := online.NewPerceptron(6, cfg)
		q, _ := online.NewPerceptron(6, cfg)
		var changes int
		last := p.Guarantee()
		for k := range 3000 {
			x := onlinetest.RandomVector(r, 6, 1+r.IntN(8))
			for i := range x.Val {
				x.Val[i] *= 1 + float64(k)/1000 // R grows now and then
			}
			y := online.Positive
			if r.IntN(3) == 0 {
				y = online.Negative
			}
			p.Predict(x)
			if g := p.Guarantee(); !onlinetest.SameGuarantee(g, last) {
				t.Fatalf("%+v round %d: Predict changed the guarantee", cfg, k)
			}
			p.Learn(x, p.Predict(x), y)
			g := p.Guarantee()
			b, _ := p.MarshalBinary()
			if err := q.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if want := q.Guarantee(); !onlinetest.SameGuarantee(g, want) {
				t.Fatalf("%+v round %d: Guarantee %+v, restored %+v", cfg, k, g, want)
			}
			if !onlinetest.SameGuarantee(g, last) {
				changes++
			}
			last = g
		}
		if changes < 10 {
			t.Errorf("%+v: the guarantee changed %d times; the stream does not test the cache", cfg, changes)
		}
	}
}

// TestPerceptronAlgorithm checks the update rule and the tie rule on a
// hand-worked stream, and the averaged weights against a direct average.
func TestPerceptronAlgorithm(t *testing.T) {
	vec := func(v ...float64) online.Vector {
		x := online.Vector{}
		for i, f := range v {
			x.Idx = append(x.Idx, uint32(i))
			x.Val = append(x.Val, f)
		}
		return x
	}
	p, _ := online.NewPerceptron(2, online.PerceptronConfig{Bias: true})
	steps := []struct {
		x     online.Vector
		y     int8
		score float64
		label int8
	}{
		// w=0,b=0: score 0 → predict -1; y=-1 is right but 0 ≤ 0 updates:
		// w = (-1, 0), b = -1.
		{vec(1, 0), online.Negative, 0, online.Negative},
		// score = -0 - 1 = -1 → -1, y = +1: update w = (-1, 2), b = 0.
		{vec(0, 2), online.Positive, -1, online.Negative},
		// score = -1·1 + 2·1 + 0 = 1 → +1, y=+1: no update.
		{vec(1, 1), online.Positive, 1, online.Positive},
	}
	for k, s := range steps {
		pr := p.Predict(s.x)
		if pr.Score != s.score || pr.Label != s.label {
			t.Fatalf("step %d: predicted %+v, want score %v label %d", k, pr, s.score, s.label)
		}
		p.Learn(s.x, pr, s.y)
	}
	if w := p.Weights(); w[0] != -1 || w[1] != 2 || w[4] != 0 || p.Updates() != 2 {
		t.Fatalf("weights %v, updates %d", w, p.Updates())
	}

	// Averaged: the score must be ⟨avg(w(1..t)), x⟩ computed directly.
	r := rand.New(rand.NewPCG(3, 3))
	a, _ := online.NewPerceptron(3, online.PerceptronConfig{Average: true, Bias: true})
	plain, _ := online.NewPerceptron(3, online.PerceptronConfig{Bias: true})
	sum := make([]float64, 9) // Σ of w(1..t), bias last
	for k := 1; k <= 300; k++ {
		x := vec(r.Float64()-0.5, r.Float64()-0.5, r.Float64()-0.5)
		y := online.Positive
		if x.Val[0]+0.3*x.Val[1] < 0.05 {
			y = online.Negative
		}
		w := plain.Weights()
		for i := range sum {
			sum[i] += w[i]
		}
		want := (x.Dot(sum) + sum[8]) / float64(k)
		got := a.Predict(x).Score
		if math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
			t.Fatalf("round %d: averaged score %v, want %v", k, got, want)
		}
		plain.Predict(x)
		a.Learn(x, a.Predict(x), y)
		plain.Learn(x, plain.Predict(x), y)
	}
}

func TestPerceptronConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  online.PerceptronConfig
		want string
	}{
		{online.PerceptronConfig{Margin: -1}, "margin"},
		{online.PerceptronConfig{Margin: math.NaN()}, "margin"},
		{online.PerceptronConfig{Margin: 0.1, Average: true}, "margin"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.cfg, err, tc.want)
		}
		if _, err := online.NewPerceptron(4, tc.cfg); err == nil {
			t.Errorf("NewPerceptron(%+v) accepted", tc.cfg)
		}
	}
	if _, err := online.NewPerceptron(online.MaxBits+1, online.PerceptronConfig{}); err == nil {
		t.Error("bits beyond MaxBits accepted")
	}
	if g := mustPerceptron(t).Guarantee(); g.Kind != online.NoBound || g.CertificateKind != "" || !math.IsNaN(g.RegretBound) {
		t.Errorf("fresh perceptron without margin: %+v", g)
	}
}

func mustPerceptron(t *testing.T) *online.Perceptron {
	p, err := online.NewPerceptron(4, online.PerceptronConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Labels that come late: the Perceptron predicts on arrival and learns
// each label 0..lag arrivals later from the prediction it served
// (Learn(x, served, y)). With d the most rounds learned while an event
// waited, its updates (and so its mistakes) stay within DelayedGuarantee:
// (2d+1)·R²/γ², and its certificate R·√((2d+1)/M) still bounds the true
// margin. With averaging the theorem says nothing (ok false).
func TestPerceptronDelayedMistakeBound(t *testing.T) {
	const dim, n = 200, 5000
	for _, gamma := range []float64{0.05, 0.1, 0.3} {
		for _, lag := range []int{1, 10, 100} {
			xs, ys, _, margin := marginStream(uint64(lag), dim, n, gamma, false)
			p, err := online.NewPerceptron(8, online.PerceptronConfig{Margin: gamma})
			if err != nil {
				t.Fatal(err)
			}
			mistakes := 0
			d := onlinetest.Delayed(len(xs), lag, uint64(lag),
				func(k int) online.Prediction { return p.Predict(xs[k]) },
				func(k int, served online.Prediction, _ int) {
					if served.Label != ys[k] {
						mistakes++
					}
					p.Learn(xs[k], served, ys[k])
				})
			g, ok := p.DelayedGuarantee(uint64(d))
			M := p.Updates()
			switch {
			case !ok || g.Kind != online.MistakeBound:
				t.Fatalf("γ=%v lag %d: no delayed bound", gamma, lag)
			case uint64(mistakes) > M || float64(M) > g.Value:
				t.Errorf("γ=%v lag %d (d=%d): mistakes %d, updates %d, bound %.1f", gamma, lag, d, mistakes, M, g.Value)
			case g.Certificate < margin:
				t.Errorf("γ=%v lag %d: certificate %v < true margin %v", gamma, lag, g.Certificate, margin)
			}
			if d == 0 || (lag >= 10 && M <= uint64(p.Guarantee().Value)/4) {
				t.Logf("γ=%v lag %d: d=%d, updates %d of a delayed bound %.0f (immediate %.0f)", gamma, lag, d, M, g.Value, p.Guarantee().Value)
			}
		}
	}
	avg, err := online.NewPerceptron(8, online.PerceptronConfig{Average: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := avg.DelayedGuarantee(3); ok {
		t.Error("the averaged Perceptron claims a delayed bound")
	}
}

// TestPerceptronPremise: a given margin is the user's word (assumed)
// until an update round disproves it, and from that round on it is false.
// The streams are small enough to follow by hand (γ is the margin given):
//
//   - "noisy": x = 1 with labels −1, +1, −1, ... and γ = 0.1, so R² = 1 and
//     the bound is R²/γ² = 100. The score is 0, −1, 0, −1, ...: every round
//     updates (a zero score does even when −1 is right). After round 2,
//     w = −1 + 1 = 0: ‖w‖ = 0 < M·γ = 0.2, which no unit separator of
//     margin 0.1 allows (M·γ ≤ ⟨u,w⟩ ≤ ‖w‖). The certificate R/√M < γ would
//     wait for update 101;
//   - "drift": x = ±1 labeled by its sign for 4 rounds (one update, w = 1),
//     then x = 1 labeled −1: round 5 updates to w = 0 with M = 2, false
//     from round 5 on, assumed before;
//   - "count": x = (1,0) then (0,1), both labeled +1, γ = 0.9 (the best
//     margin is 1/√2): round 2 makes M = 2 > R²/γ² = 1.23, and ‖w‖ = √2 <
//     1.8;
//   - "separable": x = ±1 labeled by its sign, γ = 0.5 (the true margin is
//     1): assumed on every round;
//   - "offset": with a bias, x = +1 labeled +1 then x = −1 labeled −1, γ = 2.
//     Both rounds update (scores 0 and −1+1 = 0); the second gives the
//     updates both labels, and a hyperplane with offset separating 1 from
//     −1 has margin at most ρ = 1 < 2: false at round 2, while M = 2 is
//     within the bound R²·max(1, 1/γ²) = 2;
//   - "offset separable": the same points repeated, γ = 0.5: assumed, with
//     the bound R²(1+(ρ−γ)²)/γ² = 2·1.25/0.25 = 10.
func TestPerceptronPremise(t *testing.T) {
	one := online.Vector{Idx: []uint32{0}, Val: []float64{1}}
	minus := online.Vector{Idx: []uint32{0}, Val: []float64{-1}}
	for _, tc := range []struct {
		name    string
		cfg     online.PerceptronConfig
		xs      []online.Vector
		ys      []int8
		falseAt int // the first round whose premise is false, 0: none
		bound   float64
	}{
		{"noisy", online.PerceptronConfig{Margin: 0.1}, []online.Vector{one, one, one, one, one, one, one},
			[]int8{-1, 1, -1, 1, -1, 1, -1}, 2, 100},
		{"drift", online.PerceptronConfig{Margin: 0.5}, []online.Vector{one, minus, one, minus, one, one},
			[]int8{1, -1, 1, -1, -1, 1}, 5, 4},
		{"count", online.PerceptronConfig{Margin: 0.9}, []online.Vector{one, {Idx: []uint32{1}, Val: []float64{1}}, one},
			[]int8{1, 1, 1}, 2, 1 / 0.81},
		{"separable", online.PerceptronConfig{Margin: 0.5}, []online.Vector{one, minus, one, minus, minus, one},
			[]int8{1, -1, 1, -1, -1, 1}, 0, 4},
		{"offset", online.PerceptronConfig{Bias: true, Margin: 2}, []online.Vector{one, minus, one, minus},
			[]int8{1, -1, 1, -1}, 2, 2},
		{"offset separable", online.PerceptronConfig{Bias: true, Margin: 0.5}, []online.Vector{one, minus, one, minus, one, minus},
			[]int8{1, -1, 1, -1, 1, -1}, 0, 10},
	} {
		p, err := online.NewPerceptron(4, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for k, x := range tc.xs {
			p.Round(x, tc.ys[k])
			g := p.Guarantee()
			want := online.PremiseAssumed
			if tc.falseAt > 0 && k+1 >= tc.falseAt {
				want = online.PremiseFalse
			}
			if g.Premise != want {
				t.Errorf("%s: round %d: premise %d, want %d (updates %d, bound %v)", tc.name, k+1, g.Premise, want, p.Updates(), g.Value)
			}
			if math.Abs(g.Value-tc.bound) > 1e-12*tc.bound { // R²/γ² rounded
				t.Errorf("%s: round %d: bound %v, want %v", tc.name, k+1, g.Value, tc.bound)
			}
		}
	}
}
