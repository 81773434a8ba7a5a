package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "adagrad",
		Summary: "online gradient descent with a step per feature (AdaGrad), normalized to each feature's scale by default (NAG), on the hinge, logistic or squared loss",
		Bound:   "with normalized: false, regret against the zero vector ≤ (D∞²/(2η) + η)·Σᵢ‖g₁:T,ᵢ‖₂ (Duchi, Hazan & Singer 2011, Theorem 5); normalized: none checked",
		BoundOf: func(p any) string {
			c, _ := p.(*online.AdaGradConfig)
			switch {
			case c == nil:
				return ""
			case c.IsNormalized():
				return "none checked: the normalized step (NAG) has no regret bound the tracker can check (normalized: false has one)"
			}
			return "regret against the zero vector ≤ (D∞²/(2η) + η)·Σᵢ‖g₁:T,ᵢ‖₂ (Duchi, Hazan & Singer 2011, Theorem 5)"
		},
	}, online.NewAdaGrad), online.NewSparseAdaGrad))
}
