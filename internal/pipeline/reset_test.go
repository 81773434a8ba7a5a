package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// resetBefore is the configuration a state is written by, resetAfter the
// one it is restored into with its learners b (eta changed), c and wm2
// (added) and x (dropped) reset: s, a and wm (a Weighted-Majority over s
// and a) are kept, each at another position. resetFresh is the learners
// reset, alone.
const (
	resetBefore = `
features: {bits: 10}
learners:
  - {name: s, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - {name: a, algorithm: perceptron, bias: true}
  - {name: b, algorithm: ogd, loss: hinge, eta: 0.5, bias: true}
  - {name: wm, algorithm: weighted-majority, experts: [s, a], seed: 3}
  - {name: x, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
`
	resetAfter = `
features: {bits: 10}
learners:
  - {name: c, algorithm: perceptron, bias: true, margin: 0.01}
  - {name: s, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - {name: a, algorithm: perceptron, bias: true}
  - {name: b, algorithm: ogd, loss: hinge, eta: 0.25, bias: true}
  - {name: wm, algorithm: weighted-majority, experts: [s, a], seed: 3}
  - {name: wm2, algorithm: weighted-majority, experts: [c, b], seed: 5}
`
	resetFresh = `
features: {bits: 10}
learners:
  - {name: c, algorithm: perceptron, bias: true, margin: 0.01}
  - {name: b, algorithm: ogd, loss: hinge, eta: 0.25, bias: true}
  - {name: wm2, algorithm: weighted-majority, experts: [c, b], seed: 5}
`
)

// learnerOf returns the report entry and the model encoding of learner
// name of p.
func learnerOf(t *testing.T, p *Pipeline, name string) (regret.LearnerReport, []byte) {
	t.Helper()
	i := slices.Index(p.Names(), name)
	if i < 0 {
		t.Fatalf("no learner %s in %v", name, p.Names())
	}
	rep := mustReport(t, p)
	m, err := p.Model(i).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return rep.Learners[i], m
}

// sameLearner checks that learner name of got equals learner name of
// want: its report entry, whole or (counters) its rounds, mistakes, loss
// and state digest, and its model's encoding.
func sameLearner(t *testing.T, what, name string, got, want *Pipeline, whole bool) {
	t.Helper()
	g, gm := learnerOf(t, got, name)
	w, wm := learnerOf(t, want, name)
	if !whole {
		g = regret.LearnerReport{Name: g.Name, Rounds: g.Rounds, Mistakes: g.Mistakes, Loss: g.Loss, StateSHA256: g.StateSHA256}
		w = regret.LearnerReport{Name: w.Name, Rounds: w.Rounds, Mistakes: w.Mistakes, Loss: w.Loss, StateSHA256: w.StateSHA256}
	}
	gj, _ := json.Marshal(g)
	wj, _ := json.Marshal(w)
	if !bytes.Equal(gj, wj) {
		t.Errorf("%s: learner %s:\n got %s\nwant %s", what, name, gj, wj)
	}
	if !bytes.Equal(gm, wm) {
		t.Errorf("%s: learner %s: the model differs", what, name)
	}
}

