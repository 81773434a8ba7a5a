package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// models is the model lifecycle of a Service: it owns every partition's
// model and its worker, and alone makes, owns (checkpoint.Owner),
// restores, checks against the broker's commit, rebuilds, warm-starts,
// resets and drops them. The loop asks it for a record's worker (get).
// It is the loop's: its methods run on Run's goroutine, and the
// goroutines it starts (the spare model, the premade checkpoint memory)
// touch only what they make until the loop takes it.
type models struct {
	s       *Service
	workers map[int32]*worker
	// last is the worker of the last record dispatched; nil once a model
	// is dropped.
	last  *worker
	order []int32 // partitions in the order first seen

	fingerprint [32]byte          // of the model configuration, in checkpoints
	build       *pipeline.Builder // of its pipelines, for the serving copies of models per key
	volatile    bool              // Traits.Volatile: the source's offsets do not identify records across restarts (core NATS), so a restored model skips nothing

	// premaking counts the goroutines making the memory of new models'
	// first checkpoints (worker.premake); Run waits for them. They make
	// it one at a time (premakeSlot): a rebalance that assigns many
	// partitions at once does not make all their copies at once.
	premaking   sync.WaitGroup
	premakeSlot chan struct{}
	// spare receives the model made ahead for the first partition to
	// come (makeSpare); nil once taken, or when none is made. dropSpare
	// tells its goroutine it is not wanted (any more).
	spare     chan spareModel
	dropSpare context.CancelFunc
}

// get returns the worker of rec's partition, making its model when it has
// none (of): from its checkpoint, checked against the broker's commit, or
// afresh or from the warm start, and, while Run's loop runs, starting its
// worker. A partition a rebalance gave back (rec's epoch changed) gets
// its model again from its checkpoint: another process may have learned
// it meanwhile.
func (l *models) get(ctx context.Context, rec *connectors.Record) (*worker, error) {
	w := l.last
	if w == nil || w.part != rec.Partition {
		var err error
		if w, err = l.of(ctx, rec.Partition); err != nil {
			return nil, err
		}
	}
	if w.hasEpoch && rec.Epoch != w.epoch && l.s.opt.Checkpoints != nil {
		// The partition came back after a rebalance: another process may
		// have learned it meanwhile, and its checkpoint holds that.
		l.s.logger.Info("partition assigned anew: reloading its model from the checkpoint", "partition", rec.Partition)
		if err := l.dropModel(ctx, rec.Partition); err != nil {
			return nil, err
		}
		var err error
		if w, err = l.of(ctx, rec.Partition); err != nil {
			return nil, err
		}
	}
	w.epoch, w.hasEpoch = rec.Epoch, true
	return w, nil
}

// of returns the worker of partition, creating its model (from the
// partition's checkpoint when there is one) and, while Run's loop runs,
// starting it.
func (l *models) of(ctx context.Context, partition int32) (*worker, error) {
	if w := l.last; w != nil && w.part == partition {
		return w, nil // the common case: the partition of the last record
	}
	if w, ok := l.workers[partition]; ok {
		l.last = w
		return w, nil
	}
	var m *model
	var premade *pipeline.Frozen
	if l.spare != nil {
		select {
		case sp := <-l.spare:
			m, premade = sp.m, sp.frozen
			m.p.StartNow() // a spare is made of one pipeline, never of models per key
		default: // not made in time: dropped, its copy not made
		}
		l.dropSpare()
		l.spare, l.dropSpare = nil, nil
	}
	if m == nil {
		var err error
		if m, err = newPartitionModel(l.s.opt.Config, l.s.opt.HistoryPoints); err != nil {
			return nil, err
		}
	}
	if w := l.s.opt.WarmStart; m.k != nil && w != nil {
		// Every new key's model starts from it, whether or not the
		// partition's models are restored from a checkpoint.
		if w.Err != nil {
			return nil, fmt.Errorf("service: partition %d: the models per key start from the warm start, which cannot be read: %w", partition, w.Err)
		}
		if err := m.k.StartFrom(w.Model.State, w.SHA256); err != nil {
			return nil, fmt.Errorf("service: partition %d: warm start: the model %s: %w", partition, w.Path, err)
		}
	}
	if err := l.own(ctx, partition, m); err != nil {
		return nil, err
	}
	w, err := l.newModel(ctx, partition, m, premade)
	if err != nil {
		m.disown()
		return nil, err
	}
	return w, nil
}

