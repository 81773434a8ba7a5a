package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ../../testdata/default-label.jsonl has labels joined and events
// expired with the default label (default-label.yaml beside it: labels
// wait 2 records, an expired event is learned with the default label 0,
// −1). Record by record (last-label predicts the label learned last,
// majority the one learned most, both −1 before the first and
// majority −1 on a tie; an event waits at most 2 records, the third
// expires it):
//
//	1 a arrives        last −1, maj −1
//	2 a's label 1      joined: last ✗, maj ✗
//	3 b arrives        last 1, maj 1
//	4 c arrives        last 1, maj 1
//	5 c's label 1      joined: both right
//	6 d arrives        b expires, learned with −1: last ✗, maj ✗ (default);
//	                   then d: last −1, maj 1
//	7 b's label 1      late
//	8 d's label 0      joined: last right, maj ✗
//	9 e arrives        last −1, maj −1 (2 to 2)
//	10, 11 f, g arrive
//	12 h arrives       e expires, learned with −1: both right (default)
//
// So on real labels last has 3 rounds, 1 mistake; maj 3 rounds, 2
// mistakes. Against the default label both have 2 rounds, 1 mistake.
// f, g and h wait.
const (
	defaultLabelConfig = "../../testdata/default-label.yaml"
	defaultLabelStream = "../../testdata/default-label.jsonl"
)

// writeFiles writes the files of name → contents into a new directory
// and returns their paths.
func writeFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for name, s := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

