package online_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/floats"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
	"github.com/streamlearn/streamlearn/internal/testmode"
)

// Reference losses, written independently of ogd.go: value and derivative
// in the score s.
func refLoss(loss string, s float64, y int8) (float64, float64) {
	fy := float64(y)
	switch loss {
	case online.LossHinge:
		if fy*s < 1 {
			return 1 - fy*s, -fy
		}
		return 0, 0
	case online.LossLogistic:
		z := fy * s
		// ln(1+e^-z) and its derivative -y·σ(-z).
		if z > 0 {
			e := math.Exp(-z)
			return math.Log1p(e), -fy * e / (1 + e)
		}
		e := math.Exp(z)
		return -z + math.Log1p(e), -fy / (1 + e)
	default:
		return 0.5 * (s - fy) * (s - fy), s - fy
	}
}

// noisyStream returns n examples in R^d (slots 0..d-1), roughly in the
// unit ball, labeled by a random halfspace with a fraction noise flipped.
func noisyStream(seed uint64, d, n int, noise float64) ([]online.Vector, []int8) {
	r := rand.New(rand.NewPCG(seed, 7))
	u := make([]float64, d)
	for i := range u {
		u[i] = r.NormFloat64()
	}
	xs := make([]online.Vector, n)
	ys := make([]int8, n)
	for k := range xs {
		x := online.Vector{Idx: make([]uint32, d), Val: make([]float64, d)}
		for i := range x.Val {
			x.Idx[i] = uint32(i)
			x.Val[i] = r.NormFloat64() / math.Sqrt(float64(d))
		}
		y := online.Positive
		if x.Dot(u)+0.3 < 0 {
			y = online.Negative
		}
		if r.Float64() < noise {
			y = -y
		}
		xs[k], ys[k] = x, y
	}
	return xs, ys
}

// hindsight is the comparator problem F(u) = Σ_t loss(⟨u,(x_t,1)⟩, y_t)
// over u ∈ R^dim (dim = d, or d+1 with the bias last). For the hinge loss
// the solver works on its Huber smoothing with parameter mu > 0, which is
// below the hinge everywhere and at most mu/2 under it.
type hindsight struct {
	loss string
	mu   float64
	xs   []online.Vector
	ys   []int8
	bias bool
	dim  int
}

// term returns the loss of the solver's objective (smoothed for the hinge)
// and its derivative in the score.
func (h *hindsight) term(s float64, y int8) (float64, float64) {
	if h.loss != online.LossHinge || h.mu == 0 {
		return refLoss(h.loss, s, y)
	}
	fy := float64(y)
	z := fy * s
	switch {
	case z >= 1:
		return 0, 0
	case z >= 1-h.mu:
		return (1 - z) * (1 - z) / (2 * h.mu), -fy * (1 - z) / h.mu
	default:
		return 1 - z - h.mu/2, -fy
	}
}

// eval returns the objective at u and writes its gradient into g (if not
// nil); exact reports the unsmoothed loss instead.
func (h *hindsight) eval(g, u []float64, exact bool) float64 {
	for i := range g {
		g[i] = 0
	}
	var sum float64
	for k, x := range h.xs {
		s := x.Dot(u)
		if h.bias {
			s += u[h.dim-1]
		}
		var l, c float64
		if exact {
			l, c = refLoss(h.loss, s, h.ys[k])
		} else {
			l, c = h.term(s, h.ys[k])
		}
		sum += l
		if g == nil {
			continue
		}
		for j, i := range x.Idx {
			g[i] += c * x.Val[j]
		}
		if h.bias {
			g[h.dim-1] += c
		}
	}
	return sum
}

func projectInPlace(u []float64, B float64) {
	if n := floats.Norm(u, 2); n > B {
		floats.Scale(B/n, u)
	}
}

