package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(configured(Algorithm{
		Name:    "perceptron",
		Summary: "Rosenblatt's Perceptron over hashed slots, optionally with a bias and averaging",
		Bound:   "mistakes ≤ (R/γ)² with margin: γ set (Novikoff 1962; lecture notes, Lecture 4, Theorem 3); the margin certificate R/√M always",
	}, online.NewPerceptron))
}
