package experts

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
)

// Limits of the exact generic Littlestone dimension (classes without a
// closed form). PrepareLdim (and so NewSOA) fails with an error naming the
// class and the limit when a class exceeds one; NewClass does not check
// them.
const (
	// MaxVersionSpaces bounds the number of distinct version spaces (of
	// two or more hypotheses) whose Ldim PrepareLdim memoizes. Every version
	// space a learner can reach — H restricted by any labeled sample — is
	// among them, so SOA only ever looks Ldim up. At the limit the memo
	// holds 2^18 keys of ⌈|H|/64⌉·8 bytes.
	MaxVersionSpaces = 1 << 18
	// MaxGenericPoints bounds the effective domain enumerated by the
	// generic computation (stumps have (points+1)^features points).
	// The closed forms have no such limits.
	MaxGenericPoints = 1 << 12
	// MaxGenericHypotheses bounds |H| for the generic computation: larger
	// classes without a closed form are refused at once rather than after
	// exhausting the other limits.
	MaxGenericHypotheses = 512
	// maxLdimWork bounds the split evaluations of one generic computation
	// (about a second of work).
	maxLdimWork = 1 << 25
)

type ldimMode uint8

const (
	// modeNone: not computed yet, or out of reach (ldimIndex.err).
	modeNone ldimMode = iota
	// modeChain: the hypotheses form a chain h_0 ≥ h_1 ≥ ... of distinct
	// functions with a domain point between any two (thresholds on a
	// grid). Any V ⊆ H is such a chain again and Ldim(V) = ⌊log₂|V|⌋:
	// Ldim(V) ≤ log₂|V| for every finite V (Example 21.2), and the
	// binary-search tree over the points separating consecutive members
	// is shattered to depth ⌊log₂|V|⌋ (each point splits a chain of m into
	// chains of ⌊m/2⌋ and ⌈m/2⌉; induction). Littlestone (1988).
	modeChain
	// modeSingletons: every hypothesis says 1 on at most one effective
	// point (Example 21.3, singletons, possibly with the all-0 function or
	// duplicates). Ldim(V) = -1 if V = ∅, 0 if all members of V are the
	// same function, else 1: a point x splitting V leaves in V^(1) only
	// copies of the singleton of x (Ldim 0), so Ldim(V) ≤ 1; and if V has
	// two distinct functions, one of them says 1 at some x where the other
	// says 0, a split with both sides non-empty, so Ldim(V) ≥ 1.
	modeSingletons
	// modeIntervals: the structured recursion of intervals.go over the
	// shapes reachable version spaces have (rectangles, gap unions);
	// other sets go to the generic recursion when the class is small.
	modeIntervals
	// modeMemo: exact generic recursion (Littlestone 1988; SOA's
	// definition), Ldim(V) = max over x splitting V of
	// 1 + min(Ldim(V^(0)), Ldim(V^(1))), 0 when no x splits V, memoized
	// for every reachable version space by PrepareLdim.
	modeMemo
)

// ldimIndex is what a Class knows about the Littlestone dimension of its
// version spaces. It is filled once, by PrepareLdim, on first use.
type ldimIndex struct {
	once    sync.Once
	err     error // why the exact Ldim is out of reach (modeNone)
	mode    ldimMode
	pointOf []int32         // modeSingletons: the point where h says 1, -1 if none
	memo    map[string]int8 // modeMemo: Ldim of every reachable V with |V| ≥ 2
	ivl     *intervalLdim   // modeIntervals
	dim     int             // Ldim(H)
}

func floorLog2(n int) int { return bits.Len(uint(n)) - 1 }

// PrepareLdim computes, once, what the exact Littlestone dimension of the
// class's version spaces needs, and reports whether it is within reach.
// Only SOA (and anything publishing Ldim(H)) needs it: NewClass does no
// Ldim work, so Consistent, Halving and Weighted-Majority accept every
// class NewClass accepts. Thresholds, singleton-like tables and intervals
// (up to MaxIntervalLdimPoints) have closed forms or a structured
// recursion; other classes get the generic recursion over every reachable
// version space, refused beyond MaxGenericHypotheses hypotheses,
// MaxGenericPoints effective points, MaxVersionSpaces version spaces or
// maxLdimWork split evaluations. The error names the class and the limit.
// Safe for concurrent use.
func (c *Class) PrepareLdim() error {
	c.ld.once.Do(func() {
		if err := c.initLdim(); err != nil {
			c.ld.mode = modeNone
			c.ld.err = fmt.Errorf("class %s: exact Littlestone dimension out of reach: %w", c.describe(), err)
		}
	})
	return c.ld.err
}

