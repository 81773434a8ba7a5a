// Package regret tracks, per learner, what the online learning protocol
// scores: rounds, mistakes, cumulative loss, regret against the best
// comparator in hindsight, and the bound the learner's theorem promises at
// the current round, with the rounds on which that promise was broken.
//
// The tracker knows nothing of transports or metrics: the pipeline feeds it
// one Observe per learner and labeled event, and everything else (the
// report, Prometheus collectors, the dashboard) reads a Report snapshot.
//
// Definitions (Shalev-Shwartz and Ben-David, Understanding Machine
// Learning, 2014, chapter 21):
//
//   - mistakes: rounds whose predicted label differed from the label;
//   - loss: the learner's own cumulative loss, as the seed texts charge it
//     (online.Learner.Loss): mistakes for deterministic classifiers, the
//     surrogate loss for OGD, the expected loss sum_t <w(t), v_t> for
//     Weighted-Majority;
//   - regret: loss minus the comparator's cumulative loss in hindsight
//     (online.Guarantee.ComparatorLoss), exact where the comparator set is
//     finite;
//   - bound: the learner's theorem at the current round; holds is false
//     exactly when the observed quantity (mistakes or regret) exceeded it,
//     and its status (BoundStatus: holds, violated, premise_false,
//     assumed) says whether the theorem proves it for this stream, from
//     what the learner knows of its premise (online.Guarantee.Premise).
//
// A round whose label is a default label, not one the stream gave (an
// expired event learned with labels.default_label: ObserveDefault), is a
// round the learner learned from, so the bound and the regret count it;
// the report keeps its rounds, mistakes and loss apart (LearnerReport's
// DefaultLabeled), so that its headline scores are the real labels'.
//
// A bound violation is counted once each time a bound goes from holding to
// not holding, and once for every round on which a realizable-case learner
// found its version space empty (online.Guarantee.Violations). Either is a
// drift signal: the stream stopped behaving as the theorem assumes.
//
// A Tracker's MarshalBinary and UnmarshalBinary carry all of that state
// (counters, the guarantee as of the last round, crossings and the sampled
// history), but not the models: their owner encodes those, so that a
// checkpoint restores the reports exactly.
package regret