// Rounds scored against the default label are counted apart from those
// scored against a label the stream gave, in the JSON report and the
// text one: the headline rounds, mistakes and accuracy are the real
// labels'.
func TestReplayDefaultLabelApart(t *testing.T) {
	code, out, errOut := run(t, "replay", "-c", defaultLabelConfig, "--report", "json", defaultLabelStream)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Labeled uint64 `json:"labeled"`
		Labels  struct {
			Joined, Expired, Late, Pending uint64
			ExpiredLearned                 uint64 `json:"expired_learned"`
			Warning                        *string
		} `json:"labels"`
		Learners []struct {
			Name           string
			Rounds         uint64
			Mistakes       uint64
			Accuracy       *float64
			Loss           float64
			DefaultLabeled *struct {
				Rounds, Mistakes uint64
				Accuracy         *float64
				Loss             float64
			} `json:"default_labeled"`
		} `json:"learners"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	l := rep.Labels
	if rep.Labeled != 5 || l.Joined != 3 || l.Expired != 2 || l.ExpiredLearned != 2 || l.Late != 1 || l.Pending != 3 || l.Warning != nil {
		t.Errorf("labeled %d, labels %+v; want 5 rounds: 3 joined, 2 expired and learned, 1 late, 3 pending, no warning", rep.Labeled, l)
	}
	want := map[string][4]uint64{"last": {3, 1, 2, 1}, "maj": {3, 2, 2, 1}} // real rounds, mistakes; default rounds, mistakes
	for _, lr := range rep.Learners {
		w := want[lr.Name]
		d := lr.DefaultLabeled
		if d == nil {
			t.Errorf("%s: no default_labeled", lr.Name)
			continue
		}
		got := [4]uint64{lr.Rounds, lr.Mistakes, d.Rounds, d.Mistakes}
		if got != w {
			t.Errorf("%s: rounds, mistakes %d, %d; default-labeled %d, %d; want %v", lr.Name, got[0], got[1], got[2], got[3], w)
		}
		// Both are deterministic classifiers: the loss is the mistakes.
		if lr.Accuracy == nil || *lr.Accuracy != 1-float64(w[1])/float64(w[0]) || lr.Loss != float64(w[1]) ||
			d.Accuracy == nil || *d.Accuracy != 1-float64(w[3])/float64(w[2]) || d.Loss != float64(w[3]) {
			t.Errorf("%s: accuracy %v loss %v, default-labeled accuracy %v loss %v", lr.Name, deref(lr.Accuracy), lr.Loss, deref(d.Accuracy), d.Loss)
		}
	}

	code, out, errOut = run(t, "replay", "-c", defaultLabelConfig, defaultLabelStream)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows := textRows(t, out)
	for name, cols := range map[string][]string{
		"last": {"3", "1", "0.6667", "1", "2 rounds, 1 mistakes, 0.5000"},
		"maj":  {"3", "2", "0.3333", "2", "2 rounds, 1 mistakes, 0.5000"},
	} {
		r := rows[name]
		if got := []string{r["rounds"], r["mistakes"], r["accuracy"], r["loss"], r["default-labeled"]}; fmt.Sprint(got) != fmt.Sprint(cols) {
			t.Errorf("%s: text rounds, mistakes, accuracy, loss, default-labeled %q, want %q\n%s", name, got, cols, out)
		}
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// textRows reads the learners' table of a text report: per learner, its
// columns by header. The default-labeled column's cells hold spaces: it
// is the last, and takes the rest of the line.
func textRows(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	rows := map[string]map[string]string{}
	var head []string
	var starts []int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "learner ") {
			head = strings.Fields(line)
			for _, h := range head {
				starts = append(starts, strings.Index(line, h))
			}
			continue
		}
		if head == nil || line == "" || strings.HasPrefix(line, "answer: ") { // the table's last line names the answer
			continue
		}
		r := map[string]string{}
		for i, h := range head {
			end := len(line)
			if i+1 < len(head) {
				end = min(starts[i+1], len(line))
			}
			if starts[i] < len(line) {
				r[h] = strings.TrimSpace(line[starts[i]:end])
			}
		}
		rows[r["learner"]] = r
	}
	if head == nil {
		t.Fatalf("no learners' table:\n%s", out)
	}
	return rows
}

// The SMS Spam Collection with every label sent about 200 records after
// its message (after the 100th message after it, so 100 messages and 100
// labels between), labels.wait 100 and default_label ham: every message
// expires and is learned as ham before its label comes, and every label
// is late. No round is scored on a real label, and the report says so:
// no accuracy (null, "-"), a warning with the counts in the report and,
// once, in the log. On 6505c9c it said accuracy 1.0000 and 0 mistakes for
// every learner.
func TestReplaySMSLabelsAfterExpiry(t *testing.T) {
	data, err := os.ReadFile("../../../shared/data/sms_spam_collection/SMSSpamCollection")
	if err != nil {
		t.Skipf("real data sets not available: %v", err)
	}
	var msgs, labels []string
	for line := range strings.Lines(string(data)) {
		label, text, ok := strings.Cut(strings.TrimRight(line, "\r\n"), "\t")
		if !ok {
			t.Fatalf("line %q", line)
		}
		labels, msgs = append(labels, label), append(msgs, text)
	}
	const lag = 100
	var stream strings.Builder
	enc := json.NewEncoder(&stream)
	for i := range len(msgs) + lag {
		if i < len(msgs) {
			enc.Encode(map[string]string{"id": fmt.Sprint("m-", i), "text": msgs[i]})
		}
		if j := i - lag; j >= 0 {
			enc.Encode(map[string]string{"id": fmt.Sprint("m-", j), "label": labels[j]})
		}
	}
	spam := strings.Count(strings.Join(labels, " "), "spam")
	if len(msgs) != 5574 || spam != 747 {
		t.Fatalf("%d messages, %d spam; want the collection's 5574 and 747", len(msgs), spam)
	}
	f := writeFiles(t, map[string]string{"sms.jsonl": stream.String(), "c.yaml": `input: {format: jsonl, positive: [spam], negative: [ham]}
features: {bits: 18, text: {ngrams: 2}}
labels: {delayed: true, wait: 100, default_label: ham}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ogd, algorithm: ogd, loss: logistic, eta: 0.5, bias: true}
  - {name: maj, algorithm: majority}
