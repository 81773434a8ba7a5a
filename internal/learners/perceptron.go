package learners

import (
	"fmt"

	"github.com/streamlearn/streamlearn/internal/online"
)

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "perceptron",
		Summary: "Rosenblatt's Perceptron over hashed slots, optionally with a bias and averaging",
		Bound:   "mistakes ≤ (R/γ)² with margin: γ set, R²·max(1, (1+(ρ−γ)²)/γ²) with a bias (Novikoff 1962; lecture notes, Lecture 4, Theorem 3); the margin certificate R/√M always",
		BoundOf: func(p any) string {
			c, _ := p.(*online.PerceptronConfig)
			switch {
			case c == nil:
				return ""
			case c.Average:
				return "no mistake bound: the average predicts, the theorem is the plain Perceptron's; the margin certificate R/√M of its updates"
			case c.Margin > 0 && c.Bias:
				return fmt.Sprintf("mistakes ≤ R²·max(1, (1+(ρ−γ)²)/γ²) with γ = %v, assumed (Novikoff 1962, with a bias); the margin certificate R/√M", c.Margin)
			case c.Margin > 0:
				return fmt.Sprintf("mistakes ≤ (R/γ)² with γ = %v, assumed (Novikoff 1962; lecture notes, Lecture 4, Theorem 3); the margin certificate R/√M", c.Margin)
			}
			return "the margin certificate R/√M: every unit separator of the stream so far has margin ≤ R/√M (a mistake bound needs margin: γ)"
		},
		DelayedBoundOf: func(p any) string {
			c, _ := p.(*online.PerceptronConfig)
			switch {
			case c == nil || c.Average:
				return "" // the average learns from its plain score at label time
			case c.Margin > 0 && c.Bias:
				return fmt.Sprintf("mistakes ≤ (2d+1)·R²·max(1, (1+(ρ−γ)²)/γ²) with γ = %v, assumed, labels d rounds late (Novikoff 1962, with a bias, each update on weights at most d updates away); the margin certificate R·√((2d+1)/M)", c.Margin)
			case c.Margin > 0:
				return fmt.Sprintf("mistakes ≤ (2d+1)·(R/γ)² with γ = %v, assumed, labels d rounds late (Novikoff 1962, each update on weights at most d updates away); the margin certificate R·√((2d+1)/M)", c.Margin)
			}
			return "the margin certificate R·√((2d+1)/M), labels d rounds late: every unit separator of the stream so far has margin ≤ R·√((2d+1)/M) (a mistake bound needs margin: γ)"
		},
	}, online.NewPerceptron), online.NewSparsePerceptron))
}
