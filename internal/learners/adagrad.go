package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "adagrad",
		Summary: "online gradient descent with a step per feature (AdaGrad), normalized to each feature's scale by default (NAG), on the hinge, logistic or squared loss",
		Bound:   "with normalized: false, regret against the zero vector ≤ (D∞²/(2η) + η)·Σᵢ‖g₁:T,ᵢ‖₂ (Duchi, Hazan & Singer 2011, Theorem 5); normalized: none checked",
	}, online.NewAdaGrad), online.NewSparseAdaGrad))
}
