package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// Defaults of Options.
const (
	DefaultCommitEvery    = 1000
	DefaultCommitInterval = time.Second
	// DefaultSnapshotInterval is a second: scrapes (typically every
	// 10–60s) see numbers at most a second old. A snapshot asks only the
	// models that learned since the last one for their reports, whose
	// digests cover the learners that changed (BenchmarkReport in
	// internal/pipeline); the others' last reports stand
	// (BenchmarkSnapshotAtRest), so a partition at rest costs nothing.
	// The figures: docs/performance.md, "Measurements behind code
	// decisions".
	DefaultSnapshotInterval = time.Second
	// DefaultOwnWait is how long Run waits for another process to give
	// up a partition's checkpoints (Options.OwnWait).
	DefaultOwnWait = 30 * time.Second
	// DefaultHistoryPoints bounds the sampled curves a Snapshot carries per
	// learner: enough for a chart a few hundred pixels wide at any stream
	// length, about 48kB per learner (regret.Point is 48 bytes).
	DefaultHistoryPoints = 1000
)

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
	// Fingerprint and the comment of restore.go). CommitEvery and
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
	// configuration (see models.restore). With a checkpoint of this
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
	out    outputs      // the sinks, safe for the workers of every partition at once
	src    sourceTraits // what the source is, beyond a connectors.Source

	models  models    // every partition's model and worker
	commits committer // commit rounds, the outputs' barriers and the checkpoint saver
	snaps   snapshots // the published Snapshot and the serving copies

	// wctx bounds the workers' sink messages: not Run's context, so that
	// a stopped service finishes the records it took; cancelled when the
	// drain runs out of time.
	wctx    context.Context
	wcancel context.CancelFunc
	// stop is closed once Run is asked to stop (its context is done): a
	// worker then gives up a checkpoint of models per key it is making
	// (the final one, taken once the workers stopped, holds it all).
	stop    <-chan struct{}
	intake  bool                  // Run's loop runs: new workers start
	failure atomic.Pointer[error] // the first error of a worker
	busy    busySpans             // the time Run spent learning (LearnSeconds)

	replan     bool      // the loop's deadline must be planned again (a model was dropped)
	nextReport time.Time // zero without ReportInterval
	draining   bool      // Run is taking its final snapshot
}

// outputs are a Service's sinks, each locked (lock) so that the workers
// of every partition publish to it at once; nil when not configured.
type outputs struct {
	predictions, reports, deadLetters connectors.Sink
	dl                                *DeadLetters
	predIDs                           connectors.IDSink // predictions, when it carries an identity
	idSource                          string            // the source in the outputs' identities (OutputID)
}

// sourceTraits say what a Service's source is, beyond a connectors.Source.
type sourceTraits struct {
	framed       filesource.Framed  // Source, when it is a Framed source
	batches      connectors.Batcher // Source, when it hands over batches of one partition (not Framed)
	producerKeys bool               // the source's Record.Key is its producer's (Traits.ProducerKeyed)
	lined        bool               // the source's offsets are lines (Traits.Lined)
}

// busySpans time the learning of Run (LearnSeconds): total is the sum
// of its busy spans; from is when the current one began, zero between
// spans; blocked the source's blocked time then (blocker). The loop
// times them with a clock reading per Fetch that found nothing and a few
// per span, none per record. A span begins when a record comes at the
// start or after a Fetch that found nothing; it ends at the last clock
// reading before the next such Fetch (at most clockEvery records, and at
// most half the span, early: the wait is never counted), or, at the end
// of the input, after the drain (Run).
type busySpans struct {
	total   time.Duration
	from    time.Time
	blocked time.Duration
}

