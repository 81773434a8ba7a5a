package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestE2ECrashResume is DESIGN.md's guarantee under kill -9: streamlearn
// learns a stream with checkpoints, is SIGKILLed at random moments four
// times (each time after it wrote a new checkpoint, a random while
// later), restarted each time, and finally run to the end: its model —
// every learner's state_sha256, rounds, mistakes, loss, regret — equals a
// replay of the stream, nothing lost and nothing learned twice. Kafka (a
// kfake broker process) and JetStream (Debian's nats-server), each a
// separate process the kills do not touch.
func TestE2ECrashResume(t *testing.T) {
	sl, kfake := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	ctx, cancel := context.WithTimeout(t.Context(), 3*e2eTimeout)
	defer cancel()
	dir := t.TempDir()
	const n = 30000
	stream := filepath.Join(dir, "stream.jsonl")
	runProc(t, ctx, dir, sl, "generate", "-n", strconv.Itoa(n), "--seed", "7", "-o", stream)
	want := normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", e2eConfig(t, dir, "replay.yaml", ""),
		"--report", "json", stream), "", n)

	for _, tc := range []struct {
		name   string
		source func(t *testing.T, dir string) (yaml, name string)
	}{
		{"kafka", func(t *testing.T, dir string) (string, string) {
			bootstrap := startKfake(t, ctx, dir, kfake, 1)
			runProc(t, ctx, dir, sl, "publish", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events", stream)
			// A killed member holds its partition until its session times
			// out: keep that short.
			return fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: crash, session_timeout: 1s, heartbeat_interval: 200ms}\n", bootstrap), "kafka:events"
		}},
		{"jetstream", func(t *testing.T, dir string) (string, string) {
			url, _ := natsServer(t, ctx, natsBin, dir)
			nc, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events"}}); err != nil {
				t.Fatal(err)
			}
			runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", url, "--stream", "EVENTS", "--subject", "events", stream)
			return fmt.Sprintf("source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: crash}\n", url), "jetstream:EVENTS/crash"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, srcName := tc.source(t, dir)
			ckpt := filepath.Join(dir, "state")
			cfg := e2eConfig(t, dir, "crash.yaml", src+fmt.Sprintf("checkpoint: {dir: %q, every: 1000}\n", ckpt))
			file := filepath.Join(ckpt, "partition-0.ckpt")
			r := rand.New(rand.NewPCG(11, uint64(len(tc.name))))
			var positions []int64
			for kill := range 4 {
				before := modTime(file)
				p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
				// Wait for a new checkpoint, then kill at a random moment
				// of the next stretch of learning.
				for modTime(file).Equal(before) {
					select {
					case <-p.done:
						t.Fatalf("kill %d: run exited before its first checkpoint: %v\n%s", kill, p.err, p.stderr.String())
					case <-ctx.Done():
						t.Fatalf("kill %d: no new checkpoint\n%s", kill, p.stderr.String())
					case <-time.After(5 * time.Millisecond):
					}
				}
				time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
				if err := p.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-p.done
				var cps []inspected
				if err := json.Unmarshal(runProc(t, ctx, dir, sl, "inspect", "--report", "json", ckpt), &cps); err != nil || len(cps) != 1 {
					t.Fatalf("inspect after kill %d: %v, %d checkpoints", kill, err, len(cps))
				}
				positions = append(positions, cps[0].Position)
			}
			t.Logf("checkpoint positions after each SIGKILL: %v (of %d records)", positions, n)
			// The kills fell in the middle of the stream: progress between
			// them, and the end not reached.
			for i, pos := range positions {
				if pos < 0 || (i > 0 && pos <= positions[i-1]) || pos >= n-1 && srcName == "kafka:events" || pos >= n && srcName != "kafka:events" {
					t.Fatalf("checkpoint positions %v: want increasing positions inside the stream", positions)
				}
			}
			final := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
			sameReport(t, "run resumed after four SIGKILLs", normReport(t, "run", final, srcName, n), want)
		})
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
