package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "ogd",
		Summary: "online (sub)gradient descent on the hinge, logistic or squared loss, optionally projected onto an L2 ball",
		Bound:   "regret against the best vector of the ball ≤ B·G·√(2T) with η/√t and radius B (Zinkevich 2003, Theorem 1; Understanding Machine Learning, Theorem 21.15)",
	}, online.NewOGD), online.NewSparseOGD))
}