// best minimizes the objective over the ball ‖u‖ ≤ B by projected
// accelerated gradient (FISTA, Beck & Teboulle 2009, step 1/L with L a
// bound on the gradient's Lipschitz constant: Σ‖x̃‖² times ¼ for the
// logistic loss, 1 for the squared loss, 1/mu for the smoothed hinge). It
// returns the point u, the true (unsmoothed) loss F(u) and a certified
// lower bound on min over the ball of F: by convexity, for every v in the
// ball F(v) ≥ F_mu(v) ≥ F_mu(u) + ⟨∇F_mu(u), v−u⟩ ≥ F_mu(u) − ⟨∇F_mu(u),u⟩
// − B‖∇F_mu(u)‖ (F_mu = F for the smooth losses). The regret is tested
// against that lower bound, so the test is sound however accurate the
// solver is; F(u) − lower is the certified accuracy, logged below.
func (h *hindsight) best(B float64) (u []float64, fu, lower float64) {
	var L float64
	for _, x := range h.xs {
		L += x.Norm2()
		if h.bias {
			L++
		}
	}
	switch h.loss {
	case online.LossLogistic:
		L /= 4
	case online.LossHinge:
		L /= h.mu
	}
	u = make([]float64, h.dim)
	prev := make([]float64, h.dim)
	y := make([]float64, h.dim)
	g := make([]float64, h.dim)
	tk := 1.0
	// certify returns the objective at u and the lower bound.
	certify := func() (float64, float64) {
		f := h.eval(g, u, false)
		return f, f - floats.Dot(g, u) - B*floats.Norm(g, 2)
	}
	for it := 1; it <= 50000; it++ {
		// u ← Π(y − ∇F(y)/L); y ← u + ((t_k − 1)/t_{k+1})(u − prev).
		copy(prev, u)
		h.eval(g, y, false)
		for i := range u {
			u[i] = y[i] - g[i]/L
		}
		projectInPlace(u, B)
		tn := (1 + math.Sqrt(1+4*tk*tk)) / 2
		for i := range y {
			y[i] = u[i] + (tk-1)/tn*(u[i]-prev[i])
		}
		tk = tn
		if it%500 == 0 {
			if f, lb := certify(); f-lb < 1e-7*(1+f) {
				break
			}
		}
	}
	_, lower = certify()
	return u, h.eval(nil, u, true), lower
}

// TestOGDRegret: the cumulative loss of OGD minus that of the best fixed
// comparator of the ball in hindsight stays within the published Value,
// and the regret against 0 within RegretBound, for every loss, schedule,
// step, radius and bias; and the iterates stay in the ball.
func TestOGDRegret(t *testing.T) {
	const d, n = 5, 400
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, sched := range []string{online.ScheduleSqrt, online.ScheduleFixed} {
			for _, tc := range []struct {
				eta, radius float64
				bias        bool
			}{
				{0.1, 1, false},
				{1, 3, false},
				{0.5, 1, true},
				{0.05, 0, true},
				{1, 0, false},
			} {
				name := fmt.Sprintf("%s/%s/eta=%v/B=%v/bias=%v", loss, sched, tc.eta, tc.radius, tc.bias)
				xs, ys := noisyStream(uint64(len(name)), d, n, 0.15)
				o, err := online.NewOGD(4, online.OGDConfig{Loss: loss, Eta: tc.eta, Schedule: sched, Radius: tc.radius, Bias: tc.bias})
				if err != nil {
					t.Fatal(err)
				}
				var L float64
				for k, x := range xs {
					p := o.Predict(x)
					want, _ := refLoss(loss, p.Score, ys[k])
					l := o.Loss(p, ys[k])
					if math.Abs(l-want) > 1e-12*(1+want) {
						t.Fatalf("%s: round %d: Loss %v, reference %v", name, k, l, want)
					}
					L += l
					o.Learn(x, p, ys[k])
				}
				g := o.Guarantee()
				zero, _ := refLoss(loss, 0, online.Positive)
				if g.Kind != online.RegretBound || g.Comparator != "zero_vector" || math.Abs(g.ComparatorLoss-n*zero) > 1e-9 {
					t.Fatalf("%s: guarantee %+v", name, g)
				}
				if reg0 := L - g.ComparatorLoss; reg0 > g.RegretBound {
					t.Errorf("%s: regret against 0 %v > bound %v", name, reg0, g.RegretBound)
				}
				if g.RegretBound != g.Value || g.Violations != 0 {
					t.Errorf("%s: RegretBound %v != Value %v or violations %d", name, g.RegretBound, g.Value, g.Violations)
				}
				// The bound against every u of the ball: the certificate when
				// there is a ball, Value (= the u = 0 bound, D = max ‖w‖) when not.
				ball := g.Value
				if tc.radius > 0 {
					if g.CertificateKind != "ball_regret_bound" || g.Certificate < g.Value {
						t.Fatalf("%s: ball certificate %q %v below the u = 0 bound %v", name, g.CertificateKind, g.Certificate, g.Value)
					}
					ball = g.Certificate
				}
				w := o.Weights(nil)
				if tc.radius > 0 && floats.Norm(w, 2) > tc.radius*(1+1e-12) {
					t.Errorf("%s: ‖w‖ = %v outside the ball %v", name, floats.Norm(w, 2), tc.radius)
				}
				if tc.radius == 0 {
					continue
				}
				dim := d
				if tc.bias {
					dim++
				}
				h := &hindsight{loss: loss, mu: 0.002, xs: xs, ys: ys, bias: tc.bias, dim: dim}
				_, fu, lower := h.best(tc.radius)
				if lower > fu+1e-9 {
					t.Fatalf("%s: lower bound %v above F(u) %v", name, lower, fu)
				}
				if reg := L - lower; reg > ball {
					t.Errorf("%s: regret against the best of the ball ≤ %v > bound %v", name, reg, ball)
				}
				t.Logf("%-40s loss %8.2f  best-in-ball %8.2f (certified gap %.1e)  regret ≤ %7.2f  bound %8.2f  vs 0: %7.2f ≤ %8.2f",
					name, L, fu, fu-lower, L-lower, ball, L-g.ComparatorLoss, g.RegretBound)
			}
		}
	}
}

