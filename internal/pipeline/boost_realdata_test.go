package pipeline

import (
	"testing"

	"github.com/streamlearn/streamlearn/internal/boost"
)

// TestAdaBoostRealData runs AdaBoost.OL at its defaults (10 AdaGrad weak
// learners with a bias) beside one AdaGrad learner at the same settings,
// on real data sets, in file order. On Elec2 the booster makes fewer
// mistakes than any of its weak learners and than the single learner that
// learned every example; on ijcnn1 fewer than its weak learners only; on
// Reuters and SMS spam neither. On every set its mistakes are within its
// published bound. want pins the mistakes, this code's exact results.
func TestAdaBoostRealData(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	dir := dataDir(t)
	const learners = `learners:
  - {name: adagrad, algorithm: adagrad, bias: true}
  - {name: boost, algorithm: adaboost-ol}
`
	for _, tc := range []struct {
		dataSet
		want                   map[string]uint64
		beatsWeak, beatsSingle bool // fewer mistakes than every weak learner; than the single one
	}{
		{ijcnn1Set, map[string]uint64{"adagrad": 2203, "boost": 2221}, true, false},
		{dataSet{"elec2", "elec2/elec.csv", "input: {label_column: class}\n", false}, map[string]uint64{"adagrad": 10939, "boost": 9162}, true, true},
		{reutersSet, map[string]uint64{"adagrad": 175, "boost": 232}, false, false},
		{smsSet, map[string]uint64{"adagrad": 96, "boost": 125}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustConfig(t, tc.input+learners)
			p := mustNew(t, c)
			events := decodeAll(t, c, tc.path(t, dir))
			for i := range events {
				p.Process(&events[i])
			}
			rep := mustReport(t, p)
			got := map[string]uint64{}
			for _, l := range rep.Learners {
				got[l.Name] = l.Mistakes
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s: %d mistakes, want %d", name, got[name], want)
				}
			}
			b := rep.Learners[1]
			if b.Bound == nil || !b.Bound.Holds || float64(b.Mistakes) > b.Bound.Value {
				t.Errorf("boost: %d mistakes, bound %+v", b.Mistakes, b.Bound)
			}
			ol := p.nodes[1].learner.(*boost.OL)
			bestWeak := ^uint64(0)
			for i := range boost.DefaultWeak {
				alpha, m, learned := ol.WeakStats(i)
				bestWeak = min(bestWeak, m)
				t.Logf("weak %d: α %+.3f, edge %+.3f, %d mistakes, learned %d of %d", i, alpha, ol.Edge(i), m, learned, len(events))
			}
			t.Logf("boost %d mistakes (%.2f%%), best weak learner %d, single adagrad %d; bound %.0f (%.2f·T)",
				b.Mistakes, 100*b.Accuracy, bestWeak, got["adagrad"], b.Bound.Value, b.Bound.Value/float64(len(events)))
			if beats := b.Mistakes < bestWeak; beats != tc.beatsWeak {
				t.Errorf("booster beats its best weak learner: %v, want %v", beats, tc.beatsWeak)
			}
			if beats := b.Mistakes < got["adagrad"]; beats != tc.beatsSingle {
				t.Errorf("booster beats the single learner: %v, want %v", beats, tc.beatsSingle)
			}
		})
	}
}
