package learners

import "github.com/streamlearn/streamlearn/internal/online"

func init() {
	Register(sparseToo(configured(Algorithm{
		Name:    "ogd",
		Summary: "online (sub)gradient descent on the hinge, logistic or squared loss, optionally projected onto an L2 ball",
		Bound:   "regret against the zero vector ≤ η·G²·T/2 with schedule: fixed, D²·√T/(2η) + η·G²·(√T − ½) with η/√t, D the largest ‖w‖ so far or the radius (Understanding Machine Learning, Theorem 21.15; Zinkevich 2003, Theorem 1); with a radius, the bound against every vector of the ball as a certificate",
		BoundOf: func(p any) string {
			c, _ := p.(*online.OGDConfig)
			if c == nil {
				return ""
			}
			var b string
			switch {
			case c.Schedule == online.ScheduleFixed:
				b = "regret against the zero vector ≤ η·G²·T/2, G the largest gradient norm so far (Understanding Machine Learning, Theorem 21.15)"
			case c.Radius > 0:
				b = "regret against the zero vector ≤ B²·√T/(2η) + η·G²·(√T − ½) with η/√t and radius B, G the largest gradient norm so far (Zinkevich 2003, Theorem 1)"
			default:
				b = "regret against the zero vector ≤ D²·√T/(2η) + η·G²·(√T − ½) with η/√t, D the largest ‖w‖ so far, G the largest gradient norm (Zinkevich 2003, Theorem 1)"
			}
			if c.Radius > 0 {
				b += "; the certificate ball_regret_bound against every vector of the ball"
			}
			return b
		},
		DelayedBoundOf: func(p any) string {
			c, _ := p.(*online.OGDConfig)
			if c == nil {
				return ""
			}
			drift := "d·η·G²·(d + 2√T)"
			if c.Schedule == online.ScheduleFixed {
				drift = "d·η·G²·T"
			}
			b := "regret against the zero vector ≤ the bound of immediate labels plus a drift of " + drift + ", labels d rounds late, η the larger of eta and bias_eta (Langford, Smola & Zinkevich 2009, with this step schedule)"
			if c.Radius > 0 {
				b += "; the certificate ball_regret_bound plus the same drift"
			}
			return b
		},
	}, online.NewOGD), online.NewSparseOGD))
}
