package boost_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/boost"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

func perceptrons(t testing.TB, n int, bits uint) []online.Learner {
	ls := make([]online.Learner, n)
	for i := range ls {
		p, err := online.NewPerceptron(bits, online.PerceptronConfig{Bias: true})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = p
	}
	return ls
}

func ogds(t testing.TB, n int, bits uint) []online.Learner {
	ls := make([]online.Learner, n)
	for i := range ls {
		o, err := online.NewOGD(bits, online.OGDConfig{Loss: "hinge", Eta: 0.5, Bias: true})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = o
	}
	return ls
}

// fixed is a weak learner for unit tests: it predicts from a list, one
// label a round, and counts what it is taught. Not a Rounder.
type fixed struct {
	labels []int8
	t      int // rounds predicted
	taught int
}

func (f *fixed) Predict(online.Vector) online.Prediction {
	return online.Prediction{Label: f.labels[f.t%len(f.labels)]}
}
func (f *fixed) Learn(online.Vector, online.Prediction, int8) { f.taught++ }
func (f *fixed) Loss(p online.Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}
func (f *fixed) MarshalBinary() ([]byte, error) { return []byte{byte(f.t), byte(f.taught)}, nil }
func (f *fixed) UnmarshalBinary(b []byte) error {
	f.t, f.taught = int(b[0]), int(b[1])
	return nil
}

