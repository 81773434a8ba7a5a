package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/testmode"
)

// TestE2EKafkaUntilEndAfterKills: `run --until-end` on a Kafka group whose
// earlier members were SIGKILLed — they never left the group, and a member
// killed while it joined is still counted in the next generation the
// coordinator forms. Per repetition: three `run` processes of one group,
// each SIGKILLed at a random moment 0.1–1.1s after its start (before,
// during or after its join, in the middle of the stream or after it), then
// `run --until-end` of the same group. It must either print a report of
// every partition whose learners equal a replay of that partition —
// state digests, rounds, mistakes, loss, regret — or exit non-zero with an
// error naming the group; never exit 0 with a missing or partial report.
// And it must end within the session timeout plus a margin: the
// killed members' sessions expire, the group rebalances, and the run
// learns what is left, which a run of a fresh group of the same stream,
// measured before and after the repetitions on this machine in this
// run, bounds (the margin is three times the slower of the two, plus
// the rebalance timeout), so a loaded machine does not fail the test.
// With 1 and with 3 partitions, two repetitions each
// (STREAMLEARN_FULL=1: ten), on a kfake broker process.
func TestE2EKafkaUntilEndAfterKills(t *testing.T) {
	t.Parallel() // see parallelTests
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	// The killed members' sessions and the rebalances that remove them
	// are short here; the wall-time bound below is in these terms. So are
	// the request timeout and the pause before a rejoin: kfake, unlike a
	// Kafka broker, lets the session of a member waiting in JoinGroup
	// expire, and a dead member's expiry restarts the join barrier; when
	// the two meet, the live member's join is dropped unanswered, and
	// kafka-go gives up after request + rebalance timeout, logs "Failed
	// to join group", and joins again after the backoff (see
	// docs/design.md). A run that logged it may take that much longer.
	const (
		session   = 2 * time.Second
		rebalance = time.Second
		request   = 2 * time.Second
		backoff   = 250 * time.Millisecond
	)
	reps := testmode.Reps(2, 10)
	n := 60000 // a run learns 100-200k events/s: some kills fall mid-stream
	if raceEnabled() {
		n = 15000 // about ten times slower
	}
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) {
			if !raceEnabled() {
				// Under the race detector two of these at once starve each
				// other's heartbeats on two cores.
				t.Parallel()
			}
			ctx, dir := e2eStart(t, 5*e2eTimeout)
			bootstrap := startKfake(t, ctx, dir, kfakeBin, parts)
			source := func(group string) string {
				return fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: %s, session_timeout: %v, rebalance_timeout: %v, heartbeat_interval: 200ms, request_timeout: %v, join_group_backoff: %v}\n",
					bootstrap, group, session, rebalance, request, backoff)
			}
			want := publishKeyed(t, ctx, dir, sl, e2eConfig(t, dir, "publish.yaml", source("publish")), n, parts)

			// clean is how long `run --until-end` of a fresh group takes to
			// join and learn the whole stream here and now: the work a
			// resumed run does beyond waiting for the killed sessions.
			clean := func(name string) time.Duration {
				cfg := e2eConfig(t, dir, name+".yaml", source(name)+fmt.Sprintf("checkpoint: {dir: %q, every: 2000}\n", filepath.Join(dir, name)))
				t0 := time.Now()
				out := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
				took := time.Since(t0)
				if got := bytes.Count(out, []byte("\n")); got != parts {
					t.Fatalf("run --until-end of a fresh group printed %d reports, want %d:\n%s", got, parts, out)
				}
				return took
			}
			cleanBefore := clean("clean-before")

			r := rand.New(rand.NewPCG(21, uint64(parts)))
			type timed struct {
				rep     int
				wall    time.Duration
				dropped bool
				kills   []string
				stderr  string
			}
			var walls []time.Duration
			var runs []timed
			failed, dropped := 0, 0
			for rep := range reps {
				group := fmt.Sprintf("kill-%d", rep)
				ckpt := filepath.Join(dir, group)
				cfg := e2eConfig(t, dir, group+".yaml", source(group)+fmt.Sprintf("checkpoint: {dir: %q, every: 2000}\n", ckpt))
				var kills []string
				for range 3 {
					after := time.Duration(100+r.IntN(1000)) * time.Millisecond
					p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
					select {
					case <-p.done:
						t.Fatalf("repetition %d: run exited before its kill: %v\n%s", rep, p.err, p.stderr.String())
					case <-time.After(after):
					}
					if err := p.cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
					<-p.done
					kills = append(kills, after.String())
				}
				t0 := time.Now()
				final, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
				select {
				case <-final.done:
				case <-ctx.Done():
					t.Fatalf("repetition %d (kills after %v): run --until-end still running at the deadline\n%s", rep, kills, final.stderr.String())
				}
				wall := time.Since(t0)
				walls = append(walls, wall)
				if final.err != nil {
					// An error is allowed if it names the group and why.
					msg := final.stderr.String()
					if !strings.Contains(msg, "group "+group) ||
						!strings.Contains(msg, "no partition of the topic is assigned") && !strings.Contains(msg, "did not settle") {
						t.Errorf("repetition %d (kills after %v): run --until-end: %v without the named error\nstderr:\n%s", rep, kills, final.err, msg)
					}
					if final.stdout.Len() != 0 {
						t.Errorf("repetition %d: run --until-end failed but printed a report:\n%s", rep, final.stdout.String())
					}
					failed++
				} else {
					got := map[int32][]byte{}
					for line := range bytes.Lines(final.stdout.Bytes()) {
						var r struct {
							Partition int32 `json:"partition"`
						}
						if err := json.Unmarshal(line, &r); err != nil {
							t.Fatalf("repetition %d: run printed %q: %v", rep, line, err)
						}
						if _, dup := got[r.Partition]; dup {
							t.Errorf("repetition %d: two reports of partition %d", rep, r.Partition)
						}
						got[r.Partition] = line
					}
					if len(got) != parts {
						t.Errorf("repetition %d (kills after %v): run --until-end exited 0 with reports of partitions %v, want all %d\nstderr:\n%s",
							rep, kills, slices.Sorted(maps.Keys(got)), parts, final.stderr.String())
					}
					for p, w := range want {
						if line, ok := got[p]; ok {
							sameReport(t, fmt.Sprintf("repetition %d: partition %d's model", rep, p), normReport(t, "run", line, "", w.events), w.report)
						}
					}
				}
				d := strings.Contains(final.stderr.String(), "Failed to join group")
				if d {
					dropped++
				}
				runs = append(runs, timed{rep, wall, d, kills, final.stderr.String()})
			}
			// The bound, from the fresh group's runs before and after: a
			// machine loaded during the repetitions is loaded during one
			// of them too.
			cleanAfter := clean("clean-after")
			work := max(cleanBefore, cleanAfter)
			for _, run := range runs {
				limit := session + rebalance + 3*work
				want := fmt.Sprintf("the session timeout, the rebalance timeout and 3× a fresh group's run (%v)", work.Round(time.Millisecond))
				if run.dropped {
					limit += request + rebalance + backoff
					want += ", plus a dropped join's timeout and backoff"
				}
				if run.wall > limit {
					t.Errorf("repetition %d (kills after %v): run --until-end took %v, want at most %s: %v\nstderr:\n%s",
						run.rep, run.kills, run.wall.Round(time.Millisecond), want, limit.Round(time.Millisecond), run.stderr)
				}
			}
			slices.Sort(walls)
			t.Logf("%d repetitions, %d ended with the named error, %d had a join dropped by kfake; run --until-end after three kills took %v (min) %v (median) %v (max); a fresh group's run %v before, %v after",
				reps, failed, dropped, walls[0].Round(time.Millisecond), walls[len(walls)/2].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond),
				cleanBefore.Round(time.Millisecond), cleanAfter.Round(time.Millisecond))
		})
	}
}

