package pipeline

import (
	"crypto/sha256"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// A pipeline started from a model file with StartFromTracked reports the
// records after the start apart: events, labeled, predicted and invalid
// records, and each learner's rounds, mistakes, accuracy and loss, equal
// to those of a pipeline fed every event less those of the one that wrote
// the file (the same figures, computed by two other pipelines). Its state
// (format version 6) keeps them through a restore; a learner reset
// afterwards counts its own rounds as after the start; a pipeline started
// with StartFrom encodes in version 4, as before.
func TestStartFromTracked(t *testing.T) {
	c := mustConfig(t, stateConfig)
	data := saltedDemo(t, 600).data
	cut := lineStarts(data)[250]
	whole, state := wholeAndState(t, c, data, cut)
	first := mustNew(t, c) // the model of the file
	if err := first.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256([]byte("the model file"))
	p := mustNew(t, c)
	if err := p.StartFromTracked(state, sha); err != nil {
		t.Fatal(err)
	}
	feed(t, p, c, data[cut:])
	rep, w, f := mustReport(t, p), mustReport(t, whole), mustReport(t, first)
	a := rep.WarmStart.After
	if a == nil || a.Events != w.Events-f.Events || a.Labeled != w.Labeled-f.Labeled || a.Predicted != w.Predicted-f.Predicted ||
		a.Invalid != w.Invalid-f.Invalid || a.Invalid == 0 || a.Predicted == 0 || len(a.Learners) != len(w.Learners) {
		t.Fatalf("after the start: %+v; whole %d/%d/%d/%d, file %d/%d/%d/%d", a, w.Events, w.Labeled, w.Predicted, w.Invalid, f.Events, f.Labeled, f.Predicted, f.Invalid)
	}
	for i, l := range a.Learners {
		wl, fl := w.Learners[i], f.Learners[i]
		rounds, mistakes := wl.Rounds-fl.Rounds, wl.Mistakes-fl.Mistakes
		if l.Name != wl.Name || l.Rounds != rounds || l.Mistakes != mistakes || l.Loss != wl.Loss-fl.Loss ||
			l.Accuracy != 1-float64(mistakes)/float64(rounds) || rounds == 0 {
			t.Errorf("%s after the start: %+v, want %d rounds, %d mistakes, loss %g", wl.Name, l, rounds, mistakes, wl.Loss-fl.Loss)
		}
	}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if b[len(stateMagic)] != 6 {
		t.Errorf("a tracked warm start encoded in version %d, want 6", b[len(stateMagic)])
	}
	q := mustNew(t, c)
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if got := mustReport(t, q).WarmStart; jsonOf(t, got) != jsonOf(t, rep.WarmStart) {
		t.Errorf("restored: %s, want %s", jsonOf(t, got), jsonOf(t, rep.WarmStart))
	}
	// A learner added: its rounds are all after the start; the others
	// keep theirs.
	added := mustConfig(t, stateConfig+"  - {name: extra, algorithm: ogd, bias: true}\n")
	r := mustNew(t, added)
	if _, err := r.UnmarshalBinaryReset(b, []string{"extra"}); err != nil {
		t.Fatal(err)
	}
	feed(t, r, added, data[:cut])
	rr := mustReport(t, r)
	ra := rr.WarmStart.After
	extra := ra.Learners[len(ra.Learners)-1]
	if last := rr.Learners[len(rr.Learners)-1]; extra.Name != "extra" || extra.Rounds != last.Rounds || extra.Mistakes != last.Mistakes || extra.Rounds == 0 {
		t.Errorf("a learner added after the start: %+v, its report %+v", extra, last)
	}
	if k := ra.Learners[0]; k.Rounds != rr.Learners[0].Rounds-f.Learners[0].Rounds || k.Mistakes != rr.Learners[0].Mistakes-f.Learners[0].Mistakes {
		t.Errorf("a learner kept: %+v", k)
	}
	// StartFrom counts nothing apart, and encodes as it did.
	u := mustNew(t, c)
	if err := u.StartFrom(state, sha); err != nil {
		t.Fatal(err)
	}
	ub, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if ub[len(stateMagic)] != 4 || mustReport(t, u).WarmStart.After != nil {
		t.Errorf("StartFrom: version %d, after %+v", ub[len(stateMagic)], mustReport(t, u).WarmStart.After)
	}
	// A base past the counts is refused.
	bad := mustNew(t, c)
	if err := bad.StartFromTracked(state, sha); err != nil {
		t.Fatal(err)
	}
	bad.warm.base.learners[0].real.Rounds = math.MaxUint64
	bb, err := bad.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := mustNew(t, c).UnmarshalBinary(bb); err == nil || !strings.Contains(err.Error(), `learner "pct": a warm start at`) {
		t.Errorf("a warm start past the learner's rounds: %v", err)
	}
}

// jsonOf is v as JSON.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