// mustLdim panics with PrepareLdim's error when the exact Ldim is out of
// reach.
func (c *Class) mustLdim() {
	if err := c.PrepareLdim(); err != nil {
		panic("experts: " + err.Error())
	}
}

func (c *Class) initLdim() error {
	if c.kind == KindThresholds {
		c.ld.mode = modeChain
		c.ld.dim = floorLog2(c.n)
		return nil
	}
	if c.kind == KindIntervals {
		k := c.spec.Points
		if k > MaxIntervalLdimPoints {
			return errIntervalsTooBig(k)
		}
		c.ld.ivl = newIntervalLdim(k)
		c.ld.mode = modeIntervals
		c.ld.dim = c.ld.ivl.pair(k, 0)
		return nil
	}
	if pointOf, ok := c.singletons(); ok {
		c.ld.mode = modeSingletons
		c.ld.pointOf = pointOf
		c.ld.dim = c.ldimSingletons(c.full)
		return nil
	}
	if c.n > MaxGenericHypotheses {
		return fmt.Errorf("%d hypotheses and no closed form, limit %d (MaxGenericHypotheses)", c.n, MaxGenericHypotheses)
	}
	if c.np < 0 || c.np > MaxGenericPoints {
		return fmt.Errorf("too many effective domain points, limit %d (MaxGenericPoints; use fewer points or features)", MaxGenericPoints)
	}
	e := newEngine(c, true)
	l := e.run(c.full)
	if e.err != nil {
		return e.err
	}
	c.ld.mode = modeMemo
	c.ld.memo = e.memo
	c.ld.dim = l
	return nil
}

// singletons reports whether every hypothesis says 1 on at most one
// effective point, and where.
func (c *Class) singletons() ([]int32, bool) {
	if c.np < 0 {
		return nil, false
	}
	pointOf := make([]int32, c.n)
	for i := range pointOf {
		pointOf[i] = -1
	}
	col := c.NewSet()
	for p := range c.np {
		c.column(col, p)
		for k, w := range col {
			for w != 0 {
				i := k<<6 + bits.TrailingZeros64(w)
				w &= w - 1
				if pointOf[i] >= 0 {
					return nil, false
				}
				pointOf[i] = int32(p)
			}
		}
	}
	return pointOf, true
}

func (c *Class) ldimSingletons(v Set) int {
	first := int32(-2)
	for k, w := range v {
		for w != 0 {
			i := k<<6 + bits.TrailingZeros64(w)
			w &= w - 1
			switch p := c.ld.pointOf[i]; {
			case first == -2:
				first = p
			case p != first:
				return 1
			}
		}
	}
	if first == -2 {
		return -1
	}
	return 0
}

// Dim returns Ldim(H), the Littlestone dimension of the whole class. It
// panics when PrepareLdim reports the exact Ldim out of reach.
func (c *Class) Dim() int {
	c.mustLdim()
	return c.ld.dim
}

// Ldim returns the Littlestone dimension of the version space v ⊆ H:
// -1 for the empty set (it shatters no tree, not even the depth-0 one), 0
// when no point splits v, and otherwise the depth of the deepest tree v
// shatters (Definition 21.5). It allocates; learners use a lookup that
// does not. It panics when PrepareLdim reports the exact Ldim out of
// reach, or when v is a set no learner can reach of a class too big for
// the generic recursion (see ldimSupports).
func (c *Class) Ldim(v Set) int {
	if len(v) != c.w {
		panic(fmt.Sprintf("experts: Set of %d words for a class of %d", len(v), c.w))
	}
	c.mustLdim()
	return c.ldim(v, make([]byte, 8*c.w))
}

// ldim is Ldim with a caller-owned key buffer of 8·w bytes: no allocation
// for every version space a learner can reach. PrepareLdim must have
// succeeded.
func (c *Class) ldim(v Set, key []byte) int { return c.ldimCount(v, v.Count(), key) }

// ldimCount is ldim when n = |v| is known.
func (c *Class) ldimCount(v Set, n int, key []byte) int {
	switch c.ld.mode {
	case modeChain:
		return floorLog2(n)
	case modeSingletons:
		return c.ldimSingletons(v)
	case modeNone:
		panic("experts: Littlestone dimension used without PrepareLdim")
	}
	if n <= 1 {
		return n - 1
	}
	if c.ld.mode == modeIntervals {
		if l, ok := c.ld.ivl.ldim(v); ok {
			return l
		}
		if !c.genericOK() {
			panic(fmt.Sprintf("experts: class %s: Ldim of a set no learner reaches, too big for the generic recursion", c.describe()))
		}
	} else if l, ok := c.ld.memo[string(keyOf(key, v))]; ok {
		return int(l)
	}
	// Not reachable by restricting H with labeled points (a Set built by
	// hand): compute it, pruned, with a throwaway memo.
	e := newEngine(c, false)
	return e.run(v)
}

