package experts_test

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/online"
)

// SOA over 64 thresholds on v ∈ [0, 1]: Ldim(H) = ⌊log₂ 64⌋ = 6.
func ExampleSOA() {
	const bits = 18
	c, err := experts.NewClass(experts.ClassSpec{Kind: "thresholds", Feature: "v", Min: 0, Max: 1, Points: 64}, bits)
	if err != nil {
		panic(err)
	}
	soa := experts.NewSOA(c)
	slot := online.Slot("v", online.Mask(bits))
	mistakes := 0
	for _, v := range []float64{0.5, 0.25, 0.75, 0.6, 0.7, 0.65, 0.66, 0.1, 0.9} {
		x := online.Vector{Idx: []uint32{slot}, Val: []float64{v}}
		y := online.Negative
		if v >= 0.65 { // the target threshold
			y = online.Positive
		}
		if soa.Predict(x).Label != y {
			mistakes++
		}
		soa.Learn(x, soa.Predict(x), y)
	}
	g := soa.Guarantee()
	fmt.Println("Ldim(H):", c.Dim(), "bound:", g.Value, "mistakes ≤ bound:", float64(mistakes) <= g.Value, "violations:", g.Violations)
	// Output: Ldim(H): 6 bound: 6 mistakes ≤ bound: true violations: 0
}