`})
	code, out, errOut := run(t, "replay", "-c", f["c.yaml"], "--report", "json", f["sms.jsonl"])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var labelsRep struct {
		Joined, Expired, Late uint64
		ExpiredLearned        uint64 `json:"expired_learned"`
		Warning               string
	}
	var learners []map[string]json.RawMessage
	if err := json.Unmarshal(rep["labels"], &labelsRep); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rep["learners"], &learners); err != nil {
		t.Fatal(err)
	}
	if l := labelsRep; l.Joined != 0 || l.Late != 5574 || l.Expired != 5574 || l.ExpiredLearned != 5574 {
		t.Errorf("labels %+v, want all 5574 late, expired and learned with the default label", l)
	}
	for _, w := range []string{"most labels came after their events expired: 5574 late, 0 in time; 5574 events expired (wait 100 records)",
		"no round was scored on a real label: the 5574 rounds learned were scored against the default label"} {
		if !strings.Contains(labelsRep.Warning, w) {
			t.Errorf("labels warning %q, want it to say %q", labelsRep.Warning, w)
		}
	}
	if len(learners) != 3 {
		t.Fatalf("%d learners", len(learners))
	}
	for _, l := range learners {
		var d struct{ Rounds uint64 }
		json.Unmarshal(l["default_labeled"], &d)
		if string(l["rounds"]) != "0" || string(l["mistakes"]) != "0" || string(l["accuracy"]) != "null" || d.Rounds != 5574 {
			t.Errorf("%s: rounds %s, mistakes %s, accuracy %s, default-labeled rounds %d; want 0, 0, null, 5574",
				l["name"], l["rounds"], l["mistakes"], l["accuracy"], d.Rounds)
		}
	}
	if n := strings.Count(errOut, "level=WARN msg=\"labels: most labels came after their events expired"); n != 1 {
		t.Errorf("%d warnings in the log, want 1:\n%s", n, errOut)
	}

	code, out, errOut = run(t, "replay", "-c", f["c.yaml"], f["sms.jsonl"])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "warning: most labels came after their events expired: 5574 late") {
		t.Errorf("the text report does not warn:\n%s", out)
	}
	for name, r := range textRows(t, out) {
		if r["rounds"] != "0" || r["accuracy"] != "-" || !strings.HasPrefix(r["default-labeled"], "5574 rounds") {
			t.Errorf("%s: text rounds %q accuracy %q default-labeled %q, want 0, -, 5574 rounds\n%s", name, r["rounds"], r["accuracy"], r["default-labeled"], out)
		}
	}
}

// Replay equals live with default labels: a delayed stream (generate
// --delay 100 --never 0.2) preloaded into the embedded JetStream server
// and learned by `run --until-end` reports what its replay reports, the
// default-labeled rounds, the labels' warning and every digest included.
func TestRunEmbeddedDefaultLabelEqualsReplay(t *testing.T) {
	dir := t.TempDir()
	stream := filepath.Join(dir, "delayed.jsonl")
	if code, _, errOut := run(t, "generate", "-n", "3000", "--seed", "3", "--delay", "100", "--never", "0.2", "-o", stream); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errOut)
	}
	base, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf, _, _ := strings.Cut(string(base), "\nsource:")
	conf += "\nlabels: {delayed: true, wait: 150, default_label: 0}\nsource: {kind: embedded, subject: events, stream: EVENTS, durable: streamlearn}\n"
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	want := replayJSON(t, "-c", cfg, stream)
	if l := want.Labels; l == nil || l.ExpiredLearned == 0 || l.Joined == 0 || want.Learners[0].DefaultLabeled == nil ||
		want.Learners[0].DefaultLabeled.Rounds != l.ExpiredLearned || want.Learners[0].Rounds != l.Joined {
		t.Fatalf("replay: labels %+v, learner %+v: want rounds joined and rounds on the default label", l, want.Learners[0])
	}
	code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--report", "json", "--nats-port", "-1", "--http", "off", "--preload", stream)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", want)
}