// genericOK reports whether the class is small enough for the pruned
// generic recursion on an arbitrary set.
func (c *Class) genericOK() bool {
	return c.n <= MaxGenericHypotheses && c.np >= 0 && c.np <= MaxGenericPoints
}

// ldimSupports reports whether ldimCount answers for v without falling
// back to a recursion too big to run (checked when a checkpoint is
// restored into SOA). PrepareLdim must have succeeded.
func (c *Class) ldimSupports(v Set) bool {
	if c.ld.mode != modeIntervals || c.genericOK() {
		return true
	}
	_, ok := c.ld.ivl.ldim(v)
	return ok
}

func keyOf(dst []byte, v Set) []byte {
	for k, w := range v {
		binary.LittleEndian.PutUint64(dst[8*k:], w)
	}
	return dst[:8*len(v)]
}

// engine computes Ldim by the generic recursion over the class's
// effective domain, deduplicated: points giving the same split of H, or
// complementary ones, count once, and points every hypothesis labels alike
// are dropped.
type engine struct {
	w          int
	cols       []uint64 // nc distinct splitting columns
	nc         int
	memo       map[string]int8
	key        []byte
	bufs       []Set // two per recursion depth
	exhaustive bool  // visit every split (fill the memo for all reachable V)
	work       int
	err        error
}

func newEngine(c *Class, exhaustive bool) *engine {
	e := &engine{w: c.w, memo: map[string]int8{}, key: make([]byte, 8*c.w), exhaustive: exhaustive}
	seen := map[string]bool{}
	col := c.NewSet()
	for p := range c.np {
		c.column(col, p)
		for k := range col {
			col[k] &= c.full[k]
		}
		if n := col.Count(); n == 0 || n == c.n {
			continue
		}
		if col.Has(0) { // canonical side: the one without hypothesis 0
			for k := range col {
				col[k] = c.full[k] &^ col[k]
			}
		}
		if k := string(keyOf(e.key, col)); !seen[k] {
			seen[k] = true
			e.cols = append(e.cols, col...)
			e.nc++
		}
	}
	return e
}

func (e *engine) run(v Set) int {
	return int(e.ldim(v, v.Count(), 0))
}

func (e *engine) ldim(v Set, n, depth int) int8 {
	if n <= 1 {
		return int8(n - 1)
	}
	if l, ok := e.memo[string(keyOf(e.key, v))]; ok {
		return l
	}
	if e.err != nil {
		return 0
	}
	for len(e.bufs) < 2*(depth+1) {
		e.bufs = append(e.bufs, make(Set, e.w))
	}
	v1, v0 := e.bufs[2*depth], e.bufs[2*depth+1]
	best := int8(0)
	ub := int8(floorLog2(n)) // Example 21.2: Ldim(V) ≤ log₂|V|
	for p := range e.nc {
		col := Set(e.cols[p*e.w : (p+1)*e.w])
		e.work++
		if !e.exhaustive {
			c1, c0 := countSplit(v, col)
			if c1 == 0 || c0 == 0 || 1+int8(floorLog2(min(c1, c0))) <= best {
				continue
			}
		}
		c1, c0 := split(v1, v0, v, col)
		if c1 == 0 || c0 == 0 {
			continue
		}
		if e.exhaustive {
			l1 := e.ldim(v1, c1, depth+1)
			l0 := e.ldim(v0, c0, depth+1)
			best = max(best, 1+min(l0, l1))
			continue
		}
		a, na, b, nb := v1, c1, v0, c0
		if nb < na {
			a, na, b, nb = b, nb, a, na
		}
		la := e.ldim(a, na, depth+1)
		if 1+la <= best {
			continue
		}
		best = max(best, 1+min(la, e.ldim(b, nb, depth+1)))
		if best == ub {
			break
		}
	}
	if e.err != nil {
		return 0
	}
	if e.exhaustive {
		if len(e.memo) >= MaxVersionSpaces {
			e.err = fmt.Errorf("more than %d version spaces, limit MaxVersionSpaces", MaxVersionSpaces)
			return 0
		}
		if e.work > maxLdimWork {
			e.err = fmt.Errorf("more than %d split evaluations, limit maxLdimWork", maxLdimWork)
			return 0
		}
	}
	e.memo[string(keyOf(e.key, v))] = best
	return best
}
