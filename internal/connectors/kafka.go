package connectors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// ErrNoPartitions is wrapped by Fetch of a Kafka source opened with
// untilEnd when the settled group assigns this member no partition of the
// topic (more members than partitions, or other live members hold them
// all) and KafkaConfig.AllowEmpty is false. The error names the group,
// the partitions and the members that hold them.
var ErrNoPartitions = errors.New("no partition of the topic is assigned to this member")

// ErrGroupUnsettled is wrapped by Fetch of a Kafka source opened with
// untilEnd when this member has read its own partitions to the end but the
// group did not settle within three settle windows (see NewKafkaSource):
// members kept joining and leaving, so the rest of the topic was never
// either assigned to this member or shown to be held by a live one. The
// error names the partitions and their holders.
var ErrGroupUnsettled = errors.New("the group did not settle")

// KafkaSource reads one topic as a member of a consumer group. It is not
// safe for concurrent use (see Source), except Assignments and Close, which
// may be called from any goroutine.
//
// It drives kafka-go's ConsumerGroup generations itself, with one
// single-partition kafka.Reader per assigned partition, instead of using a
// group kafka.Reader: a group Reader neither says which partitions it owns
// nor refuses a commit for a partition a rebalance gave away (its commit
// would overwrite the new owner's offset), and after a rebalance it rereads
// from the committed offset records it has already delivered. Here:
//
//   - offsets are committed only by Commit, synchronously, with the
//     generation that currently owns the partition;
//   - a partition that stays with this process across a rebalance resumes
//     after the last record Fetch returned, not at the committed offset,
//     so no record reaches the caller twice;
//   - records fetched ahead for a generation that ended are dropped.
//
// Each partition's fetching goroutine gathers the records it fetches into
// batches of that partition (see FetchBatch), which it hands over through
// a shared queue of batches; Fetch takes their records one at a time.
// Memory is bounded by QueueCapacity records per assigned partition (each
// kafka-go reader's queue), plus a batch being gathered per partition and
// QueueCapacity records in the shared queue, rounded up to whole batches
// (kafkaBatchRecords records at most).
type KafkaSource struct {
	cfg      KafkaConfig
	untilEnd bool
	name     string
	dialer   *kafka.Dialer
	group    *kafka.ConsumerGroup
	// first and end are the partitions' log start and end offsets when the
	// source was opened (end = the high watermark: one past the last record).
	first, end map[int]int64
	// start is StartOffset; starts are where the partitions without a
	// committed offset begin, resolved when the source was opened (a
	// partition added since begins at its first record); startWarned:
	// a start that did not apply was logged as a warning once.
	start       Start
	starts      map[int]int64
	startWarned bool
	origin      string // Position.Origin

	batches chan *kafkaBatch // the fetchers' batches, in the order each partition fetched them
	pool    sync.Pool        // of *kafkaBatch, released
	// Fetch's and FetchBatch's: the batch Fetch takes records from, and
	// the index of its next one.
	cur *kafkaBatch
	i   int

	errc   chan error // fatal errors for Fetch; capacity 1
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
	done   chan struct{} // closed by Close

	mu        sync.Mutex
	gen       *kafkaGen     // the live generation, nil between generations
	wake      chan struct{} // closed and replaced whenever gen changes
	next      map[int]int64 // per partition: offset of the next record to deliver
	committed map[int]int64 // per partition: last offset committed by the group, as known here
	lastGen   *kafkaGen     // the last generation this member took part in
	epochs    uint64        // epochs handed out

	// With untilEnd: since when this member has had nothing left to read
	// while the group was not settled (zero while it reads), and whether
	// it asked the group to rebalance since the last generation began.
	waitSince time.Time
	probing   bool
	probes    *atomic.Uint64 // rebalances asked for: the member metadata's user data
}

var (
	_ Assigned       = (*KafkaSource)(nil)
	_ MultiCommitter = (*KafkaSource)(nil)
	_ Positioned     = (*KafkaSource)(nil)
	_ Rereader       = (*KafkaSource)(nil)
)

var _ Source = (*KafkaSource)(nil)

