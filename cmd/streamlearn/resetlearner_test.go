package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// TestRunResetLearner: a learner added to the configuration of a model
// with checkpoints. `run` refuses the checkpoint, naming the learner and
// --reset-learner; `run --reset-learner` restores the others, which go on
// exactly as an uninterrupted run of them (a replay of the whole file),
// while the new learner learns from the checkpoint on, exactly as a
// replay of the records after it; the same flag on the next restart does
// nothing.
func TestRunResetLearner(t *testing.T) {
	dir := t.TempDir()
	demo, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(demo), "\n")
	const cut = 3000
	stream := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(stream, []byte(strings.Join(lines[:cut], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	kept := "  - {name: pct, algorithm: perceptron, bias: true}\n  - {name: ogd, algorithm: ogd, loss: logistic, eta: 0.5, bias: true}\n"
	added := "  - {name: extra, algorithm: adagrad, bias: true}\n"
	write := func(name, learners string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, fmt.Appendf(nil, "source: {kind: file, path: %q}\nlearners:\n%s", stream, learners), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	before, after, alone := write("before.yaml", kept), write("after.yaml", kept+added), write("alone.yaml", added)
	ckpt := filepath.Join(dir, "state")
	args := func(cfg string, more ...string) []string {
		return append([]string{"run", "-c", cfg, "--until-end", "--report", "json", "--http", "off", "--checkpoint-dir", ckpt, "--log-level", "info"}, more...)
	}
	if code, _, errOut := run(t, args(before)...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	// The stream goes on.
	if err := os.WriteFile(stream, demo, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, args(after)...); code != 1 || !strings.Contains(errOut, "learner extra (adagrad) added") || !strings.Contains(errOut, "`run --reset-learner extra`") {
		t.Fatalf("a learner added, no --reset-learner: exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, args(after, "--reset-learner", "extra")...)
	if code != 0 || !strings.Contains(errOut, "learners reset") {
		t.Fatalf("--reset-learner extra: exit %d: %s", code, errOut)
	}
	var got pipeline.Report
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	whole := replayJSON(t, "-c", before, "../../testdata/demo.jsonl")
	tail, _ := demoTail(t, cut+1)
	fresh := replayJSON(t, "-c", alone, tail)
	if got.Events != whole.Events || len(got.Learners) != 3 {
		t.Fatalf("%d events, %d learners; want %d, 3", got.Events, len(got.Learners), whole.Events)
	}
	for i, want := range append(whole.Learners, fresh.Learners...) {
		g := got.Learners[i]
		if g.Name != want.Name || g.Rounds != want.Rounds || g.Mistakes != want.Mistakes || g.StateSHA256 != want.StateSHA256 {
			t.Errorf("learner %s: %d rounds, %d mistakes, digest %.12s; want %s's %d, %d, %.12s", g.Name, g.Rounds, g.Mistakes, g.StateSHA256, want.Name, want.Rounds, want.Mistakes, want.StateSHA256)
		}
	}
	// The flag left in place: nothing to reset, the model as it was.
	code, again, errOut := run(t, args(after, "--reset-learner", "extra")...)
	if code != 0 || !strings.Contains(errOut, "nothing to reset") || strings.Contains(errOut, "learners reset") {
		t.Fatalf("restart with the same --reset-learner: exit %d: %s", code, errOut)
	}
	var g2 pipeline.Report
	if err := json.Unmarshal([]byte(again), &g2); err != nil {
		t.Fatal(err)
	}
	for i := range got.Learners {
		if g2.Learners[i].StateSHA256 != got.Learners[i].StateSHA256 {
			t.Errorf("restart: learner %s changed", got.Learners[i].Name)
		}
	}
	// inspect with the configuration before says what differs; with the
	// one after, it verifies the checkpoint.
	if code, _, errOut := run(t, "inspect", "-c", before, ckpt); code != 1 || !strings.Contains(errOut, "another model configuration than -c's (learner extra dropped)") {
		t.Errorf("inspect -c before.yaml: exit %d: %s", code, errOut)
	}
	if code, out, errOut := run(t, "inspect", "-c", after, ckpt); code != 0 || !strings.Contains(out, "report verified") {
		t.Errorf("inspect -c after.yaml: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, args(after, "--reset-learner", "")...); code != 2 || !strings.Contains(errOut, "empty learner name") {
		t.Errorf("--reset-learner '': exit %d: %s", code, errOut)
	}
}
