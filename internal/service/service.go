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
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// Defaults of Options.
const (
	DefaultCommitEvery    = 1000
	DefaultCommitInterval = time.Second
	// DefaultSnapshotInterval is a second: scrapes (typically every
	// 10–60s) see numbers at most a second old. A snapshot asks only the
	// models that learned since the last one for their reports, whose
	// digests cover the learners that changed (about 1ms for a model of
	// twelve learners at 2^18 slots, BenchmarkReport in
	// internal/pipeline); the others' last reports stand (64 models at
	// rest: 4µs, BenchmarkSnapshotAtRest), so a partition at rest costs
	// nothing.
	DefaultSnapshotInterval = time.Second
	// DefaultOwnWait is how long Run waits for another process to give
	// up a partition's checkpoints (Options.OwnWait).
	DefaultOwnWait = 30 * time.Second
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
// Observe must not allocate (it runs once per record) and must be safe for
// concurrent use (the workers of every partition observe).
type Observer interface {
	Observe(float64)
}

// A LatencyObserver gives, per partition, the Observer of the seconds
// from a record's broker timestamp (connectors.Record.Time) to the
// prediction of its event handed to the predictions sink; metrics'
// PredictionLatency satisfies it. Partition is called once per partition.
type LatencyObserver interface {
	Partition(p int32) Observer
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
	// Latency, when not nil, observes per partition the seconds from a
	// record's broker timestamp to its prediction handed to the
	// predictions sink (records without a timestamp are not observed).
	Latency LatencyObserver
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
	// OnMismatch says what Run does with a partition whose checkpoint
	// does not hold what the broker says was committed (no checkpoint,
	// one behind the commit, one of another partition or stream): stop
	// with a *RestoreError (MismatchFail, the zero value), start the
	// model afresh (MismatchReset) or restore the checkpoint as it is
	// (MismatchAccept). The last two are the operator's explicit choice
	// (`run --reset`, `run --accept`, checkpoint.on_mismatch), logged with
	// what they drop or skip: never a fresh model without being asked.
	OnMismatch Mismatch
	// OwnWait bounds how long Run waits to own a partition's checkpoints
	// when Checkpoints is a checkpoint.Owner and another process owns
	// them (default DefaultOwnWait): in a Kafka group, the previous owner
	// gives a partition up within about a second of a rebalance; any
	// longer, another process runs the same model, and Run stops with an
	// error naming it.
	OwnWait time.Duration
	// Owned lists the partitions whose checkpoints the caller already
	// owns (see Own): Run does not take them again, nor give them up.
	Owned []int32
	// ResetLearners names the learners to start afresh when a checkpoint
	// was written by another list of learners (`run --reset-learner`):
	// those added, those whose settings changed and those dropped since,
	// each of them and no other. The other learners keep their models,
	// and the partition's checkpoint is written again at once for the new
	// configuration (see Service.restore). With a checkpoint of this
	// configuration it does nothing.
	ResetLearners []string
	// WarmStart, when not nil, is the model every new model starts from
	// instead of an empty one (`run --warm-start`, models.warm_start): a
	// partition without a checkpoint, one reset (MismatchReset) and one
	// rebuilt from its first record. A model restored from its
	// checkpoint is the checkpoint's. It must be of this model
	// configuration (New checks), unless its Err says why it cannot be
	// read: then only a new model fails, with that error, and the models
	// restored from their checkpoints run.
	WarmStart *WarmStart

	// Logger gets lifecycle events; nil discards them.
	Logger *slog.Logger
}

// Service runs one source through per-partition models, each learned by
// its own worker goroutine (see worker.go). Run owns everything: the
// Service is not safe for concurrent use, except for Snapshot and
// Predictor, which any goroutine may call at any time.
type Service struct {
	opt    Options
	logger *slog.Logger

	// The sinks, safe for the workers of every partition at once.
	predictions, reports, deadLetters connectors.Sink
	dl                                *DeadLetters
	predIDs                           connectors.IDSink // predictions, when it carries an identity
	producerKeys                      bool              // the source's Record.Key is its producer's (connectors.ProducerKeyed)
	lined                             bool              // the source's offsets are lines (connectors.Lined)

	framed  Framed // Source, when it is a Framed source
	workers map[int32]*worker
	// lastWorker is the worker of the last record dispatched; nil once
	// a model is dropped.
	lastWorker *worker
	order      []int32 // partitions in the order first seen

	// wctx bounds the workers' sink messages: not Run's context, so that
	// a stopped service finishes the records it took; cancelled when the
	// drain runs out of time.
	wctx    context.Context
	wcancel context.CancelFunc
	intake  bool                  // Run's loop runs: new workers start
	failure atomic.Pointer[error] // the first error of a worker

	// learnTime is the time Run spent learning (LearnSeconds): the sum
	// of its busy spans. spanFrom is when the current one began, zero
	// between spans; spanBlocked the source's blocked time then
	// (blocker).
	learnTime   time.Duration
	spanFrom    time.Time
	spanBlocked time.Duration

	uncommitted int
	replan      bool         // the loop's deadline must be planned again (a model was dropped)
	lastCommit  time.Time    // the last commit round, successful or not
	round       *commitRound // the commit round waiting for its answers; nil when none
	nextReport  time.Time    // zero without ReportInterval

	fingerprint [32]byte          // of the model configuration, in checkpoints
	build       *pipeline.Builder // of its pipelines, for the serving copies of models per key
	volatile    bool              // the source's offsets do not survive a restart
	idSource    string            // the source in the outputs' identities (OutputID)
	saveFailing bool              // the last checkpoint save failed
	lastSaveErr error
	// Since when commits fail (the broker away), and how many failed
	// since; zero while they succeed. The outage is logged when it begins
	// and when it ends, not at every round.
	commitFailingSince time.Time
	commitFailures     int
	// After a failed save, commit rounds ask for no checkpoint until
	// saveRetryAt; the wait doubles from saveBackoffMin to saveBackoffMax
	// while saves keep failing.
	saveRetryAt time.Time
	saveBackoff time.Duration
	saver       *saver // waits for the sinks and writes checkpoints off the loop
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
	// outputsFailed is set once a round's outputs failed at their sink:
	// nothing is committed after it.
	outputsFailed error

	snap         atomic.Pointer[Snapshot]
	nextSnapshot time.Time
	curves       [][][]regret.Point // the last copy of the curves, shared by snapshots
	curvesAt     time.Time
	curvesEvents uint64                         // the events of every model at that copy
	draining     bool                           // Run is taking its final snapshot
	copies       atomic.Pointer[serving.Copies] // model copies for predictions; nil while idle
	serveUntil   atomic.Int64                   // Unix ns until which serving is active
	digestUntil  atomic.Int64                   // Unix ns until which snapshots carry state digests (WantDigests)
}

// Snapshot returns the latest published snapshot; it is never nil. Run
// publishes one when it starts, every SnapshotInterval while it runs
// (also while the source is idle) and one after its final commit. Before
// Run, it has Started false and no reports. Safe for concurrent use.
func (s *Service) Snapshot() *Snapshot { return s.snap.Load() }

// WantDigests makes the snapshots carry the learners' state digests for
// the next ServeIdle, and waits until one does (or ctx is done): for
// readers of the reports (GET /v1/report). Safe for concurrent use.
func (s *Service) WantDigests(ctx context.Context) {
	s.digestUntil.Store(time.Now().Add(serving.ServeIdle).UnixNano())
	for {
		if snap := s.snap.Load(); snap == nil || snap.Digests || !snap.Started && len(snap.Reports) == 0 {
			return
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// publishSnapshot asks the models that learned since the last snapshot
// for their reports (the workers answer once they have learned every
// record handed over so far) and publishes them with the last reports of
// the others: a model at rest costs its worker nothing.
func (s *Service) publishSnapshot(ctx context.Context) error {
	now := time.Now()
	parts := s.sorted()
	curvesDue := s.opt.HistoryPoints > 0 && (len(s.curves) != len(parts) || s.draining || now.Sub(s.curvesAt) >= curvesInterval)
	serve := now.UnixNano() <= s.serveUntil.Load()
	digests := s.draining || now.UnixNano() <= s.digestUntil.Load()
	old := s.copies.Load()
	servedAt := func(w *worker) uint64 {
		if old != nil {
			if pr, ok := old.Of(w.part); ok {
				return pr.Events
			}
		}
		return noCopy
	}
	changed := make([]int32, 0, len(parts))
	idle := s.opt.Config.Models.Idle
	for _, part := range parts {
		w := s.workers[part]
		// Models per key have no curves; with models.idle, they are asked
		// at rest too, to evict the models gone idle.
		curves := curvesDue && w.snapCurves == nil && w.m.k == nil
		idleDue := w.m.k != nil && idle > 0 && now.Sub(w.idleAt) >= idle/2
		if w.handed || !w.snapOK || curves || idleDue || digests && !w.snapDigests || serve && servedAt(w) != w.snap.Events {
			changed = append(changed, part)
			w.idleAt = now
		}
	}
	answers, err := s.askAll(ctx, changed, func(w *worker) *ask {
		a := &ask{kind: askSnapshot, curves: curvesDue, serve: serve, servedAt: servedAt(w), digests: digests}
		if old != nil {
			a.served, _ = old.Of(w.part)
		}
		return a
	})
	if err != nil {
		return err
	}
	served := make(map[int32]*serving.Predictor, len(answers))
	for _, a := range answers {
		w := a.w
		// The answer holds every record handed over before the question
		// (the loop hands over none while it waits).
		w.handed = false
		w.snap, w.snapOK, w.snapCurves = a.report, true, a.curves // nil without curvesDue: stale
		w.snapDigests = digests
		if a.served != nil {
			served[w.part] = a.served
		}
	}
	reports := make([]Report, len(parts))
	var events uint64
	for i, part := range parts {
		w := s.workers[part]
		reports[i] = w.snap
		// A model at rest: its last report, only later.
		reports[i].Seconds = now.Sub(w.m.started()).Seconds()
		events += w.snap.Events
	}
	if curvesDue && (len(s.curves) != len(parts) || events != s.curvesEvents) {
		curves := make([][][]regret.Point, len(parts))
		for i, part := range parts {
			curves[i] = s.workers[part].snapCurves
		}
		s.curves, s.curvesAt, s.curvesEvents = curves, now, events
	}
	var durable time.Time
	for _, w := range s.workers {
		if w.dirty && (durable.IsZero() || w.durableAt.Before(durable)) {
			durable = w.durableAt
		}
	}
	allDigests := true
	for _, part := range parts {
		allDigests = allDigests && s.workers[part].snapDigests
	}
	s.snap.Store(&Snapshot{Time: now, Source: s.opt.Source.Name(), Reports: reports, Started: true, Durable: durable, Curves: s.curves, Digests: allDigests})
	s.refreshServing(now, serve, old, parts, served)
	s.nextSnapshot = time.Now().Add(s.opt.SnapshotInterval)
	return nil
}

// noCopy is the servedAt of a model without a copy for serving: no model
// has that many events, so its worker copies it.
const noCopy = ^uint64(0)

// askAll asks the workers of parts what mk says and returns their
// answers, in the order of parts, once every one has answered; the
// workers answer once they have processed every record handed over
// before. It returns the first error of an answer, or ctx's.
func (s *Service) askAll(ctx context.Context, parts []int32, mk func(*worker) *ask) ([]answer, error) {
	replies := make(chan answer, len(parts))
	for _, part := range parts {
		a := mk(s.workers[part])
		a.reply = replies
		if err := s.workers[part].ask(ctx, a); err != nil {
			return nil, err
		}
	}
	byPart := make(map[int32]answer, len(parts))
	for range parts {
		select {
		case a := <-replies:
			if a.err != nil {
				return nil, a.err
			}
			byPart[a.w.part] = a
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]answer, len(parts))
	for i, part := range parts {
		out[i] = byPart[part]
	}
	return out, nil
}

// sorted returns the partitions with a model, ascending.
func (s *Service) sorted() []int32 {
	parts := slices.Clone(s.order)
	slices.Sort(parts)
	return parts
}

// New checks the options.
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
	if opt.OwnWait <= 0 {
		opt.OwnWait = DefaultOwnWait
	}
	if opt.HistoryPoints == 0 {
		opt.HistoryPoints = DefaultHistoryPoints
	}
	if _, err := event.NewDecoder(recordConfig(opt)); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if w := opt.WarmStart; w != nil && w.Err == nil {
		if err := w.Check(opt.Config); err != nil {
			return nil, fmt.Errorf("service: warm start: %w", err)
		}
	}
	s := &Service{opt: opt, workers: map[int32]*worker{}, logger: opt.Logger, premakeSlot: make(chan struct{}, 1),
		fingerprint: Fingerprint(opt.Config), build: pipeline.NewBuilder(opt.Config), volatile: volatile(opt.Source),
		predictions: lock(opt.Predictions), reports: lock(opt.Reports), deadLetters: lock(opt.DeadLetters)}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.idSource = opt.Source.Name()
	if s.volatile {
		s.idSource += "@" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	if s.deadLetters != nil {
		s.dl = &DeadLetters{Sink: s.deadLetters, IDSource: s.idSource}
	}
	s.predIDs, _ = s.predictions.(connectors.IDSink)
	if pk, ok := opt.Source.(connectors.ProducerKeyed); ok {
		s.producerKeys = pk.ProducerKeys()
	}
	if l, ok := opt.Source.(connectors.Lined); ok {
		s.lined = l.LineOffsets()
	}
	s.framed, _ = opt.Source.(Framed)
	s.snap.Store(&Snapshot{Time: time.Now(), Source: opt.Source.Name(), Reports: []Report{}})
	return s, nil
}

// recordConfig is the decoding configuration of the records of opt's
// source one by one (a broker's messages). A Framed source's records are
// decoded by the decoder of the input they come from, in its format (CSV
// with its file's header): there the configured format is the files',
// and the decoder of single records is never used for them.
func recordConfig(opt Options) event.Config {
	c := pipeline.EventConfig(opt.Config)
	if _, framed := opt.Source.(Framed); framed && c.Format == event.CSV {
		c.Format = event.JSONL
	}
	return c
}

// fail records the first error of a worker; Run's loop stops at it.
func (s *Service) fail(err error) { s.failure.CompareAndSwap(nil, &err) }

// failed returns the first error of a worker, nil when none failed.
func (s *Service) failed() error {
	if err := s.failure.Load(); err != nil {
		return *err
	}
	return nil
}

// Run consumes the source until ctx is done or the source reports
// connectors.ErrEndOfInput. Either way it then stops taking records, lets
// every worker learn the records it was handed, commits what was learned,
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
	s.wctx, s.wcancel = context.WithCancel(context.WithoutCancel(ctx))
	defer s.wcancel()
	defer s.disownAll() // after the last checkpoint write (stopSaver, below)
	// The workers' sink messages outlive ctx by drainTimeout at most:
	// stopWorkers cancels them when the drain runs out, and this, for the
	// records the loop processes itself (an inline worker), which no
	// drain waits for.
	var late atomic.Pointer[time.Timer]
	stopLate := context.AfterFunc(ctx, func() { late.Store(time.AfterFunc(drainTimeout, s.wcancel)) })
	defer func() {
		stopLate()
		if t := late.Load(); t != nil {
			t.Stop()
		}
	}()
	s.startSaver()
	defer s.stopSaver()
	defer s.premaking.Wait()
	if s.opt.ReportInterval > 0 {
		s.nextReport = s.lastCommit.Add(s.opt.ReportInterval)
	}
	s.intake = true
	runErr := s.restoreIdle(ctx, true)
	if runErr == nil && s.framed == nil && len(s.workers) == 0 {
		s.makeSpare(ctx)
		defer func() { // before premaking.Wait: a spare never taken is not copied
			if s.dropSpare != nil {
				s.dropSpare()
			}
		}()
	}
	if runErr == nil {
		runErr = s.publishSnapshot(ctx)
	}
	if runErr == nil {
		runErr = s.loop(ctx)
	}
	// Drain with a context of its own, since ctx may be the one that was
	// cancelled: stop intake, let the workers learn what they were
	// handed, then (the models are the loop's again) commit and report.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	s.intake = false
	stopErr := s.stopWorkers(dctx)
	if !s.spanFrom.IsZero() {
		// The loop stopped while busy (the end of its input): the
		// span ends once the workers learned what they were handed.
		s.endSpan(time.Now(), s.sourceBlocked())
	}
	if runErr == nil {
		runErr = s.failed()
	}
	if runErr == nil {
		runErr = s.restoreIdle(dctx, false)
	}
	s.draining = true // the final snapshot has the curves up to the last record
	err := errors.Join(runErr, stopErr, s.commit(dctx), s.publishReports(dctx), s.flush(dctx), s.publishSnapshot(dctx))
	return err
}

// disownAll gives up the ownership of every model's checkpoints.
func (s *Service) disownAll() {
	for _, w := range s.workers {
		w.m.disown()
	}
}

// stopWorkers lets every worker finish its queue and waits for them;
// past ctx's deadline it cancels their sink messages (a sink that does not
// answer) and waits for them to give up.
func (s *Service) stopWorkers(ctx context.Context) error {
	var errs []error
	for _, part := range s.order {
		if err := s.workers[part].stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.wcancel()
		for _, w := range s.workers {
			if w.running {
				<-w.done
				w.running = false
			}
		}
	}
	return errors.Join(errs...)
}

// A blocker is a source whose Fetch can block for input inside a call
// that then returns a record (a pipe whose writer pauses): blocked returns
// the total time its Fetch calls spent so, which is not learning time
// (LearnSeconds). Cheap enough to call at every clock reading.
type blocker interface{ blocked() time.Duration }

// endSpan ends the busy span that began at s.spanFrom at end, when the
// source's blocked time (blocker) was blocked, and adds it, less the time
// the source was blocked in it, to the learning time.
func (s *Service) endSpan(end time.Time, blocked time.Duration) {
	s.learnTime += max(end.Sub(s.spanFrom)-(blocked-s.spanBlocked), 0)
	s.spanFrom = time.Time{}
}

// sourceBlocked returns the source's blocked time (blocker); zero when it
// does not say.
func (s *Service) sourceBlocked() time.Duration {
	if b, ok := s.opt.Source.(blocker); ok {
		return b.blocked()
	}
	return 0
}

func (s *Service) loop(ctx context.Context) error {
	var (
		fc     deadlineCtx
		now    time.Time
		due    time.Time // s.deadline(now), planned again when an input of it changes
		replan = true
		clock  int // records since now was read
		// every is the records between two readings of the clock:
		// clockEvery, but 1 after a span began, doubled at each reading
		// up to clockEvery, so that a short span is timed within half
		// its length at a cost of a few readings per span.
		every = clockEvery
		idle  bool // the last Fetch found nothing
		// blocked is the source's blocked time (blocker) when now was
		// read; zero without a blocker.
		blocked time.Duration
	)
	b, _ := s.opt.Source.(blocker)
	defer fc.stop()
	for {
		if err := s.failed(); err != nil {
			return err
		}
		if s.round != nil && len(s.round.replies) == s.round.waiting {
			if err := s.finishRound(ctx); err != nil {
				return stopped(ctx, err)
			}
			replan = true
		}
		if s.saver != nil && len(s.saver.results) > 0 {
			// A checkpoint is written: commit the position it holds.
			if err := s.collectSaves(ctx, false); err != nil {
				return stopped(ctx, err)
			}
			replan = true
		}
		// The clock is read every clockEvery records (reading it costs
		// about as much as a Perceptron round; more often early in a
		// span, see every) and after every wait, and what is due by
		// time is looked at then: at most that many records late.
		if clock++; clock >= every || idle {
			now, clock, replan = time.Now(), 0, true
			every = min(2*every, clockEvery)
			if b != nil {
				blocked = b.blocked()
			}
			if err := s.dueByTime(ctx, now); err != nil {
				return stopped(ctx, err)
			}
		}
		if replan {
			due, replan = s.deadline(now), false
		}
		fctx := fc.get(ctx, due)
		rec, err := s.opt.Source.Fetch(fctx)
		idle = err != nil
		// Learning time is the sum of busy spans (LearnSeconds), timed
		// with a clock reading per Fetch that found nothing and a few
		// per span (every), none per record. A span begins when a
		// record comes at the start or after a Fetch that found
		// nothing; it ends at the last clock reading before the next
		// such Fetch (at most clockEvery records, and at most half the
		// span, early: the wait is never counted), or, at the end of
		// the input, after the drain (Run).
		switch {
		case !idle && s.spanFrom.IsZero():
			now, clock, every = time.Now(), 0, 1
			if b != nil {
				blocked = b.blocked()
			}
			s.spanFrom, s.spanBlocked = now, blocked
		case idle && !s.spanFrom.IsZero() && !errors.Is(err, connectors.ErrEndOfInput):
			s.endSpan(now, blocked)
		}
		switch {
		case err == nil:
		case errors.Is(err, connectors.ErrEndOfInput):
			s.logger.Info("end of input", "source", s.opt.Source.Name())
			return nil
		case ctx.Err() != nil:
			return nil
		case fctx.Err() != nil:
			// Nothing came: what the workers wait for goes to them, and
			// a commit, a report or a snapshot is due.
			if err := s.handOverAll(ctx); err != nil {
				return stopped(ctx, err)
			}
			continue
		default:
			return fmt.Errorf("service: fetch: %w", err)
		}
		if err := s.dispatch(ctx, &rec); err != nil {
			return stopped(ctx, err)
		}
		if s.uncommitted++; s.uncommitted == 1 || s.replan {
			// A commit is due by time now, or a reloaded model's commit
			// round changed what is due.
			replan, s.replan = true, false
		}
		if s.round == nil && s.uncommitted >= s.opt.CommitEvery {
			if err := s.startRound(ctx); err != nil {
				return stopped(ctx, err)
			}
			replan = true
		}
	}
}

// clockEvery is how many records the loop takes between two readings of
// the clock.
const clockEvery = 64

// drainTimeout bounds the drain after Run's context is done: the workers
// learning what they were handed, the final commit and reports. A
// variable for tests.
var drainTimeout = 30 * time.Second

// dueByTime publishes the interval reports, starts a commit round and
// publishes a snapshot when they are due at now.
func (s *Service) dueByTime(ctx context.Context, now time.Time) error {
	if !s.nextReport.IsZero() && !now.Before(s.nextReport) {
		if err := s.publishReports(ctx); err != nil {
			return err
		}
		// From the end of this round of reports: reports slower than
		// the interval must not starve the stream.
		s.nextReport = time.Now().Add(s.opt.ReportInterval)
	}
	if s.round == nil && s.uncommitted > 0 && now.Sub(s.lastCommit) >= s.opt.CommitInterval {
		if err := s.startRound(ctx); err != nil {
			return err
		}
	}
	if !now.Before(s.nextSnapshot) {
		if s.round == nil {
			// An idle process gives up its revoked partitions, and their
			// checkpoints, within a snapshot interval of a rebalance.
			if err := s.dropRevoked(ctx); err != nil {
				return err
			}
			if err := s.warmAssigned(ctx); err != nil {
				return err
			}
		}
		return s.publishSnapshot(ctx)
	}
	return nil
}

// stopped returns nil when err comes from ctx being done (the drain
// commits and reports), and err otherwise.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
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
	if s.round != nil || s.saver != nil && s.saver.inflight > 0 {
		// Look for answers and finished checkpoint writes every 20ms
		// while idle (a deadline that changes every 20ms, not per
		// record).
		if c := now.Truncate(20 * time.Millisecond).Add(20 * time.Millisecond); c.Before(d) {
			d = c
		}
	}
	return d
}

// worker returns the worker of partition, creating its model (from the
// partition's checkpoint when there is one) and, while Run's loop runs,
// starting it.
func (s *Service) worker(ctx context.Context, partition int32) (*worker, error) {
	if w := s.lastWorker; w != nil && w.part == partition {
		return w, nil // the common case: the partition of the last record
	}
	if w, ok := s.workers[partition]; ok {
		s.lastWorker = w
		return w, nil
	}
	var m *model
	var premade *pipeline.Frozen
	if s.spare != nil {
		select {
		case sp := <-s.spare:
			m, premade = sp.m, sp.frozen
			m.p.StartNow() // a spare is made of one pipeline, never of models per key
		default: // not made in time: dropped, its copy not made
		}
		s.dropSpare()
		s.spare, s.dropSpare = nil, nil
	}
	if m == nil {
		var err error
		if m, err = newPartitionModel(s.opt.Config, s.opt.HistoryPoints); err != nil {
			return nil, err
		}
	}
	if w := s.opt.WarmStart; m.k != nil && w != nil {
		// Every new key's model starts from it, whether or not the
		// partition's models are restored from a checkpoint.
		if w.Err != nil {
			return nil, fmt.Errorf("service: partition %d: the models per key start from the warm start, which cannot be read: %w", partition, w.Err)
		}
		if err := m.k.StartFrom(w.Model.State, w.SHA256); err != nil {
			return nil, fmt.Errorf("service: partition %d: warm start: the model %s: %w", partition, w.Path, err)
		}
	}
	if err := s.own(ctx, partition, m); err != nil {
		return nil, err
	}
	w, err := s.newModel(ctx, partition, m, premade)
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
// partition to come, before that partition's first record does: making
// config.yaml's learners at bits 18 took 5–9 ms in the latency benchmark,
// during which the partition's records waited. With checkpoints, the
// goroutine also makes the copy the first checkpoint goes into, as premake
// does, and in making it reads every page of the model's weights, which
// the checkpoint's copy would otherwise be the first to read: 2.5–3.5 ms
// of page faults between two records. One model only, for the first
// partition (JetStream and core NATS have one), and only when no model was
// restored at the start: a spare not ready when the first partition comes
// is dropped (its goroutine makes no copy then), and later partitions'
// models are made when they come, lest an unused spare hold a model's
// memory. Models per key are not made ahead: they are made as their keys
// come.
func (s *Service) makeSpare(ctx context.Context) {
	if keyed(s.opt.Config) {
		return
	}
	spare := make(chan spareModel, 1)
	ctx, s.dropSpare = context.WithCancel(ctx)
	s.spare = spare
	s.premaking.Go(func() {
		m, err := newPartitionModel(s.opt.Config, s.opt.HistoryPoints)
		if err != nil {
			return // the first partition makes its own and meets the error
		}
		sp := spareModel{m: m}
		if s.opt.Checkpoints != nil && ctx.Err() == nil {
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
func (s *Service) own(ctx context.Context, partition int32, m *model) error {
	if slices.Contains(s.opt.Owned, partition) {
		return nil
	}
	if _, ok := s.opt.Checkpoints.(checkpoint.Owner); !ok {
		return nil
	}
	what := fmt.Sprintf("partition %d of %s", partition, s.opt.Source.Name())
	release, err := Own(ctx, s.opt.Checkpoints, partition, s.opt.OwnWait, what, func() error { return s.dropRevoked(ctx) })
	if _, group := s.opt.Source.(connectors.Assigned); err != nil && group {
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
func (s *Service) newModel(ctx context.Context, partition int32, m *model, premade *pipeline.Frozen) (*worker, error) {
	if err := s.restore(ctx, partition, m); err != nil {
		return nil, err
	}
	w, err := s.newWorker(partition, m)
	if err != nil {
		return nil, err
	}
	if m.saveAtOnce {
		// The reset holds once its checkpoint does: the next run, even
		// if this one learns nothing, restores the fresh model at the
		// committed position rather than stopping again.
		t, err := w.take(nil)
		var c *checkpoint.Checkpoint
		if err == nil {
			c, err = t.complete()
		}
		if err == nil {
			err = s.opt.Checkpoints.Save(ctx, c)
		}
		if err != nil {
			return nil, fmt.Errorf("service: checkpoint of partition %d after its reset: %w", partition, err)
		}
	}
	switch {
	case !s.intake:
	case s.framed != nil:
		// One partition read from files: nothing to learn in parallel
		// with, and fetching is cheaper than learning, so a goroutine
		// would only add the copy and the hand-over. The loop learns.
		w.inline = true
	default:
		w.start(s.wctx)
		switch {
		case s.opt.Checkpoints == nil || m.p == nil:
		case premade != nil:
			w.premade.Store(premade)
		default:
			s.premaking.Go(func() { w.premake(ctx, s.premakeSlot, s.opt.Config, s.opt.HistoryPoints) })
		}
	}
	s.workers[partition] = w
	s.lastWorker = w
	s.order = append(s.order, partition)
	s.logger.Info("new model", "source", s.opt.Source.Name(), "partition", partition)
	return w, nil
}

// dispatch hands rec to the worker of its partition.
func (s *Service) dispatch(ctx context.Context, rec *connectors.Record) error {
	w, err := s.worker(ctx, rec.Partition)
	if err != nil {
		return err
	}
	if w.hasEpoch && rec.Epoch != w.epoch && s.opt.Checkpoints != nil {
		// The partition came back after a rebalance: another process may
		// have learned it meanwhile, and its checkpoint holds that.
		s.logger.Info("partition assigned anew: reloading its model from the checkpoint", "partition", rec.Partition)
		if err := s.dropModel(ctx, rec.Partition); err != nil {
			return err
		}
		if w, err = s.worker(ctx, rec.Partition); err != nil {
			return err
		}
	}
	w.epoch, w.hasEpoch = rec.Epoch, true
	if s.framed != nil {
		if n := s.framed.Input(); n != w.input {
			if err := w.setDecoder(ctx, s.framed.Decoder()); err != nil {
				return err
			}
			w.input = n
		}
	}
	if err := w.add(ctx, rec); err != nil {
		return err
	}
	w.last, w.dirty, w.handed = *rec, true, true
	w.last.Value, w.last.Key = nil, nil // not valid past the next Fetch; Commit needs neither
	return nil
}

// handOverAll hands every worker the batch being filled.
func (s *Service) handOverAll(ctx context.Context) error {
	for _, part := range s.order {
		if err := s.workers[part].handOver(ctx); err != nil {
			return err
		}
	}
	return nil
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

// dropRevoked drops the models of the partitions a Kafka rebalance gave
// to another process: the partition leaves the reports, the metrics and
// the reports sink here. With checkpoints, the model's state is
// checkpointed first (handOff), and the new owner, who waits for this
// process to give the checkpoints up, restores it; without, the new owner
// learns afresh from the group's last commit, and the model here is stale
// (if the partition comes back, it comes back from the checkpoint, or
// afresh).
func (s *Service) dropRevoked(ctx context.Context) error {
	owned, live := s.assignments()
	if !live {
		return nil
	}
	for _, part := range slices.Clone(s.order) {
		if !slices.Contains(owned, part) {
			s.logger.Info("partition revoked: dropping its model", "partition", part)
			if err := s.handOff(ctx, part); err != nil {
				return err
			}
		}
	}
	return nil
}

// startRound asks the models for their positions. A partition a Kafka
// rebalance gave to another process is not committed (the new owner
// reads it from the group's last commit).
func (s *Service) startRound(ctx context.Context) error {
	if err := s.dropRevoked(ctx); err != nil {
		return err
	}
	owned, live := s.assignments()
	// Finished rounds first: their commits are due.
	if err := s.collectSaves(ctx, false); err != nil {
		return err
	}
	if s.outputsFailed != nil {
		return s.outputsFailed
	}
	r := &commitRound{replies: make(chan answer, len(s.order)), at: time.Now()}
	// After a failed save, no checkpoint is asked for until the backoff
	// is over (but at the end of the run: the final one is tried): a full
	// disk is not written to, nor logged, at every round.
	backoff := s.opt.Checkpoints != nil && s.intake && r.at.Before(s.saveRetryAt)
	for _, part := range s.order {
		w := s.workers[part]
		if !w.dirty || w.saving || w.marked || backoff {
			continue
		}
		if s.opt.Checkpoints != nil && owned != nil && !live {
			continue // between generations: commit once one is live
		}
		a := &ask{kind: askMark, reply: r.replies}
		if s.opt.Checkpoints != nil {
			a.kind, a.savedPos, a.spare = askCheckpoint, w.savedPos, w.spare
			w.spare = nil
		}
		w.saving = true
		w.marked, w.markRec = true, w.last
		r.waiting++
		if err := w.ask(ctx, a); err != nil {
			return err
		}
	}
	if r.waiting > 0 {
		s.round = r
	}
	s.uncommitted = 0
	s.lastCommit = time.Now()
	return nil
}

// finishRound waits for every answer of the round and hands the sinks'
// barriers, the positions and the checkpoints to the saver (collectSaves
// commits them once done).
func (s *Service) finishRound(ctx context.Context) error {
	r := s.round
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
	s.round = nil
	var errs []error
	for _, a := range answers {
		a.w.marked = false
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, a := range answers {
			a.w.saving = false // no round in flight: a later one asks again
		}
		return err
	}
	if s.outputsFailed != nil {
		for _, a := range answers {
			a.w.saving = false
		}
		return s.outputsFailed // nothing is committed or checkpointed after it
	}
	// Every output of the records the answers hold is published: the
	// sinks' barriers now cover them.
	job := &roundJob{waits: s.barriers()}
	for _, a := range answers {
		w := a.w
		if s.workers[w.part] != w {
			continue // dropped meanwhile: not ours to commit
		}
		switch {
		case a.kind == askMark:
			if !a.ok {
				w.saving = false
				continue // the worker failed at its first record
			}
			job.marks = append(job.marks, commitItem{w, a.rec, r.at})
		case a.ckpt == nil:
			// Only records the durable checkpoint already holds (skipped
			// after a restore): their positions may be committed as is.
			w.spare = a.spare
			job.marks = append(job.marks, commitItem{w, w.markRec, w.durableAt})
		default:
			job.saves = append(job.saves, saveJob{part: w.part, w: w, rec: w.markRec, pos: a.ckpt.c.Position, at: a.ckpt.c.Created, c: a.ckpt})
		}
	}
	if len(job.marks)+len(job.saves) > 0 {
		// Made durable off the loop; the positions committed once it is
		// (collectSaves).
		s.saver.inflight++
		s.saver.jobs <- job
	}
	// Models left dirty (learned more meanwhile) keep commit rounds coming.
	for _, w := range s.workers {
		if w.dirty && !w.saving {
			s.uncommitted++
		}
	}
	return nil
}

// commit is a whole commit round, waited for: the final one, with every
// checkpoint written.
func (s *Service) commit(ctx context.Context) error {
	if err := s.finishRound(ctx); err != nil {
		return err
	}
	if err := s.collectSaves(ctx, true); err != nil {
		return err
	}
	if err := s.startRound(ctx); err != nil {
		return err
	}
	if err := s.finishRound(ctx); err != nil {
		return err
	}
	// Wait for every round, commit, and say if a checkpoint failed.
	if err := s.collectSaves(ctx, true); err != nil {
		return err
	}
	if s.opt.Checkpoints != nil {
		if s.saveFailing {
			return fmt.Errorf("service: the last checkpoints failed (%v): their positions are not committed", s.lastSaveErr)
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
func (s *Service) commitRecords(ctx context.Context, items []commitItem) error {
	if len(items) == 0 {
		return nil
	}
	var outcomes []error // nil: every commit succeeded
	if mc, ok := s.opt.Source.(connectors.MultiCommitter); ok {
		recs := make([]connectors.Record, len(items))
		for i, it := range items {
			recs[i] = it.rec
		}
		outcomes = mc.CommitMany(ctx, recs)
	} else {
		outcomes = make([]error, len(items))
		for i, it := range items {
			outcomes[i] = s.opt.Source.Commit(ctx, it.rec)
		}
	}
	var errs []error
	var failed error // the first commit of the round that failed and waits for the next
	for i, it := range items {
		var err error
		if outcomes != nil {
			err = outcomes[i]
		}
		retry, err := s.committed(ctx, it, err)
		if retry != nil && failed == nil {
			failed = retry
		}
		errs = append(errs, err)
	}
	// A broker away for a while (a restart, a network outage) is logged
	// when the first round fails and when a round succeeds again, not at
	// every round; a round with any failed commit counts as failing.
	switch {
	case failed != nil && s.commitFailures == 0:
		s.commitFailingSince = time.Now()
		s.logger.Warn("commits fail: learning goes on, the positions wait; retrying at every commit round, logged again when commits succeed",
			"source", s.opt.Source.Name(), "err", failed)
		s.commitFailures++
	case failed != nil:
		s.commitFailures++
	case s.commitFailures > 0:
		s.logger.Info("commits succeed again", "source", s.opt.Source.Name(), "failed_rounds", s.commitFailures,
			"for", time.Since(s.commitFailingSince).Round(time.Millisecond))
		s.commitFailures, s.commitFailingSince = 0, time.Time{}
	}
	return errors.Join(errs...)
}

// committed takes the outcome err of the commit of it. A commit that
// failed while the service runs is retried at the next round: it returns
// the failure as retry and no error.
func (s *Service) committed(ctx context.Context, it commitItem, err error) (retry, _ error) {
	w, rec := it.w, it.rec
	if errors.Is(err, connectors.ErrPartitionRevoked) {
		s.logger.Warn("partition revoked before its commit: its records since the last commit will be learned again by the new owner",
			"source", s.opt.Source.Name(), "partition", w.part, "offset", rec.Offset)
	} else if err != nil {
		err = fmt.Errorf("service: commit partition %d offset %d: %w", w.part, rec.Offset, err)
		if s.draining || ctx.Err() != nil {
			return nil, err
		}
		// The model is intact and the position waits for the next round.
		s.uncommitted++
		return err, nil
	}
	w.durableAt = it.at
	if w.last.Offset == rec.Offset && w.last.Partition == rec.Partition {
		w.dirty = false
	}
	return nil, nil
}

func (s *Service) flush(ctx context.Context) error {
	var errs []error
	for _, sink := range []connectors.Sink{s.predictions, s.reports, s.deadLetters} {
		if sink != nil {
			errs = append(errs, sink.Flush(ctx))
		}
	}
	return errors.Join(errs...)
}

// Reports returns the report of every model, ordered by partition. Call
// it after Run returns (while Run runs, Snapshot has the reports). With
// delayed labels, the labels section of each has the digest of the model's
// store of waiting events (pipeline.StoreDigest), which snapshots leave
// out.
//
// With models per key, it has the report of every key's model instead,
// ordered by partition and key.
func (s *Service) Reports() ([]Report, error) {
	reps, err := eachModel(s, "Reports while Run runs: use Snapshot", func(w *worker) ([]Report, error) {
		if w.m.k != nil {
			return w.keyReports()
		}
		rep, err := w.report()
		if err == nil && rep.Labels != nil {
			rep.Labels.StateSHA256 = w.m.p.StoreDigest() // final: the store's digest too
		}
		return []Report{rep}, err
	})
	return slices.Concat(reps...), err
}

// Models returns, after Run, the checkpoint of every model as it ended,
// in the order of Reports: what `replay --save` writes as a model file
// (checkpoint.ModelOf).
func (s *Service) Models() ([]*checkpoint.Checkpoint, error) {
	return eachModel(s, "Models while Run runs", func(w *worker) (*checkpoint.Checkpoint, error) {
		t, err := w.take(nil)
		if err != nil {
			return nil, err
		}
		return t.complete()
	})
}

// eachModel returns f of every model's worker, in partition order, once
// Run has returned (the models are no worker's then); while it runs, an
// error saying misuse.
func eachModel[T any](s *Service, misuse string, f func(w *worker) (T, error)) ([]T, error) {
	parts := s.sorted()
	out := make([]T, 0, len(parts))
	for _, part := range parts {
		w := s.workers[part]
		if w.running {
			return nil, errors.New("service: " + misuse)
		}
		v, err := f(w)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// publishReports has every model's report published to the reports sink
// (by its worker, in its turn).
func (s *Service) publishReports(ctx context.Context) error {
	if s.reports == nil {
		return nil
	}
	for _, part := range s.order {
		if err := s.workers[part].ask(ctx, &ask{kind: askReport}); err != nil {
			return err
		}
	}
	return nil
}