// NewKafkaSource joins cfg.Group on cfg.Topic and starts fetching. It first
// lists the topic's partitions with their start and end offsets, so a bad
// broker address, TLS or SASL setting or a missing topic fails here, with an
// error naming the cause.
//
// With untilEnd, Fetch returns ErrEndOfInput once the source has delivered,
// on every partition a settled group assigns to it, every record below the
// end offset that partition had when NewKafkaSource ran. Partitions that
// were empty then (or whose committed offset is already at the end) count as
// done at once, and records produced later are never delivered.
//
// A group is settled when this member owns every partition of the topic, or
// when its generation has lasted a settle window — the larger of
// SessionTimeout and RebalanceTimeout, plus HeartbeatInterval and a second —
// with no rebalance. A member that died without leaving the group (kill -9
// of a process, a process killed while it joined) still holds partitions
// in the generations the coordinator forms until its session or rebalance
// timeout removes it; the rebalance that follows hands its partitions to the
// live members. So a member that has read its own share waits, logging once
// what it waits for, until either a rebalance gives it more partitions or
// the window proves the holders of the rest alive. Then it ends: with its
// own share (live members hold the rest, and end with theirs), or, when it
// owns no partition, with an error wrapping ErrNoPartitions unless
// AllowEmpty is set. A group that does not settle within three windows
// ends Fetch with an error wrapping ErrGroupUnsettled. A run that ends
// without error has therefore read, in its group, everything it owns, and
// nothing is pending on a dead member. Members of one group are assumed to
// share the timeouts.
//
// ctx bounds the opening requests only; Close stops the source.
func NewKafkaSource(ctx context.Context, cfg KafkaConfig, untilEnd bool) (*KafkaSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		return nil, errors.New("kafka: topic is required for a source")
	}
	cfg = cfg.withDefaults()
	name := "kafka:" + cfg.Topic
	d, err := cfg.dialer()
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	// Reaching the brokers may take up to the dial timeout: say so, rather
	// than wait in silence.
	slow := time.AfterFunc(2*time.Second, func() {
		cfg.Logger.Warn("still connecting to the Kafka brokers", "source", name, "brokers", strings.Join(cfg.Brokers, ","), "dial_timeout", cfg.DialTimeout)
	})
	defer slow.Stop()
	if err := kafkaProbe(ctx, &cfg, d); err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	cluster, first, end, err := kafkaListOffsets(ctx, &cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	start, err := ParseStart(cfg.StartOffset)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: start: %w", name, err)
	}
	starts, err := kafkaStarts(ctx, &cfg, start, first, end)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: start %s: %w", name, start, err)
	}
	probes := new(atomic.Uint64)
	group, err := newKafkaGroup(cfg, name, d, probes)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &KafkaSource{
		cfg:       cfg,
		untilEnd:  untilEnd,
		name:      name,
		dialer:    d,
		group:     group,
		first:     first,
		end:       end,
		start:     start,
		starts:    starts,
		origin:    "kafka cluster " + cluster + " topic " + cfg.Topic,
		batches:   make(chan *kafkaBatch, (cfg.QueueCapacity+kafkaBatchRecords-1)/kafkaBatchRecords),
		errc:      make(chan error, 1),
		cancel:    cancel,
		done:      make(chan struct{}),
		wake:      make(chan struct{}),
		next:      make(map[int]int64),
		committed: make(map[int]int64),
		probes:    probes,
	}
	s.wg.Go(func() { s.run(runCtx) })
	return s, nil
}

// newKafkaGroup returns the kafka-go consumer group of cfg.Group on
// cfg.Topic, with the source's timeouts, its balancers (which carry probes,
// the rebalances this member asked for) and its logging of kafka-go's
// retries (warnings) and generations (debug) under the source's name.
// Joining and the generations are left to the caller (run).
func newKafkaGroup(cfg KafkaConfig, name string, d *kafka.Dialer, probes *atomic.Uint64) (*kafka.ConsumerGroup, error) {
	logger := cfg.Logger
	return kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		// kafka-go retries what fails in joining the group; say what.
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			logger.Warn("kafka consumer group: "+fmt.Sprintf(format, args...), "source", name)
		}),
		// And what it does: joins, generations, assignments (debug).
		Logger: kafka.LoggerFunc(func(format string, args ...any) {
			if logger.Enabled(context.Background(), slog.LevelDebug) {
				logger.Debug("kafka consumer group: "+fmt.Sprintf(format, args...), "source", name)
			}
		}),
		GroupBalancers: []kafka.GroupBalancer{
			probeBalancer{kafka.RangeGroupBalancer{}, probes},
			probeBalancer{kafka.RoundRobinGroupBalancer{}, probes},
		},
		ID:                cfg.Group,
		Brokers:           cfg.Brokers,
		Dialer:            d,
		Topics:            []string{cfg.Topic},
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		JoinGroupBackoff:  cfg.JoinGroupBackoff,
		Timeout:           cfg.RequestTimeout,
		// A partition without a committed offset: startGeneration starts
		// it at starts.
		StartOffset: kafka.FirstOffset,
	})
}

