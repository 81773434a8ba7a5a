package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(&Algorithm{
		Name:    "perceptron",
		Summary: "Rosenblatt's Perceptron over hashed slots, optionally with a bias and averaging",
		Bound:   "mistakes ≤ (R/γ)² with margin: γ set (Novikoff 1962; lecture notes, Lecture 4, Theorem 3); the margin certificate R/√M always",
		Params:  func() any { return new(online.PerceptronConfig) },
		Validate: func(p any, _ Env) error {
			c, err := params[online.PerceptronConfig]("perceptron", p)
			if err != nil {
				return err
			}
			return trim("perceptron", c.Validate())
		},
		New: func(p any, env Env) (online.Learner, error) {
			c, err := params[online.PerceptronConfig]("perceptron", p)
			if err != nil {
				return nil, err
			}
			return learner(online.NewPerceptron(env.Bits, *c))
		},
	})
}
