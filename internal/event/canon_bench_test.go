package event

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

func benchCanon(b *testing.B, n int, method func(c *canonicalizer, x *online.Vector)) {
	rng := rand.New(rand.NewPCG(1, 1))
	idx := make([]uint32, n)
	val := make([]float64, n)
	for k := range idx {
		idx[k] = rng.Uint32() & mask18
		val[k] = float64(k)
	}
	var c canonicalizer
	x := online.Vector{Idx: make([]uint32, n), Val: make([]float64, n)}
	for b.Loop() {
		x.Idx, x.Val = x.Idx[:n], x.Val[:n]
		copy(x.Idx, idx)
		copy(x.Val, val)
		method(&c, &x)
	}
}

// packed fills c.keys with the packed keys of x.
func packed(c *canonicalizer, x *online.Vector) []uint64 {
	c.keys = c.keys[:0]
	for j, i := range x.Idx {
		c.keys = append(c.keys, uint64(i)<<32|uint64(j))
	}
	return c.keys
}

func BenchmarkCanonicalize(b *testing.B) {
	for _, n := range []int{10, 16, 49, 200} {
		b.Run("auto/"+strconv.Itoa(n), func(b *testing.B) {
			benchCanon(b, n, func(c *canonicalizer, x *online.Vector) { c.canonicalize(x, DefaultMaxAbs) })
		})
		b.Run("pdq/"+strconv.Itoa(n), func(b *testing.B) {
			benchCanon(b, n, func(c *canonicalizer, x *online.Vector) { slicesSort(packed(c, x)) })
		})
		b.Run("insertion/"+strconv.Itoa(n), func(b *testing.B) {
			benchCanon(b, n, func(c *canonicalizer, x *online.Vector) { insertionSort(packed(c, x), 1) })
		})
		b.Run("bucket/"+strconv.Itoa(n), func(b *testing.B) {
			benchCanon(b, n, func(c *canonicalizer, x *online.Vector) { c.bucket(packed(c, x)) })
		})
	}
}

var slicesSort = slices.Sort[[]uint64]