// Name returns "kafka:<topic>".
func (s *KafkaSource) Name() string { return s.name }

// Traits reports ProducerKeyed: a record's Key is its Kafka message key.
func (s *KafkaSource) Traits() Traits { return Traits{ProducerKeyed: true} }

// Position returns the group's committed offset of partition (less one)
// as the generation that assigned the partition to this member said it,
// or as this member committed it since.
func (s *KafkaSource) Position(partition int32) (Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.end[int(partition)]; !ok {
		return Position{}, false
	}
	pos := Position{Committed: -1, First: s.first[int(partition)], Start: -1, Origin: s.origin, Consumer: "kafka group " + s.cfg.Group}
	if c, ok := s.committed[int(partition)]; ok {
		pos.Committed = c - 1
	} else if st, ok := s.starts[int(partition)]; ok && s.start.Kind != StartEarliest {
		// Only while nothing is committed: the group keeps no record of
		// where a partition began.
		pos.Start = st
	}
	return pos, true
}

// Reread reads partition from offset from (from < 0: offset 0) through
// offset through with a reader of its own, outside the group: the group's
// committed offsets and this source's fetching are untouched. It asks the
// broker for the partition's log start offset first, and returns a
// *NotRetainedError when the log no longer starts at or before from, or
// when the offsets it reads skip one: records removed while it read
// (retention), by compaction, or transaction markers, which it cannot
// tell apart. Compacted and transactional topics cannot be reread.
func (s *KafkaSource) Reread(ctx context.Context, partition int32, from, through int64, fn func(*Record) error) error {
	from = max(from, 0)
	if through < from {
		return nil
	}
	_, first, _, err := kafkaListOffsets(ctx, &s.cfg)
	if err != nil {
		return fmt.Errorf("kafka source %s: reread of partition %d: %w", s.name, partition, err)
	}
	f, ok := first[int(partition)]
	if !ok {
		return fmt.Errorf("kafka source %s: reread: topic %s has no partition %d", s.name, s.cfg.Topic, partition)
	}
	if f > from {
		return &NotRetainedError{Partition: partition, From: from, First: f}
	}
	r := s.partitionReader(int(partition))
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		return fmt.Errorf("kafka source %s: reread of partition %d: %w", s.name, partition, err)
	}
	next := from
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return fmt.Errorf("kafka source %s: reread of partition %d at offset %d: %w", s.name, partition, r.Offset(), err)
		}
		if m.Offset != next {
			// Offsets of a partition are contiguous but for removed
			// records (retention passing the reader, which kafka-go
			// follows to the log start; compaction) and transaction
			// markers. Neither can be told apart from the other here:
			// the model the commit stands for may have learned records
			// that are gone.
			return &NotRetainedError{Partition: partition, From: from, First: -1, Gap: m.Offset - 1}
		}
		next = m.Offset + 1
		if m.Offset > through {
			return nil
		}
		rec := Record{Value: m.Value, Key: m.Key, Partition: partition, Offset: m.Offset, Time: m.Time,
			Lag: max(m.HighWaterMark-m.Offset-1, 0)}
		if err := fn(&rec); err != nil {
			return err
		}
		if m.Offset >= through || m.Offset+1 >= m.HighWaterMark {
			return nil
		}
	}
}

// Assignments returns the partitions the group currently assigns to this
// source, sorted, or nil between generations (while a rebalance is under
// way, before the first join, after Close).
func (s *KafkaSource) Assignments() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil {
		return nil
	}
	out := make([]int32, len(s.gen.owned))
	for i, p := range s.gen.owned {
		out[i] = int32(p)
	}
	return out
}

// Fetch returns the next record of a partition this source owns. Records of
// one partition come in offset order; partitions interleave. Fetch never
// commits. Errors: ErrEndOfInput, or errors wrapping ErrNoPartitions or
// ErrGroupUnsettled (see NewKafkaSource), ctx.Err(), and errors no retry
// will cure (authentication, authorization), which name the source.
// Transient broker errors are retried inside.
func (s *KafkaSource) Fetch(ctx context.Context) (Record, error) {
	for {
		b, err := s.take(ctx)
		if err != nil {
			return Record{}, err
		}
		rec := &b.recs[s.i]
		s.i++
		s.mu.Lock()
		if b.gen != s.gen || rec.Offset < s.next[int(rec.Partition)] {
			s.mu.Unlock() // fetched for a generation that ended
			continue
		}
		s.next[int(rec.Partition)] = rec.Offset + 1
		s.mu.Unlock()
		return *rec, nil
	}
}

