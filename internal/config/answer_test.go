package config

import (
	"strings"
	"testing"
)

const answerLearners = `
learners:
  - {name: pct, algorithm: perceptron}
  - {name: adagrad, algorithm: adagrad}
  - {name: wm, algorithm: weighted-majority, experts: [pct, adagrad]}
`

// TestAnswer: answer names the learner that answers for the filter; left
// out, the first does; a name no learner has is refused, at its line,
// with the names there are.
func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		yaml       string
		index      int
		name, fail string
	}{
		{answerLearners, 0, "pct", ""},
		{answerLearners + "answer: wm\n", 2, "wm", ""},
		{answerLearners + "answer: adagrad\n", 1, "adagrad", ""},
		{answerLearners + "answer: ada\n", 0, "",
			`a.yaml:6: answer: "ada" is not the name of a configured learner (learners: pct, adagrad, wm): name the one whose prediction is the filter's verdict, or leave answer out for the first`},
		// no learner, or one without a name: their own error explains
		// answer's
		{"answer: ada\n", 0, "", "a.yaml: learners: configure at least one learner"},
		{"learners:\n  - {nme: ada, algorithm: majority}\nanswer: ada\n", 0, "",
			"a.yaml:2: learners[0].nme: not used by algorithm majority (its keys: none)\na.yaml:2: learners[0].name: every learner needs a name"},
	} {
		c, err := Parse("a.yaml", []byte(tc.yaml))
		if tc.fail != "" {
			if err == nil || err.Error() != tc.fail {
				t.Errorf("%q: %v, want %s", tc.yaml, err, tc.fail)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.AnswerIndex() != tc.index || c.AnswerName() != tc.name {
			t.Errorf("%q: answer %d %q, want %d %q", strings.TrimSpace(tc.yaml), c.AnswerIndex(), c.AnswerName(), tc.index, tc.name)
		}
	}
	if d := Default(); d.AnswerName() != "perceptron" {
		t.Errorf("the default configuration answers with %q, want its first learner, perceptron", d.AnswerName())
	}
}
