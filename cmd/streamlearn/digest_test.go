package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/api"
	"github.com/streamlearn/streamlearn/internal/checkpoint"
)

// learnWithCheckpoints runs `run --until-end` over the demo file (each
// event given a key of five when keyed) with checkpoints in dir/state,
// under models (a `models:` line, or nothing), with its HTTP API on addr
// ("off": none), and returns the config file and the checkpoint of
// partition 0.
func learnWithCheckpoints(t *testing.T, dir, models string, keyed bool, addr string) (cfg, ckpt string) {
	t.Helper()
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "events.jsonl")
	if keyed {
		var b bytes.Buffer
		i := 0
		for line := range bytes.Lines(data) {
			fmt.Fprintf(&b, `{"key":"k%d",%s`, i%5, line[1:])
			i++
		}
		data = b.Bytes()
	}
	if err := os.WriteFile(input, data, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	cfg = filepath.Join(dir, "learn.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "source: {kind: file, path: %q}\ncheckpoint: {dir: %q}\n%s%s", input, state, models, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "run", "-c", cfg, "--until-end", "--report", "json", "--http", addr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	return cfg, filepath.Join(state, "partition-0.ckpt")
}

// TestModelDigestOneName: the model's digest is one figure under one
// name, model_sha256, the SHA-256 of the model's state without the
// dashboard's curves. A run with its HTTP API on keeps curves in its
// checkpoint's state, which a run without one does not: the same model
// in other bytes, of one digest. For the checkpoint with curves, `export` prints
// it (and the file's own SHA-256 as file_sha256), `inspect` prints it in
// text and JSON, `serve` logs it (at info), and /v1/predict answers with it, from
// the checkpoint and from the exported model file alike.
func TestModelDigestOneName(t *testing.T) {
	_, plainCkpt := learnWithCheckpoints(t, t.TempDir(), "", false, "off")
	plain, err := checkpoint.ReadFile(plainCkpt)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(plain.State) // a state without curves: its bytes' SHA-256
	want := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	cfg, ckpt := learnWithCheckpoints(t, dir, "", false, "127.0.0.1:0")
	if c, err := checkpoint.ReadFile(ckpt); err != nil || len(c.State) <= len(plain.State) {
		t.Fatalf("the run with its HTTP API on: a state of %d bytes (%v), want more than the %d without", len(c.State), err, len(plain.State))
	}

	model := filepath.Join(dir, "model.slm")
	code, out, errOut := run(t, "export", "-c", cfg, "-o", model, ckpt)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	file, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	fileSum := sha256.Sum256(file)
	if !strings.Contains(out, "\nmodel_sha256 "+want+"\n") || !strings.Contains(out, "\nfile_sha256 "+hex.EncodeToString(fileSum[:])+"\n") {
		t.Errorf("export prints\n%s\nwant model_sha256 %s and file_sha256 %x", out, want, fileSum)
	}

	if code, out, errOut := run(t, "inspect", "-c", cfg, ckpt); code != 0 || !strings.Contains(out, "\nmodel_sha256 "+want+"\n") {
		t.Errorf("inspect: exit %d, prints\n%s%s\nwant model_sha256 %s", code, out, errOut, want)
	}
	code, out, errOut = run(t, "inspect", "--report", "json", ckpt)
	got, err := readInspected([]byte(out))
	if code != 0 || err != nil || len(got) != 1 || got[0].ModelSHA256 != want {
		t.Errorf("inspect --report json: exit %d, %v: %s%s\nwant model_sha256 %s", code, err, out, errOut, want)
	}

	for _, args := range [][]string{{"--checkpoint-dir", filepath.Dir(ckpt)}, {"--model", model}} {
		srv := startRun(t, append([]string{"serve", "-c", cfg, "--http", "127.0.0.1:0", "--log-level", "info"}, args...)...)
		resp, err := http.Post(srv.base+"/v1/predict", "application/json", strings.NewReader(`{"features":{"v":0.5,"w":0.5}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answers []api.PredictResponse
		if err := json.Unmarshal(b, &answers); err != nil {
			var one api.PredictResponse
			if json.Unmarshal(b, &one) == nil {
				answers = append(answers, one)
			}
		}
		if len(answers) != 1 || answers[0].ModelSHA256 != want {
			t.Errorf("serve %s: /v1/predict answers %s, want model_sha256 %s", args[0], b, want)
		}
		srv.stop()
		if log := srv.stderr.String(); !strings.Contains(log, "model_sha256="+want) {
			t.Errorf("serve %s does not log model_sha256=%s:\n%s", args[0], want, log)
		}
	}
}

// TestInspectKeyed: inspect reads a checkpoint of models per key
// (models.by: key, with a global model): without -c its report as saved,
// with -c the report recomputed from the state and verified; the totals
// of the keys' models have no state digest, printed as "-". Neither
// prints a rate: the seconds of a checkpoint's report are the last
// process's only.
func TestInspectKeyed(t *testing.T) {
	dir := t.TempDir()
	cfg, ckpt := learnWithCheckpoints(t, dir, "models: {by: key, global: true}\n", true, "off")
	for _, args := range [][]string{{"inspect", ckpt}, {"inspect", "-c", cfg, ckpt}} {
		code, out, errOut := run(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errOut)
			continue
		}
		verified := len(args) == 4
		for _, w := range []string{"source file:", "events 5000  labeled 5000  predicted 0  invalid 0\n", "model_sha256 ",
			map[bool]string{true: "report verified", false: "report as saved"}[verified]} {
			if !strings.Contains(out, w) {
				t.Errorf("%s does not print %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		if strings.Contains(out, "events/s") {
			t.Errorf("%s prints a rate:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, "\npct ") || !strings.Contains(out, " -\n") {
			t.Errorf("%s: no learner line with the digest \"-\":\n%s", strings.Join(args, " "), out)
		}
	}
}