// FetchBatch returns the next records of one partition this source owns,
// as its fetching goroutine gathered them: up to kafkaBatchRecords records
// or kafkaBatchBytes of values and keys, fewer when the last of them had
// nothing behind it at the broker (a Lag of 0: waiting for more would
// delay a live prediction), when nothing more came within kafkaBatchWait,
// or at an until-end source's end. It errs as Fetch does, and drops, as
// Fetch does, what a generation that ended fetched: the batch is
// delivered as a whole, its records' values and keys kafka-go's own.
// After Fetch, the rest of the batch Fetch took comes first.
func (s *KafkaSource) FetchBatch(ctx context.Context) (Batch, error) {
	for {
		b, err := s.take(ctx)
		if err != nil {
			return nil, err
		}
		b.first, s.cur = s.i, nil
		s.mu.Lock()
		if b.gen != s.gen {
			s.mu.Unlock() // fetched for a generation that ended
			b.Release()
			continue
		}
		p := int(b.recs[0].Partition)
		for b.first < len(b.recs) && b.recs[b.first].Offset < s.next[p] {
			b.first++
		}
		if b.first == len(b.recs) {
			s.mu.Unlock()
			b.Release()
			continue
		}
		s.next[p] = b.recs[len(b.recs)-1].Offset + 1
		s.mu.Unlock()
		return b, nil
	}
}

// take returns the batch the next record comes from (at index s.i of its
// records): the current one (s.cur) while it has records, else the next
// one the fetchers handed over, which becomes the current one. Before each
// record, as Fetch did before it took records in batches, it looks at
// where an until-end source stands and at the stop signals, which come
// before queued records.
func (s *KafkaSource) take(ctx context.Context) (*kafkaBatch, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		wake := s.wake
		var waitUntil time.Time // non-zero: waiting for the group to settle
		if s.untilEnd {
			st, until := s.untilEndLocked()
			switch st {
			case endWait:
				waitUntil = until
			case endReading:
			default: // a probe to ask for, or the end: rare
				if end, err := s.endStepLocked(ctx, st); end {
					return nil, err
				}
				continue
			}
		}
		s.mu.Unlock()
		// The stop signals come before queued records; each is checked
		// alone (a non-blocking receive takes no lock), and a select over
		// all of them only when no batch is queued: a five-way select
		// locks five channels.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		select {
		case <-s.done:
			return nil, s.errClosed()
		default:
		}
		select {
		case err := <-s.errc:
			return nil, err
		default:
		}
		if s.cur != nil {
			if s.i < len(s.cur.recs) {
				return s.cur, nil
			}
			s.cur.Release()
			s.cur = nil
		}
		var b *kafkaBatch
		select {
		case b = <-s.batches:
		default:
			var got bool
			var err error
			b, timer, got, err = s.await(ctx, wake, waitUntil, timer)
			if err != nil {
				return nil, err
			}
			if !got {
				continue
			}
		}
		s.cur, s.i = b, 0
		return b, nil
	}
}

// endStepLocked is Fetch's step of an until-end source that has read
// its share, with s.mu held, which it releases: for endProbe it asks the
// group to rebalance (the generation's probe) and logs why, and returns
// end false, for the caller to check again; for the end states it returns
// end true and the error Fetch returns (ending).
func (s *KafkaSource) endStepLocked(ctx context.Context, st int) (end bool, err error) {
	if st == endProbe {
		gen := s.gen
		gen.asked = true
		s.probes.Add(1)
		s.probing = true
		close(gen.probe)
		s.mu.Unlock()
		s.logProbe(ctx, gen)
		return false, nil
	}
	gen := s.gen
	s.mu.Unlock()
	return true, s.ending(ctx, st, gen)
}

// await is Fetch's wait when no batch is queued: until a batch comes
// (got true), the generation changes (wake) or waitUntil passes when not
// zero (got false: the caller checks again), or an error, the source's
// close or ctx's end (err). It returns the timer it waited with, timer
// itself or, when that was nil, a new one, for the caller to stop.
func (s *KafkaSource) await(ctx context.Context, wake <-chan struct{}, waitUntil time.Time, timer *time.Timer) (b *kafkaBatch, _ *time.Timer, got bool, err error) {
	var settle <-chan time.Time
	if !waitUntil.IsZero() {
		if timer == nil {
			timer = time.NewTimer(time.Until(waitUntil))
		} else {
			timer.Reset(time.Until(waitUntil))
		}
		settle = timer.C
	}
	select {
	case b = <-s.batches:
		return b, timer, true, nil
	case err := <-s.errc:
		return nil, timer, false, err
	case <-wake:
	case <-settle:
	case <-s.done:
		return nil, timer, false, s.errClosed()
	case <-ctx.Done():
		return nil, timer, false, ctx.Err()
	}
	return nil, timer, false, nil
}

