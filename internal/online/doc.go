// Package online holds streamlearn's vector-space learners and their
// plumbing: sparse canonical vectors, feature hashing, scaling
// (features.scale), and the linear learners of the seed texts.
//
//   - Perceptron: Rosenblatt's Perceptron with optional bias and averaging;
//     mistake bound (R/γ)² and the online margin certificate R/√M.
//   - OGD: online (sub)gradient descent on the hinge, logistic or squared
//     loss, step η/√t or fixed, optional projection onto an L2 ball; regret
//     bounds of Zinkevich's theorem and the textbook's OGD theorem.
//   - Scaler: none, running standardization, L2 normalization.
//
// Every learner implements Learner (predict first, then update) and
// Guaranteed, encodes its state canonically, and allocates nothing per
// round in steady state. The conformance suite every learner passes is in
// package onlinetest.
//
// Sums over the entries of a vector (scores, norms, the change of ‖w‖²) run
// in one canonical order, documented on Vector: four interleaved partial
// sums combined as (s0+s1)+(s2+s3). Products are rounded before they are
// added, never fused into an FMA (which Go may do on arm64, or on amd64
// with GOAMD64=v3), so this arithmetic gives the same bits on every
// architecture, not only on every run.
//
// References:
//   - F. Rosenblatt, The Perceptron: a probabilistic model for information
//     storage and organization in the brain, Psychological Review 65(6),
//     1958; A. Novikoff, On convergence proofs for perceptrons, 1962 (the
//     (R/γ)² bound; the seeds' lecture notes, Lecture 4, Theorem 3).
//   - Y. Freund, R. Schapire, Large margin classification using the
//     perceptron algorithm, Machine Learning 37(3), 1999 (averaging).
//   - M. Zinkevich, Online convex programming and generalized infinitesimal
//     gradient ascent, ICML 2003, Theorem 1 (OGD with η/√t).
//   - S. Shalev-Shwartz, S. Ben-David, Understanding Machine Learning,
//     Cambridge University Press 2014, chapter 21.3 (Online Gradient
//     Descent, Theorem 21.15) and the seeds' lecture notes on stochastic
//     sub-gradient descent (Theorem 5).
//   - J. Langford, A. Smola, M. Zinkevich, Slow learners are fast, NIPS
//     2009 (OGD with delayed updates: the drift argument of OGD's
//     DelayedGuarantee); K. Quanrud, D. Khashabi, Online learning with
//     adversarial delays, NIPS 2015 (total delay D). The Perceptron's
//     DelayedGuarantee, (2d+1)·R²/γ², follows Novikoff's proof with the
//     served score (its comment has the proof).
//   - J. Montiel et al., River: machine learning for streaming data in
//     Python, JMLR 22(110), 2021: StandardScaler, Perceptron and
//     LogisticRegression, which Scaler, Perceptron (bias) and OGD (logistic,
//     fixed, bias, bias_eta) reproduce exactly on River's Phishing data.
package online
