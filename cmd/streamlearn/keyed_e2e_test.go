package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testmode"
)

// keyedLearners are the learners of the models per key of the tests: a
// margin learner, a calibrated AdaGrad, SOA over a class of thresholds
// and Weighted-Majority over the three, on small weight vectors.
const keyedLearners = `features: {bits: 10}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: hinge, bias: true, calibrate: true}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - {name: wm, algorithm: weighted-majority, experts: [pct, ada, soa], seed: 2}
`

// keyedEvents writes n events of keys user-0 .. user-(keys-1) in random
// order, each key with a threshold of its own (so each key's model is its
// own), and returns the file and each key's lines in order.
func keyedEvents(t *testing.T, dir string, n, keys int) (string, map[string][][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	var all bytes.Buffer
	byKey := map[string][][]byte{}
	for i := range n {
		k := rng.IntN(keys)
		if i < keys {
			k = i // every key has events
		}
		key := fmt.Sprintf("user-%d", k)
		v := rng.Float64()
		label := 0
		if v >= float64(k%7+1)/8 {
			label = 1
		}
		line := fmt.Appendf(nil, `{"id":"e-%d","key":%q,"features":{"v":%.4f,"w":%.4f},"label":%d}`, i, key, v, rng.Float64(), label)
		all.Write(append(line, '\n'))
		byKey[key] = append(byKey[key], line)
	}
	path := filepath.Join(dir, "keyed.jsonl")
	if err := os.WriteFile(path, all.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, byKey
}

// keyAlone is what a key's model must be: the report of a replay of the
// key's events alone, by one model; and, with a global model, its
// choice's counts (mixOf).
type keyAlone struct {
	events   uint64
	learners []string // name rounds mistakes loss state_sha256, per learner
	mix      []pipeline.MixCounts
}

// mixOf simulates, with a global model per partition (models.global),
// each key's choice between its model and its partition's global model:
// the partition's events in the stream's order (partOf says each key's
// partition), the rule of pipeline.Keyed. It sets want's mix counts.
func mixOf(t *testing.T, dir, stream string, partOf map[string]int32, want map[string]keyAlone) {
	t.Helper()
	c, err := config.Load(filepath.Join(dir, "alone.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	globals := map[int32]*pipeline.Pipeline{}
	own := map[string]*pipeline.Pipeline{}
	mix := map[string][]pipeline.MixCounts{}
	var ev event.Event
	for line := range bytes.Lines(data) {
		if err := dec.Decode(bytes.TrimSpace(line), &ev); err != nil {
			t.Fatal(err)
		}
		key := string(ev.Key)
		part := partOf[key]
		if globals[part] == nil {
			globals[part], _ = pipeline.New(c)
		}
		gp, _ := globals[part].Process(&ev)
		gpreds := append([]online.Prediction(nil), gp...)
		if own[key] == nil {
			own[key], _ = pipeline.New(c)
			mix[key] = make([]pipeline.MixCounts, len(gpreds))
		}
		preds, _ := own[key].Process(&ev)
		for i := range preds {
			m := &mix[key][i]
			chosen := gpreds[i]
			if m.Own < m.Global {
				chosen = preds[i]
			}
			m.Rounds++
			m.Own += b2u(preds[i].Label != ev.Label)
			m.Global += b2u(gpreds[i].Label != ev.Label)
			m.Mixed += b2u(chosen.Label != ev.Label)
		}
	}
	for key, m := range mix {
		a := want[key]
		a.mix = m
		want[key] = a
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func learnerLine(name string, rounds, mistakes uint64, loss float64, sha string) string {
	return fmt.Sprintf("%s rounds=%d mistakes=%d loss=%v state=%s", name, rounds, mistakes, loss, sha)
}

// replayKeysAlone replays each key's lines alone with one model of the
// learners (this process's pipeline: what `replay` of the key's events
// gives, pinned in package pipeline) and returns each key's report.
func replayKeysAlone(t *testing.T, dir string, byKey map[string][][]byte) map[string]keyAlone {
	t.Helper()
	path := filepath.Join(dir, "alone.yaml")
	if err := os.WriteFile(path, []byte(keyedLearners), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]keyAlone, len(byKey))
	var ev event.Event
	for key, lines := range byKey {
		p, err := pipeline.New(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range lines {
			if err := dec.Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
			p.Process(&ev)
		}
		r, err := p.Report()
		if err != nil {
			t.Fatal(err)
		}
		a := keyAlone{events: r.Events}
		for _, l := range r.Learners {
			a.learners = append(a.learners, learnerLine(l.Name, l.Rounds, l.Mistakes, l.Loss, l.StateSHA256))
		}
		out[key] = a
	}
	return out
}

// checkKeyReports checks the JSON lines of `run --report json` with models
// per key: one report per key, each key in one partition only, each
// equal to the key's replay alone. It returns the partitions seen.
func checkKeyReports(t *testing.T, what string, out []byte, want map[string]keyAlone) (map[int32]int, map[string]int32) {
	t.Helper()
	parts := map[int32]int{}
	seen := map[string]int32{}
	for _, r := range keyReports(t, what, out) {
		key := *r.Key
		if p, ok := seen[key]; ok {
			t.Errorf("%s: key %s in partitions %d and %d", what, key, p, r.Partition)
		}
		seen[key] = r.Partition
		parts[r.Partition]++
		if want == nil {
			continue // the partitions only
		}
		w, ok := want[key]
		if !ok {
			t.Errorf("%s: a model of key %q, which no event has", what, key)
			continue
		}
		if r.Events != w.events {
			t.Errorf("%s: key %s: %d events, its replay alone %d", what, key, r.Events, w.events)
		}
		for i, l := range r.Learners {
			if got := learnerLine(l.Name, l.Rounds, l.Mistakes, l.Loss, l.StateSHA256); i >= len(w.learners) || got != w.learners[i] {
				t.Errorf("%s: key %s: %s\n  its replay alone: %s", what, key, got, w.learners[min(i, len(w.learners)-1)])
			}
		}
		if len(r.Mix) != len(w.mix) {
			t.Errorf("%s: key %s: %d learners' choices, want %d", what, key, len(r.Mix), len(w.mix))
		}
		for i, m := range r.Mix {
			if i < len(w.mix) && (m.Rounds != w.mix[i].Rounds || m.OwnMistakes != w.mix[i].Own || m.GlobalMistakes != w.mix[i].Global || m.Mistakes != w.mix[i].Mixed || !m.Holds) {
				t.Errorf("%s: key %s learner %s: choice %+v, simulated %+v", what, key, m.Learner, m, w.mix[i])
			}
		}
	}
	if want != nil && len(seen) != len(want) {
		t.Errorf("%s: %d keys reported, want %d", what, len(seen), len(want))
	}
	return parts, seen
}

// keyReports returns the reports of `run --report json`'s lines with
// models per key, failing t on a line that is not one or has no key.
func keyReports(t *testing.T, what string, out []byte) []service.Report {
	t.Helper()
	var reps []service.Report
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r service.Report
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v: %s", what, err, sc.Bytes())
		}
		if r.Key == nil {
			if r.Keys == nil {
				t.Fatalf("%s: a report without a key that is no partition's totals: %s", what, sc.Bytes())
			}
			continue // a partition's totals, after its keys
		}
		reps = append(reps, r)
	}
	return reps
}

// TestE2EKeyedCrash: models per key under kill -9. 1,000 keys' events,
// interleaved, on a 4-partition Kafka topic (a kfake process) and on a
// JetStream stream (Debian's nats-server; a stream is one partition), are
// learned with a model per key, at most 40 of them in memory per
// partition (so nearly every event evicts one), with a global model per
// partition beside them (models.global), checkpointed every 500 records;
// the run is SIGKILLed twice (STREAMLEARN_FULL=1: three times) a random
// while after a checkpoint, restarted each time, and run to the end. Then every key's model — each
// learner's state digest, rounds, mistakes, loss — equals a replay of
// that key's events alone; each key's choice between its model and its
// partition's global model (the mistakes of each and of the choice)
// equals a simulation of the rule beside two plain replays; and each key
// is in exactly one partition.
func TestE2EKeyedCrash(t *testing.T) {
	sl, kfake := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, dir := e2eStart(t, 3*e2eTimeout)
	n := 40000
	if raceEnabled() {
		n = 12000
	}
	stream, byKey := keyedEvents(t, dir, n, 1000)
	alone := replayKeysAlone(t, dir, byKey)
	top := dir
	for _, tc := range []struct {
		name   string
		parts  int
		source func(t *testing.T, dir string) string
	}{
		{"kafka", 4, func(t *testing.T, dir string) string {
			bootstrap := startKfake(t, ctx, dir, kfake, 4)
			runProc(t, ctx, dir, sl, "publish", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events", stream)
			return fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: keyed, session_timeout: 1s, heartbeat_interval: 200ms}\n", bootstrap)
		}},
		{"jetstream", 1, func(t *testing.T, dir string) string {
			url, _ := natsServer(t, ctx, natsBin, dir)
			jsStream(t, ctx, url, "EVENTS", "events")
			runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", stream)
			return fmt.Sprintf("source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: keyed}\n", url)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own broker and checkpoints
			dir := t.TempDir()
			ckpt := filepath.Join(dir, "state")
			cfg := filepath.Join(dir, "keyed.yaml")
			yaml := keyedLearners + "models: {by: key, max: 40, global: true}\n" + tc.source(t, dir) +
				fmt.Sprintf("checkpoint: {dir: %q, every: 500}\n", ckpt)
			if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			// stamp changes with every checkpoint written, of any partition.
			stamp := func() int64 {
				var sum int64
				files, _ := filepath.Glob(filepath.Join(ckpt, "partition-*.ckpt"))
				for _, f := range files {
					sum += modTime(f).UnixNano()
				}
				return sum
			}
			r := rand.New(rand.NewPCG(3, uint64(tc.parts)))
			var learned []int64 // the records in the checkpoints after each kill
			for kill := range testmode.Reps(2, 3) {
				killWithin(t, ctx, dir, sl, cfg, kill, stamp, r, 600*time.Millisecond)
				var at []string
				var sum int64
				for _, c := range inspectCheckpoints(t, ctx, dir, sl, ckpt) {
					at = append(at, fmt.Sprintf("partition %d at %d (%d keys, %d evictions)", c.Partition, c.Position, c.Report.Keys.Keys, c.Report.Keys.Evicted))
					sum += int64(c.Report.Events)
				}
				learned = append(learned, sum)
				t.Logf("checkpoints after SIGKILL %d: %s", kill+1, strings.Join(at, ", "))
			}
			// The kills fell in the middle of the stream, with progress
			// between them.
			grew := learned[0] > 0 && learned[len(learned)-1] < int64(n)
			for i := 1; i < len(learned); i++ {
				grew = grew && learned[i] > learned[i-1]
			}
			if !grew {
				t.Fatalf("records in the checkpoints after each kill: %v of %d: want growing, inside the stream", learned, n)
			}
			out := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
			// The choices depend on the global model of the key's
			// partition: simulated once the partitions are known.
			_, partOf := checkKeyReports(t, "partitions", out, nil)
			want := maps.Clone(alone)
			mixOf(t, top, stream, partOf, want)
			parts, _ := checkKeyReports(t, "run resumed after its SIGKILLs", out, want)
			if len(parts) != tc.parts {
				t.Errorf("keys in %d partitions (%v), want %d", len(parts), parts, tc.parts)
			}
		})
	}
}

// inspectCheckpoints returns `inspect --report json` of dir.
func inspectCheckpoints(t *testing.T, ctx context.Context, dir, sl, ckpt string) []inspected {
	t.Helper()
	cps, err := readInspected(runProc(t, ctx, dir, sl, "inspect", "--report", "json", ckpt))
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	return cps
}
