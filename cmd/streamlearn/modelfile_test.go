package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/api"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// demoHead writes the demo's first n lines to a file of the test's and
// returns its path.
func demoHead(t *testing.T, n int) string {
	t.Helper()
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("demo-head-%d.jsonl", n))
	if err := os.WriteFile(path, bytes.Join(bytes.SplitAfter(data, []byte("\n"))[:n], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// servedAnswers starts `serve` with args, asks it to predict the demo's
// first ten events (without their labels), stops it and returns the
// answers, their model times zeroed (the times the copies were made).
func servedAnswers(t *testing.T, args ...string) []api.PredictResponse {
	t.Helper()
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var evs []map[string]any
	for _, line := range bytes.SplitN(data, []byte("\n"), 11)[:10] {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		delete(ev, "label")
		evs = append(evs, ev)
	}
	body, _ := json.Marshal(evs)
	r := startRun(t, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	defer r.stop()
	resp, err := http.Post(r.base+"/v1/predict", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("serve %v: /v1/predict answered %d: %s", args, resp.StatusCode, b)
	}
	var out []api.PredictResponse
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	for i := range out {
		out[i].ModelTime = time.Time{}
	}
	return out
}

// TestServeModelAlone: a model file carries its configuration, so `serve
// --model FILE` alone answers exactly what `serve -c CONFIG --model FILE`
// answers (the same digest, labels, scores and probabilities); a -c of
// another model is refused, the first difference named; a model file of
// format version 1 (written by the previous build, without its
// configuration) still serves and starts models with -c, and without it
// is refused, saying a configuration is needed.
func TestServeModelAlone(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(cfg, []byte("source: {kind: embedded}\nhttp: {addr: 127.0.0.1:0}\nfeatures: {bits: 16}\n"+warmLearners+
		"  - {name: cal, algorithm: perceptron, calibrate: true}\nanswer: cal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.slm")
	trained := replayJSON(t, "-c", cfg, "--save", model, demoHead(t, 1000))

	withConfig := servedAnswers(t, "-c", cfg, "--model", model)
	alone := servedAnswers(t, "--model", model)
	if len(alone) != 10 || len(alone[0].Predictions) != 5 || alone[0].ModelEvents != trained.Events {
		t.Fatalf("serve --model alone: %+v", alone)
	}
	if a, b := jsonText(t, alone), jsonText(t, withConfig); a != b {
		t.Errorf("serve --model alone answers\n%s\nwith -c\n%s", a, b)
	}
	if alone[0].Answer.Learner != "cal" {
		t.Errorf("serve --model alone answers with %q: the file's configuration lost answer: cal", alone[0].Answer.Learner)
	}
	if alone[0].Predictions[4].Probability == nil {
		t.Error("the calibrated learner has no probability: the file's configuration lost calibrate")
	}

	// Another model's configuration: refused, naming the first
	// difference (the HTTP address is -c's own and may differ).
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte("http: {addr: 127.0.0.1:1}\nfeatures: {bits: 16}\n"+strings.Replace(warmLearners, "loss: hinge", "loss: hinge, eta: 0.5", 1)+
		"  - {name: cal, algorithm: perceptron, calibrate: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "serve", "-c", other, "--model", model, "--http", "127.0.0.1:0"); code != 1 ||
		!strings.Contains(errOut, "the first difference is learners[1] (ada).eta: unset in the model file, 0.5 in this configuration") {
		t.Errorf("serve with -c of another model: exit %d: %s", code, errOut)
	}

	// A model file of format version 1: served with -c, refused without.
	old := "../../testdata/model-v1.slm"
	if code, _, errOut := run(t, "serve", "--model", old, "--http", "127.0.0.1:0"); code != 1 ||
		!strings.Contains(errOut, "carries no configuration (a model file of format version 1, or a checkpoint exported without -c): give -c") {
		t.Errorf("serve of a version 1 model file without -c: exit %d: %s", code, errOut)
	}
	v1 := servedAnswers(t, "-c", "../../testdata/model-v1.yaml", "--model", old)
	// 300 events, and the model digest the previous build's serve
	// answers this file with.
	if v1[0].ModelEvents != 300 || v1[0].ModelSHA256 != "05c2de1054e8785a6dd4cba3e3a13fd2964b721cff01460414c2bcb94255736b" {
		t.Errorf("a version 1 model file served: %d events, model_sha256 %s", v1[0].ModelEvents, v1[0].ModelSHA256)
	}
	if code, _, errOut := run(t, "replay", "--warm-start", old, demoHead(t, 10)); code != 1 || !strings.Contains(errOut, "the model file carries none, being of format version 1") {
		t.Errorf("replay --warm-start of a version 1 model file without -c: exit %d: %s", code, errOut)
	}
	warm := replayJSON(t, "-c", "../../testdata/model-v1.yaml", "--warm-start", old, demoHead(t, 10))
	if warm.Events != 310 || warm.WarmStart == nil || warm.WarmStart.Events != 300 {
		t.Errorf("replay --warm-start of a version 1 model file: %d events, warm start %+v", warm.Events, warm.WarmStart)
	}
}

// jsonText is v as JSON.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWarmStartAfter: a replay of B started from the model a replay of A
// saved reports, beside its cumulative figures, those of B's records
// alone: B's events, and each learner's rounds, mistakes, accuracy and
// loss equal to those of one replay of A then B less those of the replay
// of A (two replays that know nothing of warm starts), in JSON and in
// text. Without -c, the replay is of the configuration the file carries.
func TestWarmStartAfter(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	cfg := filepath.Join(dir, "after.yaml")
	if err := os.WriteFile(cfg, []byte(warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	a := demoHead(t, 3000)
	b, n := demoTail(t, 3001)
	model := filepath.Join(dir, "a.slm")
	repA := replayJSON(t, "-c", cfg, "--save", model, a)
	repAB := replayJSON(t, "-c", cfg, a, b)
	warm := replayJSON(t, "-c", cfg, "--warm-start", model, b)
	w := warm.WarmStart
	if w == nil || w.After == nil {
		t.Fatalf("no section of the records after the warm start: %+v", w)
	}
	after := w.After
	if after.Events != uint64(n) || after.Events != repAB.Events-repA.Events || after.Labeled != repAB.Labeled-repA.Labeled ||
		warm.Events != repAB.Events || len(after.Learners) != len(repAB.Learners) {
		t.Fatalf("after the warm start: %+v, want %d events", after, n)
	}
	for i, l := range after.Learners {
		ab, a := repAB.Learners[i], repA.Learners[i]
		rounds, mistakes := ab.Rounds-a.Rounds, ab.Mistakes-a.Mistakes
		if l.Name != ab.Name || l.Rounds != rounds || l.Mistakes != mistakes || l.Loss != ab.Loss-a.Loss ||
			l.Accuracy != 1-float64(mistakes)/float64(rounds) || rounds != uint64(n) {
			t.Errorf("%s after the warm start: %+v, want %d rounds, %d mistakes, loss %g", ab.Name, l, rounds, mistakes, ab.Loss-a.Loss)
		}
	}
	// Without -c, the replay takes the configuration the file carries.
	alone := replayJSON(t, "--warm-start", model, b)
	alone.Seconds, warm.Seconds = 0, 0
	if x, y := jsonText(t, alone), jsonText(t, warm); x != y {
		t.Errorf("replay --warm-start without -c:\n%s\nwith -c:\n%s", x, y)
	}
	code, out, errOut := run(t, "replay", "-c", cfg, "--warm-start", model, b)
	if code != 0 {
		t.Fatalf("replay --warm-start: exit %d: %s", code, errOut)
	}
	l := after.Learners[1]
	head := fmt.Sprintf("after the warm start (model file %s, 3000 events): events %d  labeled %d  predicted 0  invalid 0\n", w.SHA256[:12], n, n)
	row := fmt.Sprintf("%s %s %d %d %.4f %.4g\n", l.Name, l.Algorithm, l.Rounds, l.Mistakes, l.Accuracy, l.Loss)
	_, section, ok := strings.Cut(out, head)
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	if !ok || !strings.Contains(strings.Join(rows, "\n"), row) {
		t.Errorf("the text report lacks the section %q with %q:\n%s", head, row, out)
	}
}

// TestInspectModel: inspect shows a model file, its report verified
// against the configuration it carries, and that configuration;
// --config writes it alone, a file a replay warm-starts from the model
// with. A model file of format version 1 carries none, and says so.
func TestInspectModel(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	cfg := filepath.Join(dir, "inspect.yaml")
	if err := os.WriteFile(cfg, []byte("source: {kind: embedded}\nhttp: {addr: 127.0.0.1:0}\n"+warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	head := demoHead(t, 500)
	model := filepath.Join(dir, "model.slm")
	replayJSON(t, "-c", cfg, "--save", model, head)
	code, out, errOut := run(t, "inspect", model)
	if code != 0 || !strings.Contains(out, "model.slm: model file format 2,") || !strings.Contains(out, "report verified") ||
		!strings.Contains(out, "  no time: the same inputs make the same file\n") || strings.Contains(out, "1970") ||
		!strings.Contains(out, "  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, max: 1, points: 33}}\n") {
		t.Errorf("inspect of a model file: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = run(t, "inspect", "--report", "json", model)
	js, err := readInspected([]byte(out))
	if code != 0 || err != nil || len(js) != 1 || js[0].Kind != "model" || !js[0].Verified || js[0].Config == "" {
		t.Errorf("inspect --report json of a model file: exit %d (%v): %s%s", code, err, out, errOut)
	}
	code, out, errOut = run(t, "inspect", "--config", model)
	if code != 0 || strings.Contains(out, "source") || strings.Contains(out, "http") {
		t.Fatalf("inspect --config: exit %d: %s%s", code, out, errOut)
	}
	own := filepath.Join(dir, "own.yaml")
	if err := os.WriteFile(own, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := replayJSON(t, "-c", own, "--warm-start", model, head); rep.Events != 1000 {
		t.Errorf("a replay with the configuration the model carries: %d events, want 1000", rep.Events)
	}
	if code, _, errOut := run(t, "inspect", "--config", "../../testdata/model-v1.slm"); code != 1 || !strings.Contains(errOut, "carries no configuration") {
		t.Errorf("inspect --config of a version 1 model file: exit %d: %s", code, errOut)
	}
	if code, out, _ := run(t, "inspect", "../../testdata/model-v1.slm"); code != 0 || !strings.Contains(out, "configuration: none") {
		t.Errorf("inspect of a version 1 model file: exit %d: %s", code, out)
	}
}

// TestRunWarmStartAlone: run --warm-start without -c learns with the
// model sections the file carries (its learners, its answer) on the
// embedded server, as replay --warm-start without -c does: the same
// report of the records after the file's.
func TestRunWarmStartAlone(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("features: {bits: 16}\n"+warmLearners+"answer: ada\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.slm")
	replayJSON(t, "-c", cfg, "--save", model, demoHead(t, 1000))
	tail, _ := demoTail(t, 1001)
	want := replayJSON(t, "--warm-start", model, tail)
	code, out, errOut := run(t, "run", "--warm-start", model, "--until-end", "--preload", tail, "--nats-port", "-1",
		"--store", filepath.Join(dir, "store"), "--http", "off", "--report", "json")
	if code != 0 {
		t.Fatalf("run --warm-start without -c: exit %d: %s", code, errOut)
	}
	var got pipeline.Report
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &got); err != nil {
		t.Fatalf("run's report: %v\n%s", err, out)
	}
	if got.Answer != "ada" || got.Events != want.Events || len(got.Learners) != len(want.Learners) {
		t.Fatalf("run --warm-start without -c: answer %q, %d events, %d learners; want ada, %d, %d", got.Answer, got.Events, len(got.Learners), want.Events, len(want.Learners))
	}
	for i, l := range got.Learners {
		if w := want.Learners[i]; l.Name != w.Name || l.Mistakes != w.Mistakes || l.StateSHA256 != w.StateSHA256 {
			t.Errorf("learner %d: %s %d mistakes %s, want %s %d %s", i, l.Name, l.Mistakes, l.StateSHA256, w.Name, w.Mistakes, w.StateSHA256)
		}
	}
}

// TestReplaySaveSays: replay --save says on stderr what it wrote, as
// export does: the file, its events, labeled events and learners, and the
// model_sha256 and file_sha256 inspect prints of that file; the report on
// stdout is as without --save.
func TestReplaySaveSays(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	cfg := filepath.Join(dir, "save.yaml")
	if err := os.WriteFile(cfg, []byte("features: {bits: 16}\n"+warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	model, head := filepath.Join(dir, "model.slm"), demoHead(t, 300)
	code, out, errOut := run(t, "replay", "--report", "json", "-c", cfg, "--save", model, head)
	if code != 0 {
		t.Fatalf("replay --save: exit %d: %s", code, errOut)
	}
	var rep pipeline.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Events != 300 {
		t.Fatalf("replay --save's report: %v, %d events, want 300:\n%s", err, rep.Events, out)
	}
	code, ins, insErr := run(t, "inspect", "--report", "json", model)
	got, err := readInspected([]byte(ins))
	if code != 0 || err != nil || len(got) != 1 || got[0].ModelSHA256 == "" || got[0].FileSHA256 == "" {
		t.Fatalf("inspect --report json %s: exit %d, %v: %s%s", model, code, err, ins, insErr)
	}
	want := fmt.Sprintf("%s: 300 events, 300 labeled, 4 learners, from the replay of %s\nmodel_sha256 %s\nfile_sha256 %s\n",
		model, head, got[0].ModelSHA256, got[0].FileSHA256)
	if !strings.Contains(errOut, want) {
		t.Errorf("replay --save's stderr:\n%s\nwant\n%s", errOut, want)
	}
}
