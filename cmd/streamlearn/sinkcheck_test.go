package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// TestRunMissingJetStreamSink: run whose predictions go to a JetStream
// stream that does not exist stops at start with an error naming the sink
// and the stream, before its source is opened: the durable consumer it
// would read with is not made on the input stream, and nothing is
// consumed. (Before, the durable was made first.)
func TestRunMissingJetStreamSink(t *testing.T) {
	emb, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	demo := "../../testdata/demo.jsonl"
	if code, _, errOut := run(t, "publish", "--create-stream", "--kind", "jetstream", "--url", emb.ClientURL(), "--stream", "EVENTS", "--subject", "events", demo); code != 0 {
		t.Fatalf("publish: %d %s", code, errOut)
	}
	cfg := filepath.Join(t.TempDir(), "missing.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `source: {kind: jetstream, url: %q, stream: EVENTS, subject: events, durable: learner}
sinks:
  predictions: {kind: jetstream, stream: PREDS, subject: preds}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`, emb.ClientURL()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off")
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Consumer(ctx, "EVENTS", "learner"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the durable after a run that failed at start: %v, want none", err)
	}
	if code != 1 || !strings.Contains(errOut, "sinks.predictions") || !strings.Contains(errOut, `stream "PREDS" not found`) || out != "" {
		t.Errorf("run with a missing sink stream: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRunSinksOneFile: a config whose predictions and dead letters go to
// one file stops run at start, exit 1, naming the second sink, the file
// and this process as its holder, before the source is read: nothing is
// written to the file. (Before, the two sinks' buffers were appended to
// the file in turn, each cut in the middle of a line.)
func TestRunSinksOneFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := filepath.Join(dir, "one.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `source: {kind: file, path: ../../testdata/demo.jsonl}
sinks:
  predictions: {kind: file, path: %q}
  dead_letters: {kind: file, path: %q}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`, out, out), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off")
	want := "sinks.dead_letters: file sink " + out + ": in use by pid " + strconv.Itoa(os.Getpid()) + " on "
	if code != 1 || stdout != "" || !strings.Contains(errOut, want) {
		t.Fatalf("run with two sinks in one file: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, errOut, want)
	}
	if b, err := os.ReadFile(out); err != nil || len(b) != 0 {
		t.Errorf("the file after the refused run: %d bytes (%v), want none", len(b), err)
	}
}

// TestRunEmbeddedCreatesSinkStream: run on its embedded server with a
// JetStream predictions sink whose stream does not exist creates that
// stream (once, said at INFO) and publishes a prediction per event into
// it: that server lives inside the run, so no one could have created the
// stream. With create_stream: false the run stops at start as before,
// naming the stream. (Before, it always stopped.)
func TestRunEmbeddedCreatesSinkStream(t *testing.T) {
	store := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "embedded.yaml")
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(cfg, fmt.Appendf(nil, `source: {kind: embedded, port: -1, store_dir: %q}
sinks:
  predictions: {kind: jetstream, stream: PRED, subject: preds%s}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`, store, extra), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(", create_stream: false")
	if code, _, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off"); code != 1 || !strings.Contains(errOut, `stream "PRED" not found`) {
		t.Fatalf("run with create_stream: false: exit %d, stderr %q", code, errOut)
	}
	write("")
	code, _, errOut := run(t, "run", "-c", cfg, "--until-end", "--http", "off", "--log-level", "info", "--preload", "../../testdata/demo.jsonl")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	if n := strings.Count(errOut, `msg="created JetStream stream"`); n != 1 || !strings.Contains(errOut, "stream=PRED subjects=preds") {
		t.Errorf("stderr says %d times that it created the stream, want once naming PRED and preds:\n%s", n, errOut)
	}
	emb, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: -1, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	st, err := testbroker.JetStream(t, emb.ClientURL()).Stream(t.Context(), "PRED")
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.State.Msgs != 5000 || len(info.Config.Subjects) != 1 || info.Config.Subjects[0] != "preds" || info.Config.Storage != jetstream.FileStorage {
		t.Errorf("stream PRED after the run: %d messages, subjects %v, storage %v; want 5000, [preds], file", info.State.Msgs, info.Config.Subjects, info.Config.Storage)
	}
}
