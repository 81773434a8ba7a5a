package regret

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// fake is a model whose guarantee the test sets round by round.
type fake struct {
	g     online.Guarantee
	state []byte
}

func (f *fake) MarshalBinary() ([]byte, error) { return f.state, nil }
func (f *fake) Guarantee() online.Guarantee    { return f.g }

type plain struct{}

func (plain) MarshalBinary() ([]byte, error) { return []byte{1}, nil }

func TestTrackerMistakeBoundCrossings(t *testing.T) {
	f := &fake{g: online.Guarantee{Kind: online.MistakeBound, Value: 2}}
	tr := New()
	i := tr.Add("h", "halving", f)
	// Labels and predictions: mistakes on rounds 1, 2, 3 (crosses the bound
	// of 2 at round 3), then the bound is raised to 5 (holds again), then
	// lowered to 1 (crosses a second time).
	rounds := []struct {
		pred, y int8
		bound   float64
	}{
		{+1, -1, 2}, {+1, -1, 2}, {-1, +1, 2}, {+1, +1, 5}, {+1, +1, 1},
	}
	var wantHolds = []bool{true, true, false, true, false}
	for k, r := range rounds {
		f.g.Value = r.bound
		loss := 0.0
		if r.pred != r.y {
			loss = 1
		}
		tr.Observe(i, online.Prediction{Label: r.pred}, r.y, loss)
		rep, err := tr.Learners()
		if err != nil {
			t.Fatal(err)
		}
		if got := rep[0].Bound.Holds; got != wantHolds[k] {
			t.Errorf("round %d: holds = %v, want %v", k+1, got, wantHolds[k])
		}
	}
	rep, _ := tr.Learners()
	r := rep[0]
	if r.Rounds != 5 || r.Mistakes != 3 || r.Loss != 3 || r.BoundViolations != 2 {
		t.Errorf("report = %+v, want 5 rounds, 3 mistakes, loss 3, 2 violations", r)
	}
	if math.Abs(r.Accuracy-0.4) > 1e-15 {
		t.Errorf("accuracy = %v, want 0.4", r.Accuracy)
	}
	if r.Regret != nil {
		t.Errorf("regret reported without a comparator: %+v", r.Regret)
	}
}

func TestTrackerRegret(t *testing.T) {
	f := &fake{g: online.Guarantee{
		Kind: online.RegretBound, Value: 1.5,
		Comparator: "best_expert", RegretBound: 1.5,
		Violations: 4,
	}}
	tr := New()
	tr.Add("wm", "weighted-majority", f)
	tr.Observe(0, online.Prediction{Label: 1, Score: 0.3}, -1, 0.3)
	tr.Observe(0, online.Prediction{Label: -1, Score: 0.2}, -1, 0.2)
	f.g.ComparatorLoss = 0
	rep, _ := tr.Learners()
	r := rep[0]
	if r.Regret == nil || r.Regret.Comparator != "best_expert" || math.Abs(r.Regret.Value-0.5) > 1e-15 {
		t.Fatalf("regret = %+v, want best_expert 0.5", r.Regret)
	}
	if r.Regret.Bound == nil || *r.Regret.Bound != 1.5 {
		t.Errorf("regret bound = %v, want 1.5", r.Regret.Bound)
	}
	if !r.Bound.Holds || r.Bound.Kind != online.RegretBound {
		t.Errorf("bound = %+v, want a holding regret bound", r.Bound)
	}
	// Version-space violations reported by the learner are counted too.
	if r.BoundViolations != 4 {
		t.Errorf("violations = %d, want 4", r.BoundViolations)
	}
	// NaN regret bound is omitted, not serialized.
	f.g.RegretBound = math.NaN()
	tr.Observe(0, online.Prediction{Label: -1}, -1, 0)
	rep, _ = tr.Learners()
	if rep[0].Regret.Bound != nil {
		t.Errorf("NaN regret bound reported as %v", *rep[0].Regret.Bound)
	}
}

func TestTrackerDigest(t *testing.T) {
	a, b := New(), New()
	a.Add("p", "perceptron", plain{})
	b.Add("p", "perceptron", plain{})
	for k := 0; k < 3; k++ {
		a.Observe(0, online.Prediction{Label: 1}, 1, 0)
		b.Observe(0, online.Prediction{Label: 1}, 1, 0)
	}
	ra, _ := a.Learners()
	rb, _ := b.Learners()
	if ra[0].StateSHA256 != rb[0].StateSHA256 || len(ra[0].StateSHA256) != 64 {
		t.Fatalf("digests %q and %q differ for equal runs", ra[0].StateSHA256, rb[0].StateSHA256)
	}
	b.Observe(0, online.Prediction{Label: 1}, 1, 0)
	rb, _ = b.Learners()
	if ra[0].StateSHA256 == rb[0].StateSHA256 {
		t.Error("digest ignores the round count")
	}
	if ra[0].Bound != nil || ra[0].Regret != nil {
		t.Error("a learner without a theorem reports a bound")
	}
}

// counting encodes to its state and counts the encodings.
type counting struct {
	state []byte
	n     int
}

func (c *counting) MarshalBinary() ([]byte, error) { c.n++; return c.state, nil }

