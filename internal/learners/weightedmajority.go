package learners

import (
	"errors"
	"fmt"
	"slices"

	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/online"
)

// WeightedMajorityParams are the parameters of weighted-majority: its
// experts are the hypotheses of Class, or the learners named in Experts
// (configured before it), whose predicted labels are its advice.
type WeightedMajorityParams struct {
	Class   *experts.ClassSpec `yaml:"class"`
	Experts []string           `yaml:"experts"`
	// Horizon is T when known (0: the doubling trick), Eta the learning
	// rate (0: the theorem's), Seed the seed of the draws.
	Horizon int     `yaml:"horizon"`
	Eta     float64 `yaml:"eta"`
	Seed    uint64  `yaml:"seed"`
}

// HypothesisClass returns the class, nil over learners: a learner over a
// class accepts only the events of its domain
// (experts.ClassSpec.DomainTerms).
func (p *WeightedMajorityParams) HypothesisClass() *experts.ClassSpec { return p.Class }

// Hedge returns the Weighted-Majority settings.
func (p *WeightedMajorityParams) Hedge() experts.HedgeConfig {
	return experts.HedgeConfig{Horizon: p.Horizon, Eta: p.Eta, Seed: p.Seed}
}

func init() {
	Register(&Algorithm{
		Name:    "weighted-majority",
		Summary: "Weighted-Majority (Hedge) over the hypotheses of a class or over learners configured before it, with a seeded draw",
		Bound:   "expected regret against the best expert ≤ √(2T ln d) (Understanding Machine Learning, Theorem 21.11 and Corollary 21.12; doubling trick when T is unknown)",
		DelayedBoundOf: func(any) string {
			return "expected regret against the best expert ≤ √(2T ln n), n the experts (doubling trick when T is unknown), plus a drift of Σ over epochs of rounds·min(1, d·(1 − e^(−η))) and d per doubling-trick restart, capped at the rounds, labels d rounds late (the served distribution is at most d Hedge updates old)"
		},
		Params: func() any { return new(WeightedMajorityParams) },
		Validate: func(p any, env Env) error {
			c, err := params[WeightedMajorityParams]("weighted-majority", p)
			if err != nil {
				return err
			}
			switch {
			case c.Class != nil && len(c.Experts) > 0:
				return errors.New("experts: give either class or experts, not both")
			case c.Class != nil:
				if err := c.Class.Validate(); err != nil {
					return fmt.Errorf("class: %v", err)
				}
			case len(c.Experts) > experts.MaxOverLearners:
				return fmt.Errorf("experts: %d learners, at most %d (the advice it served travels as one bit an expert)", len(c.Experts), experts.MaxOverLearners)
			case len(c.Experts) > 0:
				dup := map[string]bool{}
				for j, e := range c.Experts {
					if !slices.Contains(env.Prior, e) || e == env.Name {
						return fmt.Errorf("experts[%d]: %q is not a learner configured before this one", j, e)
					}
					if dup[e] {
						return fmt.Errorf("experts[%d]: %q is listed twice", j, e)
					}
					dup[e] = true
				}
			default:
				return errors.New("weighted-majority needs a class or a list of experts")
			}
			if c.Horizon < 0 {
				return errors.New("horizon: must not be negative (0 means unknown: doubling trick)")
			}
			if c.Eta < 0 {
				return errors.New("eta: must not be negative (0 means the theorem's rate)")
			}
			return nil
		},
		New: func(p any, env Env) (online.Learner, error) {
			c, err := params[WeightedMajorityParams]("weighted-majority", p)
			if err != nil {
				return nil, err
			}
			if c.Class == nil {
				// Over the learners configured before it, by name.
				ls := make([]online.Learner, len(c.Experts))
				for k, e := range c.Experts {
					i := slices.Index(env.Prior, e)
					if i < 0 || i >= len(env.Built) {
						return nil, fmt.Errorf("experts[%d]: %q is not a learner built before this one", k, e)
					}
					ls[k] = env.Built[i]
				}
				return learner(experts.NewOverLearners(ls, c.Hedge()))
			}
			class, err := experts.NewClass(*c.Class, env.Bits)
			if err != nil {
				return nil, err
			}
			return learner(experts.NewWeightedMajority(class, c.Hedge()))
		},
	})
}
