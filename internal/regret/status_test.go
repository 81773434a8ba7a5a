package regret

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// TestTrackerBoundStatus: a bound's status says what is known, holds
// saying only whether the observed quantity is within it. Each case plays
// rounds of one mistake each against a mistake bound of 2 whose premise
// is the case's, then reads the report, its JSON and, for the delayed
// cases, the bound of a theorem of immediate labels.
func TestTrackerBoundStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		premise  online.Premise
		mistakes int
		delayed  bool   // labels may come late; the fake's theorem assumes they do not
		delay    uint64 // the largest delay seen
		holds    bool
		status   BoundStatus
	}{
		{"unconditional, within", online.PremiseHolds, 2, false, 0, true, StatusHolds},
		{"unconditional, exceeded", online.PremiseHolds, 3, false, 0, false, StatusViolated},
		{"assumed, within", online.PremiseAssumed, 2, false, 0, true, StatusAssumed},
		// The bound exceeded disproves an assumed premise.
		{"assumed, exceeded", online.PremiseAssumed, 3, false, 0, false, StatusPremiseFalse},
		{"false, within", online.PremiseFalse, 1, false, 0, true, StatusPremiseFalse},
		{"false, exceeded", online.PremiseFalse, 3, false, 0, false, StatusPremiseFalse},
		// No label came late yet: the theorem of immediate labels applies.
		{"immediate labels so far", online.PremiseHolds, 2, true, 0, true, StatusHolds},
		{"immediate labels so far, exceeded", online.PremiseHolds, 3, true, 0, false, StatusViolated},
		// A label came late: the theorem's premise failed.
		{"a label came late", online.PremiseHolds, 1, true, 4, true, StatusPremiseFalse},
		{"a label came late, exceeded", online.PremiseHolds, 3, true, 4, false, StatusPremiseFalse},
	} {
		f := &fake{g: online.Guarantee{Kind: online.MistakeBound, Value: 2, Premise: tc.premise}}
		tr := New()
		i := tr.Add("m", "fake", f)
		if tc.delayed {
			tr.AssumeDelayed()
			tr.SetDelay(tc.delay)
		}
		for range tc.mistakes {
			tr.Observe(i, online.Prediction{Label: 1}, -1, 1)
		}
		rep, err := tr.Learners()
		if err != nil {
			t.Fatal(err)
		}
		b := rep[0].Bound
		if b.Holds != tc.holds || b.Status != tc.status {
			t.Errorf("%s: holds %v, status %s; want %v, %s", tc.name, b.Holds, b.Status, tc.holds, tc.status)
		}
		if tc.delayed != (b.Assumes == "immediate labels") {
			t.Errorf("%s: assumes %q", tc.name, b.Assumes)
		}
		js, err := json.Marshal(rep[0])
		if err != nil {
			t.Fatal(err)
		}
		if want := `"status":"` + string(tc.status) + `"`; !strings.Contains(string(js), want) {
			t.Errorf("%s: JSON %s has no %s", tc.name, js, want)
		}
	}
}

// TestTrackerPremiseEncoded: the premise of the last guarantee is part of
// the tracker's encoding, so a restored tracker reports the same status
// before its model says anything (its guarantee is not read again).
func TestTrackerPremiseEncoded(t *testing.T) {
	f := &fake{g: online.Guarantee{Kind: online.MistakeBound, Value: 5, Premise: online.PremiseFalse}}
	tr := New()
	i := tr.Add("m", "fake", f)
	tr.Observe(i, online.Prediction{Label: 1}, 1, 0)
	b, err := tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A fresh model whose premise would say holds.
	tr2 := New()
	tr2.Add("m", "fake", &fake{g: online.Guarantee{Kind: online.MistakeBound, Value: 5}})
	if err := tr2.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	rep, err := tr2.Learners()
	if err != nil {
		t.Fatal(err)
	}
	if s := rep[0].Bound.Status; s != StatusPremiseFalse {
		t.Errorf("restored status %s, want %s", s, StatusPremiseFalse)
	}
}

// TestTrackerVersion1: an encoding of format 1, written before the
// premise was, still restores; the status is then read from the model.
func TestTrackerVersion1(t *testing.T) {
	f := &fake{g: online.Guarantee{Kind: online.MistakeBound, Value: 5, Premise: online.PremiseAssumed}}
	tr := New()
	i := tr.Add("m", "fake", f)
	tr.Observe(i, online.Prediction{Label: 1}, 1, 0)
	b, err := tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// One learner, no history: the premise is the byte before the last.
	v1 := append(append([]byte(nil), b[:len(b)-2]...), b[len(b)-1])
	v1[4] = 1
	tr2 := New()
	tr2.Add("m", "fake", &fake{g: online.Guarantee{Kind: online.MistakeBound, Value: 5, Premise: online.PremiseFalse}})
	if err := tr2.UnmarshalBinary(v1); err != nil {
		t.Fatal(err)
	}
	rep, err := tr2.Learners()
	if err != nil {
		t.Fatal(err)
	}
	if r := rep[0]; r.Rounds != 1 || r.Bound.Status != StatusPremiseFalse {
		t.Errorf("restored from format 1: %d rounds, status %s; want 1 and the model's %s", r.Rounds, r.Bound.Status, StatusPremiseFalse)
	}
}
