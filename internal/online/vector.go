package online

import "math"

// Vector is a sparse vector over hashed feature slots: Val[k] is the value at
// slot Idx[k] (Idx and Val have the same length). Vectors produced by
// decoders have strictly increasing Idx (duplicates summed), which makes
// every sum over the entries of x run in one canonical order: results do
// not depend on the order features arrived in.
//
// The canonical summation order (Dot, Norm2, and the learners' sums over x,
// such as OGD's change of ‖w‖²): the term of entry k goes into partial sum
// k mod 4, each partial sum adds its terms in increasing k, and the result
// is (s0 + s1) + (s2 + s3). Four independent sums keep the floating-point
// adds from waiting on each other; the order is fixed, so the result is the
// same bits on every run and machine. Products are rounded before they are
// added (never fused into an FMA), on every architecture.
type Vector struct {
	Idx []uint32
	Val []float64
}

// Len returns the number of stored entries.
func (x Vector) Len() int { return len(x.Idx) }

// Dot returns <w, x> in the canonical summation order. w must be longer
// than every index of x.
func (x Vector) Dot(w []float64) float64 { return dot(x.Idx, x.Val, w) }

// Norm2 returns the squared Euclidean norm of x in the canonical summation
// order.
func (x Vector) Norm2() float64 { return norm2(x.Val) }

// Norm returns the Euclidean norm of x.
func (x Vector) Norm() float64 { return math.Sqrt(x.Norm2()) }

// Value returns the value stored at slot i, 0 when absent (a missing
// feature is a zero feature). It is a binary search: x must be canonical.
func (x Vector) Value(i uint32) float64 {
	lo, hi := 0, len(x.Idx)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.Idx[m] < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(x.Idx) && x.Idx[lo] == i {
		return x.Val[lo]
	}
	return 0
}
