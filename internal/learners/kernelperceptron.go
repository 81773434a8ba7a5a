package learners

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/online"
)

func init() {
	Register(configured(Algorithm{
		Name:    "kernel-perceptron",
		Summary: "the Perceptron in a kernel's feature space (polynomial or Gaussian), optionally with a budget of support vectors",
		Bound:   "with margin: γ and no budget, mistakes ≤ R²/γ², R² = the largest K(x, x) so far (Novikoff in the feature space); with max_support, none",
		DelayedBoundOf: func(p any) string {
			c, _ := p.(*online.KernelPerceptronConfig)
			switch {
			case c == nil || c.MaxSupport > 0:
				return "" // a budget forgets updates the analysis needs
			case c.Margin > 0:
				return fmt.Sprintf("mistakes ≤ (2d+1)·R²/γ² with γ = %v, labels d rounds late, R² = the largest K(x, x) so far (Novikoff in the feature space, as the Perceptron's under delays); the certificate R·√((2d+1)/M)", c.Margin)
			}
			return "the margin certificate R·√((2d+1)/M), labels d rounds late, R² = the largest K(x, x) so far (a mistake bound needs margin: γ)"
		},
	}, online.NewKernelPerceptron))
}
