// Package service is streamlearn's live loop: it fetches records from a
// connectors.Source, decodes them, runs each through the model of its
// partition (pipeline.Pipeline), publishes predictions, dead letters and
// periodic regret reports, and commits positions back to the source only
// for records whose effect is already in the model.
//
// Models and partitions: every partition gets its own model, learned in
// partition order by the single process that owns the partition. That is
// the only arrangement in which a model is a deterministic function of a
// stream: records of different partitions interleave differently on every
// run. Users who want one model per tenant or key produce with the key as
// the partitioning key (Kafka's default partitioner keeps a key on one
// partition) and give the topic as many partitions as they want models
// learned in parallel; users who want one model over everything use one
// partition. NATS subjects and files are one partition.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// Defaults of Options.
const (
	DefaultCommitEvery    = 1000
	DefaultCommitInterval = time.Second
	// DefaultSnapshotInterval is a second: scrapes (typically every
	// 10–60s) see numbers at most a second old. A snapshot digests the
	// state of every learner that learned since the last one (Report's
	// state_sha256; the digest is kept per round count): about 12ms for a
	// model of twelve learners at 2^18 slots, 2µs when nothing changed
	// (BenchmarkReport in internal/pipeline), so a partition at rest costs
	// nothing.
	DefaultSnapshotInterval = time.Second
	// DefaultHistoryPoints bounds the sampled curves a Snapshot carries per
	// learner: enough for a chart a few hundred pixels wide at any stream
	// length, about 48kB per learner (regret.Point is 48 bytes).
	DefaultHistoryPoints = 1000
)

// curvesInterval is the shortest time between two copies of the curves
// into snapshots (Snapshot.Curves): a dashboard polls every second, and a
// copy is a pass over every learner's samples. Snapshots in between share
// the last copy.
const curvesInterval = 250 * time.Millisecond

// Observer records one observation; prometheus.Histogram satisfies it.
// Observe must not allocate: it runs once per record.
type Observer interface {
	Observe(float64)
}

// Options configure a Service. Source and Config are required; every sink
// is optional.
type Options struct {
	Config *config.Config
	Source connectors.Source

	// Predictions receives one JSON object per event (see Prediction).
	Predictions connectors.Sink
	// Reports receives the report of a model (Report) every ReportEvery
	// labeled events of that model and every ReportInterval; 0 disables
	// either trigger.
	Reports        connectors.Sink
	ReportEvery    int
	ReportInterval time.Duration
	// DeadLetters receives bad records with the reason and original bytes.
	DeadLetters connectors.Sink

	// CommitEvery and CommitInterval batch commits to the source: after
	// that many records or that much time, whichever comes first
	// (defaults DefaultCommitEvery, DefaultCommitInterval).
	CommitEvery    int
	CommitInterval time.Duration

	// SnapshotInterval is how often Run publishes the Snapshot that
	// readers on other goroutines see (default DefaultSnapshotInterval).
	SnapshotInterval time.Duration
	// EventDuration, when not nil, observes the seconds each record took
	// to process: decode, predict, update, track and its sink messages.
	EventDuration Observer
	// HistoryPoints is how many points per learner the curves of a
	// Snapshot (Snapshot.Curves) keep, sampled evenly over the run
	// (regret.Tracker.EnableHistory); default DefaultHistoryPoints, a
	// negative value disables the curves. Sampling allocates nothing per
	// record.
	HistoryPoints int

	// Checkpoints, when not nil, stores a checkpoint of each model before
	// every commit of its positions, and restores models from it (see
	// Fingerprint and the comment of checkpoint.go). CommitEvery and
	// CommitInterval then default to DefaultCheckpointEvery and
	// DefaultCheckpointInterval.
	Checkpoints checkpoint.Store

	// Logger gets lifecycle events; nil discards them.
	Logger *slog.Logger
}

