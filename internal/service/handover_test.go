package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// A Kafka rebalance hands a partition's model over through its
// checkpoint: service A learns a 4-partition topic alone, service B joins
// the group mid-stream and takes half the partitions, restoring their
// models from the checkpoints A saved (one directory, shared), and reads
// on from the group's commits, skipping what those models hold. When the
// topic is consumed, each partition's checkpoint is exactly a replay of
// that partition: nothing lost, nothing learned twice across the move.
func TestKafkaHandoverThroughCheckpoint(t *testing.T) {
	const parts, n = 4, 8000
	c := loadExampleConfig(t)
	// 2^12 slots: the handover, not the size of a checkpoint, is under
	// test, and under the race detector a 2^18 one takes a second.
	c.Features.Bits = 12
	brokers := kafkaCluster(t, parts, "events")
	values := genEvents(n, 21, 0.1, 0.1, 211)
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "tenant-%d", i%16)
	}
	cfg := kafkaTestConfig(brokers, "events", "handover")
	sink, err := connectors.NewKafkaSink(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, sink, values, keys)

	// Each partition's records in offset order, read by a group of its own.
	byPart := map[int32][][]byte{}
	rb := openKafka(t, kafkaTestConfig(brokers, "events", "readback"))
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	for {
		r, err := rb.Fetch(rctx)
		if errors.Is(err, connectors.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		byPart[r.Partition] = append(byPart[r.Partition], bytes.Clone(r.Value))
	}
	if len(byPart) != parts {
		t.Fatalf("keys landed in %d partitions of %d", len(byPart), parts)
	}

	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	startService := func(i int) *Service {
		src, err := connectors.NewKafkaSource(ctx, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 200})
		wg.Go(func() { errs[i] = s.Run(ctx) })
		return s
	}
	a := startService(0)
	seen := func(s *Service) (n uint64) {
		for _, r := range s.Snapshot().Reports {
			n += r.Events
		}
		return n
	}
	for seen(a) < n/8 {
		if ctx.Err() != nil {
			t.Fatal("service A learned too little")
		}
		time.Sleep(time.Millisecond)
	}
	before := map[int32]int64{}
	for p := range int32(parts) {
		if cp, err := store.Load(ctx, p); err == nil {
			before[p] = cp.Position
		}
	}
	b := startService(1)

	// Done when every partition's checkpoint holds its last record.
	for done := 0; done < parts; {
		done = 0
		for p := range int32(parts) {
			if cp, err := store.Load(ctx, p); err == nil && cp.Position == int64(len(byPart[p])-1) {
				done++
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the topic was not consumed: %d of %d partitions checkpointed at their end", done, parts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("service %d: %v", i, err)
		}
	}
	// B restored at least one model A had started.
	var handed []int32
	for _, r := range b.Snapshot().Reports {
		if pos, ok := before[r.Partition]; ok && pos >= 0 {
			handed = append(handed, r.Partition)
		}
	}
	t.Logf("A's checkpoints when B joined: %v; B's partitions: %d, handed over with state: %v", before, len(b.Snapshot().Reports), handed)
	if len(handed) == 0 {
		t.Errorf("no partition was handed over with a model (A had checkpoints %v)", before)
	}
	for p := range int32(parts) {
		cp, err := store.Load(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var got pipeline.Report
		if err := json.Unmarshal(cp.Report, &got); err != nil {
			t.Fatal(err)
		}
		data := append(bytes.Join(byPart[p], []byte("\n")), '\n')
		sameReport(t, fmt.Sprintf("partition %d's checkpoint", p), got, replayReport(t, c, data))
	}
	if owners := len(a.Snapshot().Reports) + len(b.Snapshot().Reports); owners != parts || slices.ContainsFunc(a.Snapshot().Reports, func(r Report) bool {
		return slices.ContainsFunc(b.Snapshot().Reports, func(q Report) bool { return q.Partition == r.Partition })
	}) {
		t.Errorf("models at the end: A %d, B %d, overlapping or not %d in all", len(a.Snapshot().Reports), len(b.Snapshot().Reports), parts)
	}
}
