package regret

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// pair is a tracker over two guaranteed models and one without a theorem,
// the guaranteed ones driven by the round number alone so that two pairs
// fed the same rounds are in the same state.
type pair struct {
	tr   *Tracker
	m, r *fake
}

func newPair(history int) *pair {
	p := &pair{tr: New(), m: &fake{state: []byte("m")}, r: &fake{state: []byte("r")}}
	p.m.g = online.Guarantee{Kind: online.MistakeBound, Value: 3, Comparator: "best_hypothesis"}
	p.r.g = online.Guarantee{Kind: online.RegretBound, Comparator: "best_expert", RegretBound: 1}
	p.tr.Add("m", "halving", p.m)
	p.tr.Add("r", "weighted-majority", p.r)
	p.tr.Add("p", "perceptron", plain{})
	if history > 0 {
		p.tr.EnableHistory(history)
	}
	return p
}

// round k: the labels alternate, the predictions follow a fixed pattern;
// the mistake bound drops to 1 from round 6 on (a crossing), the regret
// bound grows like k/4, and the comparator loss like k/5.
func (p *pair) round(k int) {
	y := int8(1)
	if k%2 == 0 {
		y = -1
	}
	pred := int8(1)
	if k%3 == 0 {
		pred = -1
	}
	if k >= 6 {
		p.m.g.Value = 1
	}
	p.m.g.ComparatorLoss = float64(k / 7)
	p.m.g.Violations = uint64(k / 9)
	p.r.g.Value = float64(k) / 4
	p.r.g.RegretBound = float64(k) / 4
	p.r.g.ComparatorLoss = float64(k / 5)
	loss := 0.0
	if pred != y {
		loss = 1
	}
	p.tr.Observe(0, online.Prediction{Label: pred}, y, loss)
	p.tr.Observe(1, online.Prediction{Label: pred, Score: 0.25}, y, 0.25+loss/2)
	p.tr.Observe(2, online.Prediction{Label: pred}, y, loss)
}