// spareModel is a model made ahead, and the copy of it that its first
// checkpoint reuses (nil without checkpoints).
type spareModel struct {
	m      *model
	frozen *pipeline.Frozen
}

// makeSpare makes, on a goroutine of its own, the model of the first
// partition to come, before that partition's first record does: making a
// model takes milliseconds, during which the partition's records would
// wait (BenchmarkLatency; the figures are in docs/performance.md,
// "Measurements behind code decisions"). With checkpoints, the goroutine
// also makes the copy the first checkpoint goes into, as premake does,
// and in making it reads every page of the model's weights, which the
// checkpoint's copy would otherwise be the first to read, page faults
// between two records. One model only, for the first
// partition (JetStream and core NATS have one), and only when no model was
// restored at the start: a spare not ready when the first partition comes
// is dropped (its goroutine makes no copy then), and later partitions'
// models are made when they come, lest an unused spare hold a model's
// memory. Models per key are not made ahead: they are made as their keys
// come.
func (l *models) makeSpare(ctx context.Context) {
	if keyed(l.s.opt.Config) {
		return
	}
	spare := make(chan spareModel, 1)
	ctx, l.dropSpare = context.WithCancel(ctx)
	l.spare = spare
	l.premaking.Go(func() {
		m, err := newPartitionModel(l.s.opt.Config, l.s.opt.HistoryPoints)
		if err != nil {
			return // the first partition makes its own and meets the error
		}
		sp := spareModel{m: m}
		if l.s.opt.Checkpoints != nil && ctx.Err() == nil {
			sp.frozen, _ = m.p.Freeze(nil) // on error, none: the take makes its own
		}
		spare <- sp // the only send: never blocks
	})
}

// own makes this process the owner of partition's checkpoints for m, when
// the store keeps owners (checkpoint.Owner) and the caller does not own
// them already (Options.Owned). While it waits it gives up the partitions
// a rebalance revoked, again and again: two members taking each other's
// partitions must not wait for each other.
func (l *models) own(ctx context.Context, partition int32, m *model) error {
	if slices.Contains(l.s.opt.Owned, partition) {
		return nil
	}
	if _, ok := l.s.opt.Checkpoints.(checkpoint.Owner); !ok {
		return nil
	}
	what := fmt.Sprintf("partition %d of %s", partition, l.s.opt.Source.Name())
	release, err := Own(ctx, l.s.opt.Checkpoints, partition, l.s.opt.OwnWait, what, func() error { return l.dropRevoked(ctx) })
	if _, group := l.s.opt.Source.(connectors.Assigned); err != nil && group {
		return fmt.Errorf("%w (or, in a consumer group, a member slower than checkpoint.own_wait to give the partition up)", err)
	}
	if err != nil {
		return err
	}
	m.release = release
	return nil
}

// ownSlice is how long Own waits between two calls of its between.
const ownSlice = 100 * time.Millisecond

// Own makes this process the owner of partition's checkpoints in store,
// when store keeps owners (checkpoint.Owner; otherwise it does nothing),
// waiting up to wait (DefaultOwnWait when not positive) while another
// process owns them, and calling between, when not nil, every 100ms
// meanwhile. what names the partition in the error, which names the
// holder. release gives the ownership up. A caller that opens a source
// without consumer groups (JetStream, core NATS, files) owns partition 0
// before it opens the source, and names it in Options.Owned: opening a
// JetStream source already resets the durable and the first fetch pulls
// messages, which must not happen beside another process's model.
func Own(ctx context.Context, store checkpoint.Store, partition int32, wait time.Duration, what string, between func() error) (release func(), err error) {
	o, ok := store.(checkpoint.Owner)
	if !ok {
		return func() {}, nil
	}
	if wait <= 0 {
		wait = DefaultOwnWait
	}
	deadline := time.Now().Add(wait)
	for {
		if between != nil {
			if err := between(); err != nil {
				return nil, err
			}
		}
		until := time.Now().Add(ownSlice)
		if deadline.Before(until) {
			until = deadline
		}
		octx, cancel := context.WithDeadline(ctx, until)
		release, err := o.Own(octx, partition, checkpoint.Holder())
		cancel()
		if err == nil {
			return release, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopping, not refused
		}
		var held *checkpoint.HeldError
		if !errors.As(err, &held) {
			return nil, fmt.Errorf("service: %s: %w", what, err)
		}
		if !time.Now().Before(deadline) {
			held.Waited = wait
			return nil, fmt.Errorf("service: %s: its checkpoints are in use: %w; another streamlearn process runs this model on the same checkpoints: stop it, or give each process its own consumer and checkpoints",
				what, held)
		}
	}
}

