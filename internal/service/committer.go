package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/connectors"
)

// committer runs a Service's commit rounds: it asks the models for their
// positions (and checkpoints), takes the sinks' barriers so that no
// position is committed, nor checkpoint written, ahead of its outputs,
// hands them to the saver goroutine, commits the positions once durable,
// and backs off after a failed save. It is the loop's, like the models.
type committer struct {
	s           *Service
	uncommitted int          // records handed over since the last round began
	lastCommit  time.Time    // the last commit round, successful or not
	round       *commitRound // the commit round waiting for its answers; nil when none
	saver       *saver       // waits for the sinks and writes checkpoints off the loop

	saveFailing bool // the last checkpoint save failed
	lastSaveErr error
	// After a failed save, commit rounds ask for no checkpoint until
	// saveRetryAt; the wait doubles from saveBackoffMin to saveBackoffMax
	// while saves keep failing.
	saveRetryAt time.Time
	saveBackoff time.Duration
	// Since when commits fail (the broker away), and how many failed
	// since; zero while they succeed. The outage is logged when it begins
	// and when it ends, not at every round.
	commitFailingSince time.Time
	commitFailures     int
	// outputsFailed is set once a round's outputs failed at their sink:
	// nothing is committed after it.
	outputsFailed error
}

// Commits. A commit round asks every model with records not yet committed
// for its position — with checkpoints, for its checkpoint — in its
// worker's queue, and the loop fetches on while the workers get there.
// Once every answer is in, every output of the records up to those
// positions is published; the round takes each sink's barrier (the
// messages published so far) and hands them, with the checkpoints, to the
// saver goroutine, which waits until the sinks have them (a file fsynced,
// Kafka and JetStream acknowledged) and then writes the checkpoints, while
// the workers learn and publish on; the loop commits the positions once
// that is done (collectSaves). So no position committed, nor any
// checkpoint written, is ahead of its outputs; and once an output failed,
// nothing is committed any more. A crash repeats the outputs since the
// last commit; they carry their identity (source, partition, offset) for
// the consumer, or the server (JetStream's Nats-Msg-Id), to drop the
// duplicates.

// commitRound is a commit round waiting for its answers.
type commitRound struct {
	replies chan answer
	waiting int
	at      time.Time // when it asked
}

// startRound asks the models for their positions. A partition a Kafka
// rebalance gave to another process is not committed (the new owner
// reads it from the group's last commit).
func (cm *committer) startRound(ctx context.Context) error {
	if err := cm.s.models.dropRevoked(ctx); err != nil {
		return err
	}
	owned, live := cm.s.models.assignments()
	// Finished rounds first: their commits are due.
	if err := cm.collectSaves(ctx, false); err != nil {
		return err
	}
	if cm.outputsFailed != nil {
		return cm.outputsFailed
	}
	r := &commitRound{replies: make(chan answer, len(cm.s.models.order)), at: time.Now()}
	// After a failed save, no checkpoint is asked for until the backoff
	// is over (but at the end of the run: the final one is tried): a full
	// disk is not written to, nor logged, at every round.
	backoff := cm.s.opt.Checkpoints != nil && cm.s.intake && r.at.Before(cm.saveRetryAt)
	skipped := false // a model with new records was not asked: a later round must
	for _, part := range cm.s.models.order {
		w := cm.s.models.workers[part]
		if !w.commit.dirty || w.commit.saving || w.commit.marked {
			continue
		}
		if backoff || cm.s.opt.Checkpoints != nil && owned != nil && !live {
			// Backing off, or between generations: commit once the
			// backoff is over, or once one is live.
			skipped = true
			continue
		}
		a := &ask{kind: askMark, reply: r.replies}
		if cm.s.opt.Checkpoints != nil {
			a.kind, a.savedPos, a.spare = askCheckpoint, w.commit.savedPos, w.commit.spare
			w.commit.spare = nil
		}
		w.commit.saving = true
		w.commit.marked, w.commit.markRec = true, w.last
		r.waiting++
		if err := w.ask(ctx, a); err != nil {
			return err
		}
	}
	if r.waiting > 0 {
		cm.round = r
	}
	cm.uncommitted = 0
	if skipped {
		// Still due by time (dueByTime), should no record come again:
		// the last records of a stream learned while the saves backed
		// off would otherwise never be checkpointed.
		cm.uncommitted = 1
	}
	cm.lastCommit = time.Now()
	return nil
}