// A state of learners {s, a, b, wm, x} restored into {c, s, a, b', wm,
// wm2}, resetting b, c, wm2 and x, and run on: s, a and wm are exactly
// those of an uninterrupted run of the first configuration, b', c and wm2
// those of a fresh pipeline of them run over the events after the
// restore only; the counts are the whole run's.
func TestUnmarshalBinaryReset(t *testing.T) {
	before, after, fresh := mustConfig(t, resetBefore), mustConfig(t, resetAfter), mustConfig(t, resetFresh)
	data := stream(3000, 4, 0.05, false)
	cut := lineStarts(data)[1200]

	whole, state := wholeAndState(t, before, data, cut)

	p := mustNew(t, after)
	ch, err := p.UnmarshalBinaryReset(state, []string{"x", "c", "b", "wm2"})
	if err != nil {
		t.Fatal(err)
	}
	want := Changes{Kept: []string{"s", "a", "wm"}, Added: []string{"c", "wm2"}, Changed: []string{"b"}, Dropped: []string{"x"}}
	if fmt.Sprint(ch) != fmt.Sprint(want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	if got, err := CompareState(state, after); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CompareState: %+v, %v; want %+v", got, err, want)
	}
	if s := ch.String(); s != "learner c added; learner wm2 added; learner b: settings changed; learner x dropped" {
		t.Errorf("changes say %q", s)
	}
	// Restored, the fresh learners have no rounds, the kept ones theirs,
	// the counts are the state's.
	if r := mustReport(t, p); r.Events != 1200 || r.Learners[0].Rounds != 0 || r.Learners[2].Rounds != 1200 || r.Learners[5].Rounds != 0 {
		t.Errorf("restored: %d events, rounds c %d, a %d, wm2 %d", r.Events, r.Learners[0].Rounds, r.Learners[2].Rounds, r.Learners[5].Rounds)
	}
	// Equal states give equal bytes: the restored state restores as it is
	// into the new configuration.
	restored, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	again := mustNew(t, after)
	if err := again.UnmarshalBinary(restored); err != nil {
		t.Fatalf("the restored state, restored again: %v", err)
	}
	if b, _ := again.MarshalBinary(); !bytes.Equal(b, restored) {
		t.Error("the restored state, restored again, encodes differently")
	}

	feed(t, p, after, data[cut:])
	ref := mustNew(t, fresh)
	feed(t, ref, fresh, data[cut:])
	for _, name := range []string{"s", "a", "wm"} {
		sameLearner(t, "kept", name, p, whole, true)
	}
	for _, name := range []string{"c", "b", "wm2"} {
		sameLearner(t, "reset", name, p, ref, true)
	}
	if r, w := mustReport(t, p), mustReport(t, whole); r.Events != w.Events || r.Labeled != w.Labeled || r.Learners[1].Rounds != 3000 || r.Learners[0].Rounds != 1800 {
		t.Errorf("run on: %d events, %d labeled, rounds s %d, c %d; want %d, %d, 3000, 1800", r.Events, r.Labeled, r.Learners[1].Rounds, r.Learners[0].Rounds, w.Events, w.Labeled)
	}
	// And its state, with learners of different starts, restores as it
	// is.
	end, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := again.UnmarshalBinary(end); err != nil {
		t.Fatalf("the state run on from the restore: %v", err)
	}
	if b, _ := again.MarshalBinary(); !bytes.Equal(b, end) {
		t.Error("the state run on from the restore, restored, encodes differently")
	}
}

// The same learners in another order restore, by name, to the same
// learners; a learner's start survives the restore.
func TestUnmarshalBinaryResetReordered(t *testing.T) {
	before := mustConfig(t, resetBefore)
	lines := strings.Split(strings.TrimSpace(resetBefore), "\n")
	// x, a and b before s: wm's experts move.
	reordered := mustConfig(t, strings.Join([]string{lines[0], lines[1], lines[6], lines[3], lines[4], lines[2], lines[5]}, "\n"))
	data := stream(600, 5, 0.05, false)
	cut := lineStarts(data)[250]
	whole, state := wholeAndState(t, before, data, cut)
	p := mustNew(t, reordered)
	if p.Names()[0] != "x" || p.Names()[3] != "s" {
		t.Fatalf("reordered: %v", p.Names())
	}
	if err := p.UnmarshalBinary(state); err == nil {
		t.Error("UnmarshalBinary restored a state of learners in another order")
	}
	ch, err := p.UnmarshalBinaryReset(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Reset()) != 0 || len(ch.Kept) != 5 {
		t.Errorf("changes %+v", ch)
	}
	feed(t, p, reordered, data[cut:])
	for _, name := range whole.Names() {
		sameLearner(t, "reordered", name, p, whole, true)
	}
}

