package experts

import (
	"math/bits"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// bestLoss keeps every hypothesis's (expert's) cumulative number of
// mistakes and the minimum, exactly and incrementally: atMin is the set at
// the minimum; when a round's mistakes empty it, the minimum grew by one
// (every member erred once) and atMin is rebuilt by one scan.
type bestLoss struct {
	n     int
	loss  []uint64
	min   uint64
	atMin Set
	full  Set
}

func newBestLoss(full Set, n int) bestLoss {
	b := bestLoss{n: n, loss: make([]uint64, n), atMin: make(Set, len(full)), full: full}
	copy(b.atMin, full)
	return b
}

// add charges one mistake to every member of mis and reports whether the
// minimum grew.
func (b *bestLoss) add(mis Set) bool {
	empty := true
	for k, w := range mis {
		b.atMin[k] &^= w
		if b.atMin[k] != 0 {
			empty = false
		}
		for w != 0 {
			b.loss[k<<6+bits.TrailingZeros64(w)]++
			w &= w - 1
		}
	}
	if !empty {
		return false
	}
	b.min++
	b.rebuild()
	return true
}

// rebuild recomputes min and atMin from loss.
func (b *bestLoss) rebuild() {
	m := ^uint64(0)
	for _, l := range b.loss {
		m = min(m, l)
	}
	if b.n == 0 {
		m = 0
	}
	b.min = m
	clear(b.atMin)
	for i, l := range b.loss {
		if l == m {
			b.atMin.Add(i)
		}
	}
}

func (b *bestLoss) reset() {
	clear(b.loss)
	b.min = 0
	copy(b.atMin, b.full)
}

func (b *bestLoss) appendTo(e *codec.Encoder) {
	for _, l := range b.loss {
		e.U64(l)
	}
}
