package learners

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

func TestRegistry(t *testing.T) {
	want := []string{"adaboost-ol", "adagrad", "consistent", "halving", "kernel-perceptron", "last-label", "majority", "multiclass-perceptron", "ogd", "pegasos", "perceptron", "soa", "weighted-majority"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, name := range want {
		a, ok := Lookup(name)
		if !ok || a.Name != name {
			t.Fatalf("Lookup(%q) = %v, %v", name, a, ok)
		}
		if reflect.TypeOf(a.Params()).Kind() != reflect.Pointer || reflect.TypeOf(a.Params()).Elem().Kind() != reflect.Struct {
			t.Errorf("%s: Params returns %T, want a pointer to a struct", name, a.Params())
		}
		keys, types := a.Keys()
		for _, k := range keys {
			if k == "name" || k == "algorithm" || types[k] == nil {
				t.Errorf("%s: key %q", name, k)
			}
		}
		if reflect.TypeOf(a.Params()).Elem().Size() > 0 && a.Params() == a.Params() {
			t.Errorf("%s: Params returns the same value twice", name)
		}
	}
	if _, ok := Lookup("perceptorn"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	if keys, _ := algorithms["perceptron"].Keys(); !slices.Equal(keys, []string{"bias", "average", "margin"}) {
		t.Errorf("perceptron keys %v", keys)
	}
}

func newBaseline(t *testing.T, name string) func() online.Learner {
	return func() online.Learner {
		a, _ := Lookup(name)
		l, err := a.New(a.Params(), Env{Bits: 8})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func TestBaselinesConform(t *testing.T) {
	for _, name := range []string{"majority", "last-label"} {
		onlinetest.Run(t, name, newBaseline(t, name), onlinetest.LinearStream(8, 300, 10, 0.05))
	}
}

// TestBaselines plays labels + + - - - + : majority predicts - + + + - -
// (ties -1), last-label - + + - - -.
func TestBaselines(t *testing.T) {
	labels := []int8{1, 1, -1, -1, -1, 1}
	for name, want := range map[string][]int8{
		"majority":   {-1, 1, 1, 1, -1, -1},
		"last-label": {-1, 1, 1, -1, -1, -1},
	} {
		l := newBaseline(t, name)()
		var x online.Vector
		for k, y := range labels {
			p := l.Predict(x)
			if p.Label != want[k] {
				t.Fatalf("%s: round %d predicted %d, want %d", name, k+1, p.Label, want[k])
			}
			if l.Loss(p, y) != map[bool]float64{true: 0, false: 1}[p.Label == y] {
				t.Fatalf("%s: round %d: loss %v", name, k+1, l.Loss(p, y))
			}
			l.Learn(x, p, y)
		}
	}
}

// TestValidate: the version-space and weighted-majority checks name the
// key at fault.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		alg    string
		params any
		env    Env
		want   string
	}{
		{"soa", &ClassParams{}, Env{}, "class: soa needs a hypothesis class"},
		{"weighted-majority", &WeightedMajorityParams{}, Env{}, "weighted-majority needs a class or a list of experts"},
		{"weighted-majority", &WeightedMajorityParams{Experts: []string{"a", "b"}}, Env{Name: "w", Prior: []string{"a"}}, `experts[1]: "b" is not a learner configured before this one`},
		{"weighted-majority", &WeightedMajorityParams{Experts: []string{"a"}, Horizon: -1}, Env{Prior: []string{"a"}}, "horizon: must not be negative (0 means unknown: doubling trick)"},
		{"perceptron", &online.PerceptronConfig{Margin: -1}, Env{}, "margin: -1 is not a finite number ≥ 0"},
		{"perceptron", &ClassParams{}, Env{}, "learners: perceptron: parameters of type *learners.ClassParams, want *online.PerceptronConfig"},
	} {
		a, _ := Lookup(tc.alg)
		err := a.Validate(tc.params, tc.env)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %+v: %v, want %s", tc.alg, tc.params, err, tc.want)
		}
	}
	a, _ := Lookup("weighted-majority")
	many := make([]string, experts.MaxOverLearners+1)
	for i := range many {
		many[i] = fmt.Sprint("l", i)
	}
	want := "experts: 65 learners, at most 64 (the advice it served travels as one bit an expert)"
	if err := a.Validate(&WeightedMajorityParams{Experts: many}, Env{Prior: many}); err == nil || err.Error() != want {
		t.Errorf("Validate of weighted-majority over 65 learners: %v, want %s", err, want)
	}
	if _, err := a.New(&WeightedMajorityParams{Experts: []string{"a"}}, Env{}); err == nil {
		t.Error("New of weighted-majority over a learner not built: no error")
	}
	// Over learners built before it: a Learner whose experts are those.
	pct, _ := online.NewPerceptron(4, online.PerceptronConfig{})
	l, err := a.New(&WeightedMajorityParams{Experts: []string{"a"}}, Env{Prior: []string{"a"}, Built: []online.Learner{pct}})
	if _, ok := l.(*experts.OverLearners); err != nil || !ok {
		t.Errorf("New of weighted-majority over a built learner: %T, %v", l, err)
	}
}

// TestAdaBoostConforms: adaboost-ol at its defaults (ten AdaGrad weak
// learners) and over Perceptrons, built through the registry.
func TestAdaBoostConforms(t *testing.T) {
	stream := onlinetest.LinearStream(8, 300, 10, 0.05)
	onlinetest.Run(t, "adaboost-ol", newBaseline(t, "adaboost-ol"), stream)
	onlinetest.Run(t, "adaboost-ol/perceptron", func() online.Learner {
		a, _ := Lookup("adaboost-ol")
		p := &AdaBoostParams{WeakLearners: 3, Weak: &Spec{Algorithm: "perceptron"}, Seed: 9}
		if err := a.Validate(p, Env{}); err != nil {
			t.Fatal(err)
		}
		l, err := a.New(p, Env{Bits: 8})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, stream)
}

// TestDelayedBoundOf: an algorithm says a delayed form of its bound
// (DelayedBoundOf) exactly for the parameters whose learner the tracker
// checks under delayed labels (online.DelayGuaranteed, covered at d = 0);
// the others' bounds are reported as assuming immediate labels.
func TestDelayedBoundOf(t *testing.T) {
	class := "class: {kind: thresholds, feature: v, min: 0, max: 1, points: 9}"
	pct, err := online.NewPerceptron(8, online.PerceptronConfig{})
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Bits: 8, Classes: 3, Prior: []string{"a"}, Built: []online.Learner{pct}}
	for _, c := range []struct {
		algorithm, params string
		delayed           bool
	}{
		{"perceptron", "{}", true},
		{"perceptron", "{margin: 0.1}", true},
		{"perceptron", "{margin: 0.1, bias: true}", true},
		{"perceptron", "{average: true}", false},
		{"kernel-perceptron", "{margin: 0.1}", true},
		{"kernel-perceptron", "{}", true},
		{"kernel-perceptron", "{max_support: 10}", false},
		{"ogd", "{}", true},
		{"ogd", "{schedule: fixed, radius: 2}", true},
		{"adagrad", "{}", false},
		{"adagrad", "{normalized: false}", false},
		{"pegasos", "{}", false},
		{"adaboost-ol", "{}", false},
		{"multiclass-perceptron", "{margin: 0.1}", false},
		{"weighted-majority", "{" + class + "}", true},
		{"weighted-majority", "{experts: [a], horizon: 100}", true},
		{"consistent", "{" + class + "}", true},
		{"halving", "{" + class + "}", true},
		{"soa", "{" + class + "}", true},
		{"majority", "{}", false},
		{"last-label", "{}", false},
	} {
		a, _ := Lookup(c.algorithm)
		p := a.Params()
		if err := yaml.Unmarshal([]byte(c.params), p); err != nil {
			t.Fatalf("%s %s: %v", c.algorithm, c.params, err)
		}
		l, err := a.New(p, env)
		if err != nil {
			t.Fatalf("%s %s: %v", c.algorithm, c.params, err)
		}
		covered := false
		if dg, ok := l.(online.DelayGuaranteed); ok {
			_, covered = dg.DelayedGuarantee(0)
		}
		said := a.DelayedBoundOf != nil && a.DelayedBoundOf(p) != ""
		if covered != c.delayed || said != c.delayed {
			t.Errorf("%s %s: covered under delays %v, a delayed form said %v, want both %v", c.algorithm, c.params, covered, said, c.delayed)
		}
	}
}
