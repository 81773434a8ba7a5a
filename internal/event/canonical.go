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
	keys, tmp []uint64
	vals      []float64
	counts    [bucketSort + 1]int32

	// The slots of the last vector that needed sorting, in their input
	// order, and its sorted keys (in keys or tmp). Sorted keys depend on
	// the slot sequence alone, so a vector with the same sequence (a
	// stream's events tend to list the same features in the same order)
	// reuses them instead of sorting.
	last   []uint32
	sorted []uint64
}

// canonicalize sorts x by slot and sums the values of equal slots, in
// place. The result does not depend on the order of the entries, bit for
// bit: equal slots are summed in ascending order of their values, so even
// rounding is canonical. It returns ReasonNonFinite when a sum overflows
// to ±Inf, ReasonRange when a sum exceeds maxAbs in magnitude, else "".
// (It checks sums only: callers check each value as they parse it.)
//
// It sorts packed keys slot<<32 | position (one uint64 compare and move
// per step instead of a pair), then gathers the values by position and
// sorts each run of one slot by value as it merges the run.
func (c *canonicalizer) canonicalize(x *online.Vector, maxAbs float64) Reason {
	idx, val := x.Idx, x.Val
	n := len(idx)
	k := 1
	for k < n && idx[k-1] < idx[k] {
		k++
	}
	if k >= n {
		return "" // already canonical: the common case for LIBSVM
	}
	var keys []uint64
	if len(c.sorted) == n && slices.Equal(c.last, idx) {
		keys = c.sorted
	} else {
		keys = c.sort(idx, k)
	}
	vals := append(c.vals[:0], val...)
	c.vals = vals
	// Gather and merge. A run of one slot is gathered into val[w:w+r],
	// free since w <= j, sorted by value and summed in that order.
	w := 0
	var bad Reason
	for j := 0; j < n; w++ {
		key := keys[j]
		slot := uint32(key >> 32)
		idx[w] = slot
		h := j + 1
		if h == n || uint32(keys[h]>>32) != slot {
			val[w] = vals[uint32(key)]
			j = h
			continue
		}
		for h < n && uint32(keys[h]>>32) == slot {
			h++
		}
		run := val[w : w+h-j]
		for r := range run {
			run[r] = vals[uint32(keys[j+r])]
		}
		sortFloats(run)
		s := run[0]
		for _, v := range run[1:] {
			s += v
		}
		val[w] = s
		if !(math.Abs(s) <= maxAbs) && bad != ReasonNonFinite {
			bad = ReasonRange
			if math.IsInf(s, 0) {
				bad = ReasonNonFinite
			}
		}
		j = h
	}
	x.Idx, x.Val = idx[:w], val[:w]
	return bad
}

// sort returns the sorted packed keys of idx, whose first k slots are
// increasing, and records them for reuse.
func (c *canonicalizer) sort(idx []uint32, k int) []uint64 {
	n := len(idx)
	c.last = append(c.last[:0], idx...)
	keys := slices.Grow(c.keys[:0], n)[:n]
	for j, i := range idx {
		keys[j] = uint64(i)<<32 | uint64(j)
	}
	switch {
	case n <= smallSort:
		insertionSort(keys, k) // keys[:k] are sorted already
	case n <= bucketSort:
		c.keys = keys
		keys = c.bucket(keys) // into c.tmp
	default:
		slices.Sort(keys)
	}
	if n > bucketSort || n <= smallSort {
		c.keys = keys
	}
	c.sorted = keys
	return keys
}

// insertionSort sorts keys k.. into the sorted keys[:k].
func insertionSort(keys []uint64, k int) {
	for ; k < len(keys); k++ {
		key := keys[k]
		j := k
		for ; j > 0 && keys[j-1] > key; j-- {
			keys[j] = keys[j-1]
		}
		keys[j] = key
	}
}

// sortFloats sorts a run of values of one slot (all finite).
func sortFloats(v []float64) {
	if len(v) > smallSort {
		slices.Sort(v)
		return
	}
	for k := 1; k < len(v); k++ {
		f := v[k]
		j := k
		for ; j > 0 && v[j-1] > f; j-- {
			v[j] = v[j-1]
		}
		v[j] = f
	}
}

// bucket sorts keys into c.tmp, which it returns: it distributes them into
// about n buckets of equal slot ranges (one counting-sort pass; hashed
// slots spread evenly), then finishes with insertion sort, which has little
// left to move.
func (c *canonicalizer) bucket(keys []uint64) []uint64 {
	n := len(keys)
	lo, hi := uint32(keys[0]>>32), uint32(keys[0]>>32)
	for _, key := range keys {
		i := uint32(key >> 32)
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
	for _, key := range keys {
		counts[(uint32(key>>32)-lo)>>s+1]++
	}
	for b := 1; b < len(counts); b++ {
		counts[b] += counts[b-1]
	}
	t := slices.Grow(c.tmp[:0], n)[:n]
	for _, key := range keys {
		b := (uint32(key>>32) - lo) >> s
		p := counts[b]
		counts[b]++
		t[p] = key
	}
	c.tmp = t
	insertionSort(t, 1)
	return t
}
