package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// TestAnswerOnSinks: with answer: ada, every prediction message run
// publishes, on a file sink and on NATS (the embedded server), carries
// the filter's verdict: ada's prediction, the same object as its entry
// among the learners', with the label as the configuration names it
// (class: spam or ham) and no other convention (no label field); the
// file and the subject carry the same messages; the report names ada as
// the answering learner.
func TestAnswerOnSinks(t *testing.T) {
	emb, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 6000)
	sub, err := nc.ChanSubscribe("preds", msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	file, cfg := filepath.Join(dir, "predictions.jsonl"), filepath.Join(dir, "answer.yaml")
	const learnersYAML = `input: {positive: [spam], negative: [ham]}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: logistic, normalized: false, bias: true}
answer: ada
`
	run1 := func(sink string) string {
		t.Helper()
		if err := os.WriteFile(cfg, fmt.Appendf(nil, "%ssource: {kind: file, path: ../../testdata/demo.jsonl}\nsinks:\n  predictions: %s\n", learnersYAML, sink), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off", "--report", "json")
		if code != 0 {
			t.Fatalf("run with predictions %s: exit %d: %s", sink, code, errOut)
		}
		return out
	}
	report := run1(fmt.Sprintf("{kind: file, path: %q}", file))
	run1(fmt.Sprintf("{kind: nats, url: %q, subject: preds}", emb.ClientURL()))

	var rep struct {
		Answer string `json:"answer"`
	}
	if err := json.Unmarshal([]byte(report), &rep); err != nil || rep.Answer != "ada" {
		t.Errorf("the report names %q as the answer (%v), want ada:\n%.300s", rep.Answer, err, report)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) != 5000 {
		t.Fatalf("%d prediction messages in the file, want 5000", len(lines))
	}
	classes := map[string]int{}
	for i, line := range lines {
		var m struct {
			Answer      json.RawMessage   `json:"answer"`
			Predictions []json.RawMessage `json:"predictions"`
		}
		if err := json.Unmarshal(line, &m); err != nil || len(m.Predictions) != 2 {
			t.Fatalf("message %d: %v: %s", i, err, line)
		}
		var a struct {
			Learner, Class     string
			Score, Probability *float64
			Label              *int
		}
		if err := json.Unmarshal(m.Answer, &a); err != nil || a.Learner != "ada" || a.Score == nil || a.Probability == nil || a.Label != nil ||
			!bytes.Equal(m.Answer, m.Predictions[1]) || bytes.Contains(line, []byte(`"label"`)) {
			t.Fatalf("message %d: answer %s (%v), want ada's prediction %s, with class, score and probability, no label", i, m.Answer, err, m.Predictions[1])
		}
		classes[a.Class]++
		select {
		case msg := <-msgs:
			if !bytes.Equal(msg.Data, line) {
				t.Fatalf("message %d on NATS:\n%s\nin the file:\n%s", i, msg.Data, line)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d messages on NATS, want 5000", i)
		}
	}
	if len(classes) != 2 || classes["spam"] == 0 || classes["ham"] == 0 {
		t.Errorf("the answers' classes: %v, want spam and ham", classes)
	}
	// The text report's last line names the answering learner.
	if err := os.WriteFile(cfg, []byte(learnersYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, "replay", "-c", cfg, "../../testdata/demo.jsonl"); code != 0 || !strings.HasSuffix(out, "\nanswer: ada, the filter's verdict\n") {
		t.Errorf("replay: exit %d, want the report to end naming ada as the answer:\n%s%s", code, out, errOut)
	}
}

// TestCheckAnswer: check prints which learner answers for the filter and
// its bound: the first learner when answer is not set, the one it names
// when it is, and with a global model beside the models per key the
// bound of what a key is served; a name no learner has is an error
// naming the learners configured.
func TestCheckAnswer(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "answer.yaml")
	const learnersYAML = "learners:\n  - {name: pct, algorithm: perceptron}\n  - {name: ada, algorithm: adagrad, normalized: false}\n  - {name: wm, algorithm: weighted-majority, experts: [pct, ada]}\n"
	for _, tc := range []struct {
		extra string
		want  []string
	}{
		{"", []string{"\nanswer: pct (the first learner: set answer to choose another)", "\n its bound: the margin certificate R/√M"}},
		{"answer: wm\n", []string{"\nanswer: wm (configured by answer)", "\n its bound: expected regret against the best expert ≤ √(2T ln d)"}},
		{"answer: ada\nmodels: {by: key, global: true}\n", []string{"\nanswer: ada (configured by answer)", "\n its bound: regret against the zero vector ≤",
			"\n per key: what is served for a key, its model's or the global one's: mistakes ≤ 2.41·(1 + the fewer of the two models' mistakes on the key)"}},
	} {
		if err := os.WriteFile(cfg, []byte(learnersYAML+tc.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, "check", "-c", cfg)
		if code != 0 {
			t.Fatalf("check with %q: exit %d: %s", tc.extra, code, errOut)
		}
		out = regexp.MustCompile(` +`).ReplaceAllString(out, " ") // the columns' padding
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("check with %q: no %q in\n%s", tc.extra, w, out)
			}
		}
	}
	if err := os.WriteFile(cfg, []byte(learnersYAML+"answer: adagrad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "check", "-c", cfg); code != 1 || !strings.Contains(errOut, `answer: "adagrad" is not the name of a configured learner (learners: pct, ada, wm)`) {
		t.Errorf("check with an unknown answer: exit %d: %s", code, errOut)
	}
}
