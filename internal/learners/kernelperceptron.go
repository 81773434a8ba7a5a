package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(configured(Algorithm{
		Name:    "kernel-perceptron",
		Summary: "the Perceptron in a kernel's feature space (polynomial or Gaussian), optionally with a budget of support vectors",
		Bound:   "with margin: γ and no budget, mistakes ≤ R²/γ², R² = the largest K(x, x) so far (Novikoff in the feature space); with max_support, none",
	}, online.NewKernelPerceptron))
}
