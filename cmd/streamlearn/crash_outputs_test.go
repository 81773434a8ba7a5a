package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
)

// TestE2ECrashOutputs is "outputs are as durable as the model" under kill
// -9: a JetStream stream of labeled events with a bad record among every
// 200, `run` with checkpoints, its predictions published to a JetStream
// stream and its dead letters to a file, SIGKILLed four times (each time a
// random while after a new checkpoint) and resumed, then run to the end.
// Every bad record has a dead letter in the file (at least once: the
// records since the last commit are processed again after a kill), and
// nothing else does; the predictions stream holds exactly one prediction
// per good record (the repeats carry the same Nats-Msg-Id, which the
// server drops).
func TestE2ECrashOutputs(t *testing.T) {
	t.Parallel() // see parallelTests
	sl, _ := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, dir := e2eStart(t, 3*e2eTimeout)
	n := 60000
	if raceEnabled() {
		n = 15000
	}
	stream, _ := e2eStream(t, ctx, dir, sl, n, 5)
	url, _ := natsServer(t, ctx, natsBin, dir)
	js, _ := jsStream(t, ctx, url, "EVENTS", "events")
	preds, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PREDS", Subjects: []string{"preds"}})
	if err != nil {
		t.Fatal(err)
	}

	// The events, with every 200th replaced by a bad record: stream
	// sequence k+1 holds line k.
	f, err := os.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[int64]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var acks []jetstream.PubAckFuture
	for k := 0; sc.Scan(); k++ {
		line := bytes.Clone(sc.Bytes())
		if k%200 == 199 {
			line = fmt.Appendf(nil, `{"id": bad-%d`, k)
			bad[int64(k+1)] = true
		}
		a, err := js.PublishAsync("events", line)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	f.Close()
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}

	ckpt := filepath.Join(dir, "state")
	deadFile := filepath.Join(dir, "dead.jsonl")
	cfg := e2eConfig(t, dir, "outputs.yaml", fmt.Sprintf(`source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: outputs}
checkpoint: {dir: %q, every: 1000}
sinks:
  predictions: {kind: jetstream, subject: preds, stream: PREDS}
  dead_letters: {kind: file, path: %q}
`, url, ckpt, deadFile))
	stamp := func() int64 { return modTime(filepath.Join(ckpt, "partition-0.ckpt")).UnixNano() }
	r := rand.New(rand.NewPCG(13, 13))
	for kill := range 4 {
		killAfterCheckpoint(t, ctx, dir, sl, cfg, kill, stamp, r)
	}
	runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")

	// Dead letters: every bad record, at least once, and nothing else.
	data, err := os.ReadFile(deadFile)
	if err != nil {
		t.Fatal(err)
	}
	dead := map[int64]int{}
	lines := 0
	for line := range bytes.Lines(data) {
		var d struct {
			Source    string `json:"source"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		}
		if err := json.Unmarshal(line, &d); err != nil || d.Source != "jetstream:EVENTS/outputs" || d.Partition != 0 {
			t.Fatalf("dead letter %q: %v", line, err)
		}
		dead[d.Offset]++
		lines++
	}
	for seq := range bad {
		if dead[seq] == 0 {
			t.Errorf("bad record at sequence %d has no dead letter", seq)
		}
	}
	for seq := range dead {
		if !bad[seq] {
			t.Errorf("dead letter for sequence %d, a good record", seq)
		}
	}

	// Predictions: one per good record, exactly.
	info, err := preds.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := preds.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for got := uint64(0); got < info.State.Msgs; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for m := range batch.Messages() {
			var pr struct {
				Source    string `json:"source"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
			}
			if err := json.Unmarshal(m.Data(), &pr); err != nil || pr.Source != "jetstream:EVENTS/outputs" {
				t.Fatalf("prediction %q: %v", m.Data(), err)
			}
			if id, want := m.Headers().Get("Nats-Msg-Id"), "jetstream:EVENTS/outputs/0/"+strconv.FormatInt(pr.Offset, 10)+"/prediction"; id != want {
				t.Fatalf("prediction of sequence %d has Nats-Msg-Id %q, want %q", pr.Offset, id, want)
			}
			seen[pr.Offset]++
			k++
		}
		if k == 0 {
			t.Fatalf("%d of %d predictions read, then none", got, info.State.Msgs)
		}
		got += uint64(k)
	}
	good := n - len(bad)
	if int(info.State.Msgs) != good || len(seen) != good {
		t.Errorf("predictions stream: %d messages for %d distinct records, want %d of each", info.State.Msgs, len(seen), good)
	}
	for seq, c := range seen {
		if c != 1 || bad[seq] || seq < 1 || seq > int64(n) {
			t.Errorf("sequence %d: %d predictions (bad record: %v)", seq, c, bad[seq])
		}
	}
	t.Logf("%d records (%d bad), four SIGKILLs: %d dead-letter lines for %d bad records; %d predictions in the stream, one per good record",
		n, len(bad), lines, len(dead), info.State.Msgs)
}

