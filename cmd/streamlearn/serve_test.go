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
)

// TestServe: a serving replica (`serve`) following the checkpoints of a
// learning `run` answers exactly what the run answers whenever both hold
// the same model, by the digest every answer carries: the same
// predictions, scores and model events, as the run learns on and the
// replica reloads. A model file exported from the checkpoint is served
// with that digest too, with -c or alone. The replica's /v1/report and /metrics are the
// model's.
func TestServe(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve.yaml")
	ckpt := filepath.Join(dir, "state")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "source: {kind: embedded}\ncheckpoint: {dir: %q, every: 500}\n%s", ckpt, warmLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory that does not exist is an error, not an empty store
	// created; an empty one serves nothing and is not ready.
	if code, _, errOut := run(t, "serve", "-c", cfg, "--checkpoint-dir", filepath.Join(dir, "missing"), "--http", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "no such file or directory") {
		t.Errorf("serve of a missing directory: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("serve created the directory it was to read")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	idle := startRun(t, "serve", "-c", cfg, "--checkpoint-dir", empty, "--http", "127.0.0.1:0")
	for _, path := range []string{"/readyz", "/v1/predict"} {
		resp, err := http.Post(idle.base+path, "application/json", strings.NewReader(`{"features":{"v":1}}`))
		if path == "/readyz" {
			resp, err = http.Get(idle.base + path)
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a replica without a model: %s answers %d, want 503", path, resp.StatusCode)
		}
	}
	idle.stop()

	live := startRun(t, "run", "-c", cfg, "--nats-port", "-1", "--http", "127.0.0.1:0", "--preload", "../../testdata/demo.jsonl")
	replica := startRun(t, "serve", "-c", cfg, "--poll", "100ms", "--http", "127.0.0.1:0")

	// Events to predict: the demo's first ten, without their labels.
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.WriteString("[")
	for i, line := range bytes.SplitN(data, []byte("\n"), 11)[:10] {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		delete(ev, "label")
		b, _ := json.Marshal(ev)
		if i > 0 {
			body.WriteString(",")
		}
		body.Write(b)
	}
	body.WriteString("]")
	predict := func(base string) ([]api.PredictResponse, bool) {
		resp, err := http.Post(base+"/v1/predict", "application/json", bytes.NewReader(body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, false
		}
		var out []api.PredictResponse
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return out, true
	}
	// same waits until both answer from a model of events records, of
	// one digest, and compares the answers.
	same := func(what string, events uint64, a, b string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			x, okx := predict(a)
			y, oky := predict(b)
			if okx && oky && x[0].ModelEvents == events && y[0].ModelEvents == events && x[0].ModelSHA256 == y[0].ModelSHA256 {
				for i := range x {
					x[i].ModelTime, y[i].ModelTime = time.Time{}, time.Time{}
				}
				jx, _ := json.Marshal(x)
				jy, _ := json.Marshal(y)
				if !bytes.Equal(jx, jy) {
					t.Errorf("%s: answers of one model differ:\n%s\n%s", what, jx, jy)
				}
				return x[0].ModelSHA256
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no answers of one model of %d events: %v %v, %v %v", what, events, okx, x, oky, y)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := same("after the demo", 5000, live.base, replica.base)

	// The run learns on; the replica follows its next checkpoint: at
	// 5,500 events, checkpoint.every's (5,600 would wait for the 5 s
	// timer's).
	var url string
	if _, rest, ok := strings.Cut(live.stderr.String(), "embedded NATS JetStream at "); ok {
		url = strings.TrimSuffix(strings.Fields(rest)[0], ":")
	}
	more := filepath.Join(dir, "more.jsonl")
	if err := os.WriteFile(more, bytes.Join(bytes.SplitN(data, []byte("\n"), 501)[:500], []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", more); code != 0 {
		t.Fatalf("publish: exit %d: %s", code, errOut)
	}
	second := same("after 500 more", 5500, live.base, replica.base)
	if second == first {
		t.Error("the model's digest did not change as it learned")
	}
	get := func(base, path string) []byte {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	var lr, rr []struct {
		Partition int32 `json:"partition"`
		Learners  []struct {
			Name        string `json:"name"`
			Mistakes    uint64 `json:"mistakes"`
			StateSHA256 string `json:"state_sha256"`
		} `json:"learners"`
	}
	if err := json.Unmarshal(get(live.base, "/v1/report"), &lr); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(get(replica.base, "/v1/report"), &rr); err != nil {
		t.Fatal(err)
	}
	if jl, jr := fmt.Sprint(lr), fmt.Sprint(rr); jl != jr || len(rr) != 1 {
		t.Errorf("reports: live %s, replica %s", jl, jr)
	}
	if m := string(get(replica.base, "/metrics")); !strings.Contains(m, fmt.Sprintf("streamlearn_mistakes_total{learner=\"pct\",partition=\"0\"} %d\n", rr[0].Learners[0].Mistakes)) {
		t.Errorf("the replica's /metrics lack the model's mistakes:\n%.2000s", m)
	}

	// The checkpoint exported, served as a model file: the same digest.
	model := filepath.Join(dir, "model.slm")
	if code, _, errOut := run(t, "export", "-c", cfg, "-o", model, filepath.Join(ckpt, "partition-0.ckpt")); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	fromFile := startRun(t, "serve", "-c", cfg, "--model", model, "--http", "127.0.0.1:0")
	same("a model file", 5500, live.base, fromFile.base)
	fromFile.stop()
	// Exported with -c, the file carries its configuration: served alone.
	alone := startRun(t, "serve", "--model", model, "--http", "127.0.0.1:0")
	same("a model file alone", 5500, live.base, alone.base)
	alone.stop()
	replica.stop()
	live.stop()
}
