package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// TestCheckpointOfAnotherGroup: a Kafka group's checkpoints are its own.
// Group gx learns the demo topic with checkpoints; group gy, a new group
// pointed at the same checkpoint directory, would restore gx's models and
// skip every record without a prediction. It stops instead, exit 1, with
// the error naming both groups and the ways out, before anything is
// learned: no prediction written, nothing committed for gy, gx's
// checkpoints untouched.
func TestCheckpointOfAnotherGroup(t *testing.T) {
	bootstrap := testbroker.Kafka(t, 2, "events")[0]
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "state")
	config := func(group string) (cfg, predictions string) {
		predictions = filepath.Join(dir, group+"-predictions.jsonl")
		cfg = e2eConfig(t, dir, group+".yaml", fmt.Sprintf(
			"source: {kind: kafka, brokers: [%q], topic: events, group: %s, session_timeout: 1s, heartbeat_interval: 200ms}\n"+
				"checkpoint: {dir: %q, every: 1000}\nsinks: {predictions: {kind: file, path: %q}}\n", bootstrap, group, ckpt, predictions))
		return cfg, predictions
	}
	gx, gxPredictions := config("gx")
	gy, gyPredictions := config("gy")
	if code, _, errOut := run(t, "publish", "-c", gx, "../../testdata/demo.jsonl"); code != 0 {
		t.Fatalf("publish: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, "run", "-c", gx, "--until-end", "--report", "json", "--http", "off"); code != 0 {
		t.Fatalf("group gx: exit %d: %s", code, errOut)
	}
	if n := lines(t, gxPredictions); n != 5000 {
		t.Fatalf("group gx wrote %d predictions, want 5000", n)
	}
	before, err := os.ReadFile(filepath.Join(ckpt, "partition-0.ckpt"))
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run(t, "run", "-c", gy, "--until-end", "--report", "json", "--http", "off")
	if code == 0 || out != "" {
		t.Errorf("group gy on gx's checkpoints: exit %d, report %q; want exit 1 and none", code, out)
	}
	for _, w := range []string{"the checkpoint is of kafka group gx, this source reads as kafka group gy",
		"Run as kafka group gx", "give kafka group gy a checkpoint directory or bucket of its own", "--reset", "--accept"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("group gy's error does not say %q:\n%s", w, errOut)
		}
	}
	if n := lines(t, gyPredictions); n != 0 {
		t.Errorf("group gy wrote %d predictions, want none", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 5 * time.Second}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "gy", Topics: map[string][]int{"events": {0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics["events"] {
		if p.CommittedOffset >= 0 {
			t.Errorf("group gy committed offset %d of partition %d, want nothing committed", p.CommittedOffset, p.Partition)
		}
	}
	if after, err := os.ReadFile(filepath.Join(ckpt, "partition-0.ckpt")); err != nil || string(after) != string(before) {
		t.Errorf("gx's checkpoint of partition 0 changed by gy's run (%v)", err)
	}
}

// lines counts the lines of the file at path, 0 when there is none.
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestRunOtherDurableCheckpoint: `run` as JetStream durable db on the
// checkpoints of durable da is refused as another consumer's, with the
// ways out, before db is created; --reset, --rebuild and --accept are
// honoured.
func TestRunOtherDurableCheckpoint(t *testing.T) {
	dir := t.TempDir()
	conf := func(durable string) string {
		t.Helper()
		path := filepath.Join(dir, "j"+durable+".yaml")
		body := fmt.Sprintf("source: {kind: embedded, port: -1, durable: %s, store_dir: %q}\ncheckpoint: {dir: %q}\n%s",
			durable, filepath.Join(dir, "js"), filepath.Join(dir, "ckj"), warmLearners)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ja, jb := conf("da"), conf("db")
	events := func(what, out string) uint64 {
		t.Helper()
		var r struct {
			Source string `json:"source"`
			pipeline.Report
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: %v: %s", what, err, out)
		}
		return r.Events
	}
	if code, _, errOut := run(t, "run", "-c", ja, "--until-end", "--http", "off", "--preload", "../../testdata/demo.jsonl"); code != 0 {
		t.Fatalf("run as da: exit %d: %s", code, errOut)
	}
	code, _, errOut := run(t, "run", "-c", jb, "--until-end", "--http", "off")
	if code == 0 {
		t.Fatal("run as db on da's checkpoints: exit 0")
	}
	for _, w := range []string{"the checkpoint is of jetstream durable da, this source reads as jetstream durable db",
		"Run as jetstream durable da", "`run --rebuild`", "`run --reset`", "`run --accept`"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("run as db on da's checkpoints does not say %q:\n%s", w, errOut)
		}
	}
	// The refusal created no durable db: a start given now applies.
	code, out, errOut := run(t, "run", "-c", jb, "--until-end", "--http", "off", "--report", "json", "--reset", "--start", "offset:4001")
	if code != 0 {
		t.Fatalf("run as db with --reset: exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "the durable exists") {
		t.Errorf("the refused run created durable db:\n%s", errOut)
	}
	if n := events("db with --reset", out); n != 1000 {
		t.Errorf("db with --reset from offset 4001: %d events, want 1000 (a fresh model)", n)
	}
	// da on db's checkpoint: --rebuild learns the stream again through
	// da's commit.
	code, out, errOut = run(t, "run", "-c", ja, "--until-end", "--http", "off", "--report", "json", "--rebuild")
	if code != 0 {
		t.Fatalf("run as da with --rebuild: exit %d: %s", code, errOut)
	}
	if n := events("da with --rebuild", out); n != 5000 {
		t.Errorf("da with --rebuild: %d events, want the 5000 of the stream", n)
	}
	// db on da's checkpoint again: --accept takes da's model over.
	code, out, errOut = run(t, "run", "-c", jb, "--until-end", "--http", "off", "--report", "json", "--accept")
	if code != 0 {
		t.Fatalf("run as db with --accept: exit %d: %s", code, errOut)
	}
	if n := events("db with --accept", out); n != 5000 {
		t.Errorf("db with --accept: %d events, want da's model's 5000", n)
	}
}
