package online

import (
	"math/rand/v2"
	"testing"
)

// TestKernelPerceptronBudgetMemory: with max_support B, the support and
// its arenas stay bounded however many updates come: at most B vectors
// kept, and arenas of at most 2·max(B, 64) + 1 vectors' entries.
func TestKernelPerceptronBudgetMemory(t *testing.T) {
	for _, B := range []int{1, 50} {
		budgetMemory(t, B)
	}
}

func budgetMemory(t *testing.T, B int) {
	const nnz = 8
	k, err := NewKernelPerceptron(10, KernelPerceptronConfig{MaxSupport: B})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	for round := range 20000 {
		var x Vector
		for i := range nnz {
			x.Idx, x.Val = append(x.Idx, uint32(i*100+r.IntN(100))), append(x.Val, r.NormFloat64())
		}
		y := int8(1 - 2*r.IntN(2)) // noise: an update on about half of the rounds
		k.Learn(x, k.Predict(x), y)
		if k.count > B || len(k.idx) > (2*max(B, 64)+1)*nnz || len(k.sup) > 2*max(B, 64)+1 {
			t.Fatalf("budget %d, round %d: %d kept, %d vectors and %d arena entries held", B, round, k.count, len(k.sup), len(k.idx))
		}
	}
	if k.updates < 5000 {
		t.Fatalf("budget %d: %d updates: the budget was not exercised", B, k.updates)
	}
}
