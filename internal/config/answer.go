package config

import "strings"

// AnswerIndex returns the index in Learners of the learner that answers
// for the filter: the one Answer names, or the first when Answer is
// empty. The first is the default because it is the one learner every
// configuration has: a configuration of one learner needs no answer, and
// one written before the key existed answers as its first learner did at
// the head of every list of predictions. Validation has checked that
// Answer names a configured learner; of a configuration that was not
// validated, an unknown name gives the first.
func (c *Config) AnswerIndex() int {
	for i, l := range c.Learners {
		if l.Name == c.Answer {
			return i
		}
	}
	return 0
}

// AnswerName returns the name of the learner that answers (AnswerIndex);
// empty without learners.
func (c *Config) AnswerName() string {
	if len(c.Learners) == 0 {
		return ""
	}
	return c.Learners[c.AnswerIndex()].Name
}

// validateAnswer checks that answer, when set, names a configured learner.
// Without learners, or with one without a name (it may be the one answer
// names), their own errors explain it: answer's is left out.
func (c *Config) validateAnswer(p *problems) {
	if c.Answer == "" || len(c.Learners) == 0 {
		return
	}
	names := make([]string, len(c.Learners))
	for i, l := range c.Learners {
		if l.Name == c.Answer || l.Name == "" {
			return
		}
		names[i] = l.Name
	}
	p.add(errAt("answer", "%q is not the name of a configured learner (learners: %s): name the one whose prediction is the filter's verdict, or leave answer out for the first",
		c.Answer, strings.Join(names, ", ")))
}
