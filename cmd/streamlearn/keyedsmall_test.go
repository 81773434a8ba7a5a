package main

import (
	"strings"
	"testing"
)

// TestKeylessLabelHint: with models per key, label events without a key
// are said to have none, with how labels travel, not sent to labels.wait.
func TestKeylessLabelHint(t *testing.T) {
	p := writeFiles(t, map[string]string{
		"c.yaml":   "learners: [{name: p, algorithm: perceptron}]\nlabels: {delayed: true}\nmodels: {by: key}\n",
		"in.jsonl": `{"id":"a","key":"u1","features":{"x":1}}` + "\n" + `{"id":"b","key":"u2","features":{"x":1}}` + "\n" + `{"id":"a","label":1}` + "\n" + `{"id":"b","label":0}` + "\n",
	})
	code, _, errOut := run(t, "replay", "-c", p["c.yaml"], p["in.jsonl"])
	if code != exitNothingLearned || !strings.Contains(errOut, "first rejected (no key): ") ||
		!strings.Contains(errOut, "hint: the label has no key: with models per key (models.by: key) a label is joined to its event in the model of the event's key") ||
		strings.Contains(errOut, "labels.wait") {
		t.Errorf("replay of keyless labels: exit %d, stderr:\n%s\nwant %d, the first rejected having no key, a hint saying labels travel keyed, none about labels.wait", code, errOut, exitNothingLearned)
	}
}
