package online

import "iter"

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

var (
	_ Sizer  = (*OGD)(nil)
	_ Sizer  = (*Pegasos)(nil)
	_ Sizer  = (*MulticlassPerceptron)(nil)
	_ Sizer  = (*Scaler)(nil)
	_ Spaced = (*OGD)(nil)
	_ Spaced = (*Pegasos)(nil)
	_ Spaced = (*MulticlassPerceptron)(nil)
	_ Spaced = (*Scaler)(nil)
)
