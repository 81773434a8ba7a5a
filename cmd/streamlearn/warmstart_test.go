package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// warmLearners are learners of every kind a model file carries: linear,
// adaptive, over a hypothesis class, and Weighted-Majority over learners.
const warmLearners = `learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: hinge, bias: true}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - {name: wm, algorithm: weighted-majority, experts: [pct, ada, soa], seed: 1}
`

// TestWarmStart: a model trained by replay on a recording starts the live
// service on Kafka (`replay --save`, `run --warm-start`), and the service
// goes on exactly as one replay of the recording and the topic: the same
// counts, mistakes, bounds and model digests, its report naming the model
// file by its SHA-256. The run's checkpoint, exported (`export`), starts a
// replay (`models.warm_start`) that goes on exactly as well. A model of
// another configuration is refused, naming what differs.
func TestWarmStart(t *testing.T) {
	const cut = 3000
	head := filepath.Join(t.TempDir(), "head.jsonl")
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if err := os.WriteFile(head, bytes.Join(lines[:cut], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	tail, _ := demoTail(t, cut+1)

	bootstrap := testbroker.Kafka(t, 1, "events")[0]
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kafka.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "source: {kind: kafka, brokers: [%q], topic: events, group: warm, session_timeout: 1s, heartbeat_interval: 200ms}\n%s", bootstrap, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.slm")
	trained := replayJSON(t, "-c", cfg, "--save", model, head)
	if trained.Events != cut {
		t.Fatalf("replay of the head: %d events, want %d", trained.Events, cut)
	}
	file, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	// The same replay writes the same file.
	model2 := filepath.Join(dir, "model2.slm")
	replayJSON(t, "-c", cfg, "--save", model2, head)
	if again, _ := os.ReadFile(model2); !bytes.Equal(again, file) {
		t.Error("two replays of the same file saved different model files")
	}
	if code, _, errOut := run(t, "replay", "-c", cfg, "--save", head, head); code != 1 || !strings.Contains(errOut, "is the input") {
		t.Errorf("replay --save over its input: exit %d: %s", code, errOut)
	}

	if code, _, errOut := run(t, "publish", "-c", cfg, tail); code != 0 {
		t.Fatalf("publish: exit %d: %s", code, errOut)
	}
	want := replayJSON(t, "-c", cfg, head, tail)
	ckpt := filepath.Join(dir, "state")
	args := []string{"run", "-c", cfg, "--until-end", "--report", "json", "--http", "off", "--checkpoint-dir", ckpt, "--warm-start", model}
	code, out, errOut := run(t, args...)
	if code != 0 {
		t.Fatalf("run --warm-start: exit %d: %s", code, errOut)
	}
	sameWarm(t, "run --warm-start", out, "kafka:events", want, sum, cut)
	// Restarted, the model is its checkpoint's, which still names the
	// file it started from.
	code, out, errOut = run(t, args...)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	sameWarm(t, "restarted", out, "kafka:events", want, sum, cut)

	// inspect counts the model file's events in: the checkpoint holds
	// 5000 events at position 1999 of the topic, 3000 of them the file's.
	if code, out, errOut := run(t, "inspect", "-c", cfg, filepath.Join(ckpt, "partition-0.ckpt")); code != 0 || !strings.Contains(out, "report verified") {
		t.Errorf("inspect of a warm-started checkpoint: exit %d: %s%s", code, out, errOut)
	}

	// The checkpoint exported starts another model: a replay of the head
	// again from it is one replay of head, tail and head.
	exported := filepath.Join(dir, "exported.slm")
	code, out, errOut = run(t, "export", "-c", cfg, "-o", exported, filepath.Join(ckpt, "partition-0.ckpt"))
	if code != 0 || !strings.Contains(out, "5000 events") || !strings.Contains(out, "from the checkpoint of kafka:events partition 0 at position 1999") {
		t.Fatalf("export: exit %d: %s%s", code, out, errOut)
	}
	b, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	sum2 := sha256.Sum256(b)
	if !strings.Contains(out, hex.EncodeToString(sum2[:])) {
		t.Errorf("export does not print the file's SHA-256:\n%s", out)
	}
	// From the store a config names, the same file; never over a
	// checkpoint.
	withStore := filepath.Join(dir, "store.yaml")
	if err := os.WriteFile(withStore, fmt.Appendf(nil, "checkpoint: {dir: %q}\n%s", ckpt, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	fromStore := filepath.Join(dir, "from-store.slm")
	if code, _, errOut := run(t, "export", "-c", withStore, "-o", fromStore, "--partition", "0"); code != 0 {
		t.Fatalf("export --partition 0: exit %d: %s", code, errOut)
	}
	if b2, _ := os.ReadFile(fromStore); !bytes.Equal(b2, b) {
		t.Error("export from the store and from the file differ")
	}
	for _, a := range [][]string{
		{"export", "-o", filepath.Join(ckpt, "partition-0.ckpt"), filepath.Join(ckpt, "partition-0.ckpt")},
		{"export", "-o", filepath.Join(ckpt, "partition-0.ckpt"), exported},
	} {
		if code, _, errOut := run(t, a...); code != 1 || !strings.Contains(errOut, "write the model file elsewhere") {
			t.Errorf("%v: exit %d: %s", a, code, errOut)
		}
	}
	cfg2 := filepath.Join(dir, "warm.yaml")
	if err := os.WriteFile(cfg2, fmt.Appendf(nil, "models: {warm_start: %q}\n%s", exported, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, "check", "-c", cfg2); code != 0 || !strings.Contains(out, "new models start from "+exported+" (sha256 "+hex.EncodeToString(sum2[:])+") (checkpoint of kafka:events partition 0") {
		t.Errorf("check of a config with models.warm_start: exit %d: %s%s", code, out, errOut)
	}
	again := replayJSON(t, "-c", cfg2, head)
	wantAgain := replayJSON(t, "-c", cfg, head, tail, head)
	js, _ := json.Marshal(again)
	sameWarm(t, "replay from the exported checkpoint", fmt.Sprintf(`{"source":"file",%s`, js[1:]), "file", wantAgain, sum2, 5000)

	// Another configuration: refused before anything is read, naming the
	// learner added.
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte(warmLearners+"  - {name: extra, algorithm: ogd, bias: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	otherWarm := filepath.Join(dir, "other-warm.yaml")
	if err := os.WriteFile(otherWarm, fmt.Appendf(nil, "models: {warm_start: %q}\n%s  - {name: extra, algorithm: ogd, bias: true}\n", model, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, a := range [][]string{
		{"replay", "-c", other, "--warm-start", model, head},
		{"check", "-c", otherWarm},
		{"serve", "-c", other, "--model", model, "--http", "127.0.0.1:0"},
		{"export", "-c", other, "-o", filepath.Join(dir, "x.slm"), filepath.Join(ckpt, "partition-0.ckpt")},
	} {
		code, _, errOut := run(t, a...)
		if code != 1 || !strings.Contains(errOut, "was written by another model configuration (learner extra added)") {
			t.Errorf("%s with a model of another configuration: exit %d: %s", a[0], code, errOut)
		}
	}
	// A learner added to a service with a warm start and checkpoints: the
	// file (of the old learners) is not needed, as every partition has a
	// checkpoint, and --reset-learner applies.
	extra := filepath.Join(dir, "extra.yaml")
	if err := os.WriteFile(extra, fmt.Appendf(nil, "source: {kind: kafka, brokers: [%q], topic: events, group: warm, session_timeout: 1s, heartbeat_interval: 200ms}\n%s  - {name: extra, algorithm: ogd, bias: true}\n", bootstrap, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "run", "-c", extra, "--until-end", "--report", "json", "--http", "off", "--checkpoint-dir", ckpt, "--warm-start", model, "--reset-learner", "extra")
	if code != 0 || !strings.Contains(errOut, "the warm start cannot start models") || !strings.Contains(out, `"name":"extra"`) {
		t.Errorf("--reset-learner beside a warm start of the old learners: exit %d: %s%s", code, out, errOut)
	}

	// A checkpoint is not a model file; a damaged model file is refused.
	if code, _, errOut := run(t, "replay", "-c", cfg, "--warm-start", filepath.Join(ckpt, "partition-0.ckpt"), head); code != 1 || !strings.Contains(errOut, "a checkpoint, not a model file: write one of it with `streamlearn export") {
		t.Errorf("a checkpoint as a model file: exit %d: %s", code, errOut)
	}
	file[len(file)/2] ^= 1
	bad := filepath.Join(dir, "bad.slm")
	if err := os.WriteFile(bad, file, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "replay", "-c", cfg, "--warm-start", bad, head); code != 1 || !strings.Contains(errOut, "model file corrupt: SHA-256 mismatch") {
		t.Errorf("a damaged model file: exit %d: %s", code, errOut)
	}
}

// sameWarm fails t unless out, a JSON report of source, is want but for
// its warm start, which names the model file of SHA-256 sum and the
// events it held, and counts the events after apart.
func sameWarm(t *testing.T, what, out, source string, want pipeline.Report, sum [32]byte, events uint64) {
	t.Helper()
	var live struct {
		Source string `json:"source"`
		pipeline.Report
	}
	if err := json.Unmarshal([]byte(out), &live); err != nil {
		t.Fatalf("%s: %v: %s", what, err, out)
	}
	if w := live.WarmStart; w == nil || w.SHA256 != hex.EncodeToString(sum[:]) || w.Events != events {
		t.Errorf("%s: warm start %+v, want sha256 %x, %d events", what, w, sum, events)
	} else if a := w.After; a == nil || a.Events != live.Events-events || len(a.Learners) != len(live.Learners) ||
		a.Learners[0].Rounds != a.Events { // every event of the demo is labeled
		// The records after the start apart: the service's report has
		// them, and its checkpoint keeps them.
		t.Errorf("%s: after the warm start %+v, want %d events", what, a, live.Events-events)
	}
	live.WarmStart = nil
	js, _ := json.Marshal(live)
	sameAsReplay(t, string(js), source, want)
}

// TestWarmStartIdleKafka: members of a group with a warm start serve the
// trained model on every partition assigned, before any record comes;
// and an empty topic is still an error without --allow-empty, the
// file's model notwithstanding.
func TestWarmStartIdleKafka(t *testing.T) {
	dir := t.TempDir()
	head := filepath.Join(dir, "head.jsonl")
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(head, bytes.Join(bytes.SplitAfter(data, []byte("\n"))[:1000], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	bootstrap := testbroker.Kafka(t, 2, "empty")[0]
	cfg := filepath.Join(dir, "kafka.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "source: {kind: kafka, brokers: [%q], topic: empty, group: idle, session_timeout: 1s, heartbeat_interval: 200ms}\n%s", bootstrap, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.slm")
	replayJSON(t, "-c", cfg, "--save", model, head)

	code, _, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off", "--warm-start", model)
	if code != 1 || !strings.Contains(errOut, "no model to report") {
		t.Errorf("run --until-end on an empty topic with a warm start: exit %d: %s", code, errOut)
	}

	live := startRun(t, "run", "-c", cfg, "--http", "127.0.0.1:0", "--warm-start", model)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(live.base + "/v1/report")
		if err != nil {
			t.Fatal(err)
		}
		var reps []struct {
			Partition int32  `json:"partition"`
			Events    uint64 `json:"events"`
		}
		err = json.NewDecoder(resp.Body).Decode(&reps)
		resp.Body.Close()
		if err == nil && len(reps) == 2 && reps[0].Events == 1000 && reps[1].Events == 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trained model is not served on both partitions: %+v (%v)", reps, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Post(live.base+"/v1/predict?partition=1", "application/json", strings.NewReader(`{"features":{"v":0.9}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("predict on an idle partition with a warm start: %d", resp.StatusCode)
	}
	// Stopped having learned nothing: as without a warm start, exit 1.
	live.cancel()
	if code := <-live.done; code != 1 || !strings.Contains(live.stderr.String(), "no model to report") {
		t.Errorf("stopped having learned nothing: exit %d: %s", code, live.stderr.String())
	}
}