// partitionReplay is the normalized report of a replay of one partition's
// records, and how many there are.
type partitionReplay struct {
	report []byte
	events int
}

// publishKeyed generates n events, publishes them through cfg's Kafka
// source keyed by 16 tenants (so that they spread over the partitions),
// and returns the replay of each partition's records.
func publishKeyed(t *testing.T, ctx context.Context, dir, sl, cfg string, n, parts int) map[int32]partitionReplay {
	t.Helper()
	stream := filepath.Join(dir, "stream.jsonl")
	runProc(t, ctx, dir, sl, "generate", "-n", strconv.Itoa(n), "--seed", "5", "-o", stream)
	keyed, _ := keyEvents(t, dir, stream)
	runProc(t, ctx, dir, sl, "publish", "-c", cfg, keyed)
	want := replayPartitions(t, ctx, dir, sl, cfg)
	if len(want) != parts {
		t.Fatalf("the keyed events landed on %d partitions, want all %d", len(want), parts)
	}
	return want
}

// keyEvents writes the events of the JSONL file src keyed by 16 tenants
// (event i by tenant-i%16), so that publishing spreads them over the
// partitions by key, and returns the new file's path and how many events
// it holds.
func keyEvents(t *testing.T, dir, src string) (string, int) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var keyed bytes.Buffer
	i := 0
	for line := range bytes.Lines(data) {
		fmt.Fprintf(&keyed, `{"key":"tenant-%d",%s`, i%16, line[1:])
		i++
	}
	events := filepath.Join(dir, "keyed.jsonl")
	if err := os.WriteFile(events, keyed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return events, i
}

