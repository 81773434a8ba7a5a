package learners

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/online"
)

// ClassParams are the parameters of the version-space learners
// (consistent, halving, soa): the hypothesis class.
type ClassParams struct {
	Class *experts.ClassSpec `yaml:"class"`
}

// HypothesisClass returns the class: a learner over it accepts only the
// events of its domain (experts.ClassSpec.DomainTerms).
func (p *ClassParams) HypothesisClass() *experts.ClassSpec { return p.Class }

func init() {
	for _, a := range []struct{ name, summary, bound, delayed string }{
		{"consistent", "predicts with the first hypothesis of the class still consistent with every label",
			"mistakes ≤ |H| − 1 on a stream realizable by H (Understanding Machine Learning, Section 21.1)",
			"mistakes ≤ (d+1)·(|H| − 1) on a stream realizable by H, labels d rounds late"},
		{"halving", "predicts the label most of the consistent hypotheses give",
			"mistakes ≤ log₂|H| on a stream realizable by H (Understanding Machine Learning, Theorem 21.3)",
			"mistakes ≤ (d+1)·log₂|H| on a stream realizable by H, labels d rounds late"},
		{"soa", "Littlestone's Standard Optimal Algorithm: predicts the label whose version space has the larger Littlestone dimension",
			"mistakes ≤ Ldim(H) on a stream realizable by H, which no algorithm beats (Understanding Machine Learning, Lemmas 21.6 and 21.7)",
			"mistakes ≤ (d+1)·Ldim(H) on a stream realizable by H, labels d rounds late"},
	} {
		name, delayed := a.name, a.delayed+" (at most d+1 chains of mistakes, each one of immediate labels)"
		Register(&Algorithm{
			Name:           name,
			Summary:        a.summary,
			Bound:          a.bound,
			DelayedBoundOf: func(any) string { return delayed },
			Params:         func() any { return new(ClassParams) },
			Validate: func(p any, _ Env) error {
				c, err := params[ClassParams](name, p)
				if err != nil {
					return err
				}
				if c.Class == nil {
					return fmt.Errorf("class: %s needs a hypothesis class", name)
				}
				if err := c.Class.Validate(); err != nil {
					return fmt.Errorf("class: %v", err)
				}
				return nil
			},
			New: func(p any, env Env) (online.Learner, error) {
				c, err := params[ClassParams](name, p)
				if err != nil {
					return nil, err
				}
				if c.Class == nil {
					return nil, fmt.Errorf("%s needs a hypothesis class", name)
				}
				class, err := experts.NewClass(*c.Class, env.Bits)
				if err != nil {
					return nil, err
				}
				return experts.NewLearner(name, class, experts.HedgeConfig{})
			},
		})
	}
}
