package learners

import (
	"fmt"
	"strings"

	"github.com/streamlearn/streamlearn/internal/boost"
	"github.com/streamlearn/streamlearn/internal/online"
)

// Spec is a learner given inside another learner's keys, as adaboost-ol's
// weak learner: an algorithm of the registry and its keys, decoded into
// the algorithm's parameters (Params, nil when the algorithm is unknown,
// which Check reports).
type Spec struct {
	Algorithm string `json:"algorithm"`
	Params    any    `json:"params,omitempty"`
}

// UnmarshalYAML decodes the algorithm, then its keys into its parameters.
// (The configuration checks the keys themselves against the registry
// before decoding.) It takes yaml's decode function, so that this package
// needs no YAML decoder of its own.
func (s *Spec) UnmarshalYAML(decode func(any) error) error {
	var head struct {
		Algorithm string `yaml:"algorithm"`
	}
	if err := decode(&head); err != nil {
		return err
	}
	s.Algorithm, s.Params = head.Algorithm, nil
	if a, ok := Lookup(head.Algorithm); ok {
		p := a.Params()
		if err := decode(p); err != nil {
			return err
		}
		s.Params = p
	}
	return nil
}

// Check validates the spec: a known algorithm with valid keys, and not one
// over other learners (a learner inside another has none configured before
// it). Errors start with the key at fault.
func (s *Spec) Check(env Env) error {
	a, ok := Lookup(s.Algorithm)
	switch {
	case s.Algorithm == "":
		return fmt.Errorf("algorithm: missing (one of %s)", strings.Join(Names(), ", "))
	case !ok:
		return fmt.Errorf("algorithm: %q is not one of %s", s.Algorithm, strings.Join(Names(), ", "))
	case a.Validate == nil:
		return nil
	}
	p := s.Params
	if p == nil {
		p = a.Params()
	}
	return a.Validate(p, Env{Name: env.Name, Bits: env.Bits})
}

// build returns n learners of the spec, each in its initial state.
func (s *Spec) build(n int, env Env) ([]online.Learner, error) {
	a, ok := Lookup(s.Algorithm)
	if !ok {
		return nil, fmt.Errorf("algorithm: %q is not an algorithm", s.Algorithm)
	}
	p := s.Params
	if p == nil {
		p = a.Params()
	}
	ls := make([]online.Learner, n)
	for i := range ls {
		l, err := a.New(p, Env{Name: env.Name, Bits: env.Bits, Space: env.Space})
		if err != nil {
			return nil, err
		}
		// A learner over a hypothesis class reads raw feature values; the
		// booster would pass it scaled ones.
		if _, raw := l.(online.Domained); raw {
			return nil, fmt.Errorf("algorithm: %s reads a hypothesis class and cannot be a weak learner", s.Algorithm)
		}
		ls[i] = l
	}
	return ls, nil
}

// AdaBoostParams are the parameters of adaboost-ol.
type AdaBoostParams struct {
	// WeakLearners is N, 1 to boost.MaxWeak; 0 means boost.DefaultWeak.
	WeakLearners int `yaml:"weak_learners"`
	// Weak is the algorithm of every weak learner and its keys; nil means
	// AdaGrad at its defaults with a bias (the most accurate of the
	// registry's learners alone on most of the real data sets, and the
	// booster over it gains on two of them).
	Weak *Spec `yaml:"weak"`
	// Seed seeds the draws of the examples each weak learner learns.
	Seed uint64 `yaml:"seed"`
}

// weak returns the weak learners' spec and their number, defaults filled.
func (p *AdaBoostParams) weak() (*Spec, int) {
	n := p.WeakLearners
	if n == 0 {
		n = boost.DefaultWeak
	}
	if p.Weak == nil {
		return &Spec{Algorithm: "adagrad", Params: &online.AdaGradConfig{Bias: true}}, n
	}
	return p.Weak, n
}

// notWeak are the algorithms adaboost-ol refuses as weak learners: those
// over a hypothesis class read raw feature values where the booster passes
// the scaled ones, a booster inside a booster is not supported, and a
// multiclass learner is not a binary one.
var notWeak = map[string]bool{"consistent": true, "halving": true, "soa": true, "weighted-majority": true, "adaboost-ol": true, "multiclass-perceptron": true}

func weakNames() []string {
	var ns []string
	for _, n := range Names() {
		if !notWeak[n] {
			ns = append(ns, n)
		}
	}
	return ns
}

func init() {
	Register(&Algorithm{
		Name:    "adaboost-ol",
		Summary: "online boosting (AdaBoost.OL) over N weak learners of one algorithm of the registry",
		Bound:   "mistakes ≤ c·(min(T, (4 ln 2·T + 24N√T)/Σγᵢ²) + ln N), c = 1/ln(2e/(1+e)) ≈ 2.63, γᵢ the weak learners' measured edges (Beygelzimer, Kale & Luo 2015, with explicit constants; the proof is in package boost's documentation)",
		Params:  func() any { return new(AdaBoostParams) },
		Validate: func(p any, env Env) error {
			c, err := params[AdaBoostParams]("adaboost-ol", p)
			if err != nil {
				return err
			}
			if c.WeakLearners < 0 || c.WeakLearners > boost.MaxWeak {
				return fmt.Errorf("weak_learners: %d is outside 1..%d (0: %d)", c.WeakLearners, boost.MaxWeak, boost.DefaultWeak)
			}
			if c.Weak != nil {
				if notWeak[c.Weak.Algorithm] {
					return fmt.Errorf("weak: algorithm: %s cannot be a weak learner: boosting takes learners of feature vectors (%s)", c.Weak.Algorithm, strings.Join(weakNames(), ", "))
				}
				if err := c.Weak.Check(env); err != nil {
					return fmt.Errorf("weak: %w", err)
				}
			}
			return nil
		},
		New: func(p any, env Env) (online.Learner, error) {
			c, err := params[AdaBoostParams]("adaboost-ol", p)
			if err != nil {
				return nil, err
			}
			spec, n := c.weak()
			weak, err := spec.build(n, env)
			if err != nil {
				return nil, fmt.Errorf("weak: %w", err)
			}
			return learner(boost.New(weak, boost.Config{Seed: c.Seed}))
		},
	})
}
