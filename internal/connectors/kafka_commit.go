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
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(recs))
		}
		errs[i] = err
	}
	var pending []int // indices of recs not yet committed
	for i, r := range recs {
		if _, ok := r.ack.(*kafkaGen); !ok {
			fail(i, fmt.Errorf("kafka source %s: commit: record was not fetched from a Kafka source", s.name))
			continue
		}
		pending = append(pending, i)
	}
	failAll := func(err error) {
		for _, i := range pending {
			p, off := recs[i].Partition, recs[i].Offset+1
			fail(i, fmt.Errorf("kafka source %s: commit partition %d offset %d: %w", s.name, p, off, err))
		}
	}
	for len(pending) > 0 {
		s.mu.Lock()
		gen, wake := s.gen, s.wake
		pending = slices.DeleteFunc(pending, func(i int) bool {
			c, ok := s.committed[int(recs[i].Partition)]
			return ok && recs[i].Offset+1 <= c
		})
		s.mu.Unlock()
		if len(pending) == 0 {
			break
		}
		if gen == nil { // a rebalance is under way
			select {
			case <-wake:
				continue
			case <-s.done:
				failAll(errKafkaClosed)
			case <-ctx.Done():
				failAll(ctx.Err())
			}
			break
		}
		offsets := make(map[int]int64, len(pending))
		pending = slices.DeleteFunc(pending, func(i int) bool {
			p, off := int(recs[i].Partition), recs[i].Offset+1
			if !gen.owns(p) {
				fail(i, fmt.Errorf("kafka source %s: commit partition %d offset %d: %w", s.name, p, off, ErrPartitionRevoked))
				return true
			}
			offsets[p] = max(offsets[p], off)
			return false
		})
		if len(pending) == 0 {
			break
		}
		err := gen.g.CommitOffsets(map[string]map[int]int64{s.cfg.Topic: offsets})
		if err == nil {
			s.mu.Lock()
			for p, off := range offsets {
				if off > s.committed[p] {
					s.committed[p] = off
				}
			}
			s.mu.Unlock()
			break
		}
		if !kafkaGenerationError(err) {
			failAll(err)
			break
		}
		// The generation is ending: retry with the next one, for the
		// partitions it still gives this member.
		s.mu.Lock()
		if s.gen == gen {
			wake = s.wake
			s.mu.Unlock()
			select {
			case <-wake:
				continue
			case <-s.done:
			case <-ctx.Done():
			}
			failAll(err)
			break
		}
		s.mu.Unlock()
	}
	return errs
}