// newModel restores m, owned, from partition's checkpoint and makes its
// worker.
func (l *models) newModel(ctx context.Context, partition int32, m *model, premade *pipeline.Frozen) (*worker, error) {
	if err := l.restore(ctx, partition, m); err != nil {
		return nil, err
	}
	w, err := l.s.newWorker(partition, m)
	if err != nil {
		return nil, err
	}
	if m.saveAtOnce {
		// The reset holds once its checkpoint does: the next run, even
		// if this one learns nothing, restores the fresh model at the
		// committed position rather than stopping again.
		t, err := w.take(nil, nil)
		var c *checkpoint.Checkpoint
		if err == nil {
			c, err = t.complete()
		}
		if err == nil {
			err = l.s.opt.Checkpoints.Save(ctx, c)
		}
		if err != nil {
			return nil, fmt.Errorf("service: checkpoint of partition %d after its reset: %w", partition, err)
		}
	}
	switch {
	case !l.s.intake:
	case l.s.src.framed != nil:
		// One partition read from files: nothing to learn in parallel
		// with, and fetching is cheaper than learning, so a goroutine
		// would only add the copy and the hand-over. The loop learns.
		w.inline = true
	default:
		w.start(l.s.wctx)
		switch {
		case l.s.opt.Checkpoints == nil || m.p == nil:
		case premade != nil:
			w.premade.frozen.Store(premade)
		default:
			l.premaking.Go(func() { w.premake(ctx, l.premakeSlot, l.s.opt.Config, l.s.opt.HistoryPoints) })
		}
	}
	l.workers[partition] = w
	l.last = w
	l.order = append(l.order, partition)
	if !m.restored {
		l.s.logger.Info("new model", "source", l.s.opt.Source.Name(), "partition", partition)
	}
	return w, nil
}

// startWarm makes m, partition's new model (no checkpoint holds it), the
// warm start's model, when there is one. It is the one place a new
// model is made (restore, and the reset and rebuild it chooses).
func (l *models) startWarm(partition int32, m *model) error {
	w := l.s.opt.WarmStart
	if w == nil {
		return nil
	}
	if w.Err != nil {
		return fmt.Errorf("service: partition %d has no checkpoint, and its model cannot start from the warm start: %w", partition, w.Err)
	}
	if err := m.startFrom(w.Model.State, w.SHA256); err != nil {
		return fmt.Errorf("service: partition %d: warm start: the model %s: %w", partition, w.Path, err)
	}
	if m.p != nil && l.s.opt.HistoryPoints > 0 && m.p.Tracker().History() == nil {
		// A file written without curves (replay --save): the dashboard's
		// curves start here.
		m.p.Tracker().EnableHistory(l.s.opt.HistoryPoints)
	}
	l.s.logger.Info("model started from the warm start", "partition", partition, "model", w.String(), "events", m.events())
	return nil
}

