package online_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// TestKernelPerceptronExplicitMap: the kernel Perceptron with the kernel
// (⟨x, z⟩ + 2)² scores every round exactly as the Perceptron on the
// explicit feature map φ(x) = (x_i·x_j for every i, j; 2·x_i; 2), whose
// inner products are that kernel. Features are small integers, so every
// sum is exact and the equality is bit for bit; the labels come from a
// quadratic rule with 10% noise, so both make hundreds of mistakes.
func TestKernelPerceptronExplicitMap(t *testing.T) {
	const dim = 6
	r := rand.New(rand.NewPCG(5, 5))
	two := 2.0
	k, err := online.NewKernelPerceptron(8, online.KernelPerceptronConfig{Degree: 2, Coef: &two})
	if err != nil {
		t.Fatal(err)
	}
	p, err := online.NewPerceptron(6, online.PerceptronConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mistakes, updates := 0, 0
	for round := range 2000 {
		var x, phi online.Vector
		for i := range dim {
			if v := float64(r.IntN(7) - 3); v != 0 {
				x.Idx, x.Val = append(x.Idx, uint32(i)), append(x.Val, v)
			}
		}
		dense := make([]float64, dim)
		for j, i := range x.Idx {
			dense[i] = x.Val[j]
		}
		for i := range dim {
			for j := range dim {
				if v := dense[i] * dense[j]; v != 0 {
					phi.Idx, phi.Val = append(phi.Idx, uint32(i*dim+j)), append(phi.Val, v)
				}
			}
		}
		for i := range dim {
			if dense[i] != 0 {
				phi.Idx, phi.Val = append(phi.Idx, uint32(dim*dim+i)), append(phi.Val, 2*dense[i])
			}
		}
		phi.Idx, phi.Val = append(phi.Idx, dim*dim+dim), append(phi.Val, 2)
		y := int8(1)
		if dense[0]*dense[1]-dense[2]*dense[2]+dense[3] < 1 {
			y = -1
		}
		if r.IntN(10) == 0 {
			y = -y
		}
		pk, pp := k.Predict(x), p.Predict(phi)
		if math.Float64bits(pk.Score) != math.Float64bits(pp.Score) {
			t.Fatalf("round %d: kernel score %v, explicit map %v", round, pk.Score, pp.Score)
		}
		if pk.Label != y {
			mistakes++
		}
		if float64(y)*pk.Score <= 0 { // an update: a mistake, or a score of 0
			updates++
		}
		k.Learn(x, pk, y)
		p.Learn(phi, pp, y)
	}
	if mistakes < 100 || k.Support() != updates {
		t.Errorf("%d mistakes, %d updates, %d support vectors: want hundreds of mistakes, a vector per update", mistakes, updates, k.Support())
	}
}

// TestKernelPerceptronGaussian: the Gaussian kernel's scores equal a direct
// computation of Σ_s y_s·exp(−‖x_s − x‖²/(2σ²)) to 1e-12.
func TestKernelPerceptronGaussian(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	k, _ := online.NewKernelPerceptron(4, online.KernelPerceptronConfig{Kernel: online.KernelGaussian, Sigma: 1.5})
	type sv struct {
		x []float64
		y int8
	}
	var sup []sv
	for range 500 {
		x := make([]float64, 16)
		var v online.Vector
		for i := range x {
			if r.IntN(2) == 0 {
				x[i] = r.NormFloat64()
				v.Idx, v.Val = append(v.Idx, uint32(i)), append(v.Val, x[i])
			}
		}
		var want float64
		for _, s := range sup {
			var d2 float64
			for i := range x {
				d2 += (x[i] - s.x[i]) * (x[i] - s.x[i])
			}
			want += float64(s.y) * math.Exp(-d2/(2*1.5*1.5))
		}
		p := k.Predict(v)
		if math.Abs(p.Score-want) > 1e-12*(1+math.Abs(want)) {
			t.Fatalf("score %v, direct %v", p.Score, want)
		}
		y := int8(1)
		if x[0]+x[1] < 0 {
			y = -1
		}
		if float64(y)*p.Score <= 0 {
			sup = append(sup, sv{x, y})
		}
		k.Learn(v, p, y)
	}
	if len(sup) < 20 || k.Support() != len(sup) {
		t.Errorf("%d support vectors, reference %d", k.Support(), len(sup))
	}
}

// TestKernelPerceptronOverflowRestores: a degree-10 kernel on a value of
// 2^53 makes K(x, x) overflow to +Inf; the state still restores.
func TestKernelPerceptronOverflowRestores(t *testing.T) {
	cfg := online.KernelPerceptronConfig{Degree: 10}
	k, _ := online.NewKernelPerceptron(4, cfg)
	x := online.Vector{Idx: []uint32{1}, Val: []float64{1 << 53}}
	k.Learn(x, k.Predict(x), 1)
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := online.NewKernelPerceptron(4, cfg)
	if err := again.UnmarshalBinary(b); err != nil {
		t.Fatalf("restore: %v", err)
	}
}
