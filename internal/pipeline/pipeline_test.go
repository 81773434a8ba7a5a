package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/regret"
)

const testConfig = `
features: {bits: 16}
learners:
  - {name: pct, algorithm: perceptron, bias: true, margin: 0.009}
  - {name: ogd, algorithm: ogd, loss: hinge, eta: 0.5, radius: 5, bias: true}
  - {name: consistent, algorithm: consistent, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: wm-h, algorithm: weighted-majority, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}, seed: 7}
  - {name: wm-l, algorithm: weighted-majority, experts: [pct, ogd, soa], seed: 7}
`

func mustConfig(t testing.TB, src string) *config.Config {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stream writes n JSONL events: v, w uniform, label 1 iff v >= 0.37 with no
// v within 0.01 of 0.37 (realizable by the thresholds above, separable with
// a bias), labels flipped with probability noise. shuffle permutes the order
// of the keys inside `features`.
func stream(n int, seed uint64, noise float64, shuffle bool) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	shuf := rand.New(rand.NewPCG(seed, 2)) // its own source: shuffling must not change the data
	var b bytes.Buffer
	for i := range n {
		v := rng.Float64()
		for v > 0.36 && v < 0.38 {
			v = rng.Float64()
		}
		w := rng.Float64()
		label := 0
		if v >= 0.37 {
			label = 1
		}
		if rng.Float64() < noise {
			label = 1 - label
		}
		feats := []string{fmt.Sprintf(`"v":%.4f`, v), fmt.Sprintf(`"w":%.4f`, w), `"c":1`}
		if shuffle {
			shuf.Shuffle(len(feats), func(i, j int) { feats[i], feats[j] = feats[j], feats[i] })
		}
		fmt.Fprintf(&b, `{"id":"e-%d","features":{%s},"label":%d}`+"\n", i, strings.Join(feats, ","), label)
	}
	return b.Bytes()
}

type collect struct{ letters []DeadLetter }

func (c *collect) DeadLetter(d DeadLetter) error {
	d.Raw = bytes.Clone(d.Raw)
	c.letters = append(c.letters, d)
	return nil
}

// replay replays data through a new pipeline of c, with dead letters to
// dl, and returns the pipeline and its report (Seconds zeroed).
func replay(t testing.TB, c *config.Config, data []byte, dl DeadLetters) (*Pipeline, Report) {
	t.Helper()
	p := mustNew(t, c)
	feedFrom(t, p, c, bytes.NewReader(data), "test.jsonl", dl)
	rep := mustReport(t, p)
	rep.Seconds = 0
	return p, rep
}

func sameReports(t *testing.T, what string, a, b Report) {
	t.Helper()
	a.Seconds, b.Seconds = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("%s: reports differ:\n%s\n%s", what, ja, jb)
	}
	for i := range a.Learners {
		if a.Learners[i].StateSHA256 != b.Learners[i].StateSHA256 {
			t.Errorf("%s: learner %s: state %s != %s", what, a.Learners[i].Name, a.Learners[i].StateSHA256, b.Learners[i].StateSHA256)
		}
	}
}

func TestDeterminism(t *testing.T) {
	c := mustConfig(t, testConfig)
	data := stream(3000, 1, 0.05, false)
	_, a := replay(t, c, data, nil)
	_, b := replay(t, c, data, nil)
	sameReports(t, "two replays", a, b)
}

func TestFeatureOrderIrrelevant(t *testing.T) {
	c := mustConfig(t, testConfig)
	_, a := replay(t, c, stream(2000, 3, 0.02, false), nil)
	_, b := replay(t, c, stream(2000, 3, 0.02, true), nil)
	sameReports(t, "shuffled feature keys", a, b)
}