// Service runs one source through per-partition models. Run owns
// everything: the Service is not safe for concurrent use, except for
// Snapshot, which any goroutine may call at any time.
type Service struct {
	opt     Options
	dec     *event.Decoder
	dl      *DeadLetters
	models  map[int32]*model
	order   []int32 // partitions in the order first seen
	ev      event.Event
	predBuf []byte
	predIDs connectors.IDSink // Predictions, when it deduplicates on an identity
	logger  *slog.Logger

	uncommitted int
	lastCommit  time.Time // the last commit round, successful or not
	nextReport  time.Time // zero without ReportInterval

	fingerprint [32]byte // of the model configuration, in checkpoints
	volatile    bool     // the source's offsets do not survive a restart
	saveFailing bool     // the last checkpoint save failed
	lastSaveErr error
	saver       *saver // writes checkpoints off the loop; nil without

	snap         atomic.Pointer[Snapshot]
	nextSnapshot time.Time
	curves       [][][]regret.Point // the last copy of the curves, shared by snapshots
	curvesAt     time.Time
	curvesEvents uint64                  // the events of every model at that copy
	draining     bool                    // Run is taking its final snapshot
	serving      atomic.Pointer[serving] // model copies for predictions; nil while idle
	serveUntil   atomic.Int64            // Unix ns until which serving is active
}

// Snapshot is what the service looked like at one moment, for readers on
// other goroutines (metrics, the HTTP API). It is immutable once
// published: readers must not modify it, and every reader of one Snapshot
// sees the same numbers.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time
	// Source is the source's name (connectors.Source.Name).
	Source string
	// Reports has the report of every model, ordered by partition.
	Reports []Report
	// Started is true once Run has started consuming the source.
	Started bool
	// Durable is when the models last matched the positions committed to
	// the source (the last commit) while some processed record is not yet
	// committed, and zero when everything processed is committed. The
	// time since Durable is streamlearn_checkpoint_age_seconds: how much
	// learning a crash now would make the service redo.
	Durable time.Time
	// Curves[i] has the sampled curves of the model of Reports[i], one
	// series per learner in the order of its Learners, each ending with
	// the learner's state when they were copied (regret.Tracker.History);
	// nil when Options.HistoryPoints is negative. They are copied at most
	// every 250ms (curvesInterval) and in the final snapshot, so they may
	// end a little before Reports: a reader drawing them appends the
	// report's numbers (package api does). Snapshots may share them; no
	// one modifies them.
	Curves [][][]regret.Point
}

// Snapshot returns the latest published snapshot; it is never nil. Run
// publishes one when it starts, every SnapshotInterval while it runs
// (also while the source is idle) and one after its final commit. Before
// Run, it has Started false and no reports. Safe for concurrent use.
func (s *Service) Snapshot() *Snapshot { return s.snap.Load() }

// publishSnapshot takes the reports of every model and publishes them.
func (s *Service) publishSnapshot() error {
	reports, err := s.Reports()
	if err != nil {
		return err
	}
	now := time.Now()
	var events uint64
	for _, r := range reports {
		events += r.Events
	}
	if s.opt.HistoryPoints > 0 && (len(s.curves) != len(reports) ||
		events != s.curvesEvents && (s.draining || now.Sub(s.curvesAt) >= curvesInterval)) {
		curves := make([][][]regret.Point, len(reports))
		for i, r := range reports {
			curves[i] = s.models[r.Partition].p.Tracker().History() // a copy
		}
		s.curves, s.curvesAt, s.curvesEvents = curves, now, events
	}
	var durable time.Time
	for _, m := range s.models {
		if m.dirty && (durable.IsZero() || m.durableAt.Before(durable)) {
			durable = m.durableAt
		}
	}
	s.snap.Store(&Snapshot{Time: now, Source: s.opt.Source.Name(), Reports: reports, Started: true, Durable: durable, Curves: s.curves})
	if err := s.refreshServing(now); err != nil {
		return err
	}
	s.nextSnapshot = time.Now().Add(s.opt.SnapshotInterval)
	return nil
}

type model struct {
	p           *pipeline.Pipeline
	last        connectors.Record // last processed, not yet committed
	dirty       bool
	seen        bool  // a record was processed
	lag         int64 // Lag of the last record processed
	pos         int64 // offset of the last record whose effect is in p; -1 before any
	epoch       uint64
	hasEpoch    bool      // epoch is the Record.Epoch of the records learned
	saving      bool      // a checkpoint of the model is being written
	savedPos    int64     // pos of the last durable checkpoint; -1 before any
	durableAt   time.Time // when the state of the last commit was taken
	sinceReport int
}

