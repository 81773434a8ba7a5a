package connectors

import (
	"context"
	"time"
)

// A partition's fetching goroutine hands its batch over at
// kafkaBatchRecords records or kafkaBatchBytes of values and keys, when
// its last record had nothing behind it at the broker, or when nothing
// more came kafkaBatchWait after it began waiting with records gathered.
const (
	kafkaBatchRecords = 256
	kafkaBatchBytes   = 256 << 10
)

// kafkaBatchWait is a variable for a test to lengthen (while no source
// fetches), so that a backlog's batches are full however slow the machine.
var kafkaBatchWait = 5 * time.Millisecond

// kafkaBatch is records of one partition fetched by one generation: the
// Batch of a KafkaSource. Its records' Value and Key are kafka-go's
// messages' own, never reused by the source.
type kafkaBatch struct {
	s     *KafkaSource
	gen   *kafkaGen
	recs  []Record
	first int // the records before it were delivered before (Fetch) or dropped
	bytes int // of the records' values and keys
}

var _ Batcher = (*KafkaSource)(nil)

// Partition returns the partition of the batch's records.
func (b *kafkaBatch) Partition() int32 { return b.recs[0].Partition }

// Len returns the number of the batch's records.
func (b *kafkaBatch) Len() int { return len(b.recs) - b.first }

// Last returns the batch's last record without its value and key.
func (b *kafkaBatch) Last() Record {
	r := b.recs[len(b.recs)-1]
	r.Value, r.Key = nil, nil
	return r
}

// Records returns the batch's records; never an error.
func (b *kafkaBatch) Records() ([]Record, error) { return b.recs[b.first:], nil }

// Release gives the batch back to its source.
func (b *kafkaBatch) Release() {
	clear(b.recs)
	b.recs, b.first, b.bytes, b.gen = b.recs[:0], 0, 0, nil
	b.s.pool.Put(b)
}

// newBatch returns an empty batch of generation kg: a released one, or a
// new one.
func (s *KafkaSource) newBatch(kg *kafkaGen) *kafkaBatch {
	b, _ := s.pool.Get().(*kafkaBatch)
	if b == nil {
		b = &kafkaBatch{s: s, recs: make([]Record, 0, kafkaBatchRecords)}
	}
	b.gen = kg
	return b
}

// handOver queues b for Fetch, waiting while the queue is full, until
// ctx (the generation's) is done: then it drops b and returns false.
func (s *KafkaSource) handOver(ctx context.Context, b *kafkaBatch) bool {
	// The queue usually has room: a send that cannot block takes one
	// channel's lock, where a select with ctx takes two.
	select {
	case s.batches <- b:
		return true
	default:
	}
	select {
	case s.batches <- b:
		return true
	case <-ctx.Done():
		b.Release()
		return false
	}
}

// batchWait is a fetching goroutine's context for waiting with records
// gathered: the generation's, ended kafkaBatchWait after the wait began.
// It is made when the first wait of a batch begins (a batch handed over
// at once makes none) and lasts until stop.
type batchWait struct {
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

// get returns the context, made from parent when the wait begins.
func (w *batchWait) get(parent context.Context) context.Context {
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithCancel(parent)
		w.timer = time.AfterFunc(kafkaBatchWait, w.cancel)
	}
	return w.ctx
}

// stop ends the wait, if one began.
func (w *batchWait) stop() {
	if w.ctx != nil {
		w.timer.Stop()
		w.cancel()
		w.ctx, w.cancel, w.timer = nil, nil, nil
	}
}
