package online

import (
	"encoding"
	"math"
)

// Labels are +1 (positive) and -1 (negative) everywhere in streamlearn.
// Decoders map 1/0, 1/-1, true/false and configured strings onto them.
const (
	Positive int8 = +1
	Negative int8 = -1
)

// Prediction is what a learner says before it sees the label.
type Prediction struct {
	// Label is the predicted label, Positive or Negative.
	Label int8
	// Score is learner specific: the margin <w,x> for linear learners,
	// P(label = +1) for Weighted-Majority, the size difference of the two
	// candidate version spaces for Halving, and so on. Loss reads it.
	Score float64
	// Advice is, for Weighted-Majority over other learners, the advice
	// it predicted from: bit k is set when its expert k predicted
	// Positive. It travels with the served prediction, so that Learn
	// charges each expert the advice it gave then, however many rounds
	// later the label comes. Zero for every other learner.
	Advice uint64
}

// A Learner is an online binary classifier run by the protocol of the seed
// texts: on every round it first predicts, then receives the label and
// learns. The two halves are separate calls so that the label may come
// later: a prediction served now can be learned from when its label
// arrives, however many rounds after.
//
// Neither call retains x: the caller reuses its slices for the next event.
// Learners are plain values, not safe for concurrent use (Predict may use
// scratch space), and own no goroutine; one goroutine owns a model.
type Learner interface {
	// Predict returns the prediction for x. It does not change the
	// learner: called twice on the same state it returns the same
	// prediction, and the state (its encoding) is as before. A randomized
	// learner draws from a generator whose state is part of the model and
	// advances only when it learns, so a prediction can be recomputed.
	Predict(x Vector) Prediction
	// Learn learns from the label y of x, whose prediction served was
	// Predict(x) on this learner, in the state it had then. Learn(x,
	// Predict(x), y) is the round of the seed texts.
	Learn(x Vector, served Prediction, y int8)
	// Loss is the loss the seed texts charge this learner on a round where
	// it predicted p and the label was y: the 0-1 loss for deterministic
	// classifiers, the surrogate loss at w(t) for OGD, the expected loss
	// <w(t), v_t> for Weighted-Majority. Loss has no side effects.
	Loss(p Prediction, y int8) float64

	// MarshalBinary returns the canonical encoding of the model state:
	// equal states give equal bytes, so its digest proves two runs learned
	// the same thing. UnmarshalBinary restores it (checkpoints).
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// A Rounder plays a labeled round in one call, what Predict(x), Loss(p, y)
// and Learn(x, p, y) do, with less work between the reads of the model:
// the linear learners make one pass over x instead of two, ~10% of their
// round. Round returns the prediction and its loss and leaves the learner
// in the state the three calls would, bit for bit (onlinetest checks it).
// The pipeline uses Round where a learner has it and the label is known.
type Rounder interface {
	Round(x Vector, y int8) (Prediction, float64)
}

// BoundKind names the quantity a learner's theorem bounds.
type BoundKind string

const (
	// NoBound: the learner has no theorem the tracker can check.
	NoBound BoundKind = ""
	// MistakeBound: the number of mistakes is at most Value.
	MistakeBound BoundKind = "mistakes"
	// RegretBound: loss minus the comparator's loss is at most Value.
	RegretBound BoundKind = "regret"
)

// Guarantee is what a learner's theorem promises after the rounds it has
// seen, and the comparator its regret is measured against.
type Guarantee struct {
	// Kind and Value: the bound, Value meaningful only when Kind != NoBound.
	Kind  BoundKind
	Value float64

	// Comparator names the comparator class ("best_hypothesis",
	// "best_expert", "zero_vector"); empty when there is none.
	// ComparatorLoss is its cumulative loss over the rounds so far (for a
	// finite class: the best member in hindsight, exact), and RegretBound
	// the bound on loss - ComparatorLoss (NaN when the theorem gives none).
	Comparator     string
	ComparatorLoss float64
	RegretBound    float64

	// Certificate is an optional quantity the learner certifies online,
	// such as the Perceptron's "every unit-norm separator has margin at most
	// R/sqrt(M)". CertificateKind names it; empty when there is none.
	CertificateKind string
	Certificate     float64

	// Violations counts the rounds on which the learner found its
	// assumption broken (a realizable-case learner's version space became
	// empty) and applied its recovery policy.
	Violations uint64

	// Premise says what is known of the theorem's premise on the rounds
	// so far; the zero value is an unconditional theorem.
	Premise Premise

	// Monotone says that Kind stays, and Value and ComparatorLoss never
	// decrease, from one round to the next, nor as the delay of
	// DelayedGuarantee grows (each is built from counts, running maxima
	// and sums with nondecreasing terms, by operations that keep the order
	// in floating point too). A tracker may then skip computing the guarantee while
	// the loss, or the mistakes, have not grown past the room the bound
	// last left them.
	Monotone bool
}

// Premise is what a learner knows of its theorem's premise on the rounds
// it has seen. The values are ordered from the most known to the least
// proved: the premise of a bound summed over several models is the
// largest of theirs.
type Premise uint8

const (
	// PremiseHolds: the theorem assumes nothing of the stream (OGD,
	// Weighted-Majority), or its premise is established on the rounds so
	// far (a version space that never emptied: they are realizable by H).
	PremiseHolds Premise = iota
	// PremiseAssumed: the premise is the user's word (a given margin) and
	// nothing the learner saw contradicts it.
	PremiseAssumed
	// PremiseFalse: the learner saw its premise fail (a version space
	// emptied; more updates than a margin allows), so the theorem says
	// nothing of this stream. It stays false: what a prefix disproves,
	// the stream cannot make true again.
	PremiseFalse
)

// Guaranteed is implemented by learners whose theorem gives a bound.
type Guaranteed interface {
	Guarantee() Guarantee
}

// A DelayGuaranteed learner's theorem also holds, with a larger bound,
// when labels come late (Learn called with a prediction served before
// other labels were learned). DelayedGuarantee returns the guarantee for
// labels at most d labeled rounds late: on every learned round, at most d
// other rounds were learned between its prediction and its label. ok is
// false when the theorem says nothing of delays for this learner's
// configuration.
type DelayGuaranteed interface {
	Guaranteed
	DelayedGuarantee(d uint64) (g Guarantee, ok bool)
}

// A Prober gives the probability of the positive label that a
// prediction of its learner stands for, when the learner has one: a
// model fitted to the logistic loss (σ of the score), Weighted-Majority
// (the weight of the experts saying Positive). ok is false when it has
// none (another loss).
type Prober interface {
	Probability(p Prediction) (prob float64, ok bool)
}

// A Domained learner predicts over a hypothesis class whose domain is not
// every vector (a table of points, a grid of intervals): its theorem
// holds for the events of the domain only, so a caller hands it no event
// outside it, neither to Predict nor to Learn. It reads raw feature
// values, in the units of its class's grid: a caller does not scale them
// (and a booster, which would, does not take it as a weak learner).
type Domained interface {
	// InDomain reports whether x lies in the domain. It does not retain x.
	InDomain(x Vector) bool
}

// Sigmoid returns 1/(1+e^(−z)) without overflow.
func Sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}