// New checks the options and builds the decoder.
func New(opt Options) (*Service, error) {
	if opt.Config == nil || opt.Source == nil {
		return nil, errors.New("service: Config and Source are required")
	}
	if opt.CommitEvery <= 0 {
		opt.CommitEvery = DefaultCommitEvery
		if opt.Checkpoints != nil {
			opt.CommitEvery = DefaultCheckpointEvery
		}
	}
	if opt.CommitInterval <= 0 {
		opt.CommitInterval = DefaultCommitInterval
		if opt.Checkpoints != nil {
			opt.CommitInterval = DefaultCheckpointInterval
		}
	}
	if opt.SnapshotInterval <= 0 {
		opt.SnapshotInterval = DefaultSnapshotInterval
	}
	if opt.HistoryPoints == 0 {
		opt.HistoryPoints = DefaultHistoryPoints
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(opt.Config))
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	dec.Source = opt.Source.Name()
	s := &Service{opt: opt, dec: dec, models: map[int32]*model{}, logger: opt.Logger,
		fingerprint: Fingerprint(opt.Config), volatile: volatile(opt.Source)}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if opt.DeadLetters != nil {
		s.dl = &DeadLetters{Sink: opt.DeadLetters}
	}
	s.predIDs, _ = opt.Predictions.(connectors.IDSink)
	s.snap.Store(&Snapshot{Time: time.Now(), Source: opt.Source.Name(), Reports: []Report{}})
	return s, nil
}

// Run consumes the source until ctx is done or the source reports
// connectors.ErrEndOfInput. Either way it then commits what was learned,
// publishes a final report of every model and flushes the sinks; it
// returns nil after such a graceful stop and an error when a source, sink
// or commit fails.
//
// Commits after CommitInterval and reports after ReportInterval happen
// also while the source is idle: Fetch then runs under a deadline (one
// context per commit, report or snapshot period, not per record); so do
// the snapshots Snapshot returns.
func (s *Service) Run(ctx context.Context) error {
	s.lastCommit = time.Now()
	if s.opt.Checkpoints != nil {
		s.startSaver()
		defer s.stopSaver()
	}
	if s.opt.ReportInterval > 0 {
		s.nextReport = s.lastCommit.Add(s.opt.ReportInterval)
	}
	runErr := s.restoreIdle(ctx)
	if runErr == nil {
		runErr = s.publishSnapshot()
	}
	if runErr == nil {
		runErr = s.loop(ctx)
	}
	// Drain: commit and report with a context of its own, since ctx may be
	// the one that was cancelled.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if runErr == nil {
		runErr = s.restoreIdle(dctx)
	}
	s.draining = true // the final snapshot has the curves up to the last record
	err := errors.Join(runErr, s.commit(dctx), s.publishReports(dctx), s.flush(dctx), s.publishSnapshot())
	return err
}