// restoreIdle creates, from their checkpoints, the models of the
// partitions the service owns that no record has brought yet: at the start
// every checkpointed partition of a source without consumer-group
// assignments, and at the end the partitions a Kafka group assigns to
// this process. So a service restarted after everything was committed
// still reports its models. A partition the broker says was committed to
// is among them, checkpoint or not: its restore is checked (restore), so
// that a lost checkpoint is an error even when nothing is left to read.
// With a warm start, at the start, every partition the service owns is
// among them (a broker source's partition 0, or the Kafka partitions
// already assigned; warmAssigned takes those assigned later), so that
// the trained model reports and serves before a record comes.
func (l *models) restoreIdle(ctx context.Context, start bool) error {
	owned := []int32{0} // a source without assignments: one partition, or none known to the broker
	a, group := l.s.opt.Source.(connectors.Assigned)
	if group {
		owned = a.Assignments()
	}
	var parts []int32
	if l.s.opt.Checkpoints != nil {
		var err error
		if parts, err = l.s.opt.Checkpoints.Partitions(ctx); err != nil {
			return fmt.Errorf("service: listing checkpoints: %w", err)
		}
		if group {
			parts = slices.DeleteFunc(parts, func(p int32) bool { return !slices.Contains(owned, p) })
		}
		for _, p := range owned {
			if pos, ok := l.position(p); ok && pos.Committed >= 0 && !slices.Contains(parts, p) {
				parts = append(parts, p)
			}
		}
	}
	if start && l.s.opt.WarmStart != nil && l.s.src.framed == nil {
		// A trained model serves from the start, before its partition
		// brings a record: every partition the service owns has one. (Not
		// for files: their partitions are known as they are read.)
		if _, envelopes := l.s.opt.Source.(*filesource.Envelopes); !envelopes {
			for _, p := range owned {
				if !slices.Contains(parts, p) {
					parts = append(parts, p)
				}
			}
		}
	}
	slices.Sort(parts)
	for _, p := range parts {
		if _, err := l.of(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// warmAssigned makes, with a warm start, the model of every partition a
// consumer group assigned to the service that has none yet: the trained
// model serves before the partition brings a record.
func (l *models) warmAssigned(ctx context.Context) error {
	if l.s.opt.WarmStart == nil {
		return nil
	}
	owned, live := l.assignments()
	if !live {
		return nil
	}
	for _, p := range owned {
		if _, ok := l.workers[p]; !ok {
			if _, err := l.of(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// assignments returns the partitions a consumer group assigns to the
// source now, and whether a generation is live; owned is nil for sources
// without consumer groups.
func (l *models) assignments() (owned []int32, live bool) {
	a, ok := l.s.opt.Source.(connectors.Assigned)
	if !ok {
		return nil, false
	}
	owned = a.Assignments()
	if owned == nil {
		return []int32{}, false
	}
	return owned, true
}

// dropRevoked drops the models of the partitions a Kafka rebalance gave
// to another process: the partition leaves the reports, the metrics and
// the reports sink here. With checkpoints, the model's state is
// checkpointed first (handOff), and the new owner, who waits for this
// process to give the checkpoints up, restores it; without, the new owner
// learns afresh from the group's last commit, and the model here is stale
// (if the partition comes back, it comes back from the checkpoint, or
// afresh).
func (l *models) dropRevoked(ctx context.Context) error {
	owned, live := l.assignments()
	if !live {
		return nil
	}
	for _, part := range slices.Clone(l.order) {
		if !slices.Contains(owned, part) {
			l.s.logger.Info("partition revoked: dropping its model", "partition", part)
			if err := l.handOff(ctx, part); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropModel forgets the model of part, once its worker has learned what
// it was handed and its checkpoint in progress is written; the next record
// of part creates it again, from its checkpoint.
func (l *models) dropModel(ctx context.Context, part int32) error {
	return l.drop(ctx, part, false)
}

// handOff is dropModel for a partition given to another process: with
// checkpoints, the model is checkpointed as it is (once its outputs are
// durable) before the checkpoints are given up, so that the new owner
// restores everything learned here and skips what it holds: its reports go
// on from this process's, never back. Its position is not committed (the
// group is the new owner's): the checkpoint stands for the records after
// the last commit, as after a crash between a checkpoint and its commit.
func (l *models) handOff(ctx context.Context, part int32) error {
	return l.drop(ctx, part, true)
}

func (l *models) drop(ctx context.Context, part int32, handOff bool) error {
	w := l.workers[part]
	if err := w.stop(ctx); err != nil {
		return err
	}
	if err := l.s.commits.release(ctx, w, handOff); err != nil {
		return err
	}
	w.m.disown()
	delete(l.workers, part)
	l.last = nil
	l.s.replan = true
	l.order = slices.DeleteFunc(l.order, func(p int32) bool { return p == part })
	return nil
}

// disownAll gives up the ownership of every model's checkpoints.
func (l *models) disownAll() {
	for _, w := range l.workers {
		w.m.disown()
	}
}

// sorted returns the partitions with a model, ascending.
func (l *models) sorted() []int32 {
	parts := slices.Clone(l.order)
	slices.Sort(parts)
	return parts
}
