package experts

import (
	"math/bits"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// countPlanes is the number of bit planes of a bestLoss: a count has 64
// bits, as many as the rounds.
const countPlanes = 64

// bestLoss keeps every hypothesis's (expert's) cumulative number of
// mistakes and the minimum, exactly and incrementally.
//
// The counts are bit-sliced: bit j of hypothesis i's count is bit i of
// plane j, so that a round's mistakes are added to every member of a set
// by a carry chain of whole words (two words of planes per word of the
// set, amortized, as in a binary counter) rather than by one increment per
// member: O(|H|/64) word operations a round, however many hypotheses err.
// The 64 planes take 8 bytes a hypothesis, as 64-bit counters would.
//
// atMin is the set at the minimum. When a round's mistakes empty it, every
// member erred once, so the minimum grew by exactly one, and atMin becomes
// the hypotheses whose count equals it, compared plane by plane.
type bestLoss struct {
	n      int
	w      int      // words of a plane: len(full)
	planes []uint64 // plane j is planes[j*w : (j+1)*w]
	top    int      // planes[top*w:] are zero: every count is below 2^top
	min    uint64
	atMin  Set
	full   Set
}

func newBestLoss(full Set, n int) bestLoss {
	b := bestLoss{n: n, w: len(full), planes: make([]uint64, countPlanes*len(full)), atMin: make(Set, len(full)), full: full}
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
		j := 0
		for ; carry != 0; j++ {
			p := &b.planes[j*b.w+k]
			*p, carry = *p^carry, *p&carry
		}
		b.top = max(b.top, j)
	}
	if !empty {
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

// counts writes every hypothesis's count to dst, which has n elements.
func (b *bestLoss) counts(dst []uint64) {
	clear(dst)
	for j := range b.top {
		plane := b.planes[j*b.w : (j+1)*b.w]
		for k, word := range plane {
			for word != 0 {
				dst[k<<6+bits.TrailingZeros64(word)] |= 1 << uint(j)
				word &= word - 1
			}
		}
	}
}

// set makes the counts those of loss, which has n elements, and
// recomputes min and atMin.
func (b *bestLoss) set(loss []uint64) {
	clear(b.planes)
	b.top = 0
	m := ^uint64(0)
	for i, l := range loss {
		m = min(m, l)
		b.top = max(b.top, bits.Len64(l))
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

func (b *bestLoss) reset() {
	clear(b.planes[:b.top*b.w])
	b.top = 0
	b.min = 0
	copy(b.atMin, b.full)
}

func (b *bestLoss) appendTo(e *codec.Encoder) {
	loss := make([]uint64, b.n)
	b.counts(loss)
	for _, l := range loss {
		e.U64(l)
	}
}
