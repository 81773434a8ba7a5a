package online

import "math"

// Vector is a sparse vector over hashed feature slots: Val[k] is the value at
// slot Idx[k]. Vectors produced by decoders have strictly increasing Idx
// (duplicates summed), which makes every dot product sum in one canonical
// order: results do not depend on the order features arrived in.
type Vector struct {
	Idx []uint32
	Val []float64
}

// Len returns the number of stored entries.
func (x Vector) Len() int { return len(x.Idx) }

// Dot returns <w, x>. w must be longer than every index of x.
func (x Vector) Dot(w []float64) float64 {
	var s float64
	for k, i := range x.Idx {
		s += w[i] * x.Val[k]
	}
	return s
}

// Norm2 returns the squared Euclidean norm of x.
func (x Vector) Norm2() float64 {
	var s float64
	for _, v := range x.Val {
		s += v * v
	}
	return s
}

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