func (p *pair) state(t *testing.T) (string, []byte) {
	t.Helper()
	ls, err := p.tr.Learners()
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(struct {
		L []LearnerReport
		H [][]Point
	}{ls, p.tr.History()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return string(j), b
}

// Restoring at round k and running on gives exactly the uninterrupted
// run: reports, digests, history and encoding, for every k.
func TestTrackerSplitRun(t *testing.T) {
	const n = 40
	for _, hist := range []int{0, 4} {
		whole := newPair(hist)
		for k := 1; k <= n; k++ {
			whole.round(k)
		}
		wantJSON, wantBytes := whole.state(t)
		for k := 0; k <= n; k++ {
			a := newPair(hist)
			for r := 1; r <= k; r++ {
				a.round(r)
			}
			blob, _ := a.tr.MarshalBinary()
			// The target has no history enabled: it comes from the encoding.
			b := newPair(0)
			// The restored models carry their guarantee as of round k.
			b.m.g, b.r.g = a.m.g, a.r.g
			if err := b.tr.UnmarshalBinary(blob); err != nil {
				t.Fatalf("history %d, k %d: %v", hist, k, err)
			}
			for r := k + 1; r <= n; r++ {
				b.round(r)
			}
			gotJSON, gotBytes := b.state(t)
			if gotJSON != wantJSON || !bytes.Equal(gotBytes, wantBytes) {
				t.Fatalf("history %d, split at %d:\n got %s\nwant %s", hist, k, gotJSON, wantJSON)
			}
		}
		rep, _ := whole.tr.Learners()
		// Rounds 1..40: mistakes where pred != y, i.e. k%3==0 xor k even:
		// 20 + 13 - 2*6 = 21; the mistake bound is crossed once (at round 6
		// when it drops to 1 below 2 mistakes) and there are 40/9 = 4
		// version-space violations.
		if r := rep[0]; r.Rounds != n || r.Mistakes != 21 || r.BoundViolations != 5 || r.Bound.Holds {
			t.Fatalf("uninterrupted run: %+v", r)
		}
		if hist > 0 && len(whole.tr.History()[0]) < 3 {
			t.Fatalf("history %v too short to test anything", whole.tr.History()[0])
		}
	}
}

// An encoding without history disables the target's.
func TestTrackerHistoryFollowsEncoding(t *testing.T) {
	a := newPair(0)
	a.round(1)
	blob, _ := a.tr.MarshalBinary()
	b := newPair(8)
	b.round(1)
	if err := b.tr.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	if h := b.tr.History(); h != nil {
		t.Errorf("history %v survived an encoding without one", h)
	}
}

func TestTrackerUnmarshalRefuses(t *testing.T) {
	src := newPair(4)
	for k := 1; k <= 9; k++ {
		src.round(k)
	}
	blob, _ := src.tr.MarshalBinary()
	flip := func(i int, v byte) []byte {
		b := bytes.Clone(blob)
		b[i] = v
		return b
	}
	renamed := New()
	renamed.Add("m", "halving", &fake{})
	renamed.Add("R", "weighted-majority", &fake{})
	renamed.Add("p", "perceptron", plain{})
	realg := New()
	realg.Add("m", "soa", &fake{})
	realg.Add("r", "weighted-majority", &fake{})
	realg.Add("p", "perceptron", plain{})
	short := New()
	short.Add("m", "halving", &fake{})

	cases := []struct {
		name string
		tr   *Tracker
		b    []byte
		want string
	}{
		{"renamed", renamed, blob, `learner 1: encoding has "r" (weighted-majority), tracker has "R" (weighted-majority)`},
		{"algorithm", realg, blob, `learner 0: encoding has "m" (halving), tracker has "m" (soa)`},
		{"count", short, blob, "encoding has 3 learners, tracker has 1"},
		{"magic", nil, flip(0, 'X'), "not a tracker encoding"},
		{"version", nil, flip(4, 4), "unsupported format version 4 (this build reads 1 to 3)"},
		{"trailing", nil, append(bytes.Clone(blob), 0), "1 trailing bytes"},
		{"bool", nil, flip(9+9+15+24, 7), "bad boolean"}, // learner 0's broken flag
		{"empty", nil, nil, "truncated"},
	}
	for _, c := range cases {
		tr := c.tr
		if tr == nil {
			tr = newPair(0).tr
		}
		_, before := (&pair{tr: tr}).state(t)
		err := tr.UnmarshalBinary(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, after := (&pair{tr: tr}).state(t); !bytes.Equal(before, after) {
			t.Errorf("%s: refused encoding changed the tracker", c.name)
		}
	}
	for n := range len(blob) {
		if err := newPair(0).tr.UnmarshalBinary(blob[:n]); err == nil {
			t.Fatalf("prefix of %d of %d bytes accepted", n, len(blob))
		}
	}
}

// Counters no run produces are refused; each case patches one field of a
// learner written at a known offset.
func TestTrackerUnmarshalInconsistent(t *testing.T) {
	src := newPair(0)
	for k := 1; k <= 9; k++ {
		src.round(k)
	}
	blob, _ := src.tr.MarshalBinary()
	// Learner 0 starts after magic, version, count (9 bytes) and its name
	// "m" and algorithm "halving" (8+1 + 8+7 bytes).
	off := 9 + 9 + 15
	rounds, mistakes, broken := off, off+8, off+24
	patch := func(at int, v ...byte) []byte {
		b := bytes.Clone(blob)
		copy(b[at:], v)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"mistakes above rounds", patch(mistakes, 100), "100 mistakes in 9 rounds"},
		{"zero rounds", patch(rounds, 0), "mistakes in 0 rounds"},
		{"broken flag", patch(broken, 0), "broken flag false contradicts the bound"},
	} {
		if err := newPair(0).tr.UnmarshalBinary(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzTrackerUnmarshal(f *testing.F) {
	for _, hist := range []int{0, 3} {
		p := newPair(hist)
		for k := 0; k <= 12; k++ {
			blob, _ := p.tr.MarshalBinary()
			f.Add(blob)
			p.round(k + 1)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := newPair(0).tr
		if err := tr.UnmarshalBinary(b); err != nil {
			return
		}
		got, err := tr.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("accepted encoding re-marshals differently:\n got %x\nwant %x", got, b)
		}
		if _, err := tr.Learners(); err != nil {
			t.Fatal(err)
		}
		tr.History()
	})
}

// A diverging learner's infinite loss or regret is written as null, not
// an encoding error that would stop a report.
func TestReportJSONNonFinite(t *testing.T) {
	inf := math.Inf(1)
	b, err := json.Marshal(LearnerReport{Name: "sq", Algorithm: "ogd", Rounds: 3, Accuracy: 0.5, Loss: inf,
		Regret: &RegretReport{Comparator: "zero_vector", Value: math.NaN(), Bound: &inf}})
	if err == nil {
		t.Fatalf("a regret bound of +Inf encoded: %s (reports never carry a non-finite bound)", b)
	}
	b, err = json.Marshal(LearnerReport{Name: "sq", Algorithm: "ogd", Rounds: 3, Accuracy: 0.5, Loss: inf,
		Regret: &RegretReport{Comparator: "zero_vector", Value: math.NaN()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"loss":null`, `"value":null`, `"accuracy":0.5`, `"rounds":3`, `"comparator":"zero_vector"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back LearnerReport
	if err := json.Unmarshal(b, &back); err != nil || back.Rounds != 3 || back.Loss != 0 || back.Accuracy != 0.5 {
		t.Errorf("decoded %+v, %v", back, err)
	}
}

// Rounds scored against a default label (ObserveDefault) are kept apart
// in the report, counted in the bound, and are state: in the encoding
// (format version 3; a tracker without them keeps version 2) and in the
// digest (which, without them, is the
// one before: the state and 24 bytes of counts).
func TestTrackerDefaultLabels(t *testing.T) {
	build := func() (*Tracker, *fake) {
		m := &fake{state: []byte("m"), g: online.Guarantee{Kind: online.MistakeBound, Value: 2}}
		tr := New()
		tr.Add("m", "halving", m)
		tr.DefaultLabels()
		return tr, m
	}
	tr, _ := build()
	ls, err := tr.Learners()
	if err != nil {
		t.Fatal(err)
	}
	if d := ls[0].DefaultLabeled; d == nil || d.Rounds != 0 || !math.IsNaN(ls[0].Accuracy) || !math.IsNaN(d.Accuracy) {
		t.Errorf("before a round: %+v, default-labeled %+v; want no accuracy (NaN) and an empty default_labeled", ls[0], d)
	}
	if b, _ := json.Marshal(ls[0]); !strings.Contains(string(b), `"accuracy":null`) || !strings.Contains(string(b), `"default_labeled":{"rounds":0,"mistakes":0,"accuracy":null,"loss":0}`) {
		t.Errorf("JSON %s: want accuracy null and an empty default_labeled", b)
	}
	if b, _ := tr.MarshalBinary(); b[4] != 2 {
		t.Errorf("format version %d without default-labeled rounds, want 2", b[4])
	}
	// 3 real rounds (1 mistake), 2 on the default label (1 mistake): 2
	// mistakes in all, the bound's 2.
	tr.Observe(0, online.Prediction{Label: 1}, 1, 0)
	tr.ObserveDefault(0, online.Prediction{Label: 1}, -1, 1)
	tr.Observe(0, online.Prediction{Label: -1}, 1, 1)
	tr.ObserveDefault(0, online.Prediction{Label: -1}, -1, 0)
	tr.Observe(0, online.Prediction{Label: -1}, -1, 0)
	ls, err = tr.Learners()
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	if l.Rounds != 3 || l.Mistakes != 1 || math.Abs(l.Accuracy-2.0/3) > 1e-15 || l.Loss != 1 || l.Bound == nil || !l.Bound.Holds ||
		*l.DefaultLabeled != (DefaultLabeledReport{Rounds: 2, Mistakes: 1, Accuracy: 0.5, Loss: 1}) {
		t.Errorf("report %+v, default-labeled %+v; want 3 rounds, 1 mistake, loss 1; 2, 1, 0.5, 1; the bound 2 holding", l, l.DefaultLabeled)
	}
	if tr.Rounds(0) != 5 || tr.Mistakes(0) != 2 || tr.Defaults(0) != (Scores{2, 1, 1}) {
		t.Errorf("rounds %d, mistakes %d, defaults %+v: want every round learned, 5 and 2, of which 2, 1, 1", tr.Rounds(0), tr.Mistakes(0), tr.Defaults(0))
	}
	// One more default-labeled mistake breaks the bound of 2 mistakes:
	// the learner learned from it.
	tr.ObserveDefault(0, online.Prediction{Label: 1}, -1, 1)
	if ls, _ := tr.Learners(); ls[0].Bound.Holds || ls[0].Mistakes != 1 {
		t.Errorf("bound %+v with 3 mistakes learned (1 on a real label), want broken", ls[0].Bound)
	}
	b, err := tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if b[4] != 3 {
		t.Errorf("format version %d with default-labeled rounds, want 3", b[4])
	}
	back, _ := build()
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if back.Defaults(0) != (Scores{3, 2, 2}) {
		t.Errorf("restored defaults %+v, want 3, 2, 2", back.Defaults(0))
	}
	want, _ := json.Marshal(mustLearners(t, tr))
	if got, _ := json.Marshal(mustLearners(t, back)); !bytes.Equal(got, want) {
		t.Errorf("restored report %s, want %s", got, want)
	}
	// The digest covers the default-labeled counts; without any it is
	// the state and rounds, mistakes and loss alone.
	if StateDigest([]byte("m"), 6, 3, 3, Scores{3, 2, 2}) == StateDigest([]byte("m"), 6, 3, 3, Scores{}) {
		t.Error("the digest does not cover the default-labeled counts")
	}
	old := sha256.Sum256(append([]byte("m"), 6, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0x40))
	if StateDigest([]byte("m"), 6, 3, 3, Scores{}) != old {
		t.Error("without default-labeled rounds the digest is not the one before")
	}
	// Counts no run makes are refused: default-labeled rounds above the
	// rounds (learner 0's last 24 bytes before the history flag).
	bad := bytes.Clone(b)
	bad[len(bad)-25] = 9
	if err := back.UnmarshalBinary(bad); err == nil || !strings.Contains(err.Error(), "9 rounds (2 mistakes) scored against a default label of 6 rounds") {
		t.Errorf("9 default-labeled rounds of 6: %v", err)
	}
}

func mustLearners(t *testing.T, tr *Tracker) []LearnerReport {
	t.Helper()
	ls, err := tr.Learners()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// WithoutHistory drops the curves of an encoding of every version this
// build writes (2 without default-labeled rounds, 3 with them): what is
// left is the encoding of the same tracker without history.
func TestWithoutHistory(t *testing.T) {
	for _, def := range []bool{false, true} {
		build := func(history bool) []byte {
			m := &fake{state: []byte("m"), g: online.Guarantee{Kind: online.MistakeBound, Value: 2}}
			tr := New()
			tr.Add("m", "halving", m)
			tr.DefaultLabels()
			if history {
				tr.EnableHistory(16)
			}
			tr.Observe(0, online.Prediction{Label: 1}, 1, 0)
			if def {
				tr.ObserveDefault(0, online.Prediction{Label: 1}, -1, 1)
			}
			tr.Observe(0, online.Prediction{Label: -1}, 1, 1)
			b, err := tr.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		with, without := build(true), build(false)
		if want := byte(2 + map[bool]byte{false: 0, true: 1}[def]); with[4] != want {
			t.Errorf("default-labeled %v: format version %d, want %d", def, with[4], want)
		}
		got, err := WithoutHistory(with)
		if err != nil {
			t.Fatalf("default-labeled %v: %v", def, err)
		}
		if !bytes.Equal(got, without) {
			t.Errorf("default-labeled %v: WithoutHistory gives %x, want %x", def, got, without)
		}
	}
}