// finishRound waits for every answer of the round and hands the sinks'
// barriers, the positions and the checkpoints to the saver (collectSaves
// commits them once done).
func (cm *committer) finishRound(ctx context.Context) error {
	r := cm.round
	if r == nil {
		return nil
	}
	answers := make([]answer, 0, r.waiting)
	for range r.waiting {
		select {
		case a := <-r.replies:
			answers = append(answers, a)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cm.round = nil
	var errs []error
	for _, a := range answers {
		a.w.commit.marked = false
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, a := range answers {
			a.w.commit.saving = false // no round in flight: a later one asks again
		}
		return err
	}
	if cm.outputsFailed != nil {
		for _, a := range answers {
			a.w.commit.saving = false
		}
		return cm.outputsFailed // nothing is committed or checkpointed after it
	}
	// Every output of the records the answers hold is published: the
	// sinks' barriers now cover them.
	job := &roundJob{waits: cm.barriers()}
	for _, a := range answers {
		w := a.w
		if cm.s.models.workers[w.part] != w {
			continue // dropped meanwhile: not ours to commit
		}
		switch {
		case a.gaveUp:
			// A checkpoint given up at the stop: the final round takes
			// it again, reusing what was made (Keyed.FreezeUntil).
			w.commit.saving, w.commit.spare = false, a.spare
			continue
		case a.kind == askMark:
			if !a.ok {
				w.commit.saving = false
				continue // the worker failed at its first record
			}
			job.marks = append(job.marks, commitItem{w, a.rec, r.at})
		case a.ckpt == nil:
			// Only records the durable checkpoint already holds (skipped
			// after a restore): their positions may be committed as is.
			w.commit.spare = a.spare
			job.marks = append(job.marks, commitItem{w, w.commit.markRec, w.commit.durableAt})
		default:
			job.saves = append(job.saves, saveJob{part: w.part, w: w, rec: w.commit.markRec, pos: a.ckpt.c.Position, at: a.ckpt.c.Created, c: a.ckpt})
		}
	}
	if len(job.marks)+len(job.saves) > 0 {
		// Made durable off the loop; the positions committed once it is
		// (collectSaves).
		cm.saver.inflight++
		cm.saver.jobs <- job
	}
	// Models left dirty (learned more meanwhile) keep commit rounds coming.
	for _, w := range cm.s.models.workers {
		if w.commit.dirty && !w.commit.saving {
			cm.uncommitted++
		}
	}
	return nil
}

// collect finishes the round whose answers are all in (finishRound) and
// commits the positions of the rounds made durable (collectSaves),
// without waiting for either.
func (cm *committer) collect(ctx context.Context) error {
	if cm.round != nil && len(cm.round.replies) == cm.round.waiting {
		if err := cm.finishRound(ctx); err != nil {
			return err
		}
	}
	if cm.saver != nil && len(cm.saver.results) > 0 {
		// A checkpoint is written: commit the position it holds.
		return cm.collectSaves(ctx, false)
	}
	return nil
}

// commit is a whole commit round, waited for: the final one, with every
// checkpoint written. The round in flight is waited for up to wait, then
// the final checkpoints are taken (by the caller's goroutine when the
// workers are stopped, unbounded: the models may be many), then their
// writes and commits are waited for up to wait.
func (cm *committer) commit(ctx context.Context, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := cm.finishRound(wctx); err != nil {
		return err
	}
	if err := cm.collectSaves(wctx, true); err != nil {
		return err
	}
	if err := cm.startRound(ctx); err != nil {
		return err
	}
	wctx, cancel = context.WithTimeout(ctx, wait)
	defer cancel()
	if err := cm.finishRound(wctx); err != nil {
		return err
	}
	// Wait for every round, commit, and say if a checkpoint failed.
	if err := cm.collectSaves(wctx, true); err != nil {
		return err
	}
	if cm.s.opt.Checkpoints != nil {
		if cm.saveFailing {
			return fmt.Errorf("service: the last checkpoints failed (%v): their positions are not committed", cm.lastSaveErr)
		}
	}
	return nil
}

// commitItem is a position to commit: rec, the last record of w's
// partition that the state taken at `at` holds.
type commitItem struct {
	w   *worker
	rec connectors.Record
	at  time.Time
}

// commitRecords commits the positions of items: in one request when the
// source commits many at once (connectors.MultiCommitter), else one by
// one; every position, even after one failed. Each model whose position is
// committed is marked clean when nothing was handed over since.
func (cm *committer) commitRecords(ctx context.Context, items []commitItem) error {
	if len(items) == 0 {
		return nil
	}
	var outcomes []error // nil: every commit succeeded
	if mc, ok := cm.s.opt.Source.(connectors.MultiCommitter); ok {
		recs := make([]connectors.Record, len(items))
		for i, it := range items {
			recs[i] = it.rec
		}
		outcomes = mc.CommitMany(ctx, recs)
	} else {
		outcomes = make([]error, len(items))
		for i, it := range items {
			outcomes[i] = cm.s.opt.Source.Commit(ctx, it.rec)
		}
	}
	var errs []error
	var failed error // the first commit of the round that failed and waits for the next
	for i, it := range items {
		var err error
		if outcomes != nil {
			err = outcomes[i]
		}
		retry, err := cm.committed(ctx, it, err)
		if retry != nil && failed == nil {
			failed = retry
		}
		errs = append(errs, err)
	}
	// A broker away for a while (a restart, a network outage) is logged
	// when the first round fails and when a round succeeds again, not at
	// every round; a round with any failed commit counts as failing.
	switch {
	case failed != nil && cm.commitFailures == 0:
		cm.commitFailingSince = time.Now()
		cm.s.logger.Warn("commits fail: learning goes on, the positions wait; retrying at every commit round, logged again when commits succeed",
			"source", cm.s.opt.Source.Name(), "err", failed)
		cm.commitFailures++
	case failed != nil:
		cm.commitFailures++
	case cm.commitFailures > 0:
		cm.s.logger.Info("commits succeed again", "source", cm.s.opt.Source.Name(), "failed_rounds", cm.commitFailures,
			"for", time.Since(cm.commitFailingSince).Round(time.Millisecond))
		cm.commitFailures, cm.commitFailingSince = 0, time.Time{}
	}
	return errors.Join(errs...)
}

// committed takes the outcome err of the commit of it. A commit that
// failed while the service runs is retried at the next round: it returns
// the failure as retry and no error.
func (cm *committer) committed(ctx context.Context, it commitItem, err error) (retry, _ error) {
	w, rec := it.w, it.rec
	if errors.Is(err, connectors.ErrPartitionRevoked) {
		cm.s.logger.Warn("partition revoked before its commit: its records since the last commit will be learned again by the new owner",
			"source", cm.s.opt.Source.Name(), "partition", w.part, "offset", rec.Offset)
	} else if err != nil {
		err = fmt.Errorf("service: commit partition %d offset %d: %w", w.part, rec.Offset, err)
		if cm.s.draining || ctx.Err() != nil {
			return nil, err
		}
		// The model is intact and the position waits for the next round.
		cm.uncommitted++
		return err, nil
	}
	w.commit.durableAt = it.at
	if w.last.Offset == rec.Offset && w.last.Partition == rec.Partition {
		w.commit.dirty = false
	}
	return nil, nil
}

func (cm *committer) flush(ctx context.Context) error {
	var errs []error
	for _, sink := range []connectors.Sink{cm.s.out.predictions, cm.s.out.reports, cm.s.out.deadLetters} {
		if sink != nil {
			errs = append(errs, sink.Flush(ctx))
		}
	}
	return errors.Join(errs...)
}

// Making a commit round durable is off the loop and off the workers: the
// partitions' workers answer the round (their positions, and with
// checkpoints their frozen states: take), the loop takes the sinks'
// barriers — the outputs published so far, which cover every record the
// answers hold — and hands both to the saver goroutine, which waits for
// the barriers while the workers publish on, then encodes and writes the
// checkpoints (two fsyncs each; BenchmarkCheckpoint); the
// loop commits the positions once that is done (collectSaves), fetching
// meanwhile. One round per partition is in flight at a time.

// The backoff of commit rounds after a failed checkpoint save. Variables
// for tests.
var (
	saveBackoffMin = time.Second
	saveBackoffMax = time.Minute
)

// roundJob is a commit round's work for the saver: wait for the sinks'
// barriers, then write the checkpoints; its result has the positions to
// commit.
type roundJob struct {
	waits []func(context.Context) error
	saves []saveJob
	marks []commitItem // positions that need the outputs durable only
	err   error        // the sinks': the outputs are not durable, nothing is written or committed
}

// saveJob is one checkpoint to write, and the record whose position
// it allows to commit.
type saveJob struct {
	part int32
	w    *worker
	rec  connectors.Record
	pos  int64     // the model's position in the checkpoint
	at   time.Time // when the state was taken
	c    *taken    // encoded, digested and written by the saver
	err  error     // the write's, in a result
}

type saver struct {
	jobs     chan *roundJob
	results  chan *roundJob
	inflight int
	done     chan struct{}
}

func (cm *committer) startSaver() {
	// One round per partition at a time: a thousand partitions before a
	// finished round waits for the loop.
	sv := &saver{jobs: make(chan *roundJob, 1024), results: make(chan *roundJob, 1024), done: make(chan struct{})}
	store := cm.s.opt.Checkpoints
	wctx := cm.s.wctx
	go func() {
		defer close(sv.done)
		// failed: a round's outputs failed. The failure is reported to
		// that round's wait only, and later rounds' waits pass; their
		// checkpoints, which a restore skips up to, must not be written.
		var failed error
		for j := range sv.jobs {
			// The sinks' waits end with the workers' sink messages (a
			// drain that runs out); a write begun is finished, so that a
			// cancelled service does not leave a temporary file.
			ctx, cancel := context.WithTimeout(wctx, time.Minute)
			for _, wait := range j.waits {
				if err := wait(ctx); err != nil {
					j.err = errors.Join(j.err, err)
				}
			}
			cancel()
			if j.err != nil && failed == nil {
				failed = j.err
			}
			if j.err == nil && failed != nil {
				j.err = fmt.Errorf("an earlier round's outputs failed: %w", failed)
			}
			for i := range j.saves {
				if j.err != nil {
					break
				}
				sj := &j.saves[i]
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				c, err := sj.c.complete()
				if err == nil {
					err = store.Save(ctx, c)
				}
				sj.err = err
				sj.c.c = nil // written: the frozen state stays, for the next take
				cancel()
			}
			sv.results <- j
		}
	}()
	cm.saver = sv
}

// stopSaver ends the saver goroutine once every round is done. Results
// not collected are dropped: their positions stay uncommitted.
func (cm *committer) stopSaver() {
	sv := cm.saver
	cm.saver = nil
	close(sv.jobs)
	for sv.inflight > 0 {
		<-sv.results
		sv.inflight--
	}
	<-sv.done
}

// barriers returns the waits for the outputs published so far, of every
// sink (lockedSink.Barrier).
func (cm *committer) barriers() []func(context.Context) error {
	var waits []func(context.Context) error
	for _, sink := range []connectors.Sink{cm.s.out.predictions, cm.s.out.reports, cm.s.out.deadLetters} {
		if b, ok := sink.(connectors.BarrierSink); ok {
			waits = append(waits, b.Barrier())
		}
	}
	return waits
}

// outputsLost is Service.outputsFailed of err, a sink's failure.
func outputsLost(err error) error {
	return fmt.Errorf("service: outputs not durable, nothing committed since: %w", err)
}

// saved takes the outcome of sj's write and says whether it succeeded. A
// failed save does not stop learning: the partition's commits wait for a
// checkpoint that holds them, and the next round for the backoff
// (saveRetryAt): a full disk is not written to a hundred times a second,
// nor logged as often.
func (cm *committer) saved(sj saveJob) bool {
	if sj.err != nil {
		cm.saveBackoff = min(max(2*cm.saveBackoff, saveBackoffMin), saveBackoffMax)
		cm.saveRetryAt = time.Now().Add(cm.saveBackoff)
		args := []any{"store", cm.s.opt.Checkpoints.String(), "partition", sj.part, "err", sj.err, "retry_in", cm.saveBackoff}
		if !cm.saveFailing {
			cm.s.logger.Error("checkpoint failed: commits stop until a checkpoint succeeds", args...)
		} else {
			cm.s.logger.Warn("checkpoint failed again", args...)
		}
		cm.saveFailing, cm.lastSaveErr = true, sj.err
		// The positions wait for a later round, by time should no record
		// come (dueByTime), as after a failed commit.
		cm.uncommitted = max(cm.uncommitted, 1)
		return false
	}
	if cm.saveFailing {
		cm.saveFailing, cm.saveBackoff, cm.saveRetryAt = false, 0, time.Time{}
		cm.s.logger.Info("checkpoints succeed again: commits resumed", "store", cm.s.opt.Checkpoints.String())
	}
	return true
}

// collectSaves commits the positions of the finished rounds: their
// outputs durable and their checkpoints written. With wait, it waits for
// all of them.
func (cm *committer) collectSaves(ctx context.Context, wait bool) error {
	var commits []commitItem
collect:
	for cm.saver != nil && cm.saver.inflight > 0 {
		var j *roundJob
		if wait {
			j = <-cm.saver.results
		} else {
			select {
			case j = <-cm.saver.results:
			default:
				break collect
			}
		}
		cm.saver.inflight--
		for _, it := range j.marks {
			it.w.commit.saving = false
		}
		for _, sj := range j.saves {
			sj.w.commit.saving = false
		}
		if j.err != nil && cm.outputsFailed == nil {
			cm.outputsFailed = outputsLost(j.err)
		}
		if cm.outputsFailed != nil {
			// An output that failed is in no later round's barrier, but
			// every later position of its partition is past it: nothing
			// is committed any more (the rerun learns and publishes again
			// from the last commit).
			if j.err != nil {
				return cm.outputsFailed
			}
			continue
		}
		for _, it := range j.marks {
			if cm.s.models.workers[it.w.part] == it.w { // else dropped meanwhile: not ours to commit
				commits = append(commits, it)
			}
		}
		for _, sj := range j.saves {
			if errors.Is(sj.err, checkpoint.ErrNotOwned) {
				// Another process may learn the partition now: nothing more
				// of this one's is saved or committed.
				return fmt.Errorf("service: partition %d: %w; stopping (a restart waits for the ownership)", sj.part, sj.err)
			}
			if !cm.saved(sj) {
				continue
			}
			if cm.s.models.workers[sj.part] != sj.w {
				continue // dropped meanwhile (revoked, or reloaded): not ours to commit
			}
			sj.w.commit.savedPos, sj.w.commit.spare = sj.pos, sj.c.spare()
			commits = append(commits, commitItem{sj.w, sj.rec, sj.at})
		}
	}
	// The positions the finished rounds hold, in one commit.
	if err := cm.commitRecords(ctx, commits); err != nil {
		return err
	}
	for _, c := range commits {
		if c.w.commit.dirty {
			cm.uncommitted++ // learned more meanwhile: another round
		}
	}
	return nil
}

// release finishes the commit rounds of w, whose worker is stopped,
// before its model is dropped: its last write first, which a reload must
// not race; on a hand-off (handOff) with checkpoints, every round in
// flight, then a checkpoint of the model as it is (saveHandOff), for the
// new owner to restore.
func (cm *committer) release(ctx context.Context, w *worker, handOff bool) error {
	if w.commit.saving { // its last write first: a reload must not race it
		if err := cm.finishRound(ctx); err != nil {
			return err
		}
		if err := cm.collectSaves(ctx, true); err != nil {
			return err
		}
	}
	if handOff && cm.s.opt.Checkpoints != nil {
		// Every round in flight first: a failed output any of them
		// holds stops the hand-off (and nobody else waits on the sinks
		// meanwhile, so no failure is reported to another wait).
		if err := cm.collectSaves(ctx, true); err != nil {
			return err
		}
	}
	// A model with a checkpoint already (and so a commit): one at its
	// position now stands where the group's commit does, for the new
	// owner. One without stays unsaved: the new owner starts where its
	// own start says, which a checkpoint ahead of no commit would
	// contradict.
	if handOff && cm.s.opt.Checkpoints != nil && !w.failed && w.commit.savedPos >= 0 && w.m.pos != w.commit.savedPos && cm.outputsFailed == nil {
		if err := cm.saveHandOff(ctx, w); err != nil {
			// The new owner restores the last checkpoint and learns
			// again from the group's commit: nothing is lost.
			cm.s.logger.Warn("partition revoked: its last state is not checkpointed; the new owner learns again from the last commit",
				"partition", w.part, "err", err)
		}
	}
	return nil
}

// saveHandOff checkpoints w's model, whose worker is stopped, once every
// output published so far is durable.
func (cm *committer) saveHandOff(ctx context.Context, w *worker) error {
	for _, wait := range cm.barriers() {
		if err := wait(ctx); err != nil {
			// A wait cut short by a stop is no failed output; any other
			// error is one (even after a stop: a wait returns the
			// failures it found, and forgets them).
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				cm.outputsFailed = outputsLost(err)
			}
			return err
		}
	}
	t, err := w.take(w.commit.spare, nil)
	if err != nil {
		return err
	}
	c, err := t.complete()
	if err != nil {
		return err
	}
	if err := cm.s.opt.Checkpoints.Save(ctx, c); err != nil {
		return err
	}
	w.commit.savedPos = c.Position
	return nil
}