// A partial restore is refused, leaving the pipeline as it was, when the
// learners named to reset are not exactly those that differ, when the
// features differ, and for a state of format version 2.
func TestUnmarshalBinaryResetRefuses(t *testing.T) {
	before := mustConfig(t, resetBefore)
	first := mustNew(t, before)
	data := stream(300, 6, 0.05, false)
	feed(t, first, before, data)
	state, err := first.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	v2, err := first.marshal(2)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"b", "c", "wm2", "x"}
	// A state with a learner over a table: its domain (feature c, always
	// 1 here, is 0 or 1) is every learner's.
	const tableLearner = "  - {name: tc, algorithm: halving, class: {kind: table, feature: c, domain: [0, 1], hypotheses: [[0, 1], [1, 0]]}}\n"
	withTable := mustConfig(t, resetBefore+tableLearner)
	tp := mustNew(t, withTable)
	feed(t, tp, withTable, data)
	tableState, err := tp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, config string
		state        []byte
		reset        []string
		want         string
		missing      []string
		unchanged    []string
	}{
		{"missing", resetAfter, state, []string{"b", "c", "wm2"}, "x not named to be reset (learner c added; learner wm2 added; learner b: settings changed; learner x dropped)", []string{"x"}, nil},
		{"none", resetAfter, state, nil, "c, wm2, b, x not named to be reset", []string{"c", "wm2", "b", "x"}, nil},
		{"unchanged", resetAfter, state, append(all, "a"), "a named to be reset, but the same in the state and the configuration: it is kept as it is (rename a learner to start it afresh)", nil, []string{"a"}},
		{"unknown", resetAfter, state, append(all, "zz"), "zz named to be reset, but neither in the state nor in the configuration", nil, nil},
		{"features", strings.Replace(resetAfter, "bits: 10", "bits: 11", 1), state, all, "the state is of other input, features or labels settings, or another domain of the learners over a hypothesis class: no learner's state can be kept", nil, nil},
		{"input", "input: {positive: [yes]}\n" + resetAfter, state, all, "the state is of other input, features or labels settings, or another domain of the learners over a hypothesis class: no learner's state can be kept", nil, nil},
		// A learner over a class of another domain: the events every
		// learner sees would change (an event outside it is rejected).
		{"domain added", resetAfter + "  - {name: t, algorithm: halving, class: {kind: table, feature: w, domain: [0, 1], hypotheses: [[0, 1], [1, 0]]}}\n", state, append(all, "t"), "or another domain of the learners over a hypothesis class: no learner's state can be kept", nil, nil},
		{"domain dropped", resetAfter, tableState, append(all, "tc"), "or another domain of the learners over a hypothesis class: no learner's state can be kept", nil, nil},
		{"domain changed", resetAfter + strings.Replace(tableLearner, "domain: [0, 1]", "domain: [1, 2]", 1), tableState, append(all, "tc"), "or another domain of the learners over a hypothesis class: no learner's state can be kept", nil, nil},
		{"version 2", resetAfter, v2, all, "state format version 2: the state has no settings digests (format version 3 on): it cannot be restored in part", nil, nil},
		{"corrupt", resetAfter, withCRC(state[:len(state)-9]), all, "pipeline: unmarshal: ", nil, nil},
	}
	for _, tc := range cases {
		c := mustConfig(t, tc.config)
		p := mustNew(t, c)
		feed(t, p, c, data[:lineStarts(data)[40]])
		j0, b0 := snapshot(t, p)
		_, err := p.UnmarshalBinaryReset(tc.state, tc.reset)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pipeline: unmarshal: ") {
			t.Errorf("%s: %v\nwant %q", tc.name, err, tc.want)
		}
		var re *ResetError
		if errors.As(err, &re) && (!slices.Equal(re.Missing, tc.missing) || !slices.Equal(re.Unchanged, tc.unchanged)) {
			t.Errorf("%s: missing %v, unchanged %v; want %v, %v", tc.name, re.Missing, re.Unchanged, tc.missing, tc.unchanged)
		}
		if tc.name == "version 2" && !errors.Is(err, ErrNoDigests) {
			t.Errorf("%s: %v is not ErrNoDigests", tc.name, err)
		}
		if j1, b1 := snapshot(t, p); j1 != j0 || !bytes.Equal(b1, b0) {
			t.Errorf("%s: a refused state changed the pipeline", tc.name)
		}
	}
	if _, err := CompareState(v2, mustConfig(t, resetAfter)); !errors.Is(err, ErrNoDigests) {
		t.Errorf("CompareState of a version 2 state: %v", err)
	}
	if ch, err := CompareState(state, mustConfig(t, strings.Replace(resetBefore, "bits: 10", "bits: 11", 1))); err != nil || !ch.SharedChanged || len(ch.Reset()) != 0 {
		t.Errorf("CompareState with other features: %+v, %v", ch, err)
	}

	// A learner over a class of the same domain is added, changed or
	// dropped like any other: another grid (grids accept every decoded
	// event), another table of the same values.
	for _, tc := range []struct {
		name, config string
		state        []byte
		reset        []string
	}{
		{"grid added", resetAfter + "  - {name: y, algorithm: halving, class: {kind: thresholds, feature: w, min: 0, max: 1, points: 9}}\n", state, append(all, "y")},
		{"grid moved", strings.Replace(resetAfter, "{name: s, algorithm: soa, class: {kind: thresholds, feature: v,", "{name: s, algorithm: soa, class: {kind: intervals, feature: w,", 1), state, append(all, "s")},
		{"grids dropped", "features: {bits: 10}\nlearners:\n  - {name: a, algorithm: perceptron, bias: true}\n", state, []string{"b", "s", "wm", "x"}},
		{"table of the same values", resetAfter + tableLearner + "  - {name: t2, algorithm: soa, class: {kind: table, feature: c, domain: [1, 0], hypotheses: [[1, 1]]}}\n", tableState, append(all, "t2")},
	} {
		if _, err := mustNew(t, mustConfig(t, tc.config)).UnmarshalBinaryReset(tc.state, tc.reset); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// A state of the first builds of format 3, whose shared digest left
	// the domain out, restores into the same learners, and not in part.
	// (Without a table or conjunctions, the digests are the same.)
	legacy := mustNew(t, withTable)
	feed(t, legacy, withTable, data)
	legacy.shared = legacy.compatShared[0]
	old, err := legacy.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if legacy.compatShared[0] == tp.shared || first.compatShared[0] != first.shared {
		t.Fatal("the domain of a table does not enter the shared digest, or that of grids does")
	}
	q := mustNew(t, withTable)
	if err := q.UnmarshalBinary(old); err != nil {
		t.Fatalf("a state without the domain in its digest: %v", err)
	}
	sameLearner(t, "legacy", "tc", q, tp, true)
	if _, err := mustNew(t, mustConfig(t, resetAfter+tableLearner)).UnmarshalBinaryReset(old, all); err == nil {
		t.Error("a state without the domain in its digest restored in part")
	}
	// So does one of the next builds, whose digest had a term per grid.
	grids := mustNew(t, before)
	feed(t, grids, before, data)
	if grids.compatShared[1] == grids.shared {
		t.Fatal("the older terms of grids make the same digest")
	}
	grids.shared = grids.compatShared[1]
	old, err = grids.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := mustNew(t, before).UnmarshalBinary(old); err != nil {
		t.Errorf("a state of the older domain terms: %v", err)
	}
}