// On a realizable, separable stream every theorem must hold, and the
// version-space learners stay within their mistake bounds: Consistent
// |H|-1 = 100, Halving log2(101) = 6.66, SOA Ldim = floor(log2 101) = 6.
func TestRealizableBoundsHold(t *testing.T) {
	c := mustConfig(t, testConfig)
	_, rep := replay(t, c, stream(5000, 2, 0, false), nil)
	want := map[string]float64{"consistent": 100, "halving": math.Log2(101), "soa": 6}
	for _, l := range rep.Learners {
		if l.Rounds != 5000 {
			t.Errorf("%s: %d rounds, want 5000", l.Name, l.Rounds)
		}
		if l.Bound != nil && !l.Bound.Holds {
			t.Errorf("%s: bound %+v broken on a realizable stream (mistakes %d, regret %+v)", l.Name, l.Bound, l.Mistakes, l.Regret)
		}
		if l.BoundViolations != 0 {
			t.Errorf("%s: %d violations on a realizable stream", l.Name, l.BoundViolations)
		}
		if b, ok := want[l.Name]; ok {
			if l.Bound == nil || math.Abs(l.Bound.Value-b) > 1e-9 {
				t.Errorf("%s: bound %+v, want mistakes <= %v", l.Name, l.Bound, b)
			}
			if float64(l.Mistakes) > b {
				t.Errorf("%s: %d mistakes > %v", l.Name, l.Mistakes, b)
			}
			// Realizable: the best hypothesis in hindsight makes no mistake.
			if l.Regret == nil || l.Regret.Value != float64(l.Mistakes) {
				t.Errorf("%s: regret %+v, want %d against a perfect hypothesis", l.Name, l.Regret, l.Mistakes)
			}
		}
	}
}

// Flipped labels make the stream non-realizable: the version spaces empty
// and the tracker reports violations, while Weighted-Majority's regret
// bound keeps holding.
func TestNoisyStreamViolations(t *testing.T) {
	c := mustConfig(t, testConfig)
	_, rep := replay(t, c, stream(5000, 4, 0.05, false), nil)
	for _, l := range rep.Learners {
		switch l.Algorithm {
		case "consistent", "halving", "soa":
			if l.BoundViolations == 0 {
				t.Errorf("%s: no violation on a stream with 5%% flipped labels", l.Name)
			}
		case "weighted-majority":
			if l.Bound == nil || !l.Bound.Holds || l.Regret == nil || l.Regret.Value > l.Bound.Value {
				t.Errorf("%s: regret %+v against bound %+v", l.Name, l.Regret, l.Bound)
			}
		}
	}
}

// Bad records never reach a model: a stream salted with them learns exactly
// what the clean stream learns, and each bad record is one dead letter.
func TestBadRecordsNeverTouchModels(t *testing.T) {
	c := mustConfig(t, testConfig)
	clean := stream(1500, 5, 0.03, false)
	bad := []string{
		`{"id":"x","features":{"v":0.5},"label":1`,          // truncated
		`{"id":"x","features":{"v":"0.5"},"label":"maybe"}`, // label outside the set
		`{"id":"x","features":{"v":1e999},"label":1}`,       // overflows to +Inf
		`{"id":"x","x":[1,2],"features":{"v":[1]},"label":1}`,
		"{\"id\":\"\xff\xfe\",\"label\":1}",
		`[1,2,3]`,
	}
	var salted bytes.Buffer
	for i, line := range bytes.SplitAfter(clean, []byte("\n")) {
		salted.Write(line)
		if i%200 == 0 {
			salted.WriteString(bad[(i/200)%len(bad)] + "\n")
		}
	}
	var dl collect
	_, a := replay(t, c, clean, nil)
	_, b := replay(t, c, salted.Bytes(), &dl)
	nbad := uint64(len(dl.letters))
	if nbad != 8 || b.Invalid != nbad || b.Events != a.Events+nbad {
		t.Errorf("invalid %d, dead letters %d, events %d vs %d clean; want 8 bad", b.Invalid, nbad, b.Events, a.Events)
	}
	var sum uint64
	for _, n := range b.InvalidByReason {
		sum += n
	}
	if sum != nbad {
		t.Errorf("invalid by reason %v sums to %d, want %d", b.InvalidByReason, sum, nbad)
	}
	for _, d := range dl.letters {
		if d.Reason == "" || len(d.Raw) == 0 || d.Offset == 0 {
			t.Errorf("dead letter without reason, raw bytes or offset: %+v", d)
		}
	}
	b.Events, b.Invalid, b.InvalidByReason = a.Events, a.Invalid, a.InvalidByReason
	sameReports(t, "salted stream", a, b)
}

