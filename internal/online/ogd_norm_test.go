package online

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestOGDNormRefreshed: OGD keeps ‖w‖² incrementally and recomputes it
// every 2^bits rounds, so on those rounds it is the sum over w, bit for
// bit, and in between it is off by rounding only.
func TestOGDNormRefreshed(t *testing.T) {
	const bits = 4
	o, err := NewOGD(bits, OGDConfig{Loss: LossLogistic, Eta: 0.5, Bias: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	drifted := 0
	for k := 1; k <= 4096; k++ {
		var x Vector
		for i := range uint32(1 << bits) {
			if r.IntN(3) == 0 {
				x.Idx = append(x.Idx, i)
				x.Val = append(x.Val, r.NormFloat64())
			}
		}
		y := Positive
		if r.IntN(2) == 0 {
			y = Negative
		}
		o.Predict(x)
		o.Learn(x, o.Predict(x), y)
		var w2 float64
		for _, v := range o.v[:o.dim] {
			w := o.s * v
			w2 += w * w
		}
		if k%(1<<bits) == 0 {
			if o.w2 != w2 {
				t.Fatalf("round %d: ‖w‖² kept as %v, recomputed %v", k, o.w2, w2)
			}
			continue
		}
		if o.w2 != w2 {
			drifted++
		}
		if math.Abs(o.w2-w2) > 1e-12*w2 {
			t.Fatalf("round %d: ‖w‖² kept as %v drifted from %v", k, o.w2, w2)
		}
	}
	if drifted == 0 {
		t.Fatal("the incremental ‖w‖² never drifted: the test shows nothing")
	}
	t.Logf("‖w‖² off by rounding on %d rounds between refreshes", drifted)
}
