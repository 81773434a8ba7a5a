package experts

import (
	"fmt"
	"math/bits"
)

// Exact Littlestone dimension of the version spaces of intervals.
//
// Work in index space: hypothesis (i, j), 0 ≤ i ≤ j < k, says 1 on the
// grid points a_i..a_j and the gaps between them; there is no empty
// interval. A labeled point is either a grid point a_m or a gap (a_m,
// a_{m+1}); points outside [a_0, a_{k-1}] are 0 for every hypothesis.
//
// Reachable version spaces. V_1 = H. A negative label at a_m keeps the
// intervals that avoid m; at the gap (a_m, a_{m+1}) those lying left or
// right of it. A positive label at a_m keeps i ≤ m ≤ j; at the gap, i ≤ m
// < m+1 ≤ j. Hence, by induction over the stream, every non-empty version
// space a learner reaches (recovery included: {h : h(x) = y} is of the same
// two forms, and H is a union of one gap) is
//
//   - a gap union U(T): the complement of the negative points splits
//     [0, k) into disjoint runs ("gaps") of t_1, ..., t_r grid points and V
//     is every interval inside one gap (before any positive label); or
//   - a rectangle R: {(i, j) : a ≤ i ≤ b, c ≤ j ≤ d} with b ≤ c (after a
//     positive label: b is the leftmost positive, c the rightmost; the
//     constraint i ≤ j then holds automatically).
//
// Rectangles: Ldim(R) = ⌊log₂ p⌋ + ⌊log₂ s⌋ with p = b-a+1, s = d-c+1.
// Every point splitting R is a threshold on i alone (points left of b) or
// on j alone (points right of c): points between b and c are 1 for all of
// R. So R is the product of two chains, each query restricting one factor,
// and both children are products again. By induction on p+s, with ℓ(n) =
// ⌊log₂ n⌋ satisfying ℓ(n) = max over n = n₁+n₂ (n₁, n₂ ≥ 1) of 1 +
// min(ℓ(n₁), ℓ(n₂)) (the chain recursion, modeChain):
// max over splits of one factor of 1 + min(ℓ(p₁)+ℓ(s), ℓ(p₂)+ℓ(s)) =
// ℓ(p)+ℓ(s), and likewise for the other; the base p = s = 1 is a single
// hypothesis, Ldim 0.
//
// Gap unions: Ldim(U(T)) depends only on the multiset T of gap sizes (gaps
// are disjoint runs; relabel). A query in a gap of t points at its m-th
// grid point (0 ≤ m < t) has U^(1) = R with p = m+1, s = t-m, and U^(0) =
// U(T - {t} + {m, t-1-m}); at the gap between its m-th and (m+1)-th points,
// U^(1) = R with p = m+1, s = t-1-m and U^(0) = U(T - {t} + {m+1, t-1-m})
// (zero sizes dropped). Nothing else splits U. So
//
//	F(T) = max over those queries of 1 + min(ℓ(p)+ℓ(s), F(T')),
//	F(∅) = -1, F({1}) = 0,
//
// exact by Definition 21.5. T ranges over multisets of sum ≤ k: too many
// to memoize for k = 64. Lemma (two largest gaps): F(T) = F({t₁, t₂}),
// t₁ ≥ t₂ the two largest sizes of T. "≥" holds because V ⊆ V' implies
// Ldim(V) ≤ Ldim(V'). "≤" is verified, not proved: by the exact multiset
// recursion for every multiset of sum ≤ 26 (TestIntervalsTwoGapLemma) and
// by the generic bitset recursion for every reachable version space of
// k ≤ 10 points (TestIntervalsLdimExhaustive). With it the recursion
// closes over pairs: P[t₁][t₂] (t₁ ≥ t₂ ≥ 0, t₁ ≥ 1), with the children's
// multisets of three sizes reduced to their two largest. The potential
// (t₁+t₂, t₁) decreases strictly along every move, so P is filled in that
// order. P has (k+1)(k+2)/2 int8 entries and costs at most Σ 2(t₁+t₂) ≈
// k³ moves (fewer with the pruning below); MaxIntervalLdimPoints bounds k.
// A lookup then recognizes the shape of V from its bits in O(k + |H|/64)
// word operations, without allocating.
//
// The pair table matches this closed form for every t₁ ≤ 256 (checked in
// TestIntervalsClosedForm), stated here without proof: Ldim(U({t})) = max
// d with t ≥ N(d), N = 1, 2, 3 for d = 0, 1, 2, N(2n+1) = 5·2^(n-1) - 1,
// N(2n+2) = 7·2^(n-1) - 1 (n ≥ 1); two gaps add 1 exactly when t₁ ≥ A(d)
// and t₂ ≥ B(d) for d = that value + 1, A(2n+1) = 2^(n+1) - 1, A(2n+2) =
// 3·2^n - 1, B(1) = B(2) = 1, B(2n+1) = B(2n+2) = 3·2^(n-1) - 1 (n ≥ 1).
// In particular Ldim(intervals on 64 points) = 10 and on 256 points 14.

