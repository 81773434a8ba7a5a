package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
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