// end ends the busy span that began at from at end, when the source's
// blocked time (blocker) was blocked, and adds it, less the time the
// source was blocked in it, to the total.
func (b *busySpans) end(end time.Time, blocked time.Duration) {
	b.total += max(end.Sub(b.from)-(blocked-b.blocked), 0)
	b.from = time.Time{}
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
	s := &Service{opt: opt, logger: opt.Logger,
		out: outputs{predictions: lock(opt.Predictions), reports: lock(opt.Reports), deadLetters: lock(opt.DeadLetters)}}
	traits := connectors.TraitsOf(opt.Source)
	s.models = models{s: s, workers: map[int32]*worker{}, premakeSlot: make(chan struct{}, 1),
		fingerprint: Fingerprint(opt.Config), build: pipeline.NewBuilder(opt.Config), volatile: traits.Volatile}
	s.commits.s = s
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.out.idSource = opt.Source.Name()
	if s.models.volatile {
		s.out.idSource += "@" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	if s.out.deadLetters != nil {
		s.out.dl = &DeadLetters{Sink: s.out.deadLetters, IDSource: s.out.idSource}
	}
	s.out.predIDs, _ = s.out.predictions.(connectors.IDSink)
	s.src.producerKeys, s.src.lined = traits.ProducerKeyed, traits.Lined
	s.src.framed, _ = opt.Source.(filesource.Framed)
	if s.src.framed == nil {
		s.src.batches, _ = opt.Source.(connectors.Batcher)
	}
	s.snaps.snap.Store(&Snapshot{Time: time.Now(), Source: opt.Source.Name(), Reports: []Report{}})
	return s, nil
}

// recordConfig is the decoding configuration of the records of opt's
// source one by one (a broker's messages). A Framed source's records are
// decoded by the decoder of the input they come from, in its format (CSV
// with its file's header): there the configured format is the files',
// and the decoder of single records is never used for them.
func recordConfig(opt Options) event.Config {
	c := pipeline.EventConfig(opt.Config)
	if _, framed := opt.Source.(filesource.Framed); framed && c.Format == event.CSV {
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
// or commit fails. Once ctx is done, a worker gives up the checkpoint of
// models per key it is making: the final commit's checkpoint, taken once
// the workers stopped, holds it.
//
// Commits after CommitInterval and reports after ReportInterval happen
// also while the source is idle: Fetch then runs under a deadline (one
// context per commit, report or snapshot period, not per record); so do
// the snapshots Snapshot returns.
func (s *Service) Run(ctx context.Context) error {
	s.commits.lastCommit = time.Now()
	s.wctx, s.wcancel = context.WithCancel(context.WithoutCancel(ctx))
	defer s.wcancel()
	s.stop = ctx.Done()
	defer s.models.disownAll() // after the last checkpoint write (stopSaver, below)
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
	s.commits.startSaver()
	defer s.commits.stopSaver()
	defer s.models.premaking.Wait()
	if s.opt.ReportInterval > 0 {
		s.nextReport = s.commits.lastCommit.Add(s.opt.ReportInterval)
	}
	s.intake = true
	runErr := s.models.restoreIdle(ctx, true)
	if runErr == nil && s.src.framed == nil && len(s.models.workers) == 0 {
		s.models.makeSpare(ctx)
		defer func() { // before premaking.Wait: a spare never taken is not copied
			if s.models.dropSpare != nil {
				s.models.dropSpare()
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
	if !s.busy.from.IsZero() {
		// The loop stopped while busy (the end of its input): the
		// span ends once the workers learned what they were handed.
		s.busy.end(time.Now(), s.sourceBlocked())
	}
	if runErr == nil {
		runErr = s.failed()
	}
	if runErr == nil {
		runErr = s.models.restoreIdle(dctx, false)
	}
	s.draining = true // the final snapshot has the curves up to the last record
	// The final commit takes its checkpoints on this goroutine, which
	// may take long with many models per key (each model that learned
	// since the last checkpoint is encoded): that is work, not a sink that
	// does not answer, so its waits get drainTimeout each, as do the
	// reports and flushes after it.
	commitErr := s.commits.commit(context.WithoutCancel(ctx), drainTimeout)
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer fcancel()
	return errors.Join(runErr, stopErr, commitErr, s.publishReports(fctx), s.commits.flush(fctx), s.publishSnapshot(fctx))
}

// stopWorkers lets every worker finish its queue and waits for them;
// past ctx's deadline it cancels their sink messages (a sink that does not
// answer) and waits for them to give up.
func (s *Service) stopWorkers(ctx context.Context) error {
	var errs []error
	for _, part := range s.models.order {
		if err := s.models.workers[part].stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.wcancel()
		for _, w := range s.models.workers {
			if w.running {
				<-w.done
				w.running = false
			}
		}
	}
	return errors.Join(errs...)
}

// A blocker is a source whose Fetch can block for input inside a call
// that then returns a record (a pipe whose writer pauses): Blocked returns
// the total time its Fetch calls spent so, which is not learning time
// (LearnSeconds). Cheap enough to call at every clock reading.
type blocker interface{ Blocked() time.Duration }

// sourceBlocked returns the source's blocked time (blocker); zero when it
// does not say.
func (s *Service) sourceBlocked() time.Duration {
	if b, ok := s.opt.Source.(blocker); ok {
		return b.Blocked()
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
		if cm := &s.commits; cm.round != nil && len(cm.round.replies) == cm.round.waiting || cm.saver != nil && len(cm.saver.results) > 0 {
			if err := cm.collect(ctx); err != nil {
				return stopped(ctx, err)
			}
			replan = true
		}
		// The clock is read every clockEvery records (reading it costs
		// about as much as a Perceptron round; more often early in a
		// span, see every) and after every wait, and what is due by
		// time is looked at then: at most that many records late.
		if clock++; clock >= every || idle {
			now, blocked = readClock(b, blocked)
			clock, replan, every = 0, true, min(2*every, clockEvery)
			if err := s.dueByTime(ctx, now); err != nil {
				return stopped(ctx, err)
			}
		}
		if replan {
			due, replan = s.deadline(now), false
		}
		fctx := fc.get(ctx, due)
		var (
			rec connectors.Record
			sb  connectors.Batch // of a Batcher, instead of rec
			err error
		)
		if s.src.batches != nil {
			sb, err = s.src.batches.FetchBatch(fctx)
		} else {
			rec, err = s.opt.Source.Fetch(fctx)
		}
		idle = err != nil
		// Learning time: see busySpans.
		switch {
		case !idle && s.busy.from.IsZero():
			now, blocked = readClock(b, blocked)
			clock, every = 0, 1
			s.busy.from, s.busy.blocked = now, blocked
		case idle && !s.busy.from.IsZero() && !errors.Is(err, connectors.ErrEndOfInput):
			s.busy.end(now, blocked)
		}
		if idle {
			if stop, err := s.nothingFetched(ctx, fctx, err); stop {
				return err
			}
			continue
		}
		n := 1
		if sb != nil {
			n, err = sb.Len(), s.dispatchBatch(ctx, sb)
			clock += n - 1 // a record was counted above
		} else {
			err = s.dispatch(ctx, &rec)
		}
		if err != nil {
			return stopped(ctx, err)
		}
		if s.commits.uncommitted += n; s.commits.uncommitted == n || s.replan {
			// A commit is due by time now, or a reloaded model's commit
			// round changed what is due.
			replan, s.replan = true, false
		}
		if s.commits.round == nil && s.commits.uncommitted >= s.opt.CommitEvery {
			if err := s.commits.startRound(ctx); err != nil {
				return stopped(ctx, err)
			}
			replan = true
		}
	}
}

// readClock returns the time now and the source's blocked time read
// after it: b's, or blocked unchanged when b is nil (a source that does
// not say). The loop calls it at its readings of the clock, not per
// record.
func readClock(b blocker, blocked time.Duration) (time.Time, time.Duration) {
	now := time.Now()
	if b != nil {
		blocked = b.Blocked()
	}
	return now, blocked
}

// nothingFetched takes err, the error of a Fetch under fctx that returned
// no record: it says whether the loop stops, and with which error (nil at
// the end of the input or once ctx is done: the drain commits and
// reports). A Fetch that found nothing before fctx's deadline hands the
// workers what they wait for: a commit, a report or a snapshot is due.
func (s *Service) nothingFetched(ctx, fctx context.Context, err error) (stop bool, _ error) {
	switch {
	case errors.Is(err, connectors.ErrEndOfInput):
		s.logger.Info("end of input", "source", s.opt.Source.Name())
		return true, nil
	case ctx.Err() != nil:
		return true, nil
	case fctx.Err() != nil:
		if err := s.handOverAll(ctx); err != nil {
			return true, stopped(ctx, err)
		}
		return false, nil
	}
	return true, fmt.Errorf("service: fetch: %w", err)
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
	if s.commits.round == nil && s.commits.uncommitted > 0 && now.Sub(s.commits.lastCommit) >= s.opt.CommitInterval {
		if err := s.commits.startRound(ctx); err != nil {
			return err
		}
	}
	if !now.Before(s.snaps.nextSnapshot) {
		if s.commits.round == nil {
			// An idle process gives up its revoked partitions, and their
			// checkpoints, within a snapshot interval of a rebalance.
			if err := s.models.dropRevoked(ctx); err != nil {
				return err
			}
			if err := s.models.warmAssigned(ctx); err != nil {
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
	d := s.snaps.nextSnapshot
	if s.commits.uncommitted > 0 {
		if c := s.commits.lastCommit.Add(s.opt.CommitInterval); c.Before(d) {
			d = c
		}
	}
	if !s.nextReport.IsZero() && s.nextReport.Before(d) {
		d = s.nextReport
	}
	if s.commits.round != nil || s.commits.saver != nil && s.commits.saver.inflight > 0 {
		// Look for answers and finished checkpoint writes every 20ms
		// while idle (a deadline that changes every 20ms, not per
		// record).
		if c := now.Truncate(20 * time.Millisecond).Add(20 * time.Millisecond); c.Before(d) {
			d = c
		}
	}
	return d
}

// dispatch hands rec to the worker of its partition.
func (s *Service) dispatch(ctx context.Context, rec *connectors.Record) error {
	w, err := s.models.get(ctx, rec)
	if err != nil {
		return err
	}
	if s.src.framed != nil {
		if n := s.src.framed.Input(); n != w.input {
			if err := w.setDecoder(ctx, s.src.framed.Decoder()); err != nil {
				return err
			}
			w.input = n
		}
	}
	if err := w.add(ctx, rec); err != nil {
		return err
	}
	w.last, w.commit.dirty, w.snapshot.handed = *rec, true, true
	w.last.Value, w.last.Key = nil, nil // not valid past the next Fetch; Commit needs neither
	return nil
}

// dispatchBatch hands b, records of one partition of a source that hands
// over batches (connectors.Batcher: the Kafka source, a recording's
// Envelopes), to the worker of its partition as it is, after the batch
// being filled: the loop neither copies their bytes nor takes them one by
// one, and the order of the partition's records is the source's. The
// worker takes the records (Batch.Records: Envelopes decodes the base64
// of their values then). A batch the worker's full queue
// kept when ctx ended is handed over by the drain (worker.stop), as the
// batch being filled is.
func (s *Service) dispatchBatch(ctx context.Context, b connectors.Batch) error {
	last := b.Last()
	w, err := s.models.get(ctx, &last)
	if err == nil && !w.inline {
		err = w.handOver(ctx)
	}
	if err != nil {
		b.Release()
		return err
	}
	if w.inline {
		w.learnSource(s.wctx, b)
	} else {
		w.cur = &batch{src: b}
		if err := w.handOver(ctx); err != nil {
			return err
		}
	}
	w.last, w.commit.dirty, w.snapshot.handed = last, true, true
	return nil
}

// learnSource learns the records of b, a source's batch handed over as
// it is (dispatchBatch), and gives b back to the source. A record its
// source finds bad (Batch.Records) stops the worker, after the records
// before it, and Run, with the error Fetch would have returned.
func (w *worker) learnSource(ctx context.Context, b connectors.Batch) {
	recs, err := b.Records()
	for i := range recs {
		if !w.step(ctx, &recs[i]) {
			break
		}
	}
	b.Release()
	if err != nil && !w.failed {
		w.failed = true
		w.s.fail(fmt.Errorf("service: fetch: %w", err))
	}
}

// handOverAll hands every worker the batch being filled.
func (s *Service) handOverAll(ctx context.Context) error {
	for _, part := range s.models.order {
		if err := s.models.workers[part].handOver(ctx); err != nil {
			return err
		}
	}
	return nil
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
	var out []Report
	err := s.EachReport(func(r Report) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// EachReport calls f with each report Reports returns, in its order, one
// at a time, and stops at f's first error: with models per key, each
// key's model is reported (decoded when spilled) and dropped in turn, so
// that a million keys' reports are never in memory at once.
func (s *Service) EachReport(f func(Report) error) error {
	return EachReportOf(s, func(r Report) (Report, error) { return r, nil }, f)
}

// EachReportOf is EachReport with the work on each report in two parts:
// of, given each report, runs on every core (with models per key, on
// different keys' reports at once: it must be safe for concurrent use),
// and f is called with of's results in EachReport's order, one at a
// time, until of or f returns an error. Models per key are reported a few
// hundred at a time (pipeline.EachOrdered), so that a million keys'
// reports are never in memory at once.
func EachReportOf[T any](s *Service, of func(Report) (T, error), f func(T) error) error {
	_, err := eachModel(s, "Reports while Run runs: use Snapshot", func(w *worker) (struct{}, error) {
		if w.m.k != nil {
			return struct{}{}, eachKeyReport(w, of, f)
		}
		rep, err := w.report()
		if err != nil {
			return struct{}{}, err
		}
		if rep.Labels != nil {
			rep.Labels.StateSHA256 = w.m.p.StoreDigest() // final: the store's digest too
		}
		t, err := of(rep)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, f(t)
	})
	return err
}

// Models returns, after Run, the checkpoint of every model as it ended,
// in the order of Reports: what `replay --save` writes as a model file
// (checkpoint.ModelOf).
func (s *Service) Models() ([]*checkpoint.Checkpoint, error) {
	return eachModel(s, "Models while Run runs", func(w *worker) (*checkpoint.Checkpoint, error) {
		t, err := w.take(nil, nil)
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
	parts := s.models.sorted()
	out := make([]T, 0, len(parts))
	for _, part := range parts {
		w := s.models.workers[part]
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
	if s.out.reports == nil {
		return nil
	}
	for _, part := range s.models.order {
		if err := s.models.workers[part].ask(ctx, &ask{kind: askReport}); err != nil {
			return err
		}
	}
	return nil
}
