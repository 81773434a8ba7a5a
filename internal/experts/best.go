package experts

import (
	"math/bits"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// bestLoss keeps every hypothesis's (expert's) cumulative number of
// mistakes and the minimum, exactly and incrementally.
//
// The counts are bit-sliced: bit j of hypothesis i's count is bit i of
// plane j, so that a round's mistakes are added to every member of a set
// by a carry chain of whole words (two words of planes per word of the
// set, amortized, as in a binary counter) rather than by one increment per
// member: O(|H|/64) word operations a round, however many hypotheses err.
// A plane is added when a count first reaches a power of two (an
// allocation at most 64 times in a learner's life), so the planes take
// what 64-bit counters would at most, and less while the counts are small.
//
// atMin is the set at the minimum. When a round's mistakes empty it, every
// member erred once, so the minimum grew by exactly one, and atMin becomes
// the hypotheses whose count equals it, compared plane by plane.
type bestLoss struct {
	n      int
	w      int      // words of a plane: len(full)
	planes []uint64 // plane j is planes[j*w : (j+1)*w]; len(planes) is top*w
	top    int      // every count is below 2^top
	min    uint64
	atMin  Set
	full   Set
}

func newBestLoss(full Set, n int) bestLoss {
	b := bestLoss{n: n, w: len(full), atMin: make(Set, len(full)), full: full}
	copy(b.atMin, full)
	return b
}

// add charges one mistake to every member of mis and reports whether the
// minimum grew.
func (b *bestLoss) add(mis Set) bool {
	empty := true
	for k, carry := range mis {
		b.atMin[k] &^= carry
		if b.atMin[k] != 0 {
			empty = false
		}
		for j := 0; carry != 0; j++ {
			if j == b.top {
				b.planes = append(b.planes, make([]uint64, b.w)...)
				b.top++
			}
			p := &b.planes[j*b.w+k]
			*p, carry = *p^carry, *p&carry
		}
	}
	if !empty || b.n == 0 {
		return false
	}
	b.min++
	b.setAtMin()
	return true
}

// setAtMin sets atMin to the hypotheses whose count is min (a count below
// 2^top: bits of min from top up are zero).
func (b *bestLoss) setAtMin() {
	for k := range b.atMin {
		e := b.full[k]
		for j := range b.top {
			bit := -(b.min >> uint(j) & 1) // all ones where min has a one
			e &^= b.planes[j*b.w+k] ^ bit
		}
		b.atMin[k] = e
	}
}

// word writes the counts of hypotheses 64k to 64k+63 to c.
func (b *bestLoss) word(k int, c *[64]uint64) {
	*c = [64]uint64{}
	for j := range b.top {
		for p := b.planes[j*b.w+k]; p != 0; p &= p - 1 {
			c[bits.TrailingZeros64(p)] |= 1 << uint(j)
		}
	}
}

// counts writes every hypothesis's count to dst, which has n elements.
func (b *bestLoss) counts(dst []uint64) {
	var c [64]uint64
	for k := range b.w {
		b.word(k, &c)
		copy(dst[k<<6:], c[:])
	}
}

// set makes the counts those of loss, which has n elements, and
// recomputes min and atMin.
func (b *bestLoss) set(loss []uint64) {
	m, top := ^uint64(0), 0
	for _, l := range loss {
		m, top = min(m, l), max(top, bits.Len64(l))
	}
	b.top = top
	b.planes = append(b.planes[:0], make([]uint64, top*b.w)...)
	for i, l := range loss {
		for l != 0 {
			j := bits.TrailingZeros64(l)
			b.planes[j*b.w+i>>6] |= 1 << (uint(i) & 63)
			l &= l - 1
		}
	}
	if b.n == 0 {
		m = 0
	}
	b.min = m
	b.setAtMin()
}

// appendTo encodes every hypothesis's count (u64).
func (b *bestLoss) appendTo(e *codec.Encoder) {
	var c [64]uint64
	for k := range b.w {
		b.word(k, &c)
		for _, l := range c[:min(64, b.n-k<<6)] {
			e.U64(l)
		}
	}
}