// TestOGDBoundFormulas pins the published formulas on a hand-computable
// case: one-dimensional x = 1, y = +1, hinge loss.
func TestOGDBoundFormulas(t *testing.T) {
	x := online.Vector{Idx: []uint32{0}, Val: []float64{1}}
	for _, tc := range []struct {
		cfg         online.OGDConfig
		rounds      int
		value, zero float64
	}{
		// fixed η = 0.25: scores 0, .25, .5, .75, 1 → hinge gradients -1 on
		// the first four rounds; G = 1. Value = B²/(2η) + ηG²T/2.
		{online.OGDConfig{Eta: 0.25, Schedule: online.ScheduleFixed, Radius: 2}, 5, 4.0/0.5 + 0.25*5/2, 0.25 * 5 / 2},
		// no ball: Value = RegretBound = ηG²T/2.
		{online.OGDConfig{Eta: 0.25, Schedule: online.ScheduleFixed}, 5, 0.25 * 5 / 2, 0.25 * 5 / 2},
		// sqrt, B = 2, T = 4: (2B)²√T/(2η) + ηG²(√T − ½) and B²√T/(2η) + ….
		{online.OGDConfig{Eta: 0.5, Radius: 2}, 4, 16*2/1.0 + 0.5*1.5, 4*2/1.0 + 0.5*1.5},
	} {
		o, err := online.NewOGD(1, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range tc.rounds {
			o.Predict(x)
			o.Learn(x, o.Predict(x), online.Positive)
		}
		g := o.Guarantee()
		ball := g.Value // without a ball, the u = 0 bound is the only one
		if tc.cfg.Radius > 0 {
			ball = g.Certificate
		}
		if math.Abs(ball-tc.value) > 1e-12 || math.Abs(g.RegretBound-tc.zero) > 1e-12 || g.Value != g.RegretBound {
			t.Errorf("%+v: ball bound %v, Value %v, RegretBound %v, want %v and %v", tc.cfg, ball, g.Value, g.RegretBound, tc.value, tc.zero)
		}
	}
	// sqrt without a ball uses D = max ‖w(t)‖: with η = 1, x = 1, y = +1:
	// w(1) = 0, w(2) = 1 (score 0 < 1), w(3) = 1 (score 1: no step).
	o, _ := online.NewOGD(1, online.OGDConfig{Eta: 1})
	for range 3 {
		o.Predict(x)
		o.Learn(x, o.Predict(x), online.Positive)
	}
	r := math.Sqrt(3)
	if g, want := o.Guarantee(), 1*r/2+1*1*(r-0.5); math.Abs(g.Value-want) > 1e-12 || g.RegretBound != g.Value {
		t.Errorf("sqrt, no ball: %+v, want %v", g, want)
	}
}

// TestOGDProjectionRenormalizes drives the scale factor under 1e-100 with
// a tiny ball and checks the weights against a dense reference OGD.
func TestOGDProjectionRenormalizes(t *testing.T) {
	const B = 1e-3
	cfg := online.OGDConfig{Loss: online.LossLogistic, Eta: 10, Schedule: online.ScheduleFixed, Radius: B, Bias: true}
	o, _ := online.NewOGD(3, cfg)
	ref := make([]float64, 9)
	r := rand.New(rand.NewPCG(5, 5))
	for k := range 3000 {
		x := online.Vector{Idx: []uint32{uint32(k % 8)}, Val: []float64{1 + r.Float64()}}
		y := online.Positive
		if r.IntN(3) == 0 {
			y = online.Negative
		}
		p := o.Predict(x)
		s := ref[x.Idx[0]]*x.Val[0] + ref[8]
		if math.Abs(p.Score-s) > 1e-9*B {
			t.Fatalf("round %d: score %v, reference %v", k, p.Score, s)
		}
		o.Learn(x, p, y)
		_, c := refLoss(online.LossLogistic, s, y)
		ref[x.Idx[0]] -= 10 * c * x.Val[0]
		ref[8] -= 10 * c
		if n := floats.Norm(ref, 2); n > B {
			floats.Scale(B/n, ref)
		}
	}
	w := o.Weights(nil)
	if !floats.EqualApprox(w, ref, 1e-9*B) {
		t.Errorf("weights %v, reference %v", w, ref)
	}
}

// TestOGDDivergenceIsContained: the squared loss with a step too large
// diverges; OGD refuses the overflowing steps and counts them.
func TestOGDDivergenceIsContained(t *testing.T) {
	o, _ := online.NewOGD(2, online.OGDConfig{Loss: online.LossSquared, Eta: 5, Schedule: online.ScheduleFixed})
	x := online.Vector{Idx: []uint32{0, 1}, Val: []float64{1, 1}}
	for k := range 2000 {
		y := online.Positive
		if k%2 == 1 {
			y = online.Negative
		}
		p := o.Predict(x)
		if math.IsNaN(p.Score) || math.IsInf(p.Score, 0) || math.IsInf(o.Loss(p, y), 0) {
			t.Fatalf("round %d: score %v", k, p.Score)
		}
		o.Learn(x, p, y)
	}
	if g := o.Guarantee(); g.Violations == 0 || math.IsInf(g.Value, 0) || math.IsNaN(g.Value) {
		t.Errorf("guarantee %+v: want refused steps and a finite bound", g)
	}
}

func TestOGDConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  online.OGDConfig
		want string
	}{
		{online.OGDConfig{Loss: "hinj"}, "loss"},
		{online.OGDConfig{Schedule: "log"}, "schedule"},
		{online.OGDConfig{Eta: -1}, "eta"},
		{online.OGDConfig{Eta: math.Inf(1)}, "eta"},
		{online.OGDConfig{Radius: -2}, "radius"},
		{online.OGDConfig{BiasEta: 0.1}, "bias_eta"},
		{online.OGDConfig{Bias: true, BiasEta: 0.01, Radius: 1}, "bias_eta"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.cfg, err, tc.want)
		}
	}
	o, err := online.NewOGD(4, online.OGDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := online.OGDConfig{Loss: online.DefaultOGDLoss, Eta: online.DefaultOGDEta, Schedule: online.DefaultOGDSchedule}
	if got := o.Config(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	// bias_eta equal to eta is plain OGD and may project.
	if _, err := online.NewOGD(4, online.OGDConfig{Bias: true, Eta: 0.5, BiasEta: 0.5, Radius: 1}); err != nil {
		t.Error(err)
	}
}

// TestOGDHingeKink: at y·s = 1 exactly the hinge subgradient is 0, so OGD
// takes no step, whether the round is played by Round or by Predict, Loss
// and Update.
func TestOGDHingeKink(t *testing.T) {
	x := online.Vector{Idx: []uint32{0}, Val: []float64{1}}
	cfg := online.OGDConfig{Loss: online.LossHinge, Eta: 1, Schedule: online.ScheduleFixed}
	for _, fused := range []bool{false, true} {
		o, err := online.NewOGD(2, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var losses []float64
		for range 3 { // s = 0: step to w_0 = 1; then s = 1: at the kink
			if fused {
				_, l := o.Round(x, online.Positive)
				losses = append(losses, l)
			} else {
				p := o.Predict(x)
				losses = append(losses, o.Loss(p, online.Positive))
				o.Learn(x, p, online.Positive)
			}
		}
		if w := o.Weights(nil); w[0] != 1 || losses[0] != 1 || losses[1] != 0 || losses[2] != 0 {
			t.Errorf("Round %v: w_0 = %v, losses %v; want 1, [1 0 0]", fused, w[0], losses)
		}
	}
}

// Labels that come late: OGD predicts on arrival and learns each label
// 0..lag arrivals later from the prediction it served. Its regret against
// 0, and against the best of the ball, stays within DelayedGuarantee(d),
// d the most rounds learned while a label waited; d = 0 is the immediate
// guarantee. Labels up to 30 rounds late; with STREAMLEARN_FULL=1 also up
// to 3.
func TestOGDDelayedRegret(t *testing.T) {
	const dim, n = 5, 400
	lags := []int{30, 3}[:testmode.Reps(1, 2)]
	for _, loss := range []string{online.LossHinge, online.LossLogistic, online.LossSquared} {
		for _, sched := range []string{online.ScheduleSqrt, online.ScheduleFixed} {
			for _, lag := range lags {
				for _, tc := range []struct {
					eta, radius float64
					bias        bool
				}{{0.1, 1, false}, {1, 3, false}, {0.5, 1, true}, {1, 0, false}} {
					name := fmt.Sprintf("%s/%s/lag=%d/eta=%v/B=%v/bias=%v", loss, sched, lag, tc.eta, tc.radius, tc.bias)
					xs, ys := noisyStream(uint64(len(name)), dim, n, 0.15)
					o, err := online.NewOGD(4, online.OGDConfig{Loss: loss, Eta: tc.eta, Schedule: sched, Radius: tc.radius, Bias: tc.bias})
					if err != nil {
						t.Fatal(err)
					}
					if g0, ok := o.DelayedGuarantee(0); !ok || g0 != o.Guarantee() {
						t.Fatalf("%s: DelayedGuarantee(0) = %+v, want the guarantee", name, g0)
					}
					var L float64
					d := onlinetest.Delayed(len(xs), lag, uint64(lag),
						func(k int) online.Prediction { return o.Predict(xs[k]) },
						func(k int, served online.Prediction, _ int) {
							L += o.Loss(served, ys[k])
							o.Learn(xs[k], served, ys[k])
						})
					g, ok := o.DelayedGuarantee(uint64(d))
					if !ok || d == 0 {
						t.Fatalf("%s: no delayed guarantee, or no delay (d = %d)", name, d)
					}
					if reg0 := L - g.ComparatorLoss; reg0 > g.RegretBound {
						t.Errorf("%s (d=%d): regret against 0 %v > bound %v", name, d, reg0, g.RegretBound)
					}
					if tc.radius == 0 {
						continue
					}
					h := &hindsight{loss: loss, mu: 0.002, xs: xs, ys: ys, bias: tc.bias, dim: dim + map[bool]int{true: 1}[tc.bias]}
					_, _, lower := h.best(tc.radius)
					if reg := L - lower; reg > g.Certificate {
						t.Errorf("%s (d=%d): regret against the best of the ball ≤ %v > bound %v", name, d, reg, g.Certificate)
					}
				}
			}
		}
	}
}

// TestSparseBytes: the sparse learners and scaler over 2^18 slots hold
// arrays for the slots their space met (at most twice as many, for the
// growth), where the dense ones hold 2^18, and say so (online.Sizer),
// after rounds of 12 slots each.
func TestSparseBytes(t *testing.T) {
	const bits = 18
	space, err := online.NewSpace(bits)
	if err != nil {
		t.Fatal(err)
	}
	type sized interface {
		online.Learner
		online.Sizer
	}
	ogd, _ := online.NewSparseOGD(space, online.OGDConfig{Bias: true})
	peg, _ := online.NewSparsePegasos(space, online.PegasosConfig{})
	mc, _ := online.NewSparseMulticlassPerceptron(space, 3, online.MulticlassPerceptronConfig{})
	sc, _ := online.NewSparseScaler(space, online.ScaleStandard)
	dense := map[string]online.Sizer{}
	dense["ogd"], _ = online.NewOGD(bits, online.OGDConfig{Bias: true})
	dense["pegasos"], _ = online.NewPegasos(bits, online.PegasosConfig{})
	dense["multiclass-perceptron"], _ = online.NewMulticlassPerceptron(bits, 3, online.MulticlassPerceptronConfig{})
	dense["scaler"], _ = online.NewScaler(bits, online.ScaleStandard)
	r := rand.New(rand.NewPCG(5, 6))
	var scaled, x online.Vector
	for k := range 100 {
		sc.Transform(&scaled, onlinetest.RandomVector(r, bits, 12))
		space.Map(&x, scaled)
		for _, l := range []sized{ogd, peg} {
			l.Learn(x, l.Predict(x), []int8{-1, 1}[k%2])
		}
		mc.Learn(x, mc.Predict(x), int8(k%3))
	}
	n := space.Len() // the slots met (1,199 of 1,200 draws) and the bias's
	for name, c := range map[string]struct {
		l       online.Sizer
		perSlot int
	}{"ogd": {ogd, 8}, "pegasos": {peg, 8}, "multiclass-perceptron": {mc, 3 * 8}, "scaler": {sc, 24}} {
		got, want, d := c.l.Bytes(), c.perSlot*n, dense[name].Bytes()
		if got < want || got > 2*want+4*12 {
			t.Errorf("%s: %d bytes over %d numbers, want %d to %d", name, got, n, want, 2*want)
		}
		if d < c.perSlot<<bits {
			t.Errorf("dense %s: %d bytes, want at least %d", name, d, c.perSlot<<bits)
		}
	}
}
