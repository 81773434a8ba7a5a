// Package experts holds finite hypothesis classes, their exact Littlestone
// dimension, the realizable-case learners Consistent, Halving and SOA, and
// Weighted-Majority (Hedge) over experts or over a class's hypotheses.
// Labels are online.Positive/online.Negative; the textbook's label 1 is
// Positive and 0 is Negative.
//
// # Classes
//
// A Class (NewClass, config block `class:`, ClassSpec) is a finite set of
// hypotheses H = {h_0, ..., h_{n-1}} over events. It maps an event to a
// point of its finite effective domain and keeps, per point, the Set of
// hypotheses saying 1 there. Feature values are x.Value(online.Slot(name,
// mask)), a missing feature being 0. With grid a_0 < ... < a_{k-1} evenly
// spaced from min to max inclusive (k = points):
//
//   - thresholds: h_i(x) = 1 iff x_f ≥ a_i; |H| = k.
//   - intervals: h_{i,j}(x) = 1 iff a_i ≤ x_f ≤ a_j for i ≤ j; |H| =
//     k(k+1)/2 (no empty interval: the all-0 function is not in H),
//     indexed row by row (i, then j).
//   - table: domain (distinct values of the feature) and hypotheses (rows
//     of 0/1 labels, one per domain element); |H| = rows. Any other value
//     of the feature is outside the domain.
//   - stumps over features f_0..f_{F-1}: for each feature f and grid value
//     a_i, 1[x_f ≥ a_i] (index 2fk+i) and 1[x_f < a_i] (index 2fk+k+i);
//     |H| = 2Fk.
//   - conjunctions over n boolean features (values 0 or 1; anything else
//     is outside the domain): every conjunction of literals in which each
//     variable appears positively, negatively or not at all (3^n, the
//     empty conjunction being the constant 1), plus the constant 0; |H| =
//     3^n + 1.
//
// InDomain on every class and learner tells the pipeline to reject an
// event (reason "domain") before any model sees it. Learners handed an
// event outside the domain anyway predict Negative with Score 0 and ignore
// its update: no hypothesis is defined there.
//
// # Labels that come late
//
// Consistent, Halving and SOA learn a label from the version space as it
// is when the label comes, whatever they predicted (Learn ignores the
// served prediction). When labels come at most d learned rounds late, their
// mistake bounds on a realizable stream are d+1 times the immediate ones
// (DelayedGuarantee; the proof, by colouring the intervals from each
// prediction to its label, is at delayedBound). The bound does not depend
// on the order in which the labels come, only on how many overlap, because
// along any chain of non-overlapping mistaken rounds the version space only
// shrinks and each mistake does what it does with immediate labels.
// Weighted-Majority (Hedge) charges each expert the advice it gave, so its
// weights follow the Hedge run on the labels in the order they come; the
// distribution it served is at most d updates older than the one updated,
// and each update moves it by at most 1 − e^(−η) in total variation. Its
// regret bound gains that drift (hedge.delayedGuarantee). Joulani, György &
// Szepesvári (Online learning under delayed feedback, ICML 2013) give the
// general reduction, which runs copies of the learner instead.
//
// # Littlestone dimension
//
// Class.Ldim(V) is exact: Ldim(∅) = -1 (the empty set shatters not even the
// depth-0 tree), Ldim(V) = 0 when |V| ≥ 1 and no point splits V, and
// otherwise max over points x splitting V of 1 + min(Ldim(V^(0)),
// Ldim(V^(1))) (Definition 21.5; Littlestone 1988).
//
// Only SOA needs it (its prediction and its published bound Ldim(H)).
// NewClass does no Ldim work: Consistent, Halving and Weighted-Majority
// accept every class within the memory limits below. The work is done
// once per class, on first use, by Class.PrepareLdim (NewSOA calls it;
// NewSOAChecked and NewLearner return its error, NewSOA panics with it).
// Closed forms or structured recursions, proved next to the code:
//
//   - thresholds: Ldim(V) = ⌊log₂|V|⌋ for every V ⊆ H (ldim.go); no
//     limit but MaxHypotheses;
//   - classes whose hypotheses each say 1 on at most one point (singletons,
//     Example 21.3): Ldim(V) = 1 when V holds two distinct functions, else
//     0 (-1 when empty), however large |V|;
//   - intervals (intervals.go): every version space a learner reaches,
//     recovery included, is a rectangle {(i, j) : i ∈ [a, b], j ∈ [c, d]}
//     with b ≤ c, whose Ldim is ⌊log₂(b-a+1)⌋ + ⌊log₂(d-c+1)⌋, or a union of
//     the intervals inside disjoint gaps (before any positive label), whose
//     Ldim is read from a table over its two largest gaps (a lemma verified
//     exhaustively up to sum 26, not proved). Both are checked against the
//     generic recursion on every reachable version space for up to 10 grid
//     points. Ldim(H) = 10 for 64 points, 14 for 256. The table costs about
//     points³ steps once per class (measured 0.6 ms at 64 points, 90 ms at
//     256, 0.8 s at 512); a lookup recognizes V's shape in O(points +
//     |H|/64) word operations without allocating. Refused beyond
//     MaxIntervalLdimPoints (512) grid points.
//
// Every other class (tables, stumps, conjunctions) gets the generic
// recursion, exhaustively over every version space reachable from H by
// labeled points, memoized by bitset key; SOA then only looks Ldim up (no
// allocation, no recomputation). The computation is exponential in general
// and PrepareLdim refuses, with an error naming the class and the limit,
// beyond MaxGenericHypotheses (512) hypotheses, MaxVersionSpaces (2^18)
// memoized version spaces, maxLdimWork (2^25) split evaluations or
// MaxGenericPoints (4096) effective domain points. Measured: conjunctions
// up to 4 features (0.1 s; 5 features is refused after 1.4 s), stumps over
// 1 feature up to ~200 points, 2 features ~10 points, 3 features ~4;
// tables of a few dozen hypotheses over a dozen points (any size when they
// are singletons).
//
// Memory limits of a class, whatever the learner: |H| ≤ MaxHypotheses
// (2^20; a learner keeps a uint64 loss per hypothesis, 8 MiB, and a
// version space of |H| bits), and for tabled kinds (table, conjunctions)
// effective points × ⌈|H|/64⌉ ≤ MaxTableWords (2^22 words, 32 MiB).
// Thresholds, intervals and stumps compute labels instead of tabling them:
// intervals go up to 1447 grid points (1,047,628 hypotheses), thresholds
// up to 2^20, conjunctions up to MaxConjunctionFeatures (10).
//
// # Realizable-case learners and the recovery policy
//
// Consistent, Halving and SOA keep the version space V_t (V_1 = H) and set
// V_{t+1} = V_t^(y_t) = {h ∈ V_t : h(x_t) = y_t}. Their published mistake
// bounds are |H|-1 (Corollary 21.2), log₂|H| (Theorem 21.3) and Ldim(H)
// (Lemma 21.7). Ties predict 1, as in the textbook.
//
// When V_t^(y_t) is empty, no hypothesis of H agrees with the whole
// stream: the stream is not realizable by H. The learner counts a
// violation (Guarantee.Violations) and recovers with
//
//	V_{t+1} = {h ∈ H : h(x_t) = y_t}, or H when that is empty too,
//
// i.e. it restarts the version space from the hypotheses consistent with
// the event that broke it, and keeps predicting. The mistake bound is then
// no longer a theorem (the tracker reports it as not holding once exceeded;
// a violation is a drift signal).
//
// The comparator is "best_hypothesis": ComparatorLoss is the exact minimum
// over h ∈ H of h's cumulative mistakes, kept incrementally; RegretBound
// is NaN (no regret theorem for these learners).
//
// # Weighted-Majority
//
// Hedge runs Weighted-Majority (Section 21.2.1; Littlestone & Warmuth 1994)
// over d experts whose ±1 advice the caller passes each round; OverLearners
// runs it over other learners' predicted labels, and WeightedMajority takes the
// hypotheses of a class as experts (Corollary 21.12). The cost of expert i
// is v_{t,i} = 1[advice_i ≠ y_t]; w̃_i ← w̃_i·e^{-η v_{t,i}}. Score is
// P(label = +1) = Σ_i w_i(t)·1[advice_i = +1], and Loss the expected loss
// ⟨w(t), v_t⟩. The realized Label is drawn with probability Score from a
// PCG seeded by (seed, 0x6865646765726e67): deterministic given the seed
// and the history, and part of the checkpointed state. Round t draws the
// t-th number of that generator: Predict draws from a copy, and Learn
// advances the generator past the draw, so a prediction can be recomputed
// until its round is learned, and serving one changes nothing. Weights are kept
// scaled so the best expert of the epoch weighs exactly 1 (no underflow of
// Z), and rebuilt exactly from the integer losses whenever that best loss
// grows.
//
// Learning rate and published regret bound (Guarantee.Value and
// RegretBound, against the best expert's exact cumulative loss), after t
// rounds, with d experts:
//
//   - d = 1: 0. The only expert is the comparator (η = √(2 ln 1/T) = 0).
//   - horizon T known: η = √(2 ln d / T) and, for t ≤ T, the bound is
//     min(t, √(2 T ln d)) (Theorem 21.11). The theorem assumes T > 2 ln d;
//     when T ≤ 2 ln d we still run η = √(2 ln d / T) ≥ 1 and publish
//     min(t, √(2 T ln d)) = t, the trivial bound (regret ≤ t since each
//     round's loss is at most 1). This is also valid, since the proof's
//     inequality regret ≤ ln d/η + η t/2 holds for every η > 0 (e^{-a} ≤ 1 -
//     a + a²/2 for all a ≥ 0) and increases in t. Past the horizon (t > T,
//     η unchanged) we publish min(t, ln d/η + η t/2).
//   - eta set in the config: that η on every round, bound min(t, ln d/η +
//     η t/2).
//   - horizon unknown (0, the default): the doubling trick. Epoch m = 0,
//     1, 2, ... covers the 2^m rounds t ∈ [2^m, 2^{m+1}) (1-based), weights
//     restart uniform and η_m = √(2 ln d / 2^m). Regret over the whole run
//     is at most the sum of the epochs' regrets (the best expert overall is
//     no better, in each epoch, than that epoch's best), so the published
//     bound is Σ_{m < M} B_m + min(s, B_M) where B_m = min(2^m, √(2·2^m
//     ln d)), M is the current epoch and s the rounds done in it. It never
//     exceeds the closed form √2/(√2-1)·√(2 t ln d) ≈ 3.41·√(2 t ln d): Σ_{m
//     ≤ M} √(2^m) < √(2^{M+1})/(√2-1) ≤ √2·√t/(√2-1) because t ≥ 2^M.
//
// # Encodings
//
// MarshalBinary is canonical little-endian: a version byte (1), a learner
// tag, a class fingerprint where there is a class, then the counters, the
// version space bits, the per-hypothesis (per-expert) losses, the weights
// as float64 bits and the PCG state. UnmarshalBinary checks the class and
// configuration and restores the state exactly.
//
// # Concurrency
//
// A Class is immutable and may be shared; learners are plain values, not
// safe for concurrent use, that own no goroutine and never retain x.
//
// References:
//
//   - N. Littlestone, Learning quickly when irrelevant attributes abound: a
//     new linear-threshold algorithm, Machine Learning 2 (1988) 285–318
//     (Halving, SOA, the Littlestone dimension).
//   - N. Littlestone, M. K. Warmuth, The weighted majority algorithm,
//     Information and Computation 108 (1994) 212–261.
//   - S. Shalev-Shwartz, S. Ben-David, Understanding Machine Learning,
//     Cambridge University Press 2014, chapter 21 (Corollary 21.2, Theorem
//     21.3, Definitions 21.4–21.5, Lemmas 21.6–21.7, Theorem 21.11,
//     Corollary 21.12, the doubling trick of Exercise 21.4).
package experts
