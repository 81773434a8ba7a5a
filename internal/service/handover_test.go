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
	"github.com/streamlearn/streamlearn/internal/config"
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
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	const parts, n = 4, 8000
	c, cfg, byPart := keyedTopic(t, parts, n, 21, "handover")

	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	a := startKafkaService(t, ctx, &wg, c, cfg, store, &errs[0])
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
	b := startKafkaService(t, ctx, &wg, c, cfg, store, &errs[1])

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
	checkpointsAreReplays(t, c, store, byPart)
	if owners := len(a.Snapshot().Reports) + len(b.Snapshot().Reports); owners != parts || slices.ContainsFunc(a.Snapshot().Reports, func(r Report) bool {
		return slices.ContainsFunc(b.Snapshot().Reports, func(q Report) bool { return q.Partition == r.Partition })
	}) {
		t.Errorf("models at the end: A %d, B %d, overlapping or not %d in all", len(a.Snapshot().Reports), len(b.Snapshot().Reports), parts)
	}
}

// keyedTopic publishes n generated events (seed), keyed by 16 tenants, to
// topic "events" of a fresh Kafka cluster of parts partitions, and returns
// the example configuration at 2^12 slots (the handover, not the size of
// a checkpoint, is under test, and under the race detector a 2^18 one
// takes a second), the source configuration for group, and each
// partition's records in offset order, read back through a group of
// their own.
func keyedTopic(t *testing.T, parts, n int, seed uint64, group string) (*config.Config, connectors.KafkaConfig, map[int32][][]byte) {
	t.Helper()
	c := loadExampleConfig(t)
	c.Features.Bits = 12
	brokers := kafkaCluster(t, int32(parts), "events")
	values := genEvents(n, seed, 0.1, 0.1, 211)
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "tenant-%d", i%16)
	}
	cfg := kafkaTestConfig(brokers, "events", group)
	sink, err := connectors.NewKafkaSink(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, sink, values, keys)
	return c, cfg, readByPartition(t, brokers, "events", parts)
}

// startKafkaService starts a service reading group cfg, checkpointing
// every 200 records into store, running in wg until ctx ends; its error
// goes to *errp.
func startKafkaService(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c *config.Config, cfg connectors.KafkaConfig, store checkpoint.Store, errp *error) *Service {
	t.Helper()
	src, err := connectors.NewKafkaSource(ctx, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 200})
	wg.Go(func() { *errp = s.Run(ctx) })
	return s
}

// checkpointsAreReplays checks that every partition's checkpoint holds
// its last record and reports exactly what a replay of its records does.
func checkpointsAreReplays(t *testing.T, c *config.Config, store checkpoint.Store, byPart map[int32][][]byte) {
	t.Helper()
	for p, records := range byPart {
		cp, err := store.Load(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if end := int64(len(records) - 1); cp.Position != end {
			t.Errorf("partition %d: checkpoint at %d, want its end %d", p, cp.Position, end)
			continue
		}
		var got pipeline.Report
		if err := json.Unmarshal(cp.Report, &got); err != nil {
			t.Fatal(err)
		}
		data := append(bytes.Join(records, []byte("\n")), '\n')
		sameReport(t, fmt.Sprintf("partition %d's checkpoint", p), got, replayReport(t, c, data))
	}
}

// readByPartition reads topic back, each partition's records in offset
// order (no gap), through a consumer group of its own; every one of parts
// partitions must hold records.
func readByPartition(t *testing.T, brokers []string, topic string, parts int) map[int32][][]byte {
	t.Helper()
	return readByPartitionAs(t, brokers, topic, parts, "readback")
}

// readByPartitionAs is readByPartition through the consumer group group.
func readByPartitionAs(t *testing.T, brokers []string, topic string, parts int, group string) map[int32][][]byte {
	t.Helper()
	byPart := map[int32][][]byte{}
	rb := openKafka(t, kafkaTestConfig(brokers, topic, group))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		r, err := rb.Fetch(ctx)
		if errors.Is(err, connectors.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != int64(len(byPart[r.Partition])) {
			t.Fatalf("read back partition %d: offset %d after %d records", r.Partition, r.Offset, len(byPart[r.Partition]))
		}
		byPart[r.Partition] = append(byPart[r.Partition], bytes.Clone(r.Value))
	}
	if len(byPart) != parts {
		t.Fatalf("keys landed in %d partitions of %d: pick other keys", len(byPart), parts)
	}
	return byPart
}

// heldStore stands for a process whose checkpoint writes are held up
// (paused in the middle of one, say): while held, a Save keeps its
// checkpoint and fails, so the service commits nothing; land writes them
// all, late, in the order they were made.
type heldStore struct {
	checkpoint.Store
	mu   sync.Mutex
	hold bool
	held []*checkpoint.Checkpoint
}

var errHeld = errors.New("held up")

func (h *heldStore) Save(ctx context.Context, c *checkpoint.Checkpoint) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hold {
		cp := *c
		cp.State, cp.Report = bytes.Clone(c.State), bytes.Clone(c.Report)
		h.held = append(h.held, &cp)
		return errHeld
	}
	return h.Store.Save(ctx, c)
}

