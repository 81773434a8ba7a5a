package service

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// appendNumber writes what strconv's shortest 'g' formatting writes, its
// path for whole numbers included: at and around ±10^6 (where 'g' turns to
// an exponent), ±0, halves, huge and tiny values; null for what JSON lacks.
func TestAppendNumber(t *testing.T) {
	vs := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 999999, -999999, 1e6, -1e6, 1e6 + 1, 999999.5,
		123456, 1e21, 1e-7, math.MaxInt64, math.MinInt64, math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vs = append(vs, float64(r.IntN(4_000_000)-2_000_000), r.NormFloat64()*math.Pow(10, float64(r.IntN(20)-10)))
	}
	for _, v := range vs {
		if got, want := string(appendNumber(nil, v)), strconv.FormatFloat(v, 'g', -1, 64); got != want {
			t.Fatalf("appendNumber(%v) = %s, want %s", v, got, want)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := string(appendNumber(nil, v)); got != "null" {
			t.Errorf("appendNumber(%v) = %s, want null", v, got)
		}
	}
}
