package connectors

import (
	"context"
	"fmt"
	"slices"
)

// Commit commits r.Offset+1 for r's partition with the generation that
// owns the partition now: r and every earlier record of its partition will
// not be delivered again to this group. It is synchronous (one round trip
// to the coordinator, bounded by RequestTimeout; ctx is honoured while
// waiting for a rebalance to finish) and cumulative, so committing the last learned
// record of each partition is enough; a commit at or below the offset the
// group already has is a no-op. It returns an error wrapping
// ErrPartitionRevoked when a rebalance gave the partition to another
// member.
func (s *KafkaSource) Commit(ctx context.Context, r Record) error {
	if errs := s.CommitMany(ctx, []Record{r}); errs != nil {
		return errs[0]
	}
	return nil
}

// CommitMany commits the records, each the last of its partition to
// commit, in one offset commit request: what Commit does for one, for
// every partition of a commit round at once.
func (s *KafkaSource) CommitMany(ctx context.Context, recs []Record) []error {
	c := kafkaCommit{name: s.name, n: len(recs)}
	var pending []int // indices of recs not yet committed
	for i, r := range recs {
		if _, ok := r.ack.(*kafkaGen); !ok {
			c.fail(i, fmt.Errorf("kafka source %s: commit: record was not fetched from a Kafka source", s.name))
			continue
		}
		pending = append(pending, i)
	}
	for len(pending) > 0 {
		var gen *kafkaGen
		var wake chan struct{}
		pending, gen, wake = s.dropCommitted(recs, pending)
		if len(pending) == 0 {
			break
		}
		if gen == nil { // a rebalance is under way
			if err := s.awaitGen(ctx, wake); err != nil {
				c.failAll(recs, pending, err)
				break
			}
			continue
		}
		var offsets map[int]int64
		pending, offsets = c.owned(gen, recs, pending)
		if len(pending) == 0 {
			break
		}
		err := gen.g.CommitOffsets(map[string]map[int]int64{s.cfg.Topic: offsets})
		if err == nil {
			s.noteCommitted(offsets)
			break
		}
		if !kafkaGenerationError(err) {
			c.failAll(recs, pending, err)
			break
		}
		// The generation is ending: retry with the next one, for the
		// partitions it still gives this member.
		if !s.genEnded(ctx, gen) {
			c.failAll(recs, pending, err)
			break
		}
	}
	return c.errs
}

// kafkaCommit is one CommitMany call's errors, one per record (nil while
// none failed), for its steps that fail records. The records and the
// indices of those not yet committed (pending) are the call's, which the
// steps take (and return): kept apart from the errors, which escape, they
// stay on the caller's stack.
type kafkaCommit struct {
	name string // the source's
	n    int    // the records
	errs []error
}

// fail sets record i's error.
func (c *kafkaCommit) fail(i int, err error) {
	if c.errs == nil {
		c.errs = make([]error, c.n)
	}
	c.errs[i] = err
}

// failAll sets the error of every record of pending (indices of recs) to
// err, naming the record's partition and offset.
func (c *kafkaCommit) failAll(recs []Record, pending []int, err error) {
	for _, i := range pending {
		p, off := recs[i].Partition, recs[i].Offset+1
		c.fail(i, fmt.Errorf("kafka source %s: commit partition %d offset %d: %w", c.name, p, off, err))
	}
}

// owned fails the records of pending (indices of recs) of partitions gen
// does not give this member (ErrPartitionRevoked), and returns pending
// without them and the offsets to commit for the others, the highest per
// partition.
func (c *kafkaCommit) owned(gen *kafkaGen, recs []Record, pending []int) ([]int, map[int]int64) {
	offsets := make(map[int]int64, len(pending))
	pending = slices.DeleteFunc(pending, func(i int) bool {
		p, off := int(recs[i].Partition), recs[i].Offset+1
		if !gen.owns(p) {
			c.fail(i, fmt.Errorf("kafka source %s: commit partition %d offset %d: %w", c.name, p, off, ErrPartitionRevoked))
			return true
		}
		offsets[p] = max(offsets[p], off)
		return false
	})
	return pending, offsets
}

// dropCommitted returns pending, indices of recs, without the records the
// group has committed already, as known here, the live generation (nil
// during a rebalance) and the channel its change closes.
func (s *KafkaSource) dropCommitted(recs []Record, pending []int) ([]int, *kafkaGen, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending = slices.DeleteFunc(pending, func(i int) bool {
		c, ok := s.committed[int(recs[i].Partition)]
		return ok && recs[i].Offset+1 <= c
	})
	return pending, s.gen, s.wake
}

// awaitGen waits for the generation to change (wake closed) and returns
// nil; errKafkaClosed when the source closes first, ctx.Err() when ctx
// ends first. Failing the records is left to the caller.
func (s *KafkaSource) awaitGen(ctx context.Context, wake chan struct{}) error {
	select {
	case <-wake:
		return nil
	case <-s.done:
		return errKafkaClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// genEnded reports whether gen, whose commit failed because it is ending,
// gave way to the next generation: at once when gen is no longer the live
// one, else when it changes before the source closes or ctx ends (false).
func (s *KafkaSource) genEnded(ctx context.Context, gen *kafkaGen) bool {
	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return true
	}
	wake := s.wake
	s.mu.Unlock()
	return s.awaitGen(ctx, wake) == nil
}

// noteCommitted records offsets as committed by the group, where they are
// past what is known committed.
func (s *KafkaSource) noteCommitted(offsets map[int]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, off := range offsets {
		if off > s.committed[p] {
			s.committed[p] = off
		}
	}
}
