package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "pegasos",
		Summary: "online gradient descent on the λ-regularized hinge loss with steps 1/(λt), projected onto the ball of radius 1/√λ (Pegasos)",
		Bound:   "regret of the hinge loss against the zero vector ≤ G²(1 + ln T)/(2λ), G the largest gradient norm so far (Hazan, Agarwal & Kale 2007, Theorem 1)",
	}, online.NewPegasos), online.NewSparsePegasos))
}