func (s *Service) loop(ctx context.Context) error {
	var fc deadlineCtx
	defer fc.stop()
	for {
		now := time.Now()
		if !s.nextReport.IsZero() && !now.Before(s.nextReport) {
			if err := s.publishReports(ctx); err != nil {
				return err
			}
			// From the end of this round of reports: reports slower than
			// the interval must not starve the stream.
			s.nextReport = time.Now().Add(s.opt.ReportInterval)
		}
		if s.saver != nil && len(s.saver.results) > 0 {
			// A checkpoint is written: commit the position it holds.
			if err := s.collectSaves(ctx, false); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if s.uncommitted > 0 && now.Sub(s.lastCommit) >= s.opt.CommitInterval {
			if err := s.commit(ctx); err != nil {
				if ctx.Err() != nil {
					return nil // stopped mid-commit: the drain commits
				}
				return err
			}
		}
		if !now.Before(s.nextSnapshot) {
			if err := s.publishSnapshot(); err != nil {
				return err
			}
		}
		fctx := fc.get(ctx, s.deadline(now))
		rec, err := s.opt.Source.Fetch(fctx)
		switch {
		case err == nil:
		case errors.Is(err, connectors.ErrEndOfInput):
			s.logger.Info("end of input", "source", s.opt.Source.Name())
			return nil
		case ctx.Err() != nil:
			return nil
		case fctx.Err() != nil:
			continue // a commit, a report or a snapshot is due
		default:
			return fmt.Errorf("service: fetch: %w", err)
		}
		if err := s.process(ctx, rec); err != nil {
			return err
		}
		s.uncommitted++
		if s.uncommitted >= s.opt.CommitEvery {
			if err := s.commit(ctx); err != nil {
				if ctx.Err() != nil {
					return nil // stopped mid-commit: the drain commits
				}
				return err
			}
		}
	}
}

// deadlineCtx is the context Fetch runs under: ctx, or ctx with the
// deadline of the next commit, report or snapshot, made once per deadline.
type deadlineCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

func (d *deadlineCtx) get(parent context.Context, at time.Time) context.Context {
	if d.ctx != nil && at.Equal(d.at) {
		return d.ctx
	}
	d.stop()
	d.ctx, d.at = parent, at
	if !at.IsZero() {
		d.ctx, d.cancel = context.WithDeadline(parent, at)
	}
	return d.ctx
}

func (d *deadlineCtx) stop() {
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
}

// deadline returns when the next commit, interval report or snapshot is
// due, whichever comes first.
func (s *Service) deadline(now time.Time) time.Time {
	d := s.nextSnapshot
	if s.uncommitted > 0 {
		if c := s.lastCommit.Add(s.opt.CommitInterval); c.Before(d) {
			d = c
		}
	}
	if !s.nextReport.IsZero() && s.nextReport.Before(d) {
		d = s.nextReport
	}
	if s.saver != nil && s.saver.inflight > 0 {
		// Look for finished checkpoint writes every 20ms while idle (a
		// deadline that changes every 20ms, not per record).
		if c := now.Truncate(20 * time.Millisecond).Add(20 * time.Millisecond); c.Before(d) {
			d = c
		}
	}
	return d
}

func (s *Service) model(ctx context.Context, partition int32) (*model, error) {
	if m, ok := s.models[partition]; ok {
		return m, nil
	}
	p, err := pipeline.New(s.opt.Config)
	if err != nil {
		return nil, err
	}
	if s.opt.HistoryPoints > 0 {
		p.Tracker().EnableHistory(s.opt.HistoryPoints)
	}
	m := &model{p: p, pos: -1, savedPos: -1, durableAt: time.Now()}
	if err := s.restore(ctx, partition, m); err != nil {
		return nil, err
	}
	s.models[partition] = m
	s.order = append(s.order, partition)
	s.logger.Info("new model", "source", s.opt.Source.Name(), "partition", partition)
	return m, nil
}

// process runs rec through the model of its partition. Only a record
// processed to the end (learned or rejected, its prediction or dead letter
// published) becomes the partition's position to commit.
func (s *Service) process(ctx context.Context, rec connectors.Record) error {
	var start time.Time
	if s.opt.EventDuration != nil {
		start = time.Now()
	}
	m, err := s.model(ctx, rec.Partition)
	if err != nil {
		return err
	}
	if m.hasEpoch && rec.Epoch != m.epoch && s.opt.Checkpoints != nil {
		// The partition came back after a rebalance: another process may
		// have learned it meanwhile, and its checkpoint holds that.
		s.logger.Info("partition assigned anew: reloading its model from the checkpoint", "partition", rec.Partition)
		if m.saving { // its last write first: the reload must not race it
			if err := s.collectSaves(ctx, true); err != nil {
				return err
			}
		}
		s.dropModel(rec.Partition)
		if m, err = s.model(ctx, rec.Partition); err != nil {
			return err
		}
	}
	m.epoch, m.hasEpoch = rec.Epoch, true
	if rec.Offset <= m.pos && !s.volatile {
		// Already in the model, restored from a checkpoint saved after
		// this record and before its commit: acknowledge it only.
		m.last, m.dirty = rec, true
		return nil
	}
	if err := s.learn(ctx, rec, m); err != nil {
		return err
	}
	m.last, m.dirty, m.seen, m.lag, m.pos = rec, true, true, rec.Lag, rec.Offset
	if s.opt.EventDuration != nil {
		s.opt.EventDuration.Observe(time.Since(start).Seconds())
	}
	return nil
}

func (s *Service) learn(ctx context.Context, rec connectors.Record, m *model) error {
	if err := s.dec.Decode(rec.Value, &s.ev); err != nil {
		return s.rejectDecode(ctx, rec, m, err)
	}
	preds, reason := m.p.Process(&s.ev)
	if reason != "" {
		return s.deadLetter(ctx, rec, reason, fmt.Sprintf("%s:%d: outside the domain of a hypothesis class", s.opt.Source.Name(), rec.Offset))
	}
	if s.opt.Predictions != nil {
		s.predBuf = appendPrediction(s.predBuf[:0], &s.ev, s.dec.Source, rec, m.p, preds)
		var err error
		if s.predIDs != nil {
			err = s.predIDs.PublishID(ctx, OutputID(s.opt.Source.Name(), rec.Partition, rec.Offset, "prediction"), s.ev.Key, s.predBuf)
		} else {
			err = s.opt.Predictions.Publish(ctx, s.ev.Key, s.predBuf)
		}
		if err != nil {
			return fmt.Errorf("service: predictions: %w", err)
		}
	}
	if s.ev.Labeled && s.opt.Reports != nil && s.opt.ReportEvery > 0 {
		m.sinceReport++
		if m.sinceReport >= s.opt.ReportEvery {
			m.sinceReport = 0
			if err := s.publishReport(ctx, rec.Partition, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// rejectDecode counts and dead-letters a record the decoder refused. It is
// apart from learn because errors.As moves its target to the heap: the
// valid records' path stays free of allocations.
func (s *Service) rejectDecode(ctx context.Context, rec connectors.Record, m *model, err error) error {
	var de *event.Error
	if !errors.As(err, &de) {
		return fmt.Errorf("service: decode: %w", err)
	}
	m.p.Reject(de.Reason)
	de.Offset = rec.Offset
	return s.deadLetter(ctx, rec, de.Reason, de.Error())
}

func (s *Service) deadLetter(ctx context.Context, rec connectors.Record, reason event.Reason, msg string) error {
	if s.dl == nil {
		return nil
	}
	err := s.dl.publish(ctx, pipeline.DeadLetter{Source: s.opt.Source.Name(), Partition: rec.Partition, Offset: rec.Offset, Reason: reason, Err: msg, Raw: rec.Value, Size: rec.Size})
	if err != nil {
		return fmt.Errorf("service: dead letters: %w", err)
	}
	return nil
}

// commit acknowledges the last processed record of every partition. A
// partition a Kafka rebalance gave to another process is not committed
// (the new owner reads it from the group's last commit); its model stays,
// and goes on from where it was if the partition comes back.
//
// Outputs are as durable as the model: every output of the records
// processed so far — predictions, dead letters, reports — is flushed to
// its sink first (a file fsynced, Kafka and JetStream acknowledged), so no
// position committed now or by a checkpoint taken now is ahead of them. A
// crash repeats the outputs since the last commit; they carry their
// identity (source, partition, offset) for the consumer, or the server
// (JetStream's Nats-Msg-Id), to drop the duplicates.
func (s *Service) commit(ctx context.Context) error {
	if err := s.flush(ctx); err != nil {
		return fmt.Errorf("service: outputs not durable, nothing committed: %w", err)
	}
	owned, live := s.assignments()
	if s.opt.Checkpoints != nil && live {
		for _, part := range slices.Clone(s.order) {
			if !slices.Contains(owned, part) {
				// Given to another process: its checkpoint is the new
				// owner's to write, and this model is stale (if the
				// partition comes back, it comes back from the checkpoint).
				s.logger.Info("partition revoked: dropping its model", "partition", part)
				s.dropModel(part)
			}
		}
	}
	if s.opt.Checkpoints != nil {
		// Finished checkpoints first: their commits are due. At the end,
		// every write in flight, so that the last state is taken below.
		if err := s.collectSaves(ctx, s.draining); err != nil {
			return err
		}
	}
	for _, part := range s.order {
		m := s.models[part]
		if !m.dirty || m.saving {
			continue
		}
		if s.opt.Checkpoints != nil && owned != nil && !live {
			continue // between generations: commit once one is live
		}
		if s.opt.Checkpoints != nil && m.pos == m.savedPos {
			// Only records the durable checkpoint already holds (skipped
			// after a restore): their positions may be committed as is.
			if err := s.commitRecord(ctx, part, m, m.last, m.durableAt); err != nil {
				return err
			}
			continue
		}
		if s.opt.Checkpoints != nil {
			// The state is taken now; it is written, and then its
			// position committed, while the loop learns on.
			if err := s.startSave(part, m); err != nil {
				return err
			}
			continue
		}
		if err := s.commitRecord(ctx, part, m, m.last, time.Now()); err != nil {
			return err
		}
	}
	// Models left dirty (a checkpoint of theirs still being written, or
	// between generations) keep commit rounds coming.
	s.uncommitted = 0
	for _, m := range s.models {
		if m.dirty && !m.saving {
			s.uncommitted++
		}
	}
	s.lastCommit = time.Now()
	if s.opt.Checkpoints != nil && s.draining {
		// The last chance: wait for every write, commit, and say if a
		// checkpoint failed.
		if err := s.collectSaves(ctx, true); err != nil {
			return err
		}
		if s.saveFailing {
			return fmt.Errorf("service: the last checkpoints failed (%v): their positions are not committed", s.lastSaveErr)
		}
	}
	return nil
}

// commitRecord commits rec, the last record of part that the state taken
// at `at` holds, and marks the model clean when it learned nothing since.
func (s *Service) commitRecord(ctx context.Context, part int32, m *model, rec connectors.Record, at time.Time) error {
	if err := s.opt.Source.Commit(ctx, rec); errors.Is(err, connectors.ErrPartitionRevoked) {
		s.logger.Warn("partition revoked before its commit: its records since the last commit will be learned again by the new owner",
			"source", s.opt.Source.Name(), "partition", part, "offset", rec.Offset)
	} else if err != nil {
		err = fmt.Errorf("service: commit partition %d offset %d: %w", part, rec.Offset, err)
		if s.draining || ctx.Err() != nil {
			return err
		}
		// A broker away for a while (a restart, a network outage): the
		// model is intact and the position waits for the next round.
		s.logger.Warn("commit failed: retrying at the next commit round", "err", err)
		s.uncommitted++
		return nil
	}
	m.durableAt = at
	if m.last.Offset == rec.Offset && m.last.Partition == rec.Partition {
		m.dirty = false
	}
	return nil
}

func (s *Service) flush(ctx context.Context) error {
	var errs []error
	for _, sink := range []connectors.Sink{s.opt.Predictions, s.opt.Reports, s.opt.DeadLetters} {
		if sink != nil {
			errs = append(errs, sink.Flush(ctx))
		}
	}
	return errors.Join(errs...)
}

// Report is a model's regret report (DESIGN.md's object) with the source
// and partition it learned from.
type Report struct {
	Source    string `json:"source"`
	Partition int32  `json:"partition"`
	// ConsumerLag is the Lag of the last record the model processed (see
	// connectors.Record): how far behind the broker's end it was then.
	// Absent when the source does not say or before the first record.
	ConsumerLag *int64 `json:"consumer_lag,omitempty"`
	pipeline.Report
}

// Reports returns the report of every model, ordered by partition.
func (s *Service) Reports() ([]Report, error) {
	parts := slices.Clone(s.order)
	slices.Sort(parts)
	out := make([]Report, 0, len(parts))
	for _, part := range parts {
		rep, err := s.report(part, s.models[part])
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	return out, nil
}

// report returns the report of the model of part.
func (s *Service) report(part int32, m *model) (Report, error) {
	r, err := m.p.Report()
	if err != nil {
		return Report{}, err
	}
	rep := Report{Source: s.opt.Source.Name(), Partition: part, Report: r}
	if m.seen && m.lag >= 0 {
		lag := m.lag // a copy: reports are immutable
		rep.ConsumerLag = &lag
	}
	return rep, nil
}

func (s *Service) publishReports(ctx context.Context) error {
	if s.opt.Reports == nil {
		return nil
	}
	for _, part := range s.order {
		if err := s.publishReport(ctx, part, s.models[part]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) publishReport(ctx context.Context, part int32, m *model) error {
	r, err := s.report(part, m)
	if err != nil {
		return err
	}
	b, err := marshalReport(r)
	if err != nil {
		return err
	}
	if err := s.opt.Reports.Publish(ctx, []byte(strconv.Itoa(int(part))), b); err != nil {
		return fmt.Errorf("service: reports: %w", err)
	}
	return nil
}