// replayPartitions records the topic of cfg's Kafka source back, per
// partition in offset order (checking that order), and returns the replay
// of each partition's records on their own.
func replayPartitions(t *testing.T, ctx context.Context, dir, sl, cfg string) map[int32]partitionReplay {
	t.Helper()
	rec := filepath.Join(dir, "recorded.jsonl")
	runProc(t, ctx, dir, sl, "record", "-c", cfg, "--envelope", "-o", rec)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	perPart := map[int32]*bytes.Buffer{}
	lastOffset := map[int32]int64{}
	for line := range bytes.Lines(data) {
		var e envelope
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		if last, ok := lastOffset[e.Partition]; ok && e.Offset <= last {
			t.Fatalf("partition %d: offset %d after %d", e.Partition, e.Offset, last)
		}
		lastOffset[e.Partition] = e.Offset
		if perPart[e.Partition] == nil {
			perPart[e.Partition] = new(bytes.Buffer)
		}
		perPart[e.Partition].Write(append(e.Value, '\n'))
	}
	want := map[int32]partitionReplay{}
	for p, b := range perPart {
		file := filepath.Join(dir, fmt.Sprintf("partition-%d.jsonl", p))
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		count := bytes.Count(b.Bytes(), []byte("\n"))
		want[p] = partitionReplay{normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", cfg, "--report", "json", file), "", count), count}
	}
	return want
}

// TestE2EKafkaCleanStopLeavesGroup: a run stopped with SIGTERM leaves its
// consumer group, so the next run of the group is assigned its partitions
// at once rather than after the coordinator gives up on the stopped
// member (here a 30s session and rebalance timeout: a run that waited for
// it cannot end sooner, and one that did not ends in a second or two).
func TestE2EKafkaCleanStopLeavesGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	bootstrap := startKfake(t, ctx, dir, kfakeBin, 1)
	cfg := e2eConfig(t, dir, "kafka.yaml", fmt.Sprintf(
		"source: {kind: kafka, brokers: [%q], topic: events, group: calm, session_timeout: 30s, rebalance_timeout: 30s}\ncheckpoint: {dir: %q, every: 1000}\n",
		bootstrap, filepath.Join(dir, "state")))
	demo := e2eDemoFile(t)
	runProc(t, ctx, dir, sl, "publish", "-c", cfg, demo)

	first, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off", "--report", "json")
	waitFor(t, ctx, "the first run to checkpoint the whole demo", func() bool {
		cp, err := checkpoint.ReadFile(filepath.Join(dir, "state", "partition-0.ckpt"))
		return err == nil && cp.Position == 4999
	})
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.wait(t, ctx)

	t0 := time.Now()
	again := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--http", "off", "--report", "json")
	if took := time.Since(t0); took >= 30*time.Second {
		t.Errorf("run --until-end after a SIGTERMed run took %v: the stopped member did not leave the group (session and rebalance timeout 30s)", took)
	}
	sameReport(t, "the restored model after a clean stop", normReport(t, "run", again, "kafka:events", 5000),
		normReport(t, "run", first.stdout.Bytes(), "kafka:events", 5000))
}

// TestE2EEnvelopeReplay: a recording of a 3-partition topic made by
// `record --envelope` replays as the live run learned it, partition by
// partition: `replay --envelope` reports each partition's model equal to
// a replay of that partition's records alone (which the other tests hold
// equal to run), and `--partition N` replays that one only. `record
// --split` writes a file per partition that replays the same.
func TestE2EEnvelopeReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	const parts = 3
	bootstrap := startKfake(t, ctx, dir, kfakeBin, parts)
	cfg := e2eConfig(t, dir, "kafka.yaml", fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: env}\n", bootstrap))
	want := publishKeyed(t, ctx, dir, sl, cfg, 3000, parts)
	rec := filepath.Join(dir, "recorded.jsonl") // publishKeyed's recording

	out := runProc(t, ctx, dir, sl, "replay", "-c", cfg, "--envelope", "--report", "json", rec)
	var got []int32
	for line := range bytes.Lines(out) {
		var r struct {
			Partition int32 `json:"partition"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("replay --envelope printed %q: %v", line, err)
		}
		got = append(got, r.Partition)
		w := want[r.Partition]
		sameReport(t, fmt.Sprintf("replay --envelope: partition %d", r.Partition), normReport(t, "replay", line, "", w.events), w.report)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{0, 1, 2}) {
		t.Errorf("replay --envelope reported partitions %v, want 0, 1 and 2", got)
	}
	one := runProc(t, ctx, dir, sl, "replay", "-c", cfg, "--envelope", "--partition", "1", "--report", "json", rec)
	sameReport(t, "replay --envelope --partition 1", normReport(t, "replay", one, "", want[1].events), want[1].report)

	// record --split: a file per partition, each of which a plain replay
	// learns as that partition's model.
	split := filepath.Join(dir, "split.jsonl")
	runProc(t, ctx, dir, sl, "record", "-c", cfg, "--split", "-o", split)
	for p := range int32(parts) {
		file := filepath.Join(dir, fmt.Sprintf("split-partition-%d.jsonl", p))
		w := want[p]
		sameReport(t, fmt.Sprintf("record --split: %s", filepath.Base(file)),
			normReport(t, "replay", runProc(t, ctx, dir, sl, "replay", "-c", cfg, "--report", "json", file), "", w.events), w.report)
	}
}
