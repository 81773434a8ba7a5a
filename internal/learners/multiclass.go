package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	a := configured(Algorithm{
		Name:       "multiclass-perceptron",
		Summary:    "the multiclass Perceptron (a weight vector per class; on a mistake, +x to the true class, -x to the predicted one); needs input.classes",
		Bound:      "mistakes ≤ 2R²/γ² with margin: γ set (Kesler's construction; Crammer & Singer 2003); the margin certificate R·√(2/M) always",
		Multiclass: true,
	}, func(uint, online.MulticlassPerceptronConfig) (*online.MulticlassPerceptron, error) { return nil, nil })
	a.New = func(p any, env Env) (online.Learner, error) {
		c, err := params[online.MulticlassPerceptronConfig](a.Name, p)
		if err != nil {
			return nil, err
		}
		if env.Space != nil {
			return learner(online.NewSparseMulticlassPerceptron(env.Space, env.Classes, *c))
		}
		return learner(online.NewMulticlassPerceptron(env.Bits, env.Classes, *c))
	}
	Register(a)
}
