package event

import (
	"math"
	"slices"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Sizes at which canonicalize changes method: insertion sort up to
// smallSort entries, a bucket pass plus insertion sort up to bucketSort
// (bounding insertion sort's quadratic worst case, for keys crafted to
// share a bucket, to bucketSort²/2 moves), slices.Sort beyond.
const (
	smallSort  = 16
	bucketSort = 256
)

// canonicalizer puts vectors into canonical form with reusable scratch
// space. Not safe for concurrent use.
type canonicalizer struct {
	keys   []uint64
	vals   []float64
	idx    []uint32
	counts [bucketSort + 1]int32
}

// canonicalize sorts x by slot and sums the values of equal slots, in
// place. The result does not depend on the order of the entries, bit for
// bit: equal slots are summed in ascending order of their values, so even
// rounding is canonical. It reports false when a sum overflows to ±Inf.
func (c *canonicalizer) canonicalize(x *online.Vector) bool {
	idx, val := x.Idx, x.Val
	n := len(idx)
	k := 1
	for k < n && idx[k-1] < idx[k] {
		k++
	}
	if k >= n {
		return true // already canonical: the common case for LIBSVM
	}
	switch {
	case n <= smallSort:
		insertionSort(idx, val, k)
	case n <= bucketSort:
		c.bucket(idx, val)
	default:
		c.sort(idx, val)
	}
	// Merge equal slots.
	w := 0
	summed := false
	for j := 1; j < n; j++ {
		if idx[j] == idx[w] {
			val[w] += val[j]
			summed = true
			continue
		}
		w++
		idx[w], val[w] = idx[j], val[j]
	}
	x.Idx, x.Val = idx[:w+1], val[:w+1]
	if summed {
		for _, v := range x.Val {
			if math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

// insertionSort sorts by (slot, value) entries k.. into the sorted 0..k-1.
func insertionSort(idx []uint32, val []float64, k int) {
	for ; k < len(idx); k++ {
		i, v := idx[k], val[k]
		j := k
		for ; j > 0 && (idx[j-1] > i || idx[j-1] == i && val[j-1] > v); j-- {
			idx[j], val[j] = idx[j-1], val[j-1]
		}
		idx[j], val[j] = i, v
	}
}

// bucket distributes the entries into about n buckets of equal slot ranges
// (one counting-sort pass; hashed slots spread evenly), then finishes with
// insertion sort, which has little left to move.
func (c *canonicalizer) bucket(idx []uint32, val []float64) {
	n := len(idx)
	lo, hi := idx[0], idx[0]
	for _, i := range idx {
		lo, hi = min(lo, i), max(hi, i)
	}
	nb := uint32(1)
	for int(nb) < n {
		nb <<= 1
	}
	s := uint(0)
	for (hi-lo)>>s >= nb {
		s++
	}
	counts := c.counts[:nb+1]
	clear(counts)
	for _, i := range idx {
		counts[(i-lo)>>s+1]++
	}
	for b := 1; b < len(counts); b++ {
		counts[b] += counts[b-1]
	}
	ti := slices.Grow(c.idx[:0], n)[:n]
	tv := slices.Grow(c.vals[:0], n)[:n]
	for k, i := range idx {
		b := (i - lo) >> s
		p := counts[b]
		counts[b]++
		ti[p], tv[p] = i, val[k]
	}
	copy(idx, ti)
	copy(val, tv)
	c.idx, c.vals = ti, tv
	insertionSort(idx, val, 1)
}

// sort sorts (slot, position) keys, gathers the values, then orders the
// values within runs of one slot.
func (c *canonicalizer) sort(idx []uint32, val []float64) {
	n := len(idx)
	keys := slices.Grow(c.keys[:0], n)[:n]
	vals := append(c.vals[:0], val...)
	for j, i := range idx {
		keys[j] = uint64(i)<<32 | uint64(j)
	}
	slices.Sort(keys)
	for j, key := range keys {
		idx[j] = uint32(key >> 32)
		val[j] = vals[uint32(key)]
	}
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && idx[hi] == idx[lo] {
			hi++
		}
		if hi-lo > 1 {
			slices.Sort(val[lo:hi])
		}
		lo = hi
	}
	c.keys, c.vals = keys, vals
}