// TestTrackerDigestCached: a model is encoded for its digest once per
// round it learned, not once per report; a state noted by NoteState (a
// checkpoint's encoding) serves the next report; a restored tracker
// encodes again.
func TestTrackerDigestCached(t *testing.T) {
	m := &counting{state: []byte{1, 2}}
	tr := New()
	tr.Add("p", "perceptron", m)
	digest := func() string {
		t.Helper()
		r, err := tr.Learners()
		if err != nil {
			t.Fatal(err)
		}
		return r[0].StateSHA256
	}
	first := digest()
	if digest() != first || digest() != first || m.n != 1 {
		t.Fatalf("three reports of an unchanged model encoded it %d times, want 1", m.n)
	}
	tr.Observe(0, online.Prediction{Label: 1}, 1, 0)
	m.state = []byte{3}
	second := digest()
	if m.n != 2 || second == first {
		t.Fatalf("after a round: %d encodings, digest changed %v; want 2, true", m.n, second != first)
	}
	tr.Observe(0, online.Prediction{Label: 1}, 1, 0)
	m.state = []byte{4}
	tr.NoteState(0, []byte{4})
	noted := digest()
	if m.n != 2 {
		t.Fatalf("a report after NoteState encoded the model (%d encodings, want 2)", m.n)
	}
	m.n = 0
	enc, err := tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if digest() != noted || m.n != 1 {
		t.Fatalf("after a restore: digest %v, %d encodings; want the same digest from 1 encoding", digest() == noted, m.n)
	}
}

func TestHistoryBounded(t *testing.T) {
	tr := New()
	tr.Add("a", "perceptron", plain{})
	tr.Add("b", "perceptron", plain{})
	tr.EnableHistory(16)
	const n = 1000
	for k := 1; k <= n; k++ {
		y := int8(1)
		if k%3 == 0 {
			y = -1
		}
		tr.Observe(0, online.Prediction{Label: 1}, y, 0)
		tr.Observe(1, online.Prediction{Label: 1}, 1, 0)
	}
	h := tr.History()
	if len(h) != 2 {
		t.Fatalf("%d series, want 2", len(h))
	}
	for i, s := range h {
		if len(s) > 17 || len(s) < 8 {
			t.Errorf("series %d has %d points, want 8..17", i, len(s))
		}
		last := s[len(s)-1]
		if last.Round != n {
			t.Errorf("series %d ends at round %d, want %d", i, last.Round, n)
		}
		for k := 1; k < len(s); k++ {
			if s[k].Round <= s[k-1].Round {
				t.Fatalf("series %d not increasing at %d", i, k)
			}
		}
	}
	if got := h[0][len(h[0])-1].Mistakes; got != n/3 {
		t.Errorf("mistakes at the end = %d, want %d", got, n/3)
	}
	// Every sampled point is exact: mistakes at round r is floor(r/3).
	for _, p := range h[0] {
		if p.Mistakes != p.Round/3 {
			t.Errorf("point %+v: mistakes want %d", p, p.Round/3)
		}
	}
}

// calls is a fake that counts the guarantees asked of it.
type calls struct {
	fake
	n int
}

func (c *calls) Guarantee() online.Guarantee { c.n++; return c.g }

// TestTrackerRoom: a tracker that skips computing a Monotone guarantee
// while the loss (or the mistakes) stays within the room the bound left
// decides every round as one that computes it every round, crossings and
// all, on random nondecreasing bounds that the loss crosses and falls back
// under; and it does skip.
func TestTrackerRoom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, kind := range []online.BoundKind{online.RegretBound, online.MistakeBound, online.NoBound} {
		var crossings uint64
		var computed, all int
		for trial := range 50 {
			skip, full := &calls{}, &calls{}
			ts, tf := New(), New()
			ts.Add("l", "ogd", skip)
			tf.Add("l", "ogd", full)
			g := online.Guarantee{Kind: kind, Value: rng.Float64() * 5}
			var v uint64
			for round := range 400 {
				// The bound and the comparator's loss never decrease.
				if rng.IntN(4) == 0 {
					g.Value += rng.Float64() * 3
				}
				g.ComparatorLoss += rng.Float64() * 0.3
				skip.g, full.g = g, g
				skip.g.Monotone = true
				y, pred, loss := int8(1), int8(1), rng.Float64()
				if rng.IntN(3) == 0 {
					pred = -1
				}
				if trial%10 == 0 && round == 300 {
					loss = math.NaN() // never skipped: a NaN loss breaks a regret bound
				}
				ts.Observe(0, online.Prediction{Label: pred}, y, loss)
				tf.Observe(0, online.Prediction{Label: pred}, y, loss)
				rs, _ := ts.Learners()
				rf, _ := tf.Learners()
				holds := func(r LearnerReport) bool { return r.Bound == nil || r.Bound.Holds }
				if holds(rs[0]) != holds(rf[0]) || rs[0].BoundViolations != rf[0].BoundViolations {
					t.Fatalf("%s trial %d round %d: skipping tracker holds=%v violations=%d, full holds=%v violations=%d",
						kind, trial, round, holds(rs[0]), rs[0].BoundViolations, holds(rf[0]), rf[0].BoundViolations)
				}
				v = rf[0].BoundViolations
			}
			// Learners asks each for its guarantee once a round too.
			crossings, computed, all = crossings+v, computed+skip.n-400, all+full.n-400
		}
		if kind == online.NoBound {
			// It always holds: computed on the first rounds only.
			if crossings != 0 || computed > 2*50 || all < 300*50 {
				t.Errorf("no bound: %d crossings, %d guarantees computed by Observe skipping in 50 trials of 400 rounds (%d without), want 0 and at most 2 a trial", crossings, computed, all)
			}
			continue
		}
		if crossings < 50 || computed >= all/2 {
			t.Errorf("%s: %d crossings, %d guarantees computed by Observe skipping vs %d: the test does not exercise the room", kind, crossings, computed, all)
		}
	}
}
