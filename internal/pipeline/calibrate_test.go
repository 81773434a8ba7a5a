package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// calibConfig has a Perceptron and an AdaGrad (hinge loss) calibrated on
// the stream, a logistic OGD (a probability of its own) and a Perceptron
// without either.
const calibConfig = `
input: {positive: [spam], negative: [ham]}
features: {bits: 10}
learners:
  - {name: pct, algorithm: perceptron, bias: true, calibrate: true}
  - {name: ada, algorithm: adagrad, loss: hinge, bias: true, calibrate: true}
  - {name: lr, algorithm: ogd, loss: logistic, eta: 0.5, bias: true}
  - {name: raw, algorithm: perceptron, bias: true}
`

// The probabilities served are calibrated: on a stream whose labels are
// drawn with a probability that grows with the margin, served before each
// label, those near p come true about a fraction p of the time, and they
// score a log loss well below a coin's. A learner with neither a calibration nor a
// probability of its own has none. Calibrations are state: a pipeline
// restored mid-stream serves exactly the probabilities of the
// uninterrupted one.
func TestCalibratedProbabilities(t *testing.T) {
	c := mustConfig(t, calibConfig)
	// Labels drawn with P(spam | v) = σ(8(v − 0.5)): the closer to the
	// boundary, the noisier, as in real data.
	rng := rand.New(rand.NewPCG(3, 4))
	var lines [][]byte
	var truth []float64
	for i := range 20000 {
		v, w := rng.Float64(), rng.Float64()
		label := "ham"
		truth = append(truth, 1/(1+math.Exp(-8*(v-0.5))))
		if rng.Float64() < truth[i] {
			label = "spam"
		}
		lines = append(lines, fmt.Appendf(nil, `{"id":"e-%d","features":{"v":%.4f,"w":%.4f},"label":%q}`, i, v, w, label))
	}
	p, dec := mustNew(t, c), mustDecoder(t, c)
	var ev event.Event
	const bins = 10
	var n, pos [3][bins]float64
	var logLoss [3]float64
	var bayes float64 // the log loss of the true probabilities
	var restored *Pipeline
	for k, line := range lines {
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if k == 12000 {
			b, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			restored = mustNew(t, c)
			if err := restored.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
		}
		preds, _ := p.Predict(&ev)
		y := 0.0
		if ev.Label > 0 {
			y = 1
		}
		var row [4]float64
		for i := range 4 {
			prob, ok := p.Probability(i, preds[i])
			if i == 3 {
				if ok {
					t.Fatalf("a Perceptron without calibrate has a probability: %g", prob)
				}
				continue
			}
			if !ok || !(prob >= 0 && prob <= 1) {
				t.Fatalf("learner %d: probability %g, %v", i, prob, ok)
			}
			row[i] = prob
			if k >= 2000 { // past the first fit
				b := min(int(prob*bins), bins-1)
				n[i][b]++
				pos[i][b] += y
				logLoss[i] -= y*math.Log(max(prob, 1e-12)) + (1-y)*math.Log(max(1-prob, 1e-12))
			}
		}
		if k >= 2000 {
			q := truth[k]
			bayes -= y*math.Log(q) + (1-y)*math.Log(1-q)
		}
		if restored != nil {
			rp, _ := restored.Predict(&ev)
			for i := range 3 {
				if prob, _ := restored.Probability(i, rp[i]); prob != row[i] {
					t.Fatalf("event %d, learner %d: restored serves %g, the uninterrupted %g", k, i, prob, row[i])
				}
			}
			restored.Process(&ev)
		}
		p.Process(&ev)
		// What the stream publishes after Process: the probability as
		// served, before the label stepped the calibration.
		for i := range 3 {
			if got, _ := p.ServedProbability(i); got != row[i] {
				t.Fatalf("event %d, learner %d: %g published after the label, %g served before it", k, i, got, row[i])
			}
		}
	}
	m := float64(len(lines) - 2000)
	for i, name := range []string{"pct (calibrated)", "ada (calibrated)", "lr (logistic)"} {
		// The Perceptron's margins rank the events worse (it jumps at
		// every mistake): its calibration is reliable, its log loss only
		// well below a coin's.
		if ll, want := logLoss[i]/m, bayes/m+0.1; i == 0 && ll > math.Ln2-0.15 || i > 0 && ll > want {
			t.Errorf("%s: log loss %.3f per event; the true probabilities' %.3f, a coin's %.3f", name, ll, bayes/m, math.Ln2)
		}
		if i == 2 {
			continue // a logistic model's own probability: not calibrated by design
		}
		for b := range bins {
			if n[i][b] < 500 {
				continue
			}
			mean := (float64(b) + 0.5) / bins
			if freq := pos[i][b] / n[i][b]; math.Abs(freq-mean) > 0.1 {
				t.Errorf("%s: of %v events served probabilities in [%.1f, %.1f), %.3f came true", name, n[i][b], float64(b)/bins, float64(b+1)/bins, freq)
			}
		}
	}
	if got := p.LabelName(1) + "/" + p.LabelName(-1); got != "spam/ham" {
		t.Errorf("label names %s, want spam/ham", got)
	}
	if q := mustNew(t, mustConfig(t, stateConfig)); q.LabelName(1)+"/"+q.LabelName(-1) != "1/0" {
		t.Errorf("default label names %s/%s", q.LabelName(1), q.LabelName(-1))
	}
}

// Scores near input.max_abs_value's limit (a Perceptron's reach 1e200)
// leave the calibration finite: its state restores.
func TestCalibrationHugeScores(t *testing.T) {
	c := mustConfig(t, "input: {max_abs_value: 1e100}\nlearners:\n  - {name: pct, algorithm: perceptron, calibrate: true}\n")
	p, dec := mustNew(t, c), mustDecoder(t, c)
	var ev event.Event
	for i, line := range []string{`{"features":{"v":1e100},"label":1}`, `{"features":{"v":1e100},"label":0}`, `{"features":{"v":-1e100},"label":1}`, `{"features":{"v":1e100},"label":0}`} {
		if err := dec.Decode([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		p.Process(&ev)
		if prob, ok := p.ServedProbability(0); !ok || !(prob >= 0 && prob <= 1) {
			t.Fatalf("event %d: probability %g", i, prob)
		}
	}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := mustNew(t, c).UnmarshalBinary(b); err != nil {
		t.Fatalf("a calibration after huge scores does not restore: %v", err)
	}
}
