package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestE2EKafkaScaleOut: two `streamlearn run` processes in one consumer
// group on a 4-partition topic of a kfake broker process. The partitions
// split between them; every event is learned exactly once; each partition's
// model equals a replay of that partition's records in offset order.
//
// Both processes join before the events are published, so no partition
// changes hands while it has records learned but not committed: handing a
// model over through a checkpoint on rebalance is issue 5's.
func TestE2EKafkaScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)

	bootstrap := startKfake(t, ctx, dir, kfakeBin, 4)

	// The demo, keyed by 16 tenants: publish partitions by key.
	demo := e2eDemoFile(t)
	events, n := keyEvents(t, dir, demo)

	const group = "scale"
	cfg := e2eConfig(t, dir, "kafka.yaml", fmt.Sprintf(
		"source: {kind: kafka, brokers: [%q], topic: events, group: %s}\n", bootstrap, group))
	a, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--report", "json")
	b, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--report", "json")

	client := &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 5 * time.Second}
	waitFor(t, ctx, "both members to own two partitions each", func() bool {
		resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].GroupState != "Stable" || len(resp.Groups[0].Members) != 2 {
			return false
		}
		for _, m := range resp.Groups[0].Members {
			owned := 0
			for _, tp := range m.MemberAssignments.Topics {
				owned += len(tp.Partitions)
			}
			if owned != 2 {
				return false
			}
		}
		return true
	})

	runProc(t, ctx, dir, sl, "publish", "-c", cfg, events)
	waitFor(t, ctx, "the group to commit every event", func() bool {
		resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{"events": {0, 1, 2, 3}}})
		if err != nil {
			return false
		}
		var sum int64
		for _, p := range resp.Topics["events"] {
			if p.CommittedOffset > 0 {
				sum += p.CommittedOffset
			}
		}
		return sum == int64(n)
	})
	for _, p := range []*proc{a, b} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	a.wait(t, ctx)
	b.wait(t, ctx)

	// Each process printed one report per partition it owned.
	type liveReport struct {
		Partition int32  `json:"partition"`
		Events    uint64 `json:"events"`
	}
	live := map[int32][]byte{}
	var total uint64
	for i, p := range []*proc{a, b} {
		var parts []int32
		for line := range bytes.Lines(p.stdout.Bytes()) {
			var r liveReport
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatalf("process %d printed %q: %v", i, line, err)
			}
			if _, dup := live[r.Partition]; dup {
				t.Errorf("partition %d has a model in both processes", r.Partition)
			}
			live[r.Partition] = bytes.Clone(line)
			parts = append(parts, r.Partition)
			total += r.Events
		}
		if len(parts) != 2 {
			t.Errorf("process %d learned partitions %v, want two of the four", i, parts)
		}
	}
	if total != uint64(n) || len(live) != 4 {
		t.Fatalf("%d events learned over %d partitions, want %d over 4: every event exactly once", total, len(live), n)
	}

	// The records of each partition, in offset order, replayed on their own.
	want := replayPartitions(t, ctx, dir, sl, cfg)
	for p, line := range live {
		w, ok := want[p]
		if !ok {
			t.Fatalf("partition %d has a model but no records", p)
		}
		sameReport(t, fmt.Sprintf("partition %d's model", p), normReport(t, "run", line, "", w.events), w.report)
	}
}

// waitFor polls cond every 100ms until it holds, failing t at ctx's end.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
