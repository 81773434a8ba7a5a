package connectors

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// fetchBatches takes s's batches until ErrEndOfInput, checking that each
// is records of one partition, Len of them (at most kafkaBatchRecords),
// Last the last of them without its value and key, and returns the
// records (values as they are: never reused) and the largest batch.
func fetchBatches(t *testing.T, s *KafkaSource) (recs map[int32][]Record, largest int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs = map[int32][]Record{}
	for {
		b, err := s.FetchBatch(ctx)
		if errors.Is(err, ErrEndOfInput) {
			return recs, largest
		}
		if err != nil {
			t.Fatal(err)
		}
		rs, err := b.Records()
		if err != nil || len(rs) != b.Len() || b.Len() == 0 || b.Len() > kafkaBatchRecords {
			t.Fatalf("a batch of %d records: Records() %d, %v", b.Len(), len(rs), err)
		}
		last := b.Last()
		if r := rs[len(rs)-1]; last.Offset != r.Offset || last.Epoch != r.Epoch || last.Value != nil || last.Key != nil || last.ack != r.ack {
			t.Fatalf("Last() = %+v, the last record %+v", last, r)
		}
		for _, r := range rs {
			if r.Partition != b.Partition() {
				t.Fatalf("a batch of partition %d holds a record of partition %d", b.Partition(), r.Partition)
			}
		}
		recs[b.Partition()] = append(recs[b.Partition()], rs...)
		largest = max(largest, b.Len())
		b.Release()
	}
}

// TestKafkaFetchBatch: FetchBatch hands a topic of two partitions over in
// batches of one partition, every record once, each partition in offset
// order with the keys and values produced, the lag of a record the
// records after it; a backlog comes in batches of kafkaBatchRecords.
// The last record of a batch commits its partition: Position says so.
func TestKafkaFetchBatch(t *testing.T) {
	const n, parts = 3000, 2
	// A backlog's batch is full unless 256 records take longer than
	// kafkaBatchWait to come, as they may on a loaded machine under -race:
	// a wait of a minute (given back after the source's Close, a cleanup
	// registered before its own) leaves only the backlog's doing.
	wait := kafkaBatchWait
	t.Cleanup(func() { kafkaBatchWait = wait })
	kafkaBatchWait = time.Minute
	cfg := kafkaTestTopic(t, 1, parts, n, "batches")
	s := kafkaOpen(t, cfg, true)
	recs, largest := fetchBatches(t, s)
	if largest != kafkaBatchRecords {
		t.Errorf("the largest batch of a backlog of %d records a partition holds %d, want %d", n/parts, largest, kafkaBatchRecords)
	}
	for p := range int32(parts) {
		rs := recs[p]
		if len(rs) != n/parts {
			t.Fatalf("partition %d: %d records, want %d", p, len(rs), n/parts)
		}
		for i, r := range rs {
			e := kafkaDecode(t, r)
			if r.Offset != int64(i) || e.I != i*parts+int(p) || string(r.Key) != "k"+strconv.Itoa(e.I) || r.Lag != int64(n/parts-1-i) {
				t.Fatalf("partition %d record %d: offset %d, event %d, key %q, lag %d", p, i, r.Offset, e.I, r.Key, r.Lag)
			}
		}
		if err := s.Commit(t.Context(), rs[len(rs)-1]); err != nil {
			t.Fatal(err)
		}
		if pos, _ := s.Position(p); pos.Committed != int64(n/parts-1) {
			t.Errorf("partition %d: committed %d, want %d", p, pos.Committed, n/parts-1)
		}
	}
}

// TestKafkaFetchThenFetchBatch: after Fetch, FetchBatch hands over the
// rest of the batch Fetch took records from first, then the next ones:
// every record once, in order.
func TestKafkaFetchThenFetchBatch(t *testing.T) {
	const n = 600
	cfg := kafkaTestTopic(t, 1, 1, n, "mixed")
	s := kafkaOpen(t, cfg, true)
	for i := range 10 {
		r, err := s.Fetch(t.Context())
		if err != nil || r.Offset != int64(i) {
			t.Fatalf("Fetch %d: offset %d, %v", i, r.Offset, err)
		}
	}
	recs, _ := fetchBatches(t, s)
	if rs := recs[0]; len(rs) != n-10 || rs[0].Offset != 10 || rs[len(rs)-1].Offset != n-1 {
		t.Fatalf("FetchBatch after 10 Fetches: %d records", len(rs))
	}
}

// TestKafkaFetchBatchRebalance: a rebalance that takes one of two
// partitions away drops the batches the generation that ended fetched
// but FetchBatch had not handed over: after it, only the kept
// partition's records come, resuming after the last one delivered, in
// the same epoch.
func TestKafkaFetchBatchRebalance(t *testing.T) {
	const n, parts = 4000, 2
	cfg := kafkaTestTopic(t, 1, parts, n, "rebatch")
	cfg.QueueCapacity = 4 * kafkaBatchRecords // batches of both partitions queued
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := kafkaOpen(t, cfg, false)
	lastOf := map[int32]Record{}
	for len(lastOf) < parts { // nothing committed
		b, err := a.FetchBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lastOf[b.Partition()] = b.Last()
		b.Release()
	}
	// Let the fetchers fill the queue with batches of both partitions.
	time.Sleep(100 * time.Millisecond)
	b := kafkaOpen(t, cfg, false)
	for len(a.Assignments()) != 1 || len(b.Assignments()) != 1 {
		if ctx.Err() != nil {
			t.Fatalf("no split: %v and %v", a.Assignments(), b.Assignments())
		}
		time.Sleep(10 * time.Millisecond)
	}
	kept := a.Assignments()[0]
	kafkaProduce(t, cfg, parts, n, 2*10)
	next := lastOf[kept].Offset + 1
	for next < n/parts+10 {
		bt, err := a.FetchBatch(ctx)
		if err != nil {
			t.Fatalf("at offset %d of partition %d: %v", next, kept, err)
		}
		rs, _ := bt.Records()
		if bt.Partition() != kept || rs[0].Offset != next || rs[0].Epoch != lastOf[kept].Epoch {
			t.Fatalf("after the rebalance: a batch of partition %d from offset %d epoch %d; want partition %d from %d epoch %d",
				bt.Partition(), rs[0].Offset, rs[0].Epoch, kept, next, lastOf[kept].Epoch)
		}
		next = bt.Last().Offset + 1
		bt.Release()
	}
}
