package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "perceptron",
		Summary: "Rosenblatt's Perceptron over hashed slots, optionally with a bias and averaging",
		Bound:   "mistakes ≤ (R/γ)² with margin: γ set, R²·max(1, (1+(ρ−γ)²)/γ²) with a bias (Novikoff 1962; lecture notes, Lecture 4, Theorem 3); the margin certificate R/√M always",
	}, online.NewPerceptron), online.NewSparsePerceptron))
}
