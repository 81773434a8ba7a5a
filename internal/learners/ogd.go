package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(&Algorithm{
		Name:    "ogd",
		Summary: "online (sub)gradient descent on the hinge, logistic or squared loss, optionally projected onto an L2 ball",
		Bound:   "regret against the best vector of the ball ≤ B·G·√(2T) with η/√t and radius B (Zinkevich 2003, Theorem 1; Understanding Machine Learning, Theorem 21.15)",
		Params:  func() any { return new(online.OGDConfig) },
		Validate: func(p any, _ Env) error {
			c, err := params[online.OGDConfig]("ogd", p)
			if err != nil {
				return err
			}
			return trim("ogd", c.Validate())
		},
		New: func(p any, env Env) (online.Learner, error) {
			c, err := params[online.OGDConfig]("ogd", p)
			if err != nil {
				return nil, err
			}
			return learner(online.NewOGD(env.Bits, *c))
		},
	})
}
