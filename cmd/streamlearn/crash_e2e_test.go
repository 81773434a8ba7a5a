package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/testmode"
)

// TestE2ECrashResume is DESIGN.md's guarantee under kill -9: streamlearn
// learns a stream with checkpoints, is SIGKILLed at random moments two
// times (STREAMLEARN_FULL=1: four; each time after it wrote a new
// checkpoint, a random while later), restarted each time, and finally run to the end: its model —
// every learner's state_sha256, rounds, mistakes, loss, regret — equals a
// replay of the stream, nothing lost and nothing learned twice. Kafka (a
// kfake broker process) and JetStream (Debian's nats-server), each a
// separate process the kills do not touch; on JetStream also with the
// checkpoints in an Object Store bucket, where a kill can fall in the
// middle of a Put; and on JetStream with delayed labels, about 2,000
// events waiting for their labels at every kill.
func TestE2ECrashResume(t *testing.T) {
	sl, kfake := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, dir := e2eStart(t, 3*e2eTimeout)
	// Each restart of the bucket case waits out the killed run's
	// ownership lease (checkpoint.lease, 3s here): most of its time.
	kills := testmode.Reps(2, 4)
	// Long enough that four kills, each a checkpoint and up to 150ms after
	// a restart, fall before the end: a run learns 100-200k events/s here
	// and its first file appears ~0.15s after the first checkpoint is
	// taken (positions seen with 30,000: up to 29,994). A -race build
	// learns some ten times slower (positions seen with 30,000: 1,000 to
	// 9,000), and 120,000 would not end within the deadline.
	n := 120000
	if raceEnabled() {
		n = 30000
	}
	stream, want := e2eStream(t, ctx, dir, sl, n, 7)
	// The delayed stream: labels as label events a uniform 0..4,000
	// events late, 5% never; its replay, normalized as normDelayed does.
	const labels = "labels: {delayed: true, wait: 20000, max_pending: 50000}\n"
	dstream := filepath.Join(dir, "delayed.jsonl")
	runProc(t, ctx, dir, sl, "generate", "-n", strconv.Itoa(n), "--seed", "8", "--delay", "2000", "--never", "0.05", "-o", dstream)
	dwant := normDelayed(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", e2eConfig(t, dir, "dreplay.yaml", labels), "--report", "json", dstream))
	drecords := fileLines(t, dstream)

	jetstreamOf := func(stream string) func(t *testing.T, dir string) (string, string, string) {
		return func(t *testing.T, dir string) (string, string, string) {
			url, _ := natsServer(t, ctx, natsBin, dir)
			jsStream(t, ctx, url, "EVENTS", "events")
			runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", stream)
			return fmt.Sprintf("source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: crash}\n", url), "jetstream:EVENTS/crash", url
		}
	}
	jetstream := jetstreamOf(stream)
	for _, tc := range []struct {
		name    string
		source  func(t *testing.T, dir string) (yaml, name, url string)
		bucket  bool // checkpoints in an Object Store bucket on the NATS server, not a directory
		delayed bool // the delayed stream, with labels.delayed
	}{
		{"kafka", func(t *testing.T, dir string) (string, string, string) {
			bootstrap := startKfake(t, ctx, dir, kfake, 1)
			runProc(t, ctx, dir, sl, "publish", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events", stream)
			// A killed member holds its partition until its session times
			// out: keep that short.
			return fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: crash, session_timeout: 1s, heartbeat_interval: 200ms}\n", bootstrap), "kafka:events", ""
		}, false, false},
		{"jetstream", jetstream, false, false},
		{"jetstream-bucket", jetstream, true, false},
		{"jetstream-delayed", jetstreamOf(dstream), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own broker, stream and checkpoints; most
			// of their time is waiting (for a checkpoint, a session, a
			// lease), so two run at once.
			t.Parallel()
			dir := t.TempDir()
			src, srcName, url := tc.source(t, dir)
			ckpt := filepath.Join(dir, "state")
			store := fmt.Sprintf("checkpoint: {dir: %q, every: 1000}\n", ckpt)
			// position returns the position of the partition's checkpoint,
			// -2 when there is none yet.
			position := func() int64 {
				cp, err := checkpoint.ReadFile(filepath.Join(ckpt, "partition-0.ckpt"))
				if checkpoint.IsNotExist(err) {
					return -2
				}
				if err != nil {
					t.Fatal(err)
				}
				return cp.Position
			}
			var obs *checkpoint.ObjectStore
			if tc.bucket {
				store = "checkpoint: {bucket: STATE, every: 1000, lease: 3s}\n"
				var err error
				obs, err = dialObjectStore(ctx, connectors.NATSConfig{URL: url}, "STATE", checkpoint.ObjectStoreConfig{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { obs.Close() })
				position = func() int64 {
					cp, err := obs.Load(ctx, 0)
					if checkpoint.IsNotExist(err) {
						return -2
					}
					if err != nil {
						t.Fatal(err)
					}
					return cp.Position
				}
			}
			// stamp changes with every checkpoint written: the file's
			// modification time, cheaper to poll than its position. In a
			// bucket, a hash of the object's stamp (its name and the
			// sequence of its meta), cheaper than reading the checkpoint
			// itself every 5ms. (Most of this case's time is elsewhere:
			// each restart after a SIGKILL waits out the killed run's
			// ownership lease.)
			stamp := func() int64 { return modTime(filepath.Join(ckpt, "partition-0.ckpt")).UnixNano() }
			if tc.bucket {
				last := int64(-2)
				stamp = func() int64 {
					stamps, err := obs.Stamps(ctx)
					if ctx.Err() != nil {
						t.Fatal(err)
					}
					if err != nil { // a slow answer on a loaded machine: the same stamp, ask again
						t.Logf("stamps: %v", err)
						return last
					}
					last = -2
					if s, ok := stamps[0]; ok {
						h := fnv.New64a()
						h.Write([]byte(s))
						last = int64(h.Sum64() >> 1)
					}
					return last
				}
			}
			records := n
			if tc.delayed {
				store += labels
				records = drecords
			}
			cfg := e2eConfig(t, dir, "crash.yaml", src+store)
			r := rand.New(rand.NewPCG(11, uint64(len(tc.name))))
			var positions []int64
			for kill := range kills {
				killAfterCheckpoint(t, ctx, dir, sl, cfg, kill, stamp, r)
				if tc.bucket {
					positions = append(positions, position())
					continue
				}
				cps, err := readInspected(runProc(t, ctx, dir, sl, "inspect", "--report", "json", ckpt))
				if err != nil || len(cps) != 1 {
					t.Fatalf("inspect after kill %d: %v, %d checkpoints", kill, err, len(cps))
				}
				if cps[0].Position != position() {
					t.Fatalf("inspect after kill %d: position %d, the file holds %d", kill, cps[0].Position, position())
				}
				positions = append(positions, cps[0].Position)
			}
			t.Logf("checkpoint positions after each SIGKILL: %v (of %d records)", positions, records)
			// The kills fell in the middle of the stream: progress between
			// them, and the end not reached.
			for i, pos := range positions {
				if pos < 0 || (i > 0 && pos <= positions[i-1]) || pos >= int64(records-1) && srcName == "kafka:events" || pos >= int64(records) && srcName != "kafka:events" {
					t.Fatalf("checkpoint positions %v: want increasing positions inside the stream", positions)
				}
			}
			final := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
			if tc.delayed {
				sameReport(t, fmt.Sprintf("run resumed after %d SIGKILLs", kills), normDelayed(t, "run", final), dwant)
				return
			}
			sameReport(t, fmt.Sprintf("run resumed after %d SIGKILLs", kills), normReport(t, "run", final, srcName, n), want)
		})
	}
}

// killAfterCheckpoint starts `run -c cfg`, waits until stamp changes (the
// run wrote a new checkpoint), and SIGKILLs it at a random moment of the
// next 150ms of learning.
func killAfterCheckpoint(t *testing.T, ctx context.Context, dir, sl, cfg string, kill int, stamp func() int64, r *rand.Rand) {
	t.Helper()
	killWithin(t, ctx, dir, sl, cfg, kill, stamp, r, 150*time.Millisecond)
}

// killWithin is killAfterCheckpoint with the kill at a random moment of
// the next within. It returns what the killed run wrote to stderr.
func killWithin(t *testing.T, ctx context.Context, dir, sl, cfg string, kill int, stamp func() int64, r *rand.Rand, within time.Duration) string {
	t.Helper()
	before := stamp()
	p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
	for stamp() == before {
		select {
		case <-p.done:
			t.Fatalf("kill %d: run exited before a new checkpoint: %v\n%s", kill, p.err, p.stderr.String())
		case <-ctx.Done():
			t.Fatalf("kill %d: no new checkpoint\n%s", kill, p.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	time.Sleep(time.Duration(r.Int64N(int64(within))))
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	return p.stderr.String()
}

// e2eStream writes a generated stream of n events (seed) and returns its
// path and the normalized report of its replay.
func e2eStream(t *testing.T, ctx context.Context, dir, sl string, n int, seed int) (string, []byte) {
	t.Helper()
	stream := filepath.Join(dir, "stream.jsonl")
	runProc(t, ctx, dir, sl, "generate", "-n", strconv.Itoa(n), "--seed", strconv.Itoa(seed), "-o", stream)
	want := normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", e2eConfig(t, dir, "replay.yaml", ""),
		"--report", "json", stream), "", n)
	return stream, want
}

// waitCheckpoint waits until run has written the checkpoint file.
func waitCheckpoint(t *testing.T, run *proc, file string) {
	t.Helper()
	for modTime(file).IsZero() {
		select {
		case <-run.done:
			t.Fatalf("run ended before its first checkpoint: %v\n%s", run.err, run.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// modTime returns the modification time of path, zero when it is absent.
func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// TestE2ECheckpointBucket keeps the checkpoints in a JetStream Object Store
// bucket of the source's server: a run to the end saves them there, and a
// second run, with nothing left to read, reports the same models, restored
// from the bucket.
func TestE2ECheckpointBucket(t *testing.T) {
	sl, _ := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, dir := e2eStart(t, e2eTimeout)
	demo := e2eDemoFile(t)
	url, _ := natsServer(t, ctx, natsBin, dir)
	js, _ := jsStream(t, ctx, url, "EVENTS", "events")
	runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", demo)
	want := normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", e2eConfig(t, dir, "replay.yaml", ""), "--report", "json", demo), "", 5000)

	cfg := e2eConfig(t, dir, "bucket.yaml", fmt.Sprintf(
		"source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: bucket}\ncheckpoint: {bucket: STATE, every: 1000}\n", url))
	first := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	sameReport(t, "run with a bucket", normReport(t, "run", first, "jetstream:EVENTS/bucket", 5000), want)
	if _, err := js.ObjectStore(ctx, "STATE"); err != nil {
		t.Fatalf("no bucket STATE after the run: %v", err)
	}
	st, err := checkpoint.OpenObjectStore(ctx, js, "STATE", checkpoint.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := st.Load(ctx, 0)
	if err != nil {
		t.Fatalf("checkpoint of partition 0 in bucket STATE: %v", err)
	}
	if cp.Position != 5000 {
		t.Fatalf("checkpoint of partition 0 in bucket STATE at position %d, want 5000 (the last record's sequence)", cp.Position)
	}
	again := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	sameReport(t, "second run, restored from the bucket", normReport(t, "run", again, "jetstream:EVENTS/bucket", 5000), want)

	// The bucket lost while the durable's position stays: a fresh model
	// would report 0 of the 5000 events as if nothing had been learned.
	// run stops, naming the partition and the ways out.
	if err := js.DeleteObjectStore(ctx, "STATE"); err != nil {
		t.Fatal(err)
	}
	p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	p.waitExit(t, ctx)
	if msg := p.stderr.String(); p.err == nil || p.stdout.Len() != 0 || !strings.Contains(msg, "partition 0 of jetstream:EVENTS/bucket: no checkpoint") ||
		!strings.Contains(msg, "position 5000 was committed") || !strings.Contains(msg, "--reset") {
		t.Errorf("run with the bucket lost: want a failure naming partition 0, the committed position and --reset; got %v, stdout %q\nstderr:\n%s",
			p.err, p.stdout.String(), msg)
	}
	// --rebuild learns the stream again from the server's log up to the
	// committed position: the model of the uninterrupted run, and the
	// next run restores it.
	rebuilt := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--rebuild", "--report", "json", "--http", "off")
	sameReport(t, "run --rebuild", normReport(t, "run --rebuild", rebuilt, "jetstream:EVENTS/bucket", 5000), want)
	again = runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	sameReport(t, "run after the rebuild", normReport(t, "run", again, "jetstream:EVENTS/bucket", 5000), want)

	// Lost again: --reset starts the model afresh at the committed
	// position, knowingly. normReport checks the fresh model's 0 events.
	if err := js.DeleteObjectStore(ctx, "STATE"); err != nil {
		t.Fatal(err)
	}
	normReport(t, "run --reset", runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--reset", "--report", "json", "--http", "off"),
		"jetstream:EVENTS/bucket", 0)
	// The reset holds: its checkpoint, saved before anything was learned,
	// is at the committed position, and the next run restores it.
	normReport(t, "run after the reset", runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off"),
		"jetstream:EVENTS/bucket", 0)
}

// TestE2EBrokerRestart kills the JetStream server (Debian's nats-server,
// SIGKILL) while streamlearn learns from it and starts it again on the same
// port and store: streamlearn reconnects, resumes, and its final model
// equals a replay.
func TestE2EBrokerRestart(t *testing.T) {
	t.Parallel() // see parallelTests
	sl, _ := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, dir := e2eStart(t, 2*e2eTimeout)
	const n = 30000
	stream, want := e2eStream(t, ctx, dir, sl, n, 9)

	srv, port, mport := natsServerFree(t, ctx, natsBin, dir)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	jsStream(t, ctx, url, "EVENTS", "events")
	runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", stream)

	run := runDisrupted(t, ctx, dir, sl, fmt.Sprintf("source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: restart}\n", url), n,
		"broker killed", func() {
			if err := srv.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-srv.done
			time.Sleep(500 * time.Millisecond) // the client notices, and retries
		})
	natsServerAt(t, ctx, natsBin, dir, port, mport)
	run.wait(t, ctx)
	sameReport(t, "run across a broker restart", normReport(t, "run", run.stdout.Bytes(), "jetstream:EVENTS/restart", n), want)
}

// TestE2EKafkaBrokerOutage freezes the Kafka broker (a kfake process,
// SIGSTOP) for longer than the group's session timeout while streamlearn
// learns from it, then lets it go on (SIGCONT): streamlearn rides out the
// outage with its retries, and when the broker's clock has expired the
// member's session, the group rebalances and the partition comes back in
// a new epoch, through its checkpoint. The final model equals a replay.
func TestE2EKafkaBrokerOutage(t *testing.T) {
	sl, kfake := e2eBuild(t)
	ctx, dir := e2eStart(t, 2*e2eTimeout)
	const n = 30000
	stream, want := e2eStream(t, ctx, dir, sl, n, 5)

	broker, bootstrap := startKfakeProc(t, ctx, dir, kfake, 1)
	runProc(t, ctx, dir, sl, "publish", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events", stream)

	run := runDisrupted(t, ctx, dir, sl, fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: outage, session_timeout: 1s, heartbeat_interval: 200ms}\n", bootstrap), n,
		"broker frozen for 3s", func() {
			if err := broker.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
		})
	if err := broker.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	run.wait(t, ctx)
	sameReport(t, "run across a broker outage", normReport(t, "run", run.stdout.Bytes(), "kafka:events", n), want)
}

// TestE2EKafkaBrokerRestart kills the Kafka broker (a kfake process
// keeping its log and group commits in a directory, SIGKILL) while
// streamlearn learns from it, and starts it again on the same port and
// directory: streamlearn rides out the gap with its retries, rejoins the
// group, and its final model equals a replay.
func TestE2EKafkaBrokerRestart(t *testing.T) {
	sl, kfake := e2eBuild(t)
	ctx, dir := e2eStart(t, 2*e2eTimeout)
	const n = 30000
	stream, want := e2eStream(t, ctx, dir, sl, n, 13)

	data := filepath.Join(dir, "kafka")
	broker, bootstrap := startKfakeProc(t, ctx, dir, kfake, 1, "-data-dir", data)
	_, port, err := net.SplitHostPort(bootstrap) // to restart it on
	if err != nil {
		t.Fatal(err)
	}
	runProc(t, ctx, dir, sl, "publish", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events", stream)

	run := runDisrupted(t, ctx, dir, sl, fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: restart, session_timeout: 1s, heartbeat_interval: 200ms}\n", bootstrap), n,
		"broker killed", func() {
			if err := broker.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-broker.done
			time.Sleep(time.Second) // past the session timeout: the client retries
		})
	_, again := startKfakeProc(t, ctx, dir, kfake, 1, "-ports", port, "-data-dir", data)
	if again != bootstrap {
		t.Fatalf("restarted broker at %s, was %s", again, bootstrap)
	}
	run.wait(t, ctx)
	sameReport(t, "run across a broker restart", normReport(t, "run", run.stdout.Bytes(), "kafka:events", n), want)

	// The restarted broker holds the whole log (the run read most of it
	// from there: the client buffers about one fetch, ~1 MB, ahead).
	rcfg := e2eConfig(t, dir, "readback.yaml", fmt.Sprintf(
		"source: {kind: kafka, brokers: [%q], topic: events, group: readback}\n", bootstrap))
	rec := filepath.Join(dir, "recorded.jsonl")
	runProc(t, ctx, dir, sl, "record", "-c", rcfg, "-o", rec)
	sameFile(t, "record of the topic from the restarted broker", rec, stream)
}

// runDisrupted starts `run --until-end` from source (the config's source
// line) with a checkpoint every 1000 records, waits for its first
// checkpoint, and calls disrupt, which breaks the broker and returns once
// it has been broken long enough. The run must not have learned all n
// events by then (logged as what, with the checkpoint's position). It
// returns the running process.
func runDisrupted(t *testing.T, ctx context.Context, dir, sl, source string, n int, what string, disrupt func()) *proc {
	t.Helper()
	ckpt := filepath.Join(dir, "state", "partition-0.ckpt")
	cfg := e2eConfig(t, dir, "disrupted.yaml", source+fmt.Sprintf("checkpoint: {dir: %q, every: 1000}\n", filepath.Dir(ckpt)))
	run, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	waitCheckpoint(t, run, ckpt)
	disrupt()
	cp, err := checkpoint.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Position >= int64(n-1) {
		t.Fatalf("the run had learned everything (position %d) before the disruption", cp.Position)
	}
	t.Logf("%s with the checkpoint at position %d of %d", what, cp.Position, n)
	return run
}

// normDelayed is normReport for a stream with delayed labels: one report,
// with labels joined, events waiting at some point (expired ones) and the
// keys a live run and a replay may differ in removed.
func normDelayed(t *testing.T, what string, data []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || dec.More() {
		t.Fatalf("%s: want one JSON report (%v):\n%s", what, err, data)
	}
	if l, _ := m["labels"].(map[string]any); l == nil || l["joined"] == json.Number("0") || l["state_sha256"] == nil {
		t.Fatalf("%s: labels %v: want labels joined and the store's digest", what, m["labels"])
	}
	for _, k := range []string{"seconds", "source", "partition", "consumer_lag"} {
		delete(m, k)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fileLines returns the number of lines of the file at path.
func fileLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}