func (s *KafkaSource) errClosed() error {
	return fmt.Errorf("kafka source %s: fetch: %w", s.name, errKafkaClosed)
}

var errKafkaClosed = errors.New("source is closed")

// Close leaves the group (which rebalances at once, rather than after
// SessionTimeout), stops fetching and waits for every goroutine the source
// started. It does not commit. Close is idempotent.
func (s *KafkaSource) Close() error {
	var err error
	s.closed.Do(func() {
		close(s.done)
		err = s.group.Close() // ends the generation: its fetchers return
		s.cancel()
		s.wg.Wait()
		s.mu.Lock()
		s.setGenLocked(nil)
		s.mu.Unlock()
	})
	return err
}

// fail hands err to the next Fetch, keeping the first one.
func (s *KafkaSource) fail(err error) {
	select {
	case s.errc <- err:
	default:
	}
}

// fetchPartition reads partition p from offset start until the generation
// ends (ctx), and with untilEnd only up to end, and hands what it reads
// over in batches (handOver; FetchBatch says when a batch is handed over).
// A batch being gathered when the generation ends is dropped. It must not return before
// ctx is done: in kafka-go, a function of a generation that returns ends the
// generation.
func (s *KafkaSource) fetchPartition(ctx context.Context, kg *kafkaGen, p int, start, end int64) {
	if ctx.Err() != nil {
		return
	}
	r := s.partitionReader(p)
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		s.fail(fmt.Errorf("kafka source %s: partition %d: %w", s.name, p, err))
		<-ctx.Done()
		return
	}
	var (
		b       *kafkaBatch // being gathered
		wait    batchWait
		epoch   = kg.epoch[p]
		backoff = 100 * time.Millisecond
	)
	defer wait.stop()
	for {
		fctx := ctx
		if b != nil {
			fctx = wait.get(ctx)
		}
		m, err := r.FetchMessage(fctx)
		if err != nil {
			if ctx.Err() != nil {
				return // b, fetched for a generation that ended, is dropped
			}
			if b != nil {
				// Nothing more within kafkaBatchWait (the broker holds
				// records not delivered: transaction markers, compacted
				// ones), or an error: hand over what came.
				waited := fctx.Err() != nil
				wait.stop()
				if !s.handOver(ctx, b) {
					return
				}
				b = nil
				if waited {
					continue
				}
			}
			if kafkaFatal(err) {
				s.fail(fmt.Errorf("kafka source %s: partition %d: %w", s.name, p, err))
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if b == nil {
			b = s.newBatch(kg)
		}
		// Lag is the reader's: the high watermark of the fetch response
		// that carried m, minus the offset after m.
		lag := max(m.HighWaterMark-m.Offset-1, 0)
		b.recs = append(b.recs, Record{Value: m.Value, Key: m.Key, Partition: int32(p), Offset: m.Offset, Time: m.Time,
			Lag: lag, Epoch: epoch, ack: kg})
		b.bytes += len(m.Value) + len(m.Key)
		atEnd := s.untilEnd && m.Offset+1 >= end
		if lag == 0 || atEnd || len(b.recs) == kafkaBatchRecords || b.bytes >= kafkaBatchBytes {
			wait.stop()
			if !s.handOver(ctx, b) {
				return
			}
			b = nil
		}
		if atEnd {
			r.Close() // release the connection now; stay in the generation
			<-ctx.Done()
			return
		}
	}
}

// partitionReader returns a kafka-go reader of partition p alone, outside
// the group, with the source's fetch settings.
func (s *KafkaSource) partitionReader(p int) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:         s.cfg.Brokers,
		Topic:           s.cfg.Topic,
		Partition:       p,
		Dialer:          s.dialer,
		QueueCapacity:   s.cfg.QueueCapacity,
		MinBytes:        s.cfg.MinBytes,
		MaxBytes:        s.cfg.MaxBytes,
		MaxWait:         s.cfg.MaxWait,
		ReadLagInterval: -1,
	})
}

// kafkaFatal reports whether err is one that retrying will not cure.
func kafkaFatal(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState,
		kafka.GroupAuthorizationFailed, kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
		kafka.InvalidGroupId, kafka.InconsistentGroupProtocol, kafka.GroupMaxSizeReached:
		return true
	}
	return false
}