// MaxIntervalLdimPoints bounds the grid of an intervals class whose exact
// Littlestone dimension (SOA) is computed: the pair table costs about
// points³ steps (measured: 0.6 ms at 64 points, 90 ms at 256, 0.8 s at
// 512; 1024 would take seconds).
const MaxIntervalLdimPoints = 512

// intervalLdim is the structured Ldim of intervals over k grid points.
type intervalLdim struct {
	k int
	p []int8 // P[t1][t2] at t1*(t1+1)/2 + t2, 0 ≤ t2 ≤ t1 ≤ k
}

func pairIndex(t1, t2 int) int { return t1*(t1+1)/2 + t2 }

// top2 returns the two largest of a, b, c (sizes ≥ 0), largest first.
func top2(a, b, c int) (int, int) {
	if a < b {
		a, b = b, a
	}
	if b < c {
		b = c
		if a < b {
			a, b = b, a
		}
	}
	return a, b
}

func newIntervalLdim(k int) *intervalLdim {
	il := &intervalLdim{k: k, p: make([]int8, pairIndex(k, k)+1)}
	il.p[pairIndex(0, 0)] = -1
	// Fill by increasing t1+t2, then increasing t1: every child precedes.
	for sum := 1; sum <= 2*k; sum++ {
		for t1 := (sum + 1) / 2; t1 <= min(sum, k); t1++ {
			t2 := sum - t1
			il.p[pairIndex(t1, t2)] = int8(il.pairRec(t1, t2))
		}
	}
	return il
}

// pairRec evaluates the recursion for the gap union {t1, t2} (t2 may be 0)
// from already filled entries.
func (il *intervalLdim) pairRec(t1, t2 int) int {
	if t1 == 1 && t2 == 0 {
		return 0
	}
	// Bounds that only prune: Ldim is monotone under inclusion, and
	// U({t1-1, t2}), U({t1, t2-1}) embed in U({t1, t2}) (drop a gap's last
	// point); Ldim(V) ≤ ⌊log₂|V|⌋ (Example 21.2).
	best := 0
	if a, b := max(t1-1, t2), min(t1-1, t2); a > 0 {
		best = max(best, int(il.p[pairIndex(a, b)]))
	}
	if t2 > 0 {
		best = max(best, int(il.p[pairIndex(t1, t2-1)]))
	}
	ub := floorLog2(t1*(t1+1)/2 + t2*(t2+1)/2)
	for side, t := range [2]int{t1, t2} {
		other := t2
		if side == 1 {
			other = t1
		}
		// Grid point m of the gap (symmetric in m ↔ t-1-m).
		for m := 0; m <= (t-1)/2; m++ {
			v1 := floorLog2(m+1) + floorLog2(t-m)
			if 1+v1 <= best {
				continue
			}
			a, b := top2(other, m, t-1-m)
			if a == 0 {
				continue // V^(0) empty: not a split
			}
			best = max(best, 1+min(v1, int(il.p[pairIndex(a, b)])))
			if best == ub {
				return best
			}
		}
		// Gap between points m and m+1 of the gap.
		for m := 0; m+1 < t && m <= (t-2)/2; m++ {
			v1 := floorLog2(m+1) + floorLog2(t-1-m)
			if 1+v1 <= best {
				continue
			}
			a, b := top2(other, m+1, t-1-m)
			best = max(best, 1+min(v1, int(il.p[pairIndex(a, b)])))
			if best == ub {
				return best
			}
		}
	}
	return best
}

