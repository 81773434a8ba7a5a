// Package boost implements online boosting: AdaBoost.OL (Beygelzimer,
// Kale & Luo, "Optimal and adaptive algorithms for online boosting",
// ICML 2015, Algorithm 2) over N weak online learners of any algorithm.
//
// # The algorithm
//
// On each round the N weak learners predict h_t^i ∈ {-1, +1}. The booster
// keeps a weight α^i ∈ [-2, 2] per weak learner and sees N experts: expert
// i predicts the sign of the prefix sum ŝ_t^i = Σ_{j≤i} α_t^j h_t^j (a
// zero sum predicts -1, the Perceptron's tie rule). When the label y_t
// comes, with z_t^i = y_t h_t^i and s_t^i = y_t ŝ_t^i the margin of expert
// i (s_t^0 = 0):
//
//   - weak learner i learns the example with probability
//     w_t^i = 1/(1+e^{s_t^{i-1}}), the logistic loss's slope at the margin
//     the experts before it reached: an example they already get right by
//     a wide margin is rarely shown to it (rejection sampling, as in the
//     paper's AdaBoost.OL; the draw is a hash of the seed, the round and
//     i, so a replay draws the same);
//   - α^i takes a projected online gradient step on the logistic loss
//     ℓ(s) = ln(1+e^{-s}) of s_t^{i-1} + α z_t^i, step η_t = 4/√t:
//     α^i ← Π_[-2,2](α^i + η_t z_t^i / (1+e^{s_t^i}));
//   - expert i's weight is e^{-M_i}, M_i its mistakes so far.
//
// # Where it departs from the paper, and from batch AdaBoost
//
// The paper draws the expert whose prediction the booster plays from the
// weights e^{-M_i}; this booster plays their weighted majority vote
// (Littlestone & Warmuth's Weighted Majority with β = e^{-1}), so its
// predictions involve no draw at all and the bound below holds for the
// mistakes it makes, not only in expectation: the tracker counts the
// mistakes made, and with a draw an unlucky run could exceed a bound on
// their expectation. The price is the constant of the expert step,
// 1/ln(2e/(1+e)) ≈ 2.63 instead of 1/(1-e^{-1}) ≈ 1.58.
//
// Batch AdaBoost (the seeds' AdaBoost notes, Algorithm 1) fixes a sample,
// calls its weak learner T times on reweighted copies of the whole sample
// and sets α_t = ½ ln((1-ε_t)/ε_t) from each hypothesis' weighted error;
// its theorem bounds the training error by e^{-2Tγ²}. Online there is no
// sample to revisit: the N weak learners run side by side on the stream,
// the example weights 1/(1+e^{s}) replace AdaBoost's e^{-s} (the logistic
// loss's slope instead of the exponential loss's, so weights stay ≤ 1 and
// can be probabilities), α is learned online instead of computed from an
// error, and the number of weak learners is fixed in advance. The
// guarantee is a mistake bound on the stream, not a training error.
//
// # The mistake bound
//
// Let γ_i = Σ_t w_t^i z_t^i / Σ_t w_t^i be weak learner i's edge: its
// advantage over a coin on the examples, weighted as the booster weighted
// them (measured on the stream, so it adapts: a weak learner with no edge
// adds nothing and costs nothing). After T rounds the booster's mistakes
// are at most
//
//	c · (min(T, (4 ln 2 · T + 24 N √T) / Σ_i γ_i²) + ln N),  c = 1/ln(2e/(1+e)).
//
// This is the paper's bound for AdaBoost.OL (mistakes O(T/Σ_i γ_i²) plus
// lower-order terms), its proof followed with the constants made explicit
// for this implementation, in three steps:
//
//  1. For fixed i, the α-step is online gradient descent on the convex
//     f_t(α) = ℓ(s_t^{i-1} + α z_t^i) over [-2, 2] (diameter 4, |f_t'| ≤ 1):
//     its regret against any fixed α* is at most 6√T (Zinkevich's bound,
//     D²/(2η_T) + ½Σ_t η_t). And ℓ(s + αz) - ℓ(s) = ln(1 + w(e^{-αz} - 1))
//     ≤ w(e^{-αz} - 1) with w = 1/(1+e^s); at α* = ½ ln((1+γ_i)/(1-γ_i))
//     this sums to W_i(√(1-γ_i²) - 1) ≤ -W_i γ_i²/2, with W_i = Σ_t w_t^i (when
//     |γ_i| > tanh 2, α* = ±2 gives less than -0.73 W_i, still below). So
//     the experts' cumulative logistic losses L_i satisfy
//     L_i ≤ L_{i-1} - W_i γ_i²/2 + 6√T; with L_0 = T ln 2 and L_N ≥ 0,
//     Σ_i W_i γ_i² ≤ 2T ln 2 + 12N√T.
//  2. w_t^i ≥ ½ whenever expert i-1 errs (its margin s ≤ 0), and
//     w_t^1 = ½ on every round, so W_i ≥ M*/2 for every i, where M* is the
//     fewest mistakes of any expert. Hence
//     M* ≤ (4 ln 2 · T + 24 N √T) / Σ_i γ_i².
//  3. Weighted Majority over the N experts with β = e^{-1} makes at most
//     (M* ln(1/β) + ln N) / ln(2/(1+β)) = c (M* + ln N) mistakes.
//
// The bound is about the booster's decisions given the weak learners'
// predictions: it holds whatever the weak learners are and however they
// learn. Whether Σ_i γ_i² grows with N, so that the bound is small, is the
// weak learners' part (the weak learning assumption); the tracker reports
// the edges it measured. With labels that come late the theorem says
// nothing, and the booster publishes no delayed bound.
package boost
