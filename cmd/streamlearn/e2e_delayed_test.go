package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestE2EDelayedLabels: a delayed stream (generate --delay, labels as label
// events up to 200 events late, 10% never) produced into a kfake broker
// process by kcat, keyed by id, and published to Debian's nats-server
// JetStream. `run --until-end` on each, with labels.delayed, reports
// exactly what the file replay reports: every count, the labels section
// and every digest. `record` of the topic gives the file back, label
// events in their places, so a replay of the recording is the live run.
func TestE2EDelayedLabels(t *testing.T) {
	t.Parallel() // see parallelTests
	kcat := e2eTool(t, "kcat", "kcat")
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	sl, kfakeBin := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	stream := filepath.Join(dir, "delayed.jsonl")
	runProc(t, ctx, dir, sl, "generate", "-n", "8000", "--seed", "7", "--delay", "100", "--never", "0.1", "-o", stream)

	const labels = "labels: {delayed: true, wait: 1000, max_pending: 5000}\n"
	norm := func(what string, data []byte) []byte {
		t.Helper()
		if !bytes.Contains(data, []byte(`"expired":`)) || bytes.Contains(data, []byte(`"expired":0,`)) {
			t.Fatalf("%s: want events expired:\n%s", what, data)
		}
		return normDelayed(t, what, data)
	}
	replayCfg := e2eConfig(t, dir, "replay.yaml", labels)
	want := norm("replay", runProc(t, ctx, dir, sl, "replay", "-c", replayCfg, "--report", "json", stream))

	// kcat: key TAB value per line, so that a label lands on its event's
	// partition (one partition here: one model, as the replay).
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	var keyed bytes.Buffer
	for line := range bytes.Lines(data) {
		var r struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(line, &r); err != nil || r.Key == "" {
			t.Fatalf("generated %q: no key (%v)", line, err)
		}
		fmt.Fprintf(&keyed, "%s\t%s", r.Key, line)
	}
	kcatIn := filepath.Join(dir, "kcat.txt")
	if err := os.WriteFile(kcatIn, keyed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	bootstrap := startKfake(t, ctx, dir, kfakeBin, 1)
	runProc(t, ctx, dir, kcat, "-P", "-b", bootstrap, "-t", "events", "-K", "\t", "-l", "-X", "enable.idempotence=true", kcatIn)
	kcfg := e2eConfig(t, dir, "kafka.yaml", labels+fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: delayed}\n", bootstrap))
	sameReport(t, "run on kafka", norm("kafka", runProc(t, ctx, dir, sl, "run", "-c", kcfg, "--until-end", "--report", "json", "--http", "off")), want)

	rec := filepath.Join(dir, "recorded.jsonl")
	runProc(t, ctx, dir, sl, "record", "-c", kcfg, "-o", rec)
	sameFile(t, "record of the delayed topic", rec, stream)

	url, _ := natsServer(t, ctx, natsBin, dir)
	jsStream(t, ctx, url, "EVENTS", "events")
	runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", stream)
	jcfg := e2eConfig(t, dir, "js.yaml", labels+fmt.Sprintf("source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: delayed}\n", url))
	sameReport(t, "run on jetstream", norm("jetstream", runProc(t, ctx, dir, sl, "run", "-c", jcfg, "--until-end", "--report", "json", "--http", "off")), want)
}