func (h *heldStore) setHold(hold bool) {
	h.mu.Lock()
	h.hold = hold
	h.mu.Unlock()
}

// land writes the held checkpoints and returns their partitions and
// positions.
func (h *heldStore) land(t *testing.T, ctx context.Context) map[int32][]int64 {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	out := map[int32][]int64{}
	for _, c := range held {
		if err := h.Store.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		out[c.Partition] = append(out[c.Partition], c.Position)
	}
	return out
}

// A process that loses partitions while its checkpoint writes are held up
// (paused, say) finishes them after the new owner has learned those
// partitions to their end and checkpointed them: the late, older
// checkpoints must not replace the newer ones. Service A's checkpoints are
// held from its start until B, which joins once A has made one of every
// partition, has checkpointed the end of every partition it took; then
// they land. Every partition's checkpoint must still be its whole replay.
func TestKafkaLateCheckpointAfterHandover(t *testing.T) {
	// A's held saves fail; the backoff after failed saves (1 s doubling
	// to a minute) is not under test, and at its defaults a hold of 15 s
	// on a loaded machine left A no save before the test's deadline.
	defer func(lo, hi time.Duration) { saveBackoffMin, saveBackoffMax = lo, hi }(saveBackoffMin, saveBackoffMax)
	saveBackoffMin, saveBackoffMax = 10*time.Millisecond, 100*time.Millisecond
	const parts, n = 4, 8000
	c, cfg, byPart := keyedTopic(t, parts, n, 23, "late")
	end := func(p int32) int64 { return int64(len(byPart[p]) - 1) }

	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	held := &heldStore{Store: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard: 8 s on a quiet machine, past 60 s under a twice-loaded suite
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	// A's writes are held up from the start (each attempt kept: every
	// 200 records of a partition, so positions below each partition's end
	// whatever A has learned by the time B joins); once A has made one of
	// every partition, B joins.
	held.setHold(true)
	a := startKafkaService(t, ctx, &wg, c, cfg, held, &errs[0])
	for {
		held.mu.Lock()
		ps := map[int32]bool{}
		for _, c := range held.held {
			ps[c.Partition] = true
		}
		held.mu.Unlock()
		if len(ps) == parts {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("service A made no held checkpoint of some partition")
		}
		time.Sleep(time.Millisecond)
	}
	b := startKafkaService(t, ctx, &wg, c, cfg, dir, &errs[1])

	// B takes half the partitions and checkpoints their ends.
	var taken []int32
	for {
		taken = taken[:0]
		for _, r := range b.Snapshot().Reports {
			if cp, err := dir.Load(ctx, r.Partition); err == nil && cp.Position == end(r.Partition) {
				taken = append(taken, r.Partition)
			}
		}
		if len(taken) > 0 && len(taken) == len(b.Snapshot().Reports) && len(a.Snapshot().Reports) < parts {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("B checkpointed the end of %v only; A has %d models", taken, len(a.Snapshot().Reports))
		}
		time.Sleep(10 * time.Millisecond)
	}
	held.setHold(false)
	landed := held.land(t, ctx)
	t.Logf("B took %v and checkpointed their ends; A's held checkpoints landed late: %v", taken, landed)
	for _, p := range taken {
		if len(landed[p]) == 0 {
			t.Fatalf("no held checkpoint of partition %d, which B took: nothing under test", p)
		}
		if cp, err := dir.Load(ctx, p); err != nil || cp.Position != end(p) {
			t.Fatalf("partition %d after A's late checkpoints: position %d, %v; want its end %d", p, cp.Position, err, end(p))
		}
	}

	// A learns its own partitions to their ends too.
	for done := 0; done < parts; {
		done = 0
		for p := range int32(parts) {
			if cp, err := dir.Load(ctx, p); err == nil && cp.Position == end(p) {
				done++
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d partitions checkpointed at their end", done, parts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Give any save still in flight time to land, then stop.
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("service %d: %v", i, err)
		}
	}
	checkpointsAreReplays(t, c, dir, byPart)
}

// A partition a rebalance gives to another member leaves this one: its
// model, its report and metrics (both made of the snapshot) and its
// interval reports. Services A and B share a 4-partition topic's group, B
// joining mid-stream, and publish their reports (every 10 events of a
// model, where checkpoints come every 1,000 records) to one sink. Each partition ends in exactly one of the two
// services' reports, with or without checkpoints. With checkpoints, A
// checkpoints a partition's model as it gives it up, so B's reports of a
// partition go on from A's, never back, and every checkpoint is its
// partition's replay.
func TestKafkaRevokedPartitionsLeave(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	for _, withCheckpoints := range []bool{false, true} {
		t.Run(map[bool]string{false: "no checkpoints", true: "checkpoints"}[withCheckpoints], func(t *testing.T) {
			t.Parallel() // each its own cluster and group
			const parts, n = 4, 8000
			c, cfg, byPart := keyedTopic(t, parts, n, 23, "revoke")
			var store checkpoint.Store
			if withCheckpoints {
				dir, err := checkpoint.OpenDir(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				store = dir
			}
			reports := &memSink{}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			var srcs []*connectors.KafkaSource
			start := func(errp *error) *Service {
				src, err := connectors.NewKafkaSource(ctx, cfg, false)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { src.Close() })
				srcs = append(srcs, src)
				s := newService(t, Options{Config: c, Source: src, Checkpoints: store, CommitEvery: 1000,
					Reports: reports, ReportEvery: 10, SnapshotInterval: 20 * time.Millisecond})
				wg.Go(func() { *errp = s.Run(ctx) })
				return s
			}
			a := start(&errs[0])
			for seen := uint64(0); seen < n/8; {
				seen = 0
				for _, r := range a.Snapshot().Reports {
					seen += r.Events
				}
				if ctx.Err() != nil {
					t.Fatal("service A learned too little")
				}
				time.Sleep(time.Millisecond)
			}
			// With checkpoints, B joins once each of A's models has its
			// first: a model given up before it has none stays unsaved (its
			// new owner starts where its own start says, by design), and
			// its reports would go back. A's first commit round, due at
			// its 1,000th record, may still be saving here.
			for p := int32(0); withCheckpoints && p < parts; p++ {
				for _, err := store.Load(ctx, p); err != nil; _, err = store.Load(ctx, p) {
					if ctx.Err() != nil {
						t.Fatalf("no checkpoint of partition %d: %v", p, err)
					}
					time.Sleep(time.Millisecond)
				}
			}
			b := start(&errs[1])
			// As many events again while B joins: the partitions move
			// in the middle of a stream.
			more := genEvents(n, 24, 0.1, 0.1, 211)
			keys := make([][]byte, len(more))
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "tenant-%d", i%16)
			}
			sink, err := connectors.NewKafkaSink(cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			publishAll(t, sink, more, keys)
			byPart = readByPartitionAs(t, cfg.Brokers, "events", parts, "readback-all")
			// Done when the group gave each partition to one of the two,
			// each service's models are of its own partitions only, every
			// model read to its end, and so for ten snapshots in a row (with
			// checkpoints, each partition's is at its end too).
			settled := func() bool {
				own := [2][]int32{srcs[0].Assignments(), srcs[1].Assignments()}
				all := slices.Concat(own[0], own[1])
				slices.Sort(all)
				if len(own[0]) == 0 || len(own[1]) == 0 || !slices.Equal(all, []int32{0, 1, 2, 3}) {
					return false
				}
				for i, s := range []*Service{a, b} {
					for _, r := range s.Snapshot().Reports {
						if !slices.Contains(own[i], r.Partition) || r.ConsumerLag != nil && *r.ConsumerLag != 0 {
							return false
						}
					}
				}
				if withCheckpoints {
					for p := range int32(parts) {
						if cp, err := store.Load(ctx, p); err != nil || cp.Position != int64(len(byPart[p])-1) {
							return false
						}
					}
				}
				return true
			}
			for stable := 0; stable < 10; {
				if ctx.Err() != nil {
					var got [2][]int32
					for i, s := range []*Service{a, b} {
						for _, r := range s.Snapshot().Reports {
							got[i] = append(got[i], r.Partition)
						}
					}
					t.Fatalf("A is assigned %v and has models of %v; B is assigned %v and has models of %v: want each partition assigned to one, whose models only it has",
						srcs[0].Assignments(), got[0], srcs[1].Assignments(), got[1])
				}
				if settled() {
					stable++
				} else {
					stable = 0
				}
				time.Sleep(20 * time.Millisecond)
			}
			owned := [2][]int32{srcs[0].Assignments(), srcs[1].Assignments()}
			cancel()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("service %d: %v", i, err)
				}
			}
			var final []int32
			for i, s := range []*Service{a, b} {
				reps, err := s.Reports()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range reps {
					final = append(final, r.Partition)
					if !slices.Contains(owned[i], r.Partition) {
						t.Errorf("service %d's final report has partition %d, which it gave away (it owns %v)", i, r.Partition, owned[i])
					}
				}
			}
			slices.Sort(final)
			if len(slices.Compact(slices.Clone(final))) != len(final) || withCheckpoints && !slices.Equal(final, []int32{0, 1, 2, 3}) {
				t.Errorf("partitions in the final reports of A and B: %v, want each at most once (with checkpoints, each of 0..3 once)", final)
			}
			if !withCheckpoints {
				return
			}
			last := map[int32]uint64{}
			for i, m := range reports.messages() {
				var r Report
				if err := json.Unmarshal(m, &r); err != nil {
					t.Fatal(err)
				}
				if r.Events < last[r.Partition] {
					t.Errorf("report %d of partition %d: %d events after %d", i, r.Partition, r.Events, last[r.Partition])
				}
				last[r.Partition] = r.Events
			}
			checkpointsAreReplays(t, c, store, byPart)
		})
	}
}
