package regret

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// UnmarshalBinaryFrom restores learner by learner, by index: the learners
// taken have the encoded entries and curves, wherever they are; a learner
// not taken keeps its own (fresh) entry and an empty curve; an encoded
// learner not taken is dropped. Bad mappings are errors that leave the
// tracker as it was.
func TestUnmarshalBinaryFrom(t *testing.T) {
	src := newPair(8)
	for k := range 40 {
		src.round(k)
	}
	b, err := src.tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want, err := src.tr.Learners()
	if err != nil {
		t.Fatal(err)
	}
	wantCurves := src.tr.History()

	// x is new, p and m kept (in another order), r dropped.
	newTarget := func() *Tracker {
		tr := New()
		tr.Add("x", "perceptron", &fake{state: []byte("x"), g: online.Guarantee{Kind: online.MistakeBound, Value: 9}})
		tr.Add("p", "perceptron", plain{})
		tr.Add("m", "halving", &fake{state: []byte("m"), g: online.Guarantee{Kind: online.MistakeBound, Value: 1}})
		tr.EnableHistory(4) // replaced by the encoded history
		return tr
	}
	tr := newTarget()
	if err := tr.UnmarshalBinaryFrom(b, 3, []int{-1, 2, 0}); err != nil {
		t.Fatal(err)
	}
	got, err := tr.Learners()
	if err != nil {
		t.Fatal(err)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if js(got[1]) != js(want[2]) || js(got[2]) != js(want[0]) {
		t.Errorf("kept learners:\n got %s\n     %s\nwant %s\n     %s", js(got[1]), js(got[2]), js(want[2]), js(want[0]))
	}
	if got[0].Name != "x" || got[0].Rounds != 0 || got[0].Mistakes != 0 || got[0].Bound == nil || got[0].Bound.Value != 9 {
		t.Errorf("fresh learner: %s", js(got[0]))
	}
	curves := tr.History()
	if len(curves) != 3 || len(curves[0]) != 0 || js(curves[1]) != js(wantCurves[2]) || js(curves[2]) != js(wantCurves[0]) {
		t.Errorf("curves %s, want [], %s, %s", js(curves), js(wantCurves[2]), js(wantCurves[0]))
	}
	// It goes on: the fresh learner's rounds count from here.
	tr.Observe(0, online.Prediction{Label: 1}, -1, 1)
	tr.Observe(1, online.Prediction{Label: 1}, -1, 1)
	if tr.Rounds(0) != 1 || tr.Rounds(1) != want[2].Rounds+1 {
		t.Errorf("rounds after one more: %d, %d", tr.Rounds(0), tr.Rounds(1))
	}

	for _, tc := range []struct {
		encoded int
		from    []int
		want    string
	}{
		{3, []int{-1, 1, 0}, `learner "p" (perceptron) takes encoded learner 1, "r" (weighted-majority)`},
		{3, []int{-1, 3, 0}, `learner "p": no encoded learner 3 of 3`},
		{3, []int{0, 0, -1}, "encoded learner 0 taken twice"},
		{3, []int{-1, 2}, "2 sources for 3 learners"},
		{4, []int{-1, 2, 0}, "encoding has 3 learners, the state 4"},
	} {
		tr := newTarget()
		before, _ := tr.MarshalBinary()
		err := tr.UnmarshalBinaryFrom(b, tc.encoded, tc.from)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("from %v: %v, want %q", tc.from, err, tc.want)
		}
		if after, _ := tr.MarshalBinary(); string(after) != string(before) {
			t.Errorf("from %v: a refused encoding changed the tracker", tc.from)
		}
	}
}
