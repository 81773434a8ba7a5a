package pipeline

import (
	"math"

	"github.com/streamlearn/streamlearn/internal/online"
)

// platt is Platt scaling fitted on the stream: the probability of the
// positive label given a learner's score s is σ(a·s + b). Each labeled
// round, after the learner's own update, a and b take an AdaGrad step on
// the log loss of the label at the score the learner served: predict,
// then update, as every learner does, so that the probability served for
// an event never saw its label. AdaGrad's steps make the fit independent
// of the scale of the scores (a Perceptron's margins grow with its
// weights). It starts at σ(s) (a = 1, b = 0).
type platt struct {
	a, b   float64
	ga, gb float64 // sums of squared gradients
}

// plattEta is the step of the calibration's AdaGrad.
const plattEta = 0.1

func newPlatt() *platt { return &platt{a: 1} }

// prob returns the calibrated probability of the positive label at
// score s: at an infinite score, 1 or 0 as the slope a says; 0.5 at NaN.
func (c *platt) prob(s float64) float64 {
	z := c.a*s + c.b
	if math.IsNaN(z) {
		return 0.5
	}
	return online.Sigmoid(z)
}

// learn takes the step of a round labeled y whose served score was s. A
// step whose sums would not stay finite (scores past 1e150, which
// input.max_abs_value allows) is not taken: every state learn reaches
// encodes and restores (valid).
func (c *platt) learn(s float64, y int8) {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return
	}
	t := 0.0
	if y == online.Positive {
		t = 1
	}
	g := c.prob(s) - t // d(log loss)/dz at z = a·s + b
	ga, gb := g*s, g
	if sa := c.ga + ga*ga; !math.IsInf(sa, 0) && !math.IsNaN(sa) && sa > 0 {
		c.ga = sa
		c.a -= plattEta * ga / math.Sqrt(sa)
	}
	if sb := c.gb + gb*gb; sb > 0 {
		c.gb = sb
		c.b -= plattEta * gb / math.Sqrt(sb)
	}
}

// Probability returns the probability of the positive label that learner
// i's prediction pr stands for: calibrated (learners[i].calibrate), or
// the learner's own (a logistic model's, Weighted-Majority's); ok is
// false when it has none.
func (p *Pipeline) Probability(i int, pr online.Prediction) (prob float64, ok bool) {
	n := &p.nodes[i]
	if n.calib != nil {
		return n.calib.prob(pr.Score), true
	}
	if n.prober != nil {
		return n.prober.Probability(pr)
	}
	return 0, false
}

// ServedProbability is Probability of the prediction of learner i that
// the last Process (or Predict) returned, as it was served: for a
// calibrated learner, from its calibration before the label of that event
// (a labeled one) or of any event the call let expire. Call it before the
// next Process.
func (p *Pipeline) ServedProbability(i int) (prob float64, ok bool) {
	if n := &p.nodes[i]; n.calib != nil {
		return n.servedProb, true
	}
	return p.Probability(i, p.preds[i])
}

// LabelName returns the label y as the configuration names it: the first
// of input.positive or input.negative, else "1" or "0"; with classes
// (input.classes), the name of class y.
func (p *Pipeline) LabelName(y int8) string {
	if p.classes != nil {
		if int(y) >= 0 && int(y) < len(p.classes) {
			return p.classes[y]
		}
		return ""
	}
	if y == online.Positive {
		return p.labelNames[1]
	}
	return p.labelNames[0]
}

// first returns s[0], or "" when s is empty.
func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// valid reports whether c is a state learn can reach: finite, with sums
// of squares not negative.
func (c *platt) valid() bool {
	for _, v := range []float64{c.a, c.b, c.ga, c.gb} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return c.ga >= 0 && c.gb >= 0
}
