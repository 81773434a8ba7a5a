package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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

// kernelCase is a random input of the kernels: weights of a random length,
// often 2^j or 2^j+1 as the learners' are; entries that are mostly below
// the largest power of two in len(w), sometimes above it (the bias slot
// of a learner), sometimes repeated; values of every magnitude, some of
// them ±0, ±Inf, NaN or subnormal.
func kernelCase(r *rand.Rand) (w []float64, x Vector) {
	n := 1 << r.IntN(11)
	switch r.IntN(4) {
	case 0:
		n++
	case 1:
		n = 1 + r.IntN(300)
	}
	w = make([]float64, n)
	for i := range w {
		w[i] = kernelValue(r)
	}
	m := r.IntN(50)
	if r.IntN(20) == 0 {
		m = 1000
	}
	x = Vector{Idx: make([]uint32, m), Val: make([]float64, m)}
	low := int(lowSlots(n))
	for k := range x.Idx {
		switch {
		case k > 0 && r.IntN(10) == 0:
			x.Idx[k] = x.Idx[r.IntN(k)] // repeated slot
		case r.IntN(30) == 0:
			x.Idx[k] = uint32(r.IntN(n)) // anywhere, the top slots included
		default:
			x.Idx[k] = uint32(r.IntN(low))
		}
		x.Val[k] = kernelValue(r)
	}
	return w, x
}

// lowSlots is the largest power of two ≤ n: the assembly kernels mask
// indices below it.
func lowSlots(n int) uint64 {
	p := uint64(1)
	for p*2 <= uint64(n) {
		p *= 2
	}
	return p
}

func kernelValue(r *rand.Rand) float64 {
	if r.IntN(25) == 0 {
		return []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, -1e-310, math.MaxFloat64}[r.IntN(8)]
	}
	return r.NormFloat64() * math.Exp(8*r.NormFloat64())
}

// sameBits reports whether a and b are the same float64, NaN matching any
// NaN: which of two NaN operands x86 propagates depends on the operand
// order, which Go does not fix either (the race detector's build of a
// kernel returns another payload than the plain build). No caller reads a
// payload.
func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

// checkKernels runs every kernel with an assembly version (on amd64) and
// its Go version on one input and reports the first difference.
func checkKernels(t *testing.T, w []float64, x Vector) {
	t.Helper()
	d1, n1 := dotNorm2(x.Idx, x.Val, w)
	d2, n2 := dotNorm2Generic(x.Idx, x.Val, w)
	if !sameBits(d1, d2) || !sameBits(n1, n2) {
		t.Fatalf("dotNorm2 = %v, %v; Go %v, %v (len(w) %d, x %v)", d1, n1, d2, n2, len(w), x)
	}
}

// TestKernelsMatchGeneric: the kernels the learners call compute the bits
// of the Go versions in kernel.go, on every kind of input, weights as
// well as results (on amd64 this compares the assembly with Go).
func TestKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 20000 {
		w, x := kernelCase(r)
		checkKernels(t, w, x)
	}
}

// TestKernelsOutOfRange: an index ≥ len(w) panics in every kernel, as an
// index out of range; len(val) < len(idx) panics.
func TestKernelsOutOfRange(t *testing.T) {
	for _, c := range []struct {
		n   int
		idx []uint32
	}{
		{16, []uint32{1, 3, 15, 16, 5}},
		{17, []uint32{1, 3, 15, 17, 5}},
		{16, []uint32{16}}, // alone: only the mask can tell it from a valid index
		{1 << 10, []uint32{1 << 10}},
	} {
		n := c.n
		w := make([]float64, n)
		x := Vector{Idx: c.idx, Val: []float64{1, 2, 3, 4, 5}[:len(c.idx)]}
		want := fmt.Sprintf("index out of range [%d] with length %d", n, n)
		mustPanic := func(name string, f func()) {
			t.Helper()
			defer func() {
				if e, _ := recover().(error); e == nil || !strings.Contains(e.Error(), want) {
					t.Errorf("len(w) %d: %s: recovered %v, want %s", n, name, e, want)
				}
			}()
			f()
		}
		mustPanic("dotNorm2", func() { dotNorm2(x.Idx, x.Val, w) })
		mustPanic("dot", func() { dot(x.Idx, x.Val, w) })
		mustPanic("axpy", func() { axpy(w, 2, x.Idx, x.Val) })
		short := x.Val[:len(x.Idx)-1]
		for name, f := range map[string]func(){
			"dotNorm2": func() { dotNorm2(x.Idx, short, w) },
			"dot":      func() { dot(x.Idx, short, w) },
			"axpy":     func() { axpy(w, 1, x.Idx, short) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: len(val) < len(idx) did not panic", name)
					}
				}()
				f()
			}()
		}
	}
	for name, f := range map[string]func(){
		"dotNorm2": func() { dotNorm2([]uint32{0}, []float64{1}, nil) },
		"dot":      func() { dot([]uint32{0}, []float64{1}, nil) },
		"axpy":     func() { axpy(nil, 1, []uint32{0}, []float64{1}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: an index into an empty w did not panic", name)
				}
			}()
			f()
		}()
	}
}

// FuzzKernels compares the kernels with their Go versions on inputs made
// from the fuzzer's values, the seeds of a kernelCase.
func FuzzKernels(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(3), uint64(0))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		w, x := kernelCase(rand.New(rand.NewPCG(s1, s2)))
		checkKernels(t, w, x)
	})
}

// BenchmarkKernels compares each kernel the learners call (the assembly
// on amd64) with its Go version on 256 vectors of 40 random slots, over
// weights that stay in L1 (2^10 slots) and over the default 2^18 slots.
func BenchmarkKernels(b *testing.B) {
	for _, bits := range []uint{10, 18} {
		r := rand.New(rand.NewPCG(9, 9))
		w := make([]float64, 1<<bits+1)
		for i := range w {
			w[i] = r.NormFloat64()
		}
		xs := make([]Vector, 256)
		for k := range xs {
			for range 40 {
				xs[k].Idx = append(xs[k].Idx, uint32(r.IntN(1<<bits)))
				xs[k].Val = append(xs[k].Val, r.NormFloat64())
			}
			slices.Sort(xs[k].Idx)
		}
		var sink float64
		for _, kc := range []struct {
			name string
			f    func(x Vector) float64
		}{
			{"dotNorm2", func(x Vector) float64 { d, n := dotNorm2(x.Idx, x.Val, w); return d + n }},
			{"dotNorm2/go", func(x Vector) float64 { d, n := dotNorm2Generic(x.Idx, x.Val, w); return d + n }},
		} {
			b.Run(fmt.Sprintf("bits=%d/%s", bits, kc.name), func(b *testing.B) {
				k := 0
				for b.Loop() {
					sink += kc.f(xs[k&255])
					k++
				}
			})
		}
		_ = sink
	}
}