// With delayed labels, events wait across the restore: the learners kept
// keep the predictions they served and are exactly those of an
// uninterrupted run; the learners started afresh predict the waiting
// events at the restore, from their fresh states (wm2 from its experts'
// predictions), and learn them when their labels come — exactly as a
// fresh pipeline of them that saw the waiting events arrive first.
func TestUnmarshalBinaryResetDelayed(t *testing.T) {
	const labels = "labels: {delayed: true, wait: 100000, max_pending: 100000}\n"
	beforeCfg := labels + `learners:
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 32, points: 33}}
  - {name: pct, algorithm: perceptron}
  - {name: gone, algorithm: ogd, loss: logistic, eta: 0.5}
`
	freshCfg := labels + `learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 32, points: 33}}
  - {name: wm2, algorithm: weighted-majority, experts: [pct, soa], seed: 2}
`
	afterCfg := labels + `learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 32, points: 33}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 32, points: 33}}
  - {name: wm2, algorithm: weighted-majority, experts: [pct, soa], seed: 2}
`
	recs := delayedStream(2000, 80, 21)
	const cut = 1700
	whole := runDelayed(t, beforeCfg, recs)
	first := runDelayed(t, beforeCfg, recs[:cut])
	state, err := first.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The events waiting at the cut, in arrival order.
	labeled := map[string]bool{}
	for _, r := range recs[:cut] {
		if r.label {
			labeled[r.id] = true
		}
	}
	var waiting []delayedRecord
	joinedLater := 0
	for _, r := range recs[:cut] {
		if !r.label && r.y == 0 && !labeled[r.id] {
			waiting = append(waiting, r)
			if slices.ContainsFunc(recs[cut:], func(l delayedRecord) bool { return l.label && l.id == r.id }) {
				joinedLater++
			}
		}
	}
	if rep := mustReport(t, first); rep.Labels.Pending != uint64(len(waiting)) || joinedLater < 20 {
		t.Fatalf("%d events waiting at the cut (%d by the records), %d of them labeled after it: not the case under test", rep.Labels.Pending, len(waiting), joinedLater)
	}

	after := mustConfig(t, afterCfg)
	p := mustNew(t, after)
	if _, err := p.UnmarshalBinaryReset(state, []string{"pct", "soa", "wm2", "gone"}); err != nil {
		t.Fatal(err)
	}
	dec := mustDecoder(t, after)
	var ev event.Event
	for _, r := range recs[cut:] {
		if err := dec.Decode([]byte(r.line), &ev); err != nil {
			t.Fatal(err)
		}
		p.Process(&ev)
	}
	ref := runDelayed(t, freshCfg, append(slices.Clone(waiting), recs[cut:]...))

	sameLearner(t, "kept", "halving", p, whole, true)
	for _, name := range []string{"pct", "soa", "wm2"} {
		// Not the bound: it is for the largest delay seen, the whole
		// stream's in p.
		sameLearner(t, "reset", name, p, ref, false)
	}
	r, w := mustReport(t, p), mustReport(t, whole)
	if r.Labeled != w.Labeled || r.Events != w.Events || r.Labels.Joined != w.Labels.Joined {
		t.Errorf("counts: %d labeled, %d events, %d joined; want the uninterrupted run's %d, %d, %d", r.Labeled, r.Events, r.Labels.Joined, w.Labeled, w.Events, w.Labels.Joined)
	}
	// The fresh learners learned the waiting events labeled after the
	// restore: their rounds are the rounds learned since.
	if fr := mustReport(t, first); r.Learners[0].Rounds != r.Labeled-fr.Labeled || r.Learners[2].Rounds != r.Labeled-fr.Labeled {
		t.Errorf("fresh learners' rounds %d, %d, want the %d learned since the restore", r.Learners[0].Rounds, r.Learners[2].Rounds, r.Labeled-fr.Labeled)
	}
	// The state of learners of different starts restores as it is.
	end, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	q := mustNew(t, after)
	if err := q.UnmarshalBinary(end); err != nil {
		t.Fatal(err)
	}
	if b, _ := q.MarshalBinary(); !bytes.Equal(b, end) {
		t.Error("restored again, the state encodes differently")
	}
}

// wholeAndState runs c's pipeline over all of data and, apart, over data
// up to cut, and returns the first and the second's state.
func wholeAndState(t *testing.T, c *config.Config, data []byte, cut int) (*Pipeline, []byte) {
	t.Helper()
	whole := mustNew(t, c)
	feed(t, whole, c, data)
	first := mustNew(t, c)
	feed(t, first, c, data[:cut])
	state, err := first.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return whole, state
}
