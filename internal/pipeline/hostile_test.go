package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/online"
)

// hostileLearners has every linear learner in the variants whose
// arithmetic differs (bias, averaging, each loss, with and without a
// ball, both schedules), a hypothesis class over a feature that takes
// extreme values, and Weighted-Majority over the linear learners.
const hostileLearners = `
learners:
  - {name: pct, algorithm: perceptron}
  - {name: pct-avg, algorithm: perceptron, bias: true, average: true}
  - {name: hinge, algorithm: ogd, loss: hinge, eta: 0.5}
  - {name: logistic, algorithm: ogd, loss: logistic, eta: 0.5, schedule: fixed, bias: true}
  - {name: squared-ball, algorithm: ogd, loss: squared, eta: 0.1, radius: 10}
  - {name: squared, algorithm: ogd, loss: squared, eta: 0.5, schedule: fixed}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: a, min: -1e16, max: 1e16, points: 33}}
  - {name: wm-l, algorithm: weighted-majority, experts: [pct, pct-avg, hinge, logistic, squared-ball], seed: 3}
`

// extremeEvents returns n labeled events whose values are all accepted
// with the limit m (within ±m) and as hostile to the arithmetic as
// accepted values get: ±(2^53−1) alone, in long dense vectors and summed
// from colliding names; a slot that only ever sees one value (zero
// variance); values one ulp apart and subnormal ones (variance that
// underflows); huge and tiny values at one slot; repeated words.
func extremeEvents(n int, seed uint64, m float64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	dense := func(sign float64) string {
		v := make([]string, 300)
		for i := range v {
			v[i] = fmt.Sprint(sign * m * float64(1-2*(i%2)))
		}
		return "[" + strings.Join(v, ",") + "]"
	}
	kinds := []string{
		fmt.Sprintf(`"features":{"a":%v,"b":%v}`, float64(m), -float64(m)),
		fmt.Sprintf(`"features":{"a":%v}`, -float64(m)),
		`"x":` + dense(1),
		`"x":` + dense(-1),
		fmt.Sprintf(`"features":{"a":%v,"a":%v}`, float64(m)/2, float64(m)/2), // a sum at the limit
		`"features":{"same":12345.678}`,
		`"features":{"u":1}`, `"features":{"u":1.0000000000000002}`,
		`"features":{"t":5e-324}`, `"features":{"t":1e-310}`, `"features":{"t":-2.5e-308}`,
		fmt.Sprintf(`"features":{"mix":%v}`, float64(m)), `"features":{"mix":1e-300}`,
		fmt.Sprintf(`"features":{"mix":%v,"a":1e-300}`, -float64(m)),
		`"text":"` + strings.Repeat("spam ", 2000) + `"`,
		`"features":{}`,
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{%s,"label":%d}`, kinds[rng.IntN(len(kinds))], rng.IntN(2))
	}
	return out
}

// No accepted input makes a learner's weights, scores or losses NaN or
// ±Inf, whatever the scaling, with the default limit and with the largest
// one allowed (event.MaxMaxAbs, 1e100): the limit keeps the raw values
// small enough, the standard scaler maps a value to at most √n in
// magnitude (n its slot's count) and to 0 while the variance is 0, and l2
// maps to the unit sphere.
func TestExtremeValuesStayFinite(t *testing.T) {
	for _, tc := range []struct {
		scale string
		limit float64
	}{
		{"none", event.DefaultMaxAbs}, {"standard", event.DefaultMaxAbs}, {"l2", event.DefaultMaxAbs},
		{"none", event.MaxMaxAbs}, {"standard", event.MaxMaxAbs}, {"l2", event.MaxMaxAbs},
	} {
		events := extremeEvents(3000, 1, tc.limit)
		t.Run(fmt.Sprintf("%s/%g", tc.scale, tc.limit), func(t *testing.T) {
			c := mustConfig(t, fmt.Sprintf("input: {max_abs_value: %g}\nfeatures: {bits: 12, scale: %s}\n%s", tc.limit, tc.scale, hostileLearners))
			p, dec := mustNew(t, c), mustDecoder(t, c)
			var ev event.Event
			for i, raw := range events {
				if err := dec.Decode(raw, &ev); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				preds, reason := p.Process(&ev)
				if reason != "" {
					t.Fatalf("event %d: %s", i, reason)
				}
				for k, pr := range preds {
					if !finite(pr.Score) {
						t.Fatalf("event %d (%.60s...): learner %s: score %v", i, raw, p.Name(k), pr.Score)
					}
				}
			}
			checkFinite(t, p)
			rep := mustReport(t, p)
			if _, err := json.Marshal(rep); err != nil { // NaN or Inf anywhere fails
				t.Fatalf("report: %v", err)
			}
			for _, l := range rep.Learners {
				if l.Rounds != uint64(len(events)) {
					t.Errorf("%s: %d rounds, want %d", l.Name, l.Rounds, len(events))
				}
			}
		})
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkFinite fails t unless every weight of every learner of p is finite.
func checkFinite(t *testing.T, p *Pipeline) {
	t.Helper()
	for i := range p.nodes {
		var w []float64
		switch m := p.Model(i).(type) {
		case *online.Perceptron:
			w = m.Weights()
		case *online.OGD:
			w = m.Weights(nil)
		case *experts.OverLearners:
			w = m.Weights(nil)
		case *experts.WeightedMajority:
			w = m.Weights(nil)
		default:
			continue // version spaces: no real-valued state
		}
		for k, v := range w {
			if !finite(v) {
				t.Fatalf("learner %s: weight %d is %v", p.Name(i), k, v)
			}
		}
	}
}
