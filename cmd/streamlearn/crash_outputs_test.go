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
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
