package regret

import (
	"math"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Point is one sample of a learner's curves.
type Point struct {
	Round    uint64  `json:"round"`
	Mistakes uint64  `json:"mistakes"`
	Loss     float64 `json:"loss"`
	// Regret is NaN-free: it is 0 when the learner has no comparator.
	Regret float64 `json:"regret"`
	// MistakeBound and RegretBound are the learner's bounds at this round;
	// 0 when its theorem gives none.
	MistakeBound float64 `json:"mistake_bound"`
	RegretBound  float64 `json:"regret_bound"`
}

// History samples every learner's curves over rounds in bounded memory: it
// keeps at most max points per learner, recording every stride-th round and
// doubling the stride (dropping every other point) when full, so the
// samples always span the whole run evenly. The last round is always
// available through Tracker.Learners.
type History struct {
	max    int
	stride uint64
	series [][]Point
}

// EnableHistory makes the tracker sample curves, at most max points per
// learner: max is raised to 2 and capped at MaxHistoryPoints. It starts an
// empty history, discarding any earlier one.
func (t *Tracker) EnableHistory(max int) {
	if max < 2 {
		max = 2
	}
	if max > MaxHistoryPoints {
		max = MaxHistoryPoints
	}
	t.history = &History{max: max, stride: 1}
	t.history.grow(len(t.learners))
}

// History returns a copy of the sampled curves, one series per learner in
// the order they were added, with each learner's current state appended as
// the last point. It returns nil when history is not enabled.
func (t *Tracker) History() [][]Point {
	if t.history == nil {
		return nil
	}
	out := make([][]Point, len(t.learners))
	for i := range t.learners {
		s := t.history.series[i]
		cp := make([]Point, len(s), len(s)+1)
		copy(cp, s)
		l := &t.learners[i]
		if n := len(cp); l.rounds > 0 && (n == 0 || cp[n-1].Round != l.rounds) {
			cp = append(cp, point(l))
		}
		out[i] = cp
	}
	return out
}

func (h *History) grow(n int) {
	for len(h.series) < n {
		h.series = append(h.series, make([]Point, 0, h.max))
	}
}

func (h *History) observe(i int, l *learner) {
	if l.rounds%h.stride != 0 {
		return
	}
	s := h.series[i]
	if len(s) == h.max {
		// Halve the resolution of every series at once so they stay aligned.
		h.stride *= 2
		for j, sj := range h.series {
			k := 0
			for _, p := range sj {
				if p.Round%h.stride == 0 {
					sj[k] = p
					k++
				}
			}
			h.series[j] = sj[:k]
		}
		if l.rounds%h.stride != 0 {
			return
		}
		s = h.series[i]
	}
	h.series[i] = append(s, point(l))
}

func point(l *learner) Point {
	p := Point{Round: l.rounds, Mistakes: l.mistakes, Loss: l.loss}
	if l.guaranteed != nil {
		l.sync()
		g := l.g
		if g.Comparator != "" {
			p.Regret = l.regret()
		}
		if g.Kind == online.MistakeBound && finite(g.Value) {
			p.MistakeBound = g.Value
		}
		if g.Kind == online.RegretBound && finite(g.Value) {
			p.RegretBound = g.Value
		} else if finite(g.RegretBound) {
			p.RegretBound = g.RegretBound
		}
	}
	if math.IsNaN(p.Regret) {
		p.Regret = 0
	}
	return p
}