// Unlabeled events are predicted and never learned from.
func TestUnlabeledNotLearned(t *testing.T) {
	c := mustConfig(t, testConfig)
	labeled := stream(1000, 6, 0, false)
	var mixed bytes.Buffer
	for i, line := range bytes.SplitAfter(labeled, []byte("\n")) {
		mixed.Write(line)
		if i%10 == 0 && len(line) > 0 {
			mixed.WriteString(`{"id":"u","features":{"v":0.9,"w":0.1,"c":1}}` + "\n")
		}
	}
	_, a := replay(t, c, labeled, nil)
	_, b := replay(t, c, mixed.Bytes(), nil)
	if b.Predicted != 100 || b.Labeled != 1000 || b.Events != 1100 {
		t.Errorf("events %d labeled %d predicted %d, want 1100/1000/100", b.Events, b.Labeled, b.Predicted)
	}
	b.Events, b.Predicted = a.Events, a.Predicted
	// Weighted-Majority draws its randomized prediction on every Predict,
	// so unlabeled events advance its generator: compare the others.
	a.Learners, b.Learners = deterministic(a), deterministic(b)
	sameReports(t, "unlabeled events", a, b)
}

func deterministic(r Report) []regret.LearnerReport {
	var out []regret.LearnerReport
	for _, l := range r.Learners {
		if l.Algorithm != "weighted-majority" {
			out = append(out, l)
		}
	}
	return out
}

// An event outside an explicit table's domain is rejected before any model.
func TestDomainRejected(t *testing.T) {
	c := mustConfig(t, `
learners:
  - {name: pct, algorithm: perceptron}
  - name: tab
    algorithm: halving
    class: {kind: table, feature: v, domain: [0, 1, 2], hypotheses: [[0, 0, 1], [0, 1, 1], [1, 1, 1]]}
`)
	data := []byte(`{"features":{"v":1},"label":1}
{"features":{"v":5},"label":1}
{"features":{"v":2},"label":1}
`)
	var dl collect
	_, rep := replay(t, c, data, &dl)
	if rep.Invalid != 1 || rep.InvalidByReason["domain"] != 1 || rep.Labeled != 2 || len(dl.letters) != 1 || dl.letters[0].Offset != 2 {
		t.Errorf("report %+v, dead letters %+v: want line 2 rejected for its domain", rep, dl.letters)
	}
	for _, l := range rep.Learners {
		if l.Rounds != 2 {
			t.Errorf("%s: %d rounds, want 2", l.Name, l.Rounds)
		}
	}
}

// The hot path — decode, predict, update, track — allocates nothing per
// event in steady state, for every learner kind at once.
func TestHotPathAllocs(t *testing.T) {
	c := mustConfig(t, testConfig)
	p, d := mustNew(t, c), mustDecoder(t, c)
	lines := bytes.Split(bytes.TrimSpace(stream(512, 8, 0.05, false)), []byte("\n"))
	var ev event.Event
	k := 0
	step := func() {
		if err := d.Decode(lines[k%len(lines)], &ev); err != nil {
			t.Fatal(err)
		}
		k++
		if _, reason := p.Process(&ev); reason != "" {
			t.Fatal(reason)
		}
	}
	for range 2 * len(lines) {
		step() // warm up: buffers reach their steady size
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per event, want 0", a)
	}
}
