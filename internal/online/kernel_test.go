package online

import (
	"math"
	"math/rand/v2"
	"testing"
)

// canonicalSum is the canonical summation order of Vector, written out:
// term k into partial sum k mod 4, then (s0+s1)+(s2+s3).
func canonicalSum(terms []float64) float64 {
	var s [4]float64
	for k, t := range terms {
		s[k%4] += t
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// TestKernelsCanonicalOrder: Dot, Norm2, dotNorm2 and the OGD steps sum in
// exactly the documented order, for every length mod 4, and update the
// weights as written.
func TestKernelsCanonicalOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	w := make([]float64, 64)
	for n := 0; n <= 13; n++ {
		for rep := 0; rep < 20; rep++ {
			for i := range w {
				w[i] = r.NormFloat64() * math.Exp(10*r.NormFloat64())
			}
			x := Vector{Idx: make([]uint32, n), Val: make([]float64, n)}
			for k := range x.Idx {
				x.Idx[k] = uint32(r.IntN(len(w)))
				x.Val[k] = r.NormFloat64() * math.Exp(5*r.NormFloat64())
			}
			dt, nt := make([]float64, n), make([]float64, n)
			for k, i := range x.Idx {
				dt[k] = w[i] * x.Val[k]
				nt[k] = x.Val[k] * x.Val[k]
			}
			wantDot, wantN2 := canonicalSum(dt), canonicalSum(nt)
			d, n2 := dotNorm2(x.Idx, x.Val, w)
			if d != wantDot || x.Dot(w) != wantDot || n2 != wantN2 || x.Norm2() != wantN2 {
				t.Fatalf("n=%d: dotNorm2 = %v, %v, Dot %v, Norm2 %v; want %v, %v", n, d, n2, x.Dot(w), x.Norm2(), wantDot, wantN2)
			}

			// Distinct slots, so that the reference below is simple.
			for k := range x.Idx {
				x.Idx[k] = uint32(k * 4)
			}
			const eta, c, s = 0.3, -1.7, 0.25
			for _, scaled := range []bool{false, true} {
				v := append([]float64(nil), w...)
				want := append([]float64(nil), w...)
				terms := make([]float64, n)
				for k, i := range x.Idx {
					old := want[i]
					if scaled {
						old = s * want[i]
					}
					nw := old - float64(eta*float64(c*x.Val[k])) // no FMA, as documented
					want[i] = nw
					if scaled {
						want[i] = nw * (1 / s)
					}
					terms[k] = float64(nw*nw) - float64(old*old)
				}
				var got float64
				if scaled {
					got = stepScaled(v, s, 1/s, eta, c, x.Idx, x.Val)
				} else {
					got = stepUnscaled(v, eta, c, x.Idx, x.Val)
				}
				if wantD := canonicalSum(terms); got != wantD && !(math.IsNaN(got) && math.IsNaN(wantD)) {
					t.Fatalf("n=%d scaled=%v: Δ‖w‖² = %v, want %v", n, scaled, got, wantD)
				}
				for i := range v {
					if math.Float64bits(v[i]) != math.Float64bits(want[i]) {
						t.Fatalf("n=%d scaled=%v: v[%d] = %v, want %v", n, scaled, i, v[i], want[i])
					}
				}
			}
		}
	}
}

// TestTransformFused: Transform (one pass over a canonical x) gives the
// same statistics and output bits as Observe then Scale, also on vectors
// with repeated or unordered slots (which take the two-pass path).
func TestTransformFused(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	a, _ := NewScaler(5, ScaleStandard)
	b, _ := NewScaler(5, ScaleStandard)
	var za, zb Vector
	for round := 0; round < 2000; round++ {
		n := r.IntN(12)
		x := Vector{}
		for k := 0; k < n; k++ {
			x.Idx = append(x.Idx, uint32(r.IntN(32)))
			x.Val = append(x.Val, r.NormFloat64()*3+1)
		}
		if round%3 != 0 { // mostly canonical vectors
			x.Idx = x.Idx[:0]
			x.Val = x.Val[:0]
			for i := uint32(0); i < 32; i++ {
				if r.IntN(4) == 0 {
					x.Idx = append(x.Idx, i)
					x.Val = append(x.Val, r.NormFloat64()*3+1)
				}
			}
		}
		a.Transform(&za, x)
		b.Observe(x)
		b.Scale(&zb, x)
		for k := range za.Val {
			if za.Idx[k] != zb.Idx[k] || math.Float64bits(za.Val[k]) != math.Float64bits(zb.Val[k]) {
				t.Fatalf("round %d: entry %d: %d:%v, want %d:%v", round, k, za.Idx[k], za.Val[k], zb.Idx[k], zb.Val[k])
			}
		}
	}
	ea, _ := a.MarshalBinary()
	eb, _ := b.MarshalBinary()
	if string(ea) != string(eb) {
		t.Fatal("statistics differ")
	}
}
