package pipeline

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

const multiclassConfig = `
input: {classes: [ham, spam, promo]}
features: {bits: 8}
learners:
  - {name: mpct, algorithm: multiclass-perceptron, bias: true}
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: logistic, bias: true}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 9}}
  - {name: ogd, algorithm: ogd, bias: true}
`

// multiclassStream makes n events of three classes: ham below v = 0.3,
// promo above 0.7, spam between (which no single threshold separates
// from the rest).
func multiclassStream(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	var out [][]byte
	for range n {
		v := float64(rng.IntN(9)) / 8
		label := "spam"
		switch {
		case v < 0.3:
			label = "ham"
		case v > 0.7:
			label = "promo"
		}
		out = append(out, fmt.Appendf(nil, `{"features":{"v":%g,"w":%.3f},"label":%q}`, v, rng.Float64(), label))
	}
	return out
}

// A multiclass pipeline is as exact as a binary one: restored at a cut
// and run on, its report and state are the uninterrupted one's; each
// learner's per-class rounds and mistakes add up to its own; a label
// that is not a class is a bad record; predictions name their class.
func TestMulticlassPipeline(t *testing.T) {
	c := mustConfig(t, multiclassConfig)
	lines := append(multiclassStream(3000, 1), []byte(`{"features":{"v":0.5},"label":"eggs"}`))
	dec := mustDecoder(t, c)
	run := func(p *Pipeline, lines [][]byte) {
		t.Helper()
		var ev event.Event
		for _, line := range lines {
			if err := dec.Decode(line, &ev); err != nil {
				var de *event.Error
				if !errors.As(err, &de) {
					t.Fatal(err)
				}
				p.Reject(de.Reason)
				continue
			}
			preds, reason := p.Process(&ev)
			if reason != "" {
				t.Fatalf("rejected: %s", reason)
			}
			for _, pr := range preds {
				if pr.Label < 0 || pr.Label > 2 {
					t.Fatalf("class %d predicted", pr.Label)
				}
			}
		}
	}
	whole := mustNew(t, c)
	run(whole, lines)
	cut := mustNew(t, c)
	run(cut, lines[:1234])
	state, err := cut.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	restored := mustNew(t, c)
	if err := restored.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	run(restored, lines[1234:])
	js := func(p *Pipeline) string {
		r := mustReport(t, p)
		r.Seconds = 0
		b, _ := json.Marshal(r)
		return string(b)
	}
	if a, b := js(whole), js(restored); a != b {
		t.Errorf("restored at 1,234 and run on:\n got %s\nwant %s", b, a)
	}
	rep := mustReport(t, whole)
	if rep.Invalid != 1 || rep.InvalidByReason[string(event.ReasonLabel)] != 1 {
		t.Errorf("the label eggs: invalid %d %v", rep.Invalid, rep.InvalidByReason)
	}
	for _, l := range rep.Learners {
		var rounds, mistakes uint64
		for _, cr := range l.Classes {
			rounds, mistakes = rounds+cr.Rounds, mistakes+cr.Mistakes
		}
		if len(l.Classes) != 3 || l.Classes[1].Class != "spam" || rounds != l.Rounds || mistakes != l.Mistakes {
			t.Errorf("%s: classes %+v: want ham, spam, promo adding up to %d rounds and %d mistakes", l.Name, l.Classes, l.Rounds, l.Mistakes)
		}
		// One versus the rest: a round the class is wrong has a class
		// model wrong; each class model's theorem is its own.
		if l.Algorithm == "multiclass-perceptron" {
			continue
		}
		var binary uint64
		for _, cr := range l.Classes {
			if cr.Model == nil {
				t.Fatalf("%s class %s: no class model's record", l.Name, cr.Class)
			}
			binary += cr.Model.Mistakes
			if l.Algorithm == "ogd" && (cr.Model.Regret == nil || cr.Model.Bound == nil || !cr.Model.Bound.Holds) {
				t.Errorf("%s class %s: regret %+v bound %+v: OGD's regret bound holds on every stream", l.Name, cr.Class, cr.Model.Regret, cr.Model.Bound)
			}
		}
		if l.Mistakes > binary {
			t.Errorf("%s: %d mistakes, more than its class models' %d", l.Name, l.Mistakes, binary)
		}
		t.Logf("%s: %d mistakes of %d; per class %+v", l.Name, l.Mistakes, l.Rounds, l.Classes)
	}
	// SOA over thresholds, one versus the rest: ham and promo are each a
	// threshold, spam is not; the bound (the sum of the three SOAs') is
	// broken, and says so.
	if soa := rep.Learners[3]; soa.Bound == nil || soa.Bound.Holds || soa.BoundViolations == 0 {
		t.Errorf("soa over thresholds on a class no threshold makes: bound %+v, %d violations", soa.Bound, soa.BoundViolations)
	}
	if whole.LabelName(2) != "promo" {
		t.Errorf("class 2 is %q", whole.LabelName(2))
	}
}

// digitsPath is the UCI digits (the test set of Optical Recognition of
// Handwritten Digits: 1,797 8×8 images of 0..16 pixels, 10 classes), as
// Debian's python3-sklearn ships it: $STREAMLEARN_DIGITS, else the
// installed package's file. Tests skip without it, unless
// STREAMLEARN_REQUIRE_DIGITS is set (CI unpacks the package).
func digitsPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("STREAMLEARN_DIGITS")
	if path == "" {
		path = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("STREAMLEARN_REQUIRE_DIGITS") != "" {
			t.Fatalf("the digits data set: %v", err)
		}
		t.Skipf("the digits data set (Debian's python3-sklearn) is not here: %v", err)
	}
	return path
}

// TestDigits learns the UCI digits prequentially (test, then train, in
// the file's order) with multiclass learners of examples/digits.yaml and
// pins their mistakes. Vowpal Wabbit's one-against-all (`vw --oaa 10`,
// its defaults: squared loss, adaptive normalized updates, one pass) on
// the same rows in the same order has a progressive error of 0.089594
// (accuracy 91.04%, 161 mistakes of 1,797; bench/vw/README.md has the
// command): AdaGrad with the logistic loss, one versus the rest, makes no
// more.
func TestDigits(t *testing.T) {
	f, err := os.Open(digitsPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var lines bytes.Buffer
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), ",")
		feats := map[string]json.Number{}
		for i, v := range cols[:len(cols)-1] {
			if v != "0" {
				feats[fmt.Sprintf("p%d", i)] = json.Number(v)
			}
		}
		b, err := json.Marshal(map[string]any{"features": feats, "label": cols[len(cols)-1]})
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(append(b, '\n'))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../examples/digits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := mustConfig(t, string(cfg))
	p := mustNew(t, c)
	feedFrom(t, p, c, &lines, "digits.jsonl", nil)
	rep := mustReport(t, p)
	want := map[string]uint64{"mpct": 316, "pct": 289, "ada": 161}
	if rep.Events != 1797 || rep.Invalid != 0 {
		t.Fatalf("events %d invalid %d, want 1797 and 0", rep.Events, rep.Invalid)
	}
	for _, l := range rep.Learners {
		t.Logf("%s: %d mistakes of %d, accuracy %.4f", l.Name, l.Mistakes, l.Rounds, l.Accuracy)
		if w, ok := want[l.Name]; !ok || l.Mistakes != w {
			t.Errorf("%s: %d mistakes, want %d", l.Name, l.Mistakes, w)
		}
	}
	if ada := rep.Learners[2]; ada.Mistakes > 161 {
		t.Errorf("ada: %d mistakes, more than vw --oaa 10's 161", ada.Mistakes)
	}
}
