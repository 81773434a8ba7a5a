package online

import (
	"iter"
	"slices"
)

// inOrder yields the number and the hashed slot of each of s's numbers
// below n (the length of a vector in its numbers, stride 1), in the order
// of the slots: the bias's, number 0, last. A sum over the dense vector
// that runs in its order, one value at a time, is the sum over these
// numbers in this order: the values it skips are the dense vector's
// zeros, which add nothing.
func (s *Space) inOrder(n int) iter.Seq2[int, int] {
	return func(yield func(k, slot int) bool) {
		for _, k := range s.sorted() {
			if int(k) < n && !yield(int(k), int(s.slots[k])) {
				return
			}
		}
	}
}

// growTo returns s with at least n elements, the new ones zero, growing its
// capacity geometrically.
func growTo[T any](s []T, n int) []T {
	if len(s) >= n {
		return s
	}
	m := len(s)
	s = slices.Grow(s, n-m)[:n]
	clear(s[m:])
	return s
}
