package online_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// refPegasos is Pegasos written from the paper's pseudocode on a dense
// weight vector: shrink by 1 − 1/t, step by y·x/(λt) on an active hinge,
// project onto the ball of radius 1/√λ.
type refPegasos struct {
	lambda float64
	bias   bool
	w      []float64 // the bias last
	t      float64
	maxG2  float64
}

func (r *refPegasos) round(x online.Vector, y int8) float64 {
	dim := len(r.w) - 1
	xt := make([]float64, len(r.w))
	for k, i := range x.Idx {
		xt[i] += x.Val[k]
	}
	if r.bias {
		xt[dim] = 1
	}
	var s, w2, x2 float64
	for i := range r.w {
		s += r.w[i] * xt[i]
		w2 += r.w[i] * r.w[i]
		x2 += xt[i] * xt[i]
	}
	r.t++
	fy := float64(y)
	active := fy*s < 1
	g := make([]float64, len(r.w))
	var g2 float64
	for i := range g {
		g[i] = r.lambda * r.w[i]
		if active {
			g[i] -= fy * xt[i]
		}
		g2 += g[i] * g[i]
	}
	r.maxG2 = math.Max(r.maxG2, g2)
	eta := 1 / (r.lambda * r.t)
	var n2 float64
	for i := range r.w {
		r.w[i] -= eta * g[i]
		n2 += r.w[i] * r.w[i]
	}
	if n2 > 1/r.lambda {
		f := 1 / math.Sqrt(r.lambda*n2)
		for i := range r.w {
			r.w[i] *= f
		}
	}
	return s
}

func pegasosStream(seed uint64, bits uint, n int, noise float64) ([]online.Vector, []int8) {
	r := rand.New(rand.NewPCG(seed, 7))
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
			if r.IntN(3) == 0 {
				v := r.NormFloat64()
				x.Idx, x.Val = append(x.Idx, uint32(i)), append(x.Val, v)
				s += u[i] * v
			}
		}
		y := int8(1)
		if s <= 0 {
			y = -1
		}
		if r.Float64() < noise {
			y = -y
		}
		xs[t], ys[t] = x, y
	}
	return xs, ys
}

// TestPegasosReference: Pegasos (weights kept as σ·v, O(nnz) rounds)
// scores every round as the dense pseudocode does, to 1e-9, predicts the
// same labels, and reports the same largest gradient.
func TestPegasosReference(t *testing.T) {
	const bits = 5
	for _, cfg := range []online.PegasosConfig{{Lambda: 0.01}, {Lambda: 0.5, Bias: true}, {Lambda: 1e-4, Bias: true}} {
		xs, ys := pegasosStream(3, bits, 3000, 0.1)
		p, err := online.NewPegasos(bits, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ref := &refPegasos{lambda: cfg.Lambda, bias: cfg.Bias, w: make([]float64, 1<<bits+1)}
		for k, x := range xs {
			want := ref.round(x, ys[k])
			got, _ := p.Round(x, ys[k])
			if math.Abs(got.Score-want) > 1e-9*(1+math.Abs(want)) {
				t.Fatalf("%+v round %d: score %v, reference %v", cfg, k+1, got.Score, want)
			}
		}
		g := p.Guarantee()
		T := float64(len(xs))
		if wantB := ref.maxG2 * (1 + math.Log(T)) / (2 * cfg.Lambda); math.Abs(g.Value-wantB) > 1e-9*wantB {
			t.Errorf("%+v: bound %v, reference %v", cfg, g.Value, wantB)
		}
	}
}

// TestPegasosRegretBound: Hazan, Agarwal & Kale's bound holds for the
// regularized hinge against random u of the ball of radius 1/√λ, and the
// hinge regret against 0 the tracker measures stays under the published
// value; on learnable and on pure-noise streams.
func TestPegasosRegretBound(t *testing.T) {
	const bits = 4
	dim := 1 << bits
	for _, lambda := range []float64{1e-3, 0.1, 1} {
		for _, noise := range []float64{0, 0.5} {
			xs, ys := pegasosStream(uint64(7+lambda*100), bits, 4000, noise)
			p, _ := online.NewPegasos(bits, online.PegasosConfig{Lambda: lambda, Bias: true})
			r := rand.New(rand.NewPCG(1, 2))
			us := make([][]float64, 4)
			for j := range us {
				u := make([]float64, dim+1)
				var n2 float64
				for i := range u {
					u[i] = r.NormFloat64()
					n2 += u[i] * u[i]
				}
				f := float64(j) / 3 / math.Sqrt(lambda*n2) // radius j/3 of the ball's
				for i := range u {
					u[i] *= f
				}
				us[j] = u
			}
			fU := make([]float64, len(us))
			var fW, hinge float64
			var w []float64
			for k, x := range xs {
				w = p.Weights(w[:0])
				var w2 float64
				for _, v := range w {
					w2 += v * v
				}
				pr, l := p.Round(x, ys[k])
				hinge += l
				fW += lambda/2*w2 + l
				for j, u := range us {
					s, u2 := u[dim], 0.0
					for q, i := range x.Idx {
						s += u[i] * x.Val[q]
					}
					for _, v := range u {
						u2 += v * v
					}
					fU[j] += lambda/2*u2 + math.Max(0, 1-float64(ys[k])*s)
				}
				_ = pr
			}
			g := p.Guarantee()
			if !(hinge-g.ComparatorLoss <= g.Value) {
				t.Errorf("λ %v noise %v: hinge regret against 0 %v above the bound %v", lambda, noise, hinge-g.ComparatorLoss, g.Value)
			}
			for j := range us {
				if reg := fW - fU[j]; reg > g.Value*(1+1e-9) {
					t.Errorf("λ %v noise %v u%d: regularized regret %v above G²(1+ln T)/(2λ) = %v", lambda, noise, j, reg, g.Value)
				}
			}
		}
	}
}

// TestPegasosLambdaRange: λ outside [1e-12, 1e6] is refused, naming the key.
func TestPegasosLambdaRange(t *testing.T) {
	for _, l := range []float64{1e-13, 2e6, math.Inf(1), -1} {
		if _, err := online.NewPegasos(4, online.PegasosConfig{Lambda: l}); err == nil || !strings.Contains(err.Error(), "lambda") {
			t.Errorf("λ %v: %v, want an error naming lambda", l, err)
		}
	}
}
