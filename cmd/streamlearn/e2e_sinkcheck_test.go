package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestE2EMissingSinkTopic: `run --until-end` whose reports sink is a Kafka
// topic that does not exist stops at start with an error naming the sink
// and the topic, before it consumes anything: no report printed, nothing
// committed. Then, with create: true on the sink, a run creates the topic
// and learns every event exactly once: each partition's report equals a
// replay of that partition, with and without checkpoints. (Before the
// sinks were checked at start, the first run learned and committed 890
// records, then failed at its first report; without checkpoints the rerun
// started past them with fresh models.)
func TestE2EMissingSinkTopic(t *testing.T) {
	t.Parallel() // see parallelTests
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	for _, checkpoints := range []bool{false, true} {
		t.Run(map[bool]string{false: "no checkpoints", true: "checkpoints"}[checkpoints], func(t *testing.T) {
			ctx, dir := e2eStart(t, e2eTimeout)
			bootstrap := startKfake(t, ctx, dir, kfakeBin, 3)
			source := func(group string) string {
				return fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: %s}\n", bootstrap, group)
			}
			want := publishKeyed(t, ctx, dir, sl, e2eConfig(t, dir, "publish.yaml", source("publish")), 3000, 3)
			extra := source("learn")
			if checkpoints {
				extra += fmt.Sprintf("checkpoint: {dir: %q, every: 500}\n", filepath.Join(dir, "state"))
			}
			sink := "sinks:\n  reports: {kind: kafka, topic: sl-missing, every: 500%s}\n"
			missing := e2eConfig(t, dir, "missing.yaml", extra+fmt.Sprintf(sink, ""))
			p, _ := start(t, ctx, dir, false, sl, "run", "-c", missing, "--until-end", "--report", "json", "--http", "off")
			<-p.done
			msg := p.stderr.String()
			if p.err == nil || !strings.Contains(msg, "sinks.reports") || !strings.Contains(msg, `topic "sl-missing" does not exist`) {
				t.Fatalf("run with a missing sink topic: %v\n%s", p.err, msg)
			}
			if p.stdout.Len() != 0 {
				t.Errorf("the failed run printed a report:\n%s", p.stdout.String())
			}

			created := e2eConfig(t, dir, "created.yaml", extra+fmt.Sprintf(sink, ", create: true, partitions: 3, retention: 24h"))
			out := runProc(t, ctx, dir, sl, "run", "-c", created, "--until-end", "--report", "json", "--http", "off")
			got := map[int32][]byte{}
			for line := range bytes.Lines(out) {
				var r struct {
					Partition int32 `json:"partition"`
				}
				if err := json.Unmarshal(line, &r); err != nil {
					t.Fatalf("run printed %q: %v", line, err)
				}
				got[r.Partition] = line
			}
			if len(got) != len(want) {
				t.Fatalf("reports of %d partitions, want %d", len(got), len(want))
			}
			for part, w := range want {
				sameReport(t, fmt.Sprintf("partition %d's model", part), normReport(t, "run", got[part], "", w.events), w.report)
			}
			// The reports went to the topic made for them.
			rec := runProc(t, ctx, dir, sl, "record", "-c", e2eConfig(t, dir, "reports.yaml",
				fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: sl-missing, group: check}\n", bootstrap)), "-o", "-")
			if n := bytes.Count(rec, []byte("\n")); n < len(want) {
				t.Errorf("the created topic holds %d reports, want at least one per partition (%d)", n, len(want))
			}
		})
	}
}

// TestE2EKafkaGroupOneFileWriter: two members of one Kafka group started
// with one config, whose predictions and dead letters go to files: the
// same paths for both. The second is refused at start, before it joins
// the group (its debug log has no word from the group), exit 1 with an
// error naming the sink, the file and the first member (pid and host);
// the first goes on alone, and every line of both files is whole: each
// record of the topic has one output, a dead letter for each bad record.
// (Before, the second member joined, took a partition, and the two
// appended to both files at once: `{"source":"kafka:events","partitio{"source":…`.)
func TestE2EKafkaGroupOneFileWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	bootstrap := startKfake(t, ctx, dir, kfakeBin, 2)
	stream, bad := withBadRecords(t, e2eDemoFile(t), filepath.Join(dir, "stream.jsonl"), 100)
	const n = 5000
	runProc(t, ctx, dir, sl, "publish", "--kind", "kafka", "--brokers", bootstrap, "--topic", "events", stream)
	cfg := e2eConfig(t, dir, "member.yaml", fmt.Sprintf(`source: {kind: kafka, brokers: [%q], topic: events, group: members}
sinks:
  predictions: {kind: file, path: predictions.jsonl}
  dead_letters: {kind: file, path: dead-letters.jsonl}
`, bootstrap))

	first, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off")
	holder := "pid " + strconv.Itoa(first.cmd.Process.Pid) + " on "
	client := &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 5 * time.Second}
	committed := func() int64 {
		resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "members", Topics: map[string][]int{"events": {0, 1}}})
		if err != nil {
			return -1
		}
		var sum int64
		for _, p := range resp.Topics["events"] {
			sum += max(p.CommittedOffset, 0)
		}
		return sum
	}
	// A commit comes after the outputs of the records it covers are in
	// the files: the first member has them open.
	waitFor(t, ctx, "the first member to commit a record", func() bool { return committed() > 0 })

	second, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--until-end", "--http", "off", "--log-level", "debug")
	second.waitExit(t, ctx)
	host, _ := os.Hostname()
	msg := second.stderr.String()
	if code := second.cmd.ProcessState.ExitCode(); code != 1 || second.stdout.Len() != 0 ||
		!strings.Contains(msg, "sinks.predictions: file sink predictions.jsonl: in use by "+holder+host+" since ") {
		t.Fatalf("the second member: exit %d, stdout %q; want exit 1 and an error naming sinks.predictions, its file and %s%s\nstderr:\n%s",
			code, second.stdout.String(), holder, host, msg)
	}
	if strings.Contains(msg, "kafka consumer group") {
		t.Errorf("the second member spoke to the group before it was refused:\n%s", msg)
	}
	t.Logf("the second member: %s", strings.TrimSpace(msg))

	waitFor(t, ctx, "the first member to commit every record", func() bool { return committed() == n })
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.wait(t, ctx)
	type id struct {
		partition int32
		offset    int64
	}
	seen := map[id]string{}
	for _, f := range []string{"predictions.jsonl", "dead-letters.jsonl"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			var o struct {
				Source    string `json:"source"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
			}
			if err := json.Unmarshal(line, &o); err != nil || o.Source != "kafka:events" {
				t.Fatalf("%s: %.300q is not an output of kafka:events: %v", f, line, err)
			}
			k := id{o.Partition, o.Offset}
			if other, ok := seen[k]; ok {
				t.Fatalf("partition %d offset %d: outputs in %s and %s", k.partition, k.offset, other, f)
			}
			seen[k] = f
		}
	}
	dead := 0
	for _, f := range seen {
		if f == "dead-letters.jsonl" {
			dead++
		}
	}
	if len(seen) != n || dead != len(bad) {
		t.Errorf("%d records with an output, %d of them dead letters; want %d and %d", len(seen), dead, n, len(bad))
	}
}