// TestE2ECrashFileOutputs is "a file output holds whole lines only,
// whatever the crash; one file has one writer" under kill -9: a JetStream
// stream of labeled events with a bad record among every 200, `run` with
// checkpoints, its predictions and its dead letters in files, SIGKILLed
// five times (each a random moment of the 100ms after a new checkpoint)
// and resumed, then run to the end. Every line of both files is a JSON
// object of the run's source; the copies a kill repeats (the records
// since the last commit are processed again) are byte for byte the first;
// after dropping them by identity (source, partition, offset) each
// record of the stream is in exactly one file, once: a prediction for each
// good record, a dead letter for each bad one. The final model equals a
// replay of the stream. (Before, a kill left a torn last line that the
// next run appended to: `…"offset":14643,"round":339{"id":"e-6645",…`.)
// STREAMLEARN_SOAK=1 kills 20 times, on a stream five times longer.
func TestE2ECrashFileOutputs(t *testing.T) {
	t.Parallel() // see parallelTests
	sl, _ := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	kills, n, deadline := 5, 60000, 3*e2eTimeout
	if os.Getenv("STREAMLEARN_SOAK") == "1" {
		kills, n, deadline = 20, 300000, 8*e2eTimeout
	}
	if raceEnabled() {
		n /= 4
	}
	ctx, dir := e2eStart(t, deadline)
	clean := filepath.Join(dir, "clean.jsonl")
	runProc(t, ctx, dir, sl, "generate", "-n", strconv.Itoa(n), "--seed", "17", "-o", clean)
	stream, bad := withBadRecords(t, clean, filepath.Join(dir, "stream.jsonl"), 200)
	good := n - len(bad)
	want := normReportLabeled(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", e2eConfig(t, dir, "replay.yaml", ""), "--report", "json", stream), "", n, good)
	url, _ := natsServer(t, ctx, natsBin, dir)
	jsStream(t, ctx, url, "EVENTS", "events")
	runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", stream)

	ckpt := filepath.Join(dir, "state")
	predFile, deadFile := filepath.Join(dir, "predictions.jsonl"), filepath.Join(dir, "dead.jsonl")
	cfg := e2eConfig(t, dir, "files.yaml", fmt.Sprintf(`source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: files}
checkpoint: {dir: %q, every: 1000}
sinks:
  predictions: {kind: file, path: %q}
  dead_letters: {kind: file, path: %q}
`, url, ckpt, predFile, deadFile))
	stamp := func() int64 { return modTime(filepath.Join(ckpt, "partition-0.ckpt")).UnixNano() }
	r := rand.New(rand.NewPCG(17, 17))
	torn := 0 // torn tails removed at a start
	var positions []int64
	for kill := range kills {
		torn += strings.Count(killWithin(t, ctx, dir, sl, cfg, kill, stamp, r, 100*time.Millisecond), "removed a torn last line")
		cp, err := checkpoint.ReadFile(filepath.Join(ckpt, "partition-0.ckpt"))
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, cp.Position)
	}
	for i, pos := range positions {
		if i > 0 && pos <= positions[i-1] || pos >= int64(n) {
			t.Fatalf("checkpoint positions after each kill %v: want increasing positions inside the stream of %d", positions, n)
		}
	}
	p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	p.wait(t, ctx)
	torn += strings.Count(p.stderr.String(), "removed a torn last line")
	sameReport(t, fmt.Sprintf("run resumed after %d SIGKILLs", kills), normReportLabeled(t, "run", p.stdout.Bytes(), "jetstream:EVENTS/files", n, good), want)

	// outputs reads a file of outputs: each line's first copy by offset,
	// and the number of lines.
	outputs := func(what, path string) (map[int64][]byte, int) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Errorf("%s: the file ends in a line without its end: %.200q", what, data[max(0, len(data)-200):])
		}
		first := map[int64][]byte{}
		lines := 0
		for line := range bytes.Lines(data) {
			lines++
			var o struct {
				Source    string `json:"source"`
				Partition *int32 `json:"partition"`
				Offset    *int64 `json:"offset"`
			}
			if err := json.Unmarshal(line, &o); err != nil || o.Source != "jetstream:EVENTS/files" || o.Partition == nil || *o.Partition != 0 || o.Offset == nil {
				t.Fatalf("%s line %d is not an output of partition 0 of the source (%v): %.300q", what, lines, err, line)
			}
			if f, ok := first[*o.Offset]; !ok {
				first[*o.Offset] = line
			} else if !bytes.Equal(f, line) {
				t.Fatalf("%s line %d, a repeat of sequence %d, differs from its first copy:\n%s\n%s", what, lines, *o.Offset, f, line)
			}
		}
		return first, lines
	}
	preds, predLines := outputs("predictions", predFile)
	dead, deadLines := outputs("dead letters", deadFile)
	for seq := int64(1); seq <= int64(n); seq++ {
		_, p := preds[seq]
		_, d := dead[seq]
		if p == bad[seq] || d != bad[seq] {
			t.Errorf("sequence %d (bad record: %v): prediction %v, dead letter %v; want one, of its kind", seq, bad[seq], p, d)
		}
	}
	if len(preds)+len(dead) != n {
		t.Errorf("%d predictions and %d dead letters for %d records: outputs of records that are not in the stream", len(preds), len(dead), n)
	}
	t.Logf("%d records (%d bad), %d SIGKILLs at checkpoint positions %v: %d prediction lines for %d records, %d dead-letter lines for %d; %d torn tails removed at a start",
		n, len(bad), kills, positions, predLines, len(preds), deadLines, len(dead), torn)
}

// withBadRecords copies the JSONL file from to to with every every-th
// line replaced by a record that is not JSON, and returns to and the
// stream sequences (line numbers from 1) of the bad records.
func withBadRecords(t *testing.T, from, to string, every int) (string, map[int64]bool) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	bad := map[int64]bool{}
	k := 0
	for line := range bytes.Lines(data) {
		k++
		if k%every == 0 {
			line = fmt.Appendf(nil, "{\"id\": bad-%d\n", k)
			bad[int64(k)] = true
		}
		out.Write(line)
	}
	if err := os.WriteFile(to, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return to, bad
}
