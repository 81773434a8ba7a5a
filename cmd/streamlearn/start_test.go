package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// demoTail writes the demo's records from the from-th (1-based) on to a
// file and returns its path and how many there are.
func demoTail(t *testing.T, from int) (string, int) {
	t.Helper()
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	tail := bytes.Join(lines[from-1:], nil)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("demo-from-%d.jsonl", from))
	if err := os.WriteFile(path, tail, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, len(lines) - from + 1
}

// TestRunStart: `run --start` begins a first start where it says — a
// JetStream durable at a stream sequence, a Kafka group at an offset — and
// the model learns exactly the records from there: its report equals a
// replay of them. With checkpoints, the next run restores the model
// (nothing committed is missing, nothing skipped), whatever --start says
// then. `record --start` copies from there too.
func TestRunStart(t *testing.T) {
	const from = 4001 // JetStream sequence, 1-based like the demo's lines
	tail, n := demoTail(t, from)
	learners := "learners:\n  - {name: pct, algorithm: perceptron}\n  - {name: ada, algorithm: adagrad}\n"

	t.Run("jetstream", func(t *testing.T) {
		emb, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: -1, StoreDir: t.TempDir(),
			Stream: "EVENTS", Subjects: []string{"events"}})
		if err != nil {
			t.Fatal(err)
		}
		defer emb.Shutdown()
		dir := t.TempDir()
		cfg := filepath.Join(dir, "js.yaml")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, "source: {kind: jetstream, url: %q, stream: EVENTS, subject: events}\n%s", emb.ClientURL(), learners), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := run(t, "publish", "-c", cfg, "../../testdata/demo.jsonl"); code != 0 {
			t.Fatalf("publish: exit %d: %s", code, errOut)
		}
		want := replayJSON(t, "-c", cfg, tail)
		if want.Events != uint64(n) {
			t.Fatalf("replay of the tail: %d events, want %d", want.Events, n)
		}
		ckpt := filepath.Join(dir, "state")
		args := []string{"run", "-c", cfg, "--until-end", "--report", "json", "--http", "off", "--checkpoint-dir", ckpt}
		code, out, errOut := run(t, append(args, "--start", fmt.Sprintf("offset:%d", from))...)
		if code != 0 {
			t.Fatalf("run --start offset:%d: exit %d: %s", from, code, errOut)
		}
		sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", want)
		// The restart: the durable and the checkpoint agree; --start no
		// longer applies.
		code, out, errOut = run(t, append(args, "--start", "latest", "--log-level", "info")...)
		if code != 0 {
			t.Fatalf("second run: exit %d: %s", code, errOut)
		}
		sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", want)
		if !strings.Contains(errOut, "start applies when the durable is created") {
			t.Errorf("second run: no word that --start did not apply:\n%s", errOut)
		}

		// The checkpoint lost: a rebuild learns from where the durable
		// was begun, not from the stream's first record.
		if err := os.RemoveAll(ckpt); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := run(t, args...); code != 1 || !strings.Contains(errOut, "no checkpoint") {
			t.Fatalf("run without its checkpoint: exit %d, want 1 and no checkpoint: %s", code, errOut)
		}
		code, out, errOut = run(t, append(args, "--rebuild")...)
		if code != 0 {
			t.Fatalf("run --rebuild: exit %d: %s", code, errOut)
		}
		sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", want)

		// The durable deleted and begun again past records the
		// checkpoint lacks: refused, then rebuilt up to the new start.
		if code, _, errOut := run(t, "publish", "-c", cfg, "../../testdata/demo.jsonl"); code != 0 {
			t.Fatalf("publish: exit %d: %s", code, errOut)
		}
		js := testbroker.JetStream(t, emb.ClientURL())
		if err := js.DeleteConsumer(t.Context(), "EVENTS", "streamlearn"); err != nil {
			t.Fatal(err)
		}
		code, _, errOut = run(t, append(args, "--start", "latest")...)
		if code != 1 || !strings.Contains(errOut, "the checkpoint is behind position 10001, where the consumer, which has committed nothing, begins (its start)") {
			t.Fatalf("run --start latest with a checkpoint behind it: exit %d, want 1 and the checkpoint behind the start: %s", code, errOut)
		}
		code, out, errOut = run(t, append(args, "--start", "latest", "--rebuild")...)
		if code != 0 {
			t.Fatalf("run --start latest --rebuild: exit %d: %s", code, errOut)
		}
		demo, _ := os.ReadFile("../../testdata/demo.jsonl")
		tailData, _ := os.ReadFile(tail)
		both := filepath.Join(dir, "tail-and-demo.jsonl")
		if err := os.WriteFile(both, append(tailData, demo...), 0o644); err != nil {
			t.Fatal(err)
		}
		sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", replayJSON(t, "-c", cfg, both))

		recorded := filepath.Join(dir, "recorded.jsonl")
		if code, _, errOut := run(t, "record", "-c", cfg, "--start", "offset:9991", "-o", recorded); code != 0 {
			t.Fatalf("record --start: exit %d: %s", code, errOut)
		}
		got, _ := os.ReadFile(recorded)
		want10, _ := demoTail(t, 4991)
		if w, _ := os.ReadFile(want10); !bytes.Equal(got, w) {
			t.Errorf("record --start offset:9991 wrote %d bytes, want the demo's last 10 records (%d bytes)", len(got), len(w))
		}
	})

	t.Run("kafka", func(t *testing.T) {
		bootstrap := testbroker.Kafka(t, 1, "events")[0]
		dir := t.TempDir()
		cfg := filepath.Join(dir, "kafka.yaml")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, "source: {kind: kafka, brokers: [%q], topic: events, group: start, session_timeout: 1s, heartbeat_interval: 200ms}\n%s", bootstrap, learners), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := run(t, "publish", "-c", cfg, "../../testdata/demo.jsonl"); code != 0 {
			t.Fatalf("publish: exit %d: %s", code, errOut)
		}
		want := replayJSON(t, "-c", cfg, tail)
		ckpt := filepath.Join(dir, "state")
		args := []string{"run", "-c", cfg, "--until-end", "--report", "json", "--http", "off", "--checkpoint-dir", ckpt}
		// Kafka offsets count from 0: line 4001 is offset 4000.
		code, out, errOut := run(t, append(args, "--start", fmt.Sprintf("offset:%d", from-1))...)
		if code != 0 {
			t.Fatalf("run --start offset:%d: exit %d: %s", from-1, code, errOut)
		}
		sameAsReplay(t, out, "kafka:events", want)
		code, out, errOut = run(t, append(args, "--start", "latest")...)
		if code != 0 {
			t.Fatalf("second run: exit %d: %s", code, errOut)
		}
		sameAsReplay(t, out, "kafka:events", want)
	})

	for _, c := range []struct{ args, err string }{
		{"run --start offset:x", `--start "offset:x": the offset must be a whole number`},
		{"run -c ../../config.yaml --start latest", "a file source reads from its first record"},
		{"record --kind nats --start offset:3", "a core NATS subscription receives what is published from now on"},
	} {
		if code, _, errOut := run(t, strings.Fields(c.args)...); code != 2 || !strings.Contains(errOut, c.err) {
			t.Errorf("%s: exit %d, %q; want exit 2 and %q", c.args, code, errOut, c.err)
		}
	}
}