func TestConformance(t *testing.T) {
	const bits = 8
	stream := onlinetest.LinearStream(bits, 300, 10, 0.05)
	onlinetest.Run(t, "adaboost-ol/perceptron", func() online.Learner {
		b, err := boost.New(perceptrons(t, 5, bits), boost.Config{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, stream)
	onlinetest.Run(t, "adaboost-ol/ogd", func() online.Learner {
		b, err := boost.New(ogds(t, 64, bits), boost.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, stream)
}

// TestSteps follows two rounds by hand with two weak learners that
// predict +1 and -1 on every round and a label +1: the prefix experts'
// margins, the α-steps, the draw weights and the experts' mistakes.
func TestSteps(t *testing.T) {
	a, b := &fixed{labels: []int8{1}}, &fixed{labels: []int8{-1}}
	ol, err := boost.New([]online.Learner{a, b}, boost.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var x online.Vector
	// Round 1: α = (0, 0): both experts' sums are 0, predict -1: the vote
	// is -1, a mistake, and both experts err.
	p := ol.Predict(x)
	if p.Label != online.Negative || p.Score != -1 || p.Advice != 1 {
		t.Fatalf("round 1: %+v", p)
	}
	ol.Learn(x, p, online.Positive)
	// z = (+1, -1); s^0 = 0: w^1 = ½, α^1 = 0 + 4·1/(1+e^0) = 2;
	// s^1 = 0 (α^1 was 0): w^2 = ½, α^2 = Π(0 + 4·(-1)/(1+e^0)) = -2.
	alpha1, _, _ := ol.WeakStats(0)
	alpha2, _, _ := ol.WeakStats(1)
	if alpha1 != 2 || alpha2 != -2 {
		t.Fatalf("after round 1: α = (%v, %v), want (2, -2)", alpha1, alpha2)
	}
	if ol.ExpertMistakes(0) != 1 || ol.ExpertMistakes(1) != 1 {
		t.Fatalf("expert mistakes %d %d, want 1 1", ol.ExpertMistakes(0), ol.ExpertMistakes(1))
	}
	// Round 2: ŝ^1 = 2, ŝ^2 = 2 + (-2)(-1) = 4: both predict +1.
	p = ol.Predict(x)
	if p.Label != online.Positive || p.Score != 1 {
		t.Fatalf("round 2: %+v", p)
	}
	ol.Learn(x, p, online.Positive)
	// η = 4/√2. α^1 = Π(2 + η/(1+e^2)) = 2; s^1 = 2, so w^2 = 1/(1+e^2)
	// and α^2 = Π(-2 + η·(-1)/(1+e^4)).
	eta := 4 / math.Sqrt(2)
	alpha1, _, _ = ol.WeakStats(0)
	alpha2, _, _ = ol.WeakStats(1)
	if want := max(-2, -2-eta/(1+math.Exp(4))); alpha1 != 2 || alpha2 != want {
		t.Fatalf("after round 2: α = (%v, %v), want (2, %v)", alpha1, alpha2, want)
	}
	// Edges: γ_1 = (½ + ½)/(½ + ½) = 1; γ_2 = (-½ - w)/(½ + w).
	if got := ol.Edge(0); got != 1 {
		t.Errorf("γ_1 = %v, want 1", got)
	}
	if got := ol.Edge(1); got != -1 {
		t.Errorf("γ_2 = %v, want -1", got)
	}
	g := ol.Guarantee()
	c := 1 / math.Log(2*math.E/(1+math.E))
	if want := c * (2 + math.Ln2); g.Kind != online.MistakeBound || math.Abs(g.Value-want) > 1e-12 || g.ComparatorLoss != 1 {
		t.Errorf("guarantee %+v, want mistakes ≤ %v, best expert 1", g, want)
	}
}

// TestDraws: each weak learner learns an example with probability
// 1/(1+e^{s}) of the margin the experts before it reached: the first
// always with ½; one after an expert that is right by a wide margin
// rarely.
func TestDraws(t *testing.T) {
	const rounds = 20000
	a, b := &fixed{labels: []int8{1}}, &fixed{labels: []int8{1}}
	ol, err := boost.New([]online.Learner{a, b}, boost.Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var x online.Vector
	for range rounds {
		ol.Learn(x, ol.Predict(x), online.Positive)
	}
	_, _, shownA := ol.WeakStats(0)
	_, _, shownB := ol.WeakStats(1)
	if int(shownA) != a.taught || int(shownB) != b.taught {
		t.Fatalf("shown %d %d, taught %d %d", shownA, shownB, a.taught, b.taught)
	}
	// a: p = ½ on every round: within 4 standard deviations (√(n/4) = 71).
	if d := math.Abs(float64(shownA) - rounds/2); d > 4*math.Sqrt(rounds/4) {
		t.Errorf("first weak learner learned %d of %d, want about half", shownA, rounds)
	}
	// b: α^1 reaches 2 after one round, so from round 2 on w = 1/(1+e^2) ≈ 0.119.
	want := 0.5 + float64(rounds-1)/(1+math.Exp(2))
	if d := math.Abs(float64(shownB) - want); d > 4*math.Sqrt(want) {
		t.Errorf("second weak learner learned %d, want about %.0f", shownB, want)
	}
}

// oracle is a weak learner for unit tests that knows the label: x's slot
// 0 holds it and slot 1 the round; it is right with probability acc, by a
// hash of the round and its id. It learns nothing.
type oracle struct {
	id  uint64
	acc float64
}

func (o *oracle) Predict(x online.Vector) online.Prediction {
	y := int8(x.Val[0])
	r := rand.New(rand.NewPCG(uint64(x.Val[1]), o.id))
	if r.Float64() >= o.acc {
		y = -y
	}
	return online.Prediction{Label: y}
}
func (o *oracle) Learn(online.Vector, online.Prediction, int8) {}
func (o *oracle) Loss(p online.Prediction, y int8) float64 {
	if p.Label != y {
		return 1
	}
	return 0
}
func (o *oracle) MarshalBinary() ([]byte, error) { return nil, nil }
func (o *oracle) UnmarshalBinary([]byte) error   { return nil }

// TestMistakeBound checks the published bound, and the two inequalities
// its proof chains: the best expert's mistakes M* against the boosting
// step's (4 ln 2·T + 24N√T)/Σγ², and the booster's mistakes against
// Weighted Majority's c(M* + ln N), after every round. With weak learners
// that are right 95% of the time, independently, the bound is well below
// T (about 0.3T); with learning weak learners on a noisy linear stream the
// edges are small and the bound exceeds T, but the Weighted Majority step
// is still checked.
func TestMistakeBound(t *testing.T) {
	const bits = 10
	c := 1 / math.Log(2*math.E/(1+math.E))
	oracles := func(_ testing.TB, n int, _ uint) []online.Learner {
		ls := make([]online.Learner, n)
		for i := range ls {
			ls[i] = &oracle{id: uint64(i), acc: 0.95}
		}
		return ls
	}
	linear := func(rounds int, noise float64) []onlinetest.Example {
		return onlinetest.LinearStream(bits, rounds, 20, noise)(11)
	}
	labeled := func(rounds int) []onlinetest.Example {
		r := rand.New(rand.NewPCG(9, 9))
		ex := make([]onlinetest.Example, rounds)
		for k := range ex {
			y := online.Negative
			if r.IntN(2) == 1 {
				y = online.Positive
			}
			ex[k] = onlinetest.Example{X: online.Vector{Idx: []uint32{0, 1}, Val: []float64{float64(y), float64(k)}}, Y: y}
		}
		return ex
	}
	for _, tc := range []struct {
		name     string
		weak     func(testing.TB, int, uint) []online.Learner
		n        int
		stream   []onlinetest.Example
		maxBound float64 // the final bound, as a fraction of T, at most
	}{
		{"oracles-64", oracles, 64, labeled(100000), 0.4},
		{"perceptron-10", perceptrons, 10, linear(5000, 0.1), math.Inf(1)},
		{"perceptron-3", perceptrons, 3, linear(5000, 0.3), math.Inf(1)},
		{"ogd-20", ogds, 20, linear(5000, 0.05), math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ol, err := boost.New(tc.weak(t, tc.n, bits), boost.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			var mistakes uint64
			for k, ex := range tc.stream {
				p, _ := ol.Round(ex.X, ex.Y)
				if p.Label != ex.Y {
					mistakes++
				}
				g := ol.Guarantee()
				if float64(mistakes) > g.Value {
					t.Fatalf("round %d: %d mistakes, bound %v", k+1, mistakes, g.Value)
				}
				if float64(mistakes) > c*(g.ComparatorLoss+math.Log(float64(tc.n)))+1e-9 {
					t.Fatalf("round %d: %d mistakes, best expert %v: over Weighted Majority's bound", k+1, mistakes, g.ComparatorLoss)
				}
				if T := float64(k + 1); k%997 == 0 || k == len(tc.stream)-1 {
					var g2 float64
					for i := range tc.n {
						g2 += ol.Edge(i) * ol.Edge(i)
					}
					if bound := (4*math.Ln2*T + 24*float64(tc.n)*math.Sqrt(T)) / g2; g.ComparatorLoss > bound {
						t.Fatalf("round %d: best expert %v mistakes, over the boosting bound %v", k+1, g.ComparatorLoss, bound)
					}
				}
			}
			T := float64(len(tc.stream))
			g := ol.Guarantee()
			if g.Value > tc.maxBound*T {
				t.Errorf("bound %.0f, want at most %.2f·T", g.Value, tc.maxBound)
			}
			t.Logf("%d rounds: %d mistakes, best expert %v, bound %.0f (%.2f·T)", len(tc.stream), mistakes, g.ComparatorLoss, g.Value, g.Value/T)
		})
	}
}

// TestBeatsWeak: on a stream no halfspace through a weak learner's
// features separates well (labels by the product of two coordinates'
// signs, XOR-like, plus a linear part), the booster makes fewer mistakes
// than its best weak learner.
func TestBeatsWeak(t *testing.T) {
	const bits, n = 6, 10
	ol, err := boost.New(perceptrons(t, n, bits), boost.Config{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	var mistakes uint64
	const rounds = 20000
	for range rounds {
		x := onlinetest.RandomVector(r, bits, 8)
		var s float64
		for k, i := range x.Idx {
			s += x.Val[k] * float64(i%7) / 7
		}
		y := online.Negative
		if s > 0 {
			y = online.Positive
		}
		if r.Float64() < 0.1 {
			y = -y
		}
		if p, _ := ol.Round(x, y); p.Label != y {
			mistakes++
		}
	}
	bestWeak := uint64(math.MaxUint64)
	for i := range n {
		_, m, _ := ol.WeakStats(i)
		bestWeak = min(bestWeak, m)
	}
	t.Logf("booster %d mistakes, best weak learner %d", mistakes, bestWeak)
	if mistakes >= bestWeak {
		t.Errorf("booster %d mistakes, not fewer than its best weak learner's %d", mistakes, bestWeak)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := boost.New(nil, boost.Config{}); err == nil {
		t.Error("no weak learners accepted")
	}
	if _, err := boost.New(perceptrons(t, boost.MaxWeak+1, 4), boost.Config{}); err == nil {
		t.Error("too many weak learners accepted")
	}
}

// TestUnmarshalUnchanged: a state another booster refuses leaves it as it
// was, weak learners included: here the last weak learner refuses a state
// of a larger space after the first two have restored theirs.
func TestUnmarshalUnchanged(t *testing.T) {
	const bits = 6
	mk := func(seed uint64, weak []online.Learner) *boost.OL {
		b, err := boost.New(weak, boost.Config{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	src := mk(1, append(perceptrons(t, 2, bits), perceptrons(t, 1, bits+1)...))
	dst := mk(1, perceptrons(t, 3, bits))
	for _, ex := range onlinetest.LinearStream(bits, 200, 5, 0.1)(3) {
		src.Round(ex.X, ex.Y)
		dst.Round(ex.X, -ex.Y)
	}
	state, _ := src.MarshalBinary()
	before, _ := dst.MarshalBinary()
	// W_1 = 1e-300 (every round adds ½ to it): the edge γ_1 = Σwz/W_1
	// would make the bound fall below the mistakes made.
	tiny := append([]byte(nil), before...)
	binary.LittleEndian.PutUint64(tiny[2+4+8+8+4*8:], math.Float64bits(1e-300))
	for _, p := range [][]byte{state, state[:len(state)-3], nil, tiny} {
		if err := dst.UnmarshalBinary(p); err == nil {
			t.Fatalf("state of %d bytes accepted", len(p))
		}
		if after, _ := dst.MarshalBinary(); string(after) != string(before) {
			t.Fatalf("a refused state of %d bytes changed the booster", len(p))
		}
	}
	if err := mk(2, perceptrons(t, 3, bits)).UnmarshalBinary(before); err == nil {
		t.Error("a state of another seed accepted")
	}
	again := mk(1, perceptrons(t, 3, bits))
	if err := again.UnmarshalBinary(before); err != nil {
		t.Fatal(err)
	}
	if after, _ := again.MarshalBinary(); string(after) != string(before) {
		t.Error("restored state re-marshals differently")
	}
}
