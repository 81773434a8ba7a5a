package experts

import (
	"bytes"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// trainedExperts returns four learners over c, each trained on its own
// stream of 60 examples, so that they disagree.
func trainedExperts(t testing.TB, c *Class) []online.Learner {
	t.Helper()
	wm, err := NewWeightedMajority(c, HedgeConfig{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ls := []online.Learner{NewConsistent(c), NewHalving(c), NewSOA(c), wm}
	for i, l := range ls {
		for _, e := range classStream(c)(uint64(100 + i))[:60] {
			l.Learn(e.X, l.Predict(e.X), e.Y)
		}
	}
	return ls
}

// Weighted-Majority over learners is a Learner like any other: the
// conformance suite, over experts that do not learn meanwhile (it never
// makes them learn).
func TestOverLearnersConformance(t *testing.T) {
	c := testClasses(t)["thresholds64"]
	onlinetest.Run(t, "over-learners", func() online.Learner {
		l, err := NewOverLearners(trainedExperts(t, c), HedgeConfig{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, classStream(c))
}

// A label that comes later charges each expert the advice it served, not
// what it would say now: Weighted-Majority over learners whose experts
// learn between the serving and the label ends where a Hedge given the
// served advice by hand ends, and not where one given the experts'
// advice at learning time does.
func TestOverLearnersDelayedAdvice(t *testing.T) {
	c := testClasses(t)["thresholds64"]
	ex := classStream(c)(7)
	exps := trainedExperts(t, c)
	cfg := HedgeConfig{Seed: 5}
	over, err := NewOverLearners(exps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := NewHedge(len(exps), cfg)  // given the served advice
	current, _ := NewHedge(len(exps), cfg) // given the advice at learning time
	advice := func(x online.Vector) []int8 {
		a := make([]int8, len(exps))
		for k, e := range exps {
			a[k] = e.Predict(x).Label
		}
		return a
	}
	const delay = 8
	type pending struct {
		x      online.Vector
		y      int8
		p      online.Prediction
		advice []int8
	}
	var q []pending
	differ := 0
	for k, e := range ex {
		a := advice(e.X)
		p := over.Predict(e.X)
		if want := served.Predict(a); p.Label != want.Label || p.Score != want.Score {
			t.Fatalf("round %d: predicted %+v, Hedge over the same advice %+v", k, p, want)
		}
		q = append(q, pending{e.X, e.Y, p, a})
		for _, l := range exps { // the experts learn at once
			l.Learn(e.X, l.Predict(e.X), e.Y)
		}
		if len(q) > delay {
			d := q[0]
			q = q[1:]
			over.Learn(d.x, d.p, d.y)
			served.Learn(d.advice, d.p, d.y)
			now := advice(d.x)
			if !slices.Equal(now, d.advice) {
				differ++
			}
			current.Learn(now, d.p, d.y)
		}
	}
	got, _ := over.MarshalBinary()
	want, _ := served.MarshalBinary()
	if !bytes.Equal(got, want) {
		t.Error("Weighted-Majority over learners ends unlike a Hedge given the served advice")
	}
	if differ == 0 {
		t.Fatal("the experts never changed their advice between serving and learning: the test shows nothing")
	}
	if now, _ := current.MarshalBinary(); bytes.Equal(got, now) {
		t.Errorf("the advice changed %d times, yet learning from the advice at learning time ends the same", differ)
	}
}

// More experts than Prediction.Advice has bits are refused.
func TestOverLearnersTooMany(t *testing.T) {
	ls := make([]online.Learner, MaxOverLearners+1)
	if _, err := NewOverLearners(ls, HedgeConfig{}); err == nil {
		t.Errorf("%d experts accepted", len(ls))
	}
}
