package pipeline

import "github.com/streamlearn/streamlearn/internal/regret"

// Model returns the model of learner i (configuration order): an
// online.Learner (*online.Perceptron, *online.OGD, a version-space or
// Weighted-Majority learner of package experts, *experts.OverLearners for
// Weighted-Majority over other learners). It is for inspection (tests,
// debugging): the pipeline owns it, so read it only on the pipeline's
// goroutine and do not modify it.
func (p *Pipeline) Model(i int) regret.Model { return p.nodes[i].learner }