// pair returns Ldim of the gap union whose two largest gaps are t1 ≥ t2.
func (il *intervalLdim) pair(t1, t2 int) int { return int(il.p[pairIndex(t1, t2)]) }

// rowRange returns the first and last member of v in [lo, hi) and how many
// members it has there (first = last = -1 when none).
func rowRange(v Set, lo, hi int) (first, last, n int) {
	first, last = -1, -1
	for lo < hi {
		k, b := lo>>6, uint(lo)&63
		cnt := min(64-int(b), hi-lo)
		w := v[k] >> b
		if cnt < 64 {
			w &= 1<<uint(cnt) - 1
		}
		if w != 0 {
			if first < 0 {
				first = lo + bits.TrailingZeros64(w)
			}
			last = lo + 63 - bits.LeadingZeros64(w)
			n += bits.OnesCount64(w)
		}
		lo += cnt
	}
	return first, last, n
}

// ldim returns Ldim(v) when v is a rectangle or a gap union (every version
// space a learner can reach), ok false otherwise. It does not allocate; it
// costs O(k + |H|/64).
func (il *intervalLdim) ldim(v Set) (l int, ok bool) {
	k := il.k
	// One pass over the rows i (members (i, i..k-1), contiguous indices):
	// gap-union and rectangle shapes checked side by side.
	gapOK, rectOK := true, true
	end := -1        // gap union: last point of the current gap
	g1, g2 := 0, 0   // two largest gaps
	ra, rb := -1, -1 // rectangle: first and last non-empty row
	rc, rd := -1, -1 // rectangle: the common row [c, d]
	for i := range k {
		base := intervalIndex(i, i, k)
		f, la, n := rowRange(v, base, base+k-i)
		if n == 0 {
			if i <= end {
				gapOK = false
			}
			if ra >= 0 && rb < 0 {
				rb = i - 1
			}
			continue
		}
		if n != la-f+1 {
			return 0, false // a row with a hole
		}
		jf, jl := i+f-base, i+la-base
		if gapOK {
			switch {
			case i <= end:
				gapOK = jf == i && jl == end
			case jf == i:
				end = jl
				if t := jl - i + 1; t > g1 {
					g1, g2 = t, g1
				} else if t > g2 {
					g2 = t
				}
			default:
				gapOK = false
			}
		}
		if rectOK {
			switch {
			case ra < 0:
				ra, rc, rd = i, jf, jl
			case rb >= 0 || jf != rc || jl != rd:
				rectOK = false
			}
		}
		if !gapOK && !rectOK {
			return 0, false
		}
	}
	if ra < 0 {
		return -1, true // empty
	}
	if rb < 0 {
		rb = k - 1
	}
	if rectOK && rc >= rb {
		return floorLog2(rb-ra+1) + floorLog2(rd-rc+1), true
	}
	if gapOK {
		return il.pair(g1, g2), true
	}
	return 0, false
}

// errIntervalsTooBig is the refusal for intervals beyond the pair table.
func errIntervalsTooBig(k int) error {
	return fmt.Errorf("%d grid points, limit %d (MaxIntervalLdimPoints)", k, MaxIntervalLdimPoints)
}
