package experts

import "math/bits"

// Set is a set of hypotheses of a Class: hypothesis i is a member when bit
// i%64 of word i/64 is set. A Set made by Class.NewSet has exactly the words
// the class needs; bits past the class's last hypothesis are always zero.
type Set []uint64

// Has reports whether hypothesis i is in s.
func (s Set) Has(i int) bool { return s[i>>6]>>(uint(i)&63)&1 == 1 }

// Add adds hypothesis i to s.
func (s Set) Add(i int) { s[i>>6] |= 1 << (uint(i) & 63) }

// Remove removes hypothesis i from s.
func (s Set) Remove(i int) { s[i>>6] &^= 1 << (uint(i) & 63) }

// Count returns the number of hypotheses in s.
func (s Set) Count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// First returns the lowest hypothesis in s, or -1 when s is empty.
func (s Set) First() int {
	for k, w := range s {
		if w != 0 {
			return k<<6 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// empty reports whether s has no member.
func (s Set) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// words returns the number of 64-bit words of a set of n hypotheses.
func words(n int) int { return (n + 63) >> 6 }

// setRange adds hypotheses [lo, hi) to s.
func (s Set) setRange(lo, hi int) {
	for lo < hi {
		k, b := lo>>6, uint(lo)&63
		n := min(64-int(b), hi-lo)
		var m uint64
		if n == 64 {
			m = ^uint64(0)
		} else {
			m = (uint64(1)<<uint(n) - 1) << b
		}
		s[k] |= m
		lo += n
	}
}

// split writes v ∩ col to v1 and v \ col to v0 and returns their sizes.
func split(v1, v0, v, col Set) (c1, c0 int) {
	for k, w := range v {
		a, b := w&col[k], w&^col[k]
		v1[k], v0[k] = a, b
		c1 += bits.OnesCount64(a)
		c0 += bits.OnesCount64(b)
	}
	return c1, c0
}

// countSplit returns |v ∩ col| and |v \ col| without writing anything.
func countSplit(v, col Set) (c1, c0 int) {
	for k, w := range v {
		c1 += bits.OnesCount64(w & col[k])
		c0 += bits.OnesCount64(w &^ col[k])
	}
	return c1, c0
}
