package experts

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/online"
)

// MaxOverLearners is the most experts Weighted-Majority over learners
// takes: the advice it served travels in online.Prediction.Advice, one bit
// an expert.
const MaxOverLearners = 64

// OverLearners is Weighted-Majority (Hedge) over other learners, its
// experts: their predicted labels of an example are its advice. It is an
// online.Learner like any other. Predict returns Hedge's prediction with
// the advice in its Advice bits, so Learn(x, served, y) charges each
// expert the advice it gave when served was predicted, whatever the
// experts learned since (a label that comes later). It never makes its
// experts learn: they are learners of their own, with their own rounds.
// Its state (MarshalBinary) is the Hedge's; the experts' are theirs. Not
// safe for concurrent use.
type OverLearners struct {
	hedge   *Hedge
	experts []online.Learner
	advice  []int8 // scratch
}

// NewOverLearners returns Weighted-Majority over experts, 1 to
// MaxOverLearners learners.
func NewOverLearners(experts []online.Learner, cfg HedgeConfig) (*OverLearners, error) {
	if len(experts) > MaxOverLearners {
		return nil, fmt.Errorf("experts: %d learners, at most %d", len(experts), MaxOverLearners)
	}
	h, err := NewHedge(len(experts), cfg)
	if err != nil {
		return nil, err
	}
	return &OverLearners{hedge: h, experts: experts, advice: make([]int8, len(experts))}, nil
}

// Predict asks every expert for its prediction of x and returns
// PredictAdvice of their labels. Every expert reads x as it is: a caller
// whose experts read different inputs (the pipeline's scaled and raw
// features) passes their labels to PredictAdvice.
func (o *OverLearners) Predict(x online.Vector) online.Prediction {
	for k, e := range o.experts {
		o.advice[k] = e.Predict(x).Label
	}
	return o.PredictAdvice(o.advice)
}

// PredictAdvice returns the prediction for the experts' labels advice,
// one per expert: what Predict computes from the example, for a caller
// that already has them (the pipeline, which asked every learner this
// round). It does not retain advice and does not allocate.
func (o *OverLearners) PredictAdvice(advice []int8) online.Prediction {
	p := o.hedge.Predict(advice)
	for k, a := range advice {
		if a == online.Positive {
			p.Advice |= 1 << k
		}
	}
	return p
}

// Learn charges each expert the advice in served.Advice against y (see
// Hedge.Learn); x is not read.
func (o *OverLearners) Learn(_ online.Vector, served online.Prediction, y int8) {
	for k := range o.advice {
		o.advice[k] = online.Negative
		if served.Advice>>k&1 == 1 {
			o.advice[k] = online.Positive
		}
	}
	o.hedge.Learn(o.advice, served, y)
}

// Loss is the expected loss ⟨w(t), v_t⟩ (Hedge.Loss).
func (o *OverLearners) Loss(p online.Prediction, y int8) float64 { return o.hedge.Loss(p, y) }

// Guarantee returns the regret bound against the best expert.
func (o *OverLearners) Guarantee() online.Guarantee { return o.hedge.Guarantee() }

// DelayedGuarantee returns the regret bound for labels at most d learned
// rounds late (Hedge.DelayedGuarantee).
func (o *OverLearners) DelayedGuarantee(d uint64) (online.Guarantee, bool) {
	return o.hedge.DelayedGuarantee(d)
}

// Weights returns the distribution over the experts, appended to dst.
func (o *OverLearners) Weights(dst []float64) []float64 { return o.hedge.Weights(dst) }

// MarshalBinary returns the Hedge's state.
func (o *OverLearners) MarshalBinary() ([]byte, error) { return o.hedge.MarshalBinary() }

// UnmarshalBinary restores the Hedge's state.
func (o *OverLearners) UnmarshalBinary(b []byte) error { return o.hedge.UnmarshalBinary(b) }

var (
	_ online.Learner    = (*OverLearners)(nil)
	_ online.Guaranteed = (*OverLearners)(nil)
)

// Probability is the prediction's score: the weight of the experts saying
// Positive, the probability of the label drawn.
func (o *OverLearners) Probability(p online.Prediction) (float64, bool) { return p.Score, true }

var _ online.Prober = (*OverLearners)(nil)
