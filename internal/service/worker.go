package service

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// Workers. Every partition's model has a worker: a goroutine that alone
// touches the model while it runs (or, for a Framed source's one
// partition, the loop itself: an inline worker), decoding its partition's
// records, predicting, learning, tracking and publishing their outputs.
// The loop
// (Run's goroutine) fetches, copies each record into the current batch of
// its partition's worker and hands full batches over a bounded queue: a
// model that falls behind fills its queue and stops the fetching
// (back-pressure), and the partitions of a source learn in parallel, as
// many at once as there are cores. A model is still a function of its
// partition's records alone, so the numbers are those of a serial run.
//
// What the loop needs of a model — the position a commit may take, a
// checkpoint, a report — it asks in the same queue, so the answer holds
// exactly the records handed over before the question.

// Batching: a batch is handed over when it holds batchRecords records or
// batchBytes bytes, when its last record had nothing behind it at the
// broker (Record.Lag 0: waiting for more would delay a live prediction),
// before every question to the worker, and whenever Fetch finds nothing.
const (
	batchRecords = 256
	batchBytes   = 256 << 10
	// workerQueue is how many batches (and questions) wait for a worker
	// at most: with the batch being filled and the one being learned,
	// about 1,500 records per partition are between the source and the
	// model.
	workerQueue = 4
)

// batch is records copied out of the source (Record's slices are valid
// only until the next Fetch); their Value and Key point into buf. Or,
// when src is set, a batch of the source's own, handed over as it is
// (dispatchBatch).
type batch struct {
	recs []connectors.Record
	buf  []byte
	src  connectors.Batch
}

func (b *batch) add(rec *connectors.Record) {
	start := len(b.buf)
	b.buf = append(b.buf, rec.Value...)
	b.buf = append(b.buf, rec.Key...)
	end := len(b.buf)
	b.recs = append(b.recs, *rec)
	c := &b.recs[len(b.recs)-1]
	c.Value = b.buf[start : start+len(rec.Value) : start+len(rec.Value)]
	c.Key = b.buf[start+len(rec.Value) : end : end]
}

// What the loop asks a worker.
type askKind uint8

const (
	// askMark: every record handed over so far is processed and its
	// outputs published (the position of a commit without checkpoints).
	askMark askKind = iota
	// askCheckpoint: the checkpoint of the model as of now, unless its
	// position is savedPos (nothing learned since the last checkpoint).
	askCheckpoint
	// askSnapshot: the model's report, and its curves and a copy for
	// serving predictions when asked.
	askSnapshot
	// askReport: publish the model's report to the reports sink.
	askReport
)

type ask struct {
	kind     askKind
	savedPos int64            // askCheckpoint
	spare    *pipeline.Frozen // askCheckpoint: the last checkpoint's frozen state, written (its memory reused); nil when none
	curves   bool             // askSnapshot: copy the curves
	digests  bool             // askSnapshot: with the learners' state digests
	serve    bool             // askSnapshot: copy the model when it changed since servedAt
	servedAt uint64
	// served is the last copy for serving (askSnapshot with serve), nil
	// when none: of models per key, the keys' encodings that have not
	// changed since are shared.
	served *serving.Predictor
	reply  chan<- answer // nil: no answer wanted
}

// answer is a worker's answer to an ask.
type answer struct {
	w      *worker
	kind   askKind
	report Report
	curves [][]regret.Point
	served *serving.Predictor // askSnapshot with serve, when the model changed
	ckpt   *taken             // askCheckpoint, nil when nothing is new
	spare  *pipeline.Frozen   // askCheckpoint with nothing new or given up: the spare it came with, unused
	gaveUp bool               // askCheckpoint: the stop came while the models per key were being frozen
	rec    connectors.Record  // askMark: the last record processed to the end
	ok     bool               // askMark: rec is set
	err    error
}

// item is what a worker's queue carries: a batch, a question, or the
// decoder of the records that follow (a Framed source's next input).
type item struct {
	b   *batch
	ask *ask
	dec *event.RecordDecoder
}

// model is the state of one partition's model. While its worker runs,
// only the worker's goroutine touches it.
type model struct {
	p    *pipeline.Pipeline // nil with models per key
	k    *pipeline.Keyed    // models per key; nil otherwise
	seen bool               // a record was processed
	lag  int64              // Lag of the last record processed
	pos  int64              // offset of the last record whose effect is in p; -1 before any
	// base is added to a volatile source's offsets (core NATS: arrival
	// counts that begin again at every restart) to make pos: the restored
	// checkpoint's position plus one, so that the positions a model is
	// checkpointed at grow across restarts, as the stores require.
	base        int64
	skipTo      int64 // the restored checkpoint's position, until a record past it comes; -1 then
	sinceReport int
	origin      string // the stream the positions are of, for checkpoints (connectors.Position.Origin)
	consumer    string // the consumer they are of, for checkpoints (connectors.Position.Consumer)
	saveAtOnce  bool   // reset or accepted by the operator: checkpointed before it learns
	restored    bool   // from its checkpoint, which the log said: not a new model
	release     func() // gives up the ownership of the partition's checkpoints; nil when not owned
}

// disown gives up the ownership of m's checkpoints, if it has it.
func (m *model) disown() {
	if m.release != nil {
		m.release()
		m.release = nil
	}
}

// worker runs one partition's model. The fields after the model's belong
// to the loop.
type worker struct {
	s    *Service
	part int32
	m    *model

	// The worker goroutine's.
	dec      *event.Decoder       // JSON records, of broker sources
	rdec     *event.RecordDecoder // records of a Framed source's input; nil for JSON
	source   string               // what outputs and dead letters name as their source
	ev       event.Event
	predBuf  []byte
	failed   bool              // a record failed: the rest are not processed
	quiet    bool              // a rebuild's: the records' outputs went out when they were first learned
	lastDone connectors.Record // the last record processed to the end (Value and Key nil)
	anyDone  bool              // lastDone is set
	intake   Intake            // what this Run handed the model
	// servedGen numbers the serving copies of models per key made
	// (serving.KeyedCopy.Gen).
	servedGen uint64
	latency   Observer // the partition's, of Options.Latency; nil without
	// labelsWarned: the labels report's warning was logged (once).
	labelsWarned atomic.Bool

	// Shared: the queue, the batches coming back, the end.
	in      chan item
	free    chan *batch
	done    chan struct{}
	running bool // the goroutine runs (the loop's to read and write)
	inline  bool // no goroutine: the loop processes the records itself
	closed  bool // in is closed: the goroutine ends after its queue

	// The loop's.
	input    int // the Framed source's input of the records handed over
	cur      *batch
	batches  int               // batches made
	last     connectors.Record // the last record handed over (Value and Key nil)
	epoch    uint64
	hasEpoch bool        // epoch is the Record.Epoch of the records handed over
	commit   commitState // the model's commit rounds
	snapshot snapState   // the model at the last snapshot that asked

	// premade is the memory of the model's first checkpoint, made on
	// another goroutine (premake).
	premade premadeMemory
}

// commitState is the loop's record of a worker's commit rounds.
type commitState struct {
	dirty     bool              // records were handed over since the last commit
	saving    bool              // a commit round of the model is in flight: its outputs waited for, its checkpoint taken or written
	marked    bool              // a commit round waits for this worker's answer
	markRec   connectors.Record // the last record handed over when the round asked
	savedPos  int64             // pos of the last durable checkpoint; -1 before any
	spare     *pipeline.Frozen  // the frozen state of the last checkpoint written, for the next (see take)
	durableAt time.Time         // when the state of the last commit was taken
}

// snapState is the loop's record of a worker's model at the last
// snapshot that asked it (publishSnapshot).
type snapState struct {
	handed  bool      // records were handed over since the last snapshot asked
	report  Report    // the model's report then
	ok      bool      // report is set
	digests bool      // report has the learners' state digests
	idleAt  time.Time // when the last snapshot asked (models.idle)
	// curves are the curves of the model then; nil when that snapshot
	// did not copy them.
	curves [][]regret.Point
}

// premadeMemory is the memory of a model's first checkpoint, made on
// another goroutine (premake) and swapped out by the first take, on the
// worker's: took says a take was made (a copy premade later is dropped),
// used that one was taken into premade memory.
type premadeMemory struct {
	frozen atomic.Pointer[pipeline.Frozen]
	took   atomic.Bool
	used   atomic.Bool
}

func (s *Service) newWorker(part int32, m *model) (*worker, error) {
	dec, err := event.NewDecoder(recordConfig(s.opt))
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	dec.Source = s.opt.Source.Name()
	w := &worker{s: s, part: part, m: m, dec: dec, source: dec.Source, commit: commitState{savedPos: m.pos, durableAt: time.Now()},
		free: make(chan *batch, workerQueue+2)}
	if s.opt.Latency != nil {
		w.latency = s.opt.Latency.Partition(part)
	}
	return w, nil
}

// start starts the worker's goroutine; ctx bounds its sink messages.
func (w *worker) start(ctx context.Context) {
	w.in = make(chan item, workerQueue)
	w.done = make(chan struct{})
	w.running, w.closed = true, false
	go w.run(ctx)
}

// stop hands over the batch being filled, lets the worker process its
// queue and waits for it, until ctx is done.
func (w *worker) stop(ctx context.Context) error {
	if !w.running {
		return nil
	}
	var err error
	if !w.closed {
		err = w.handOver(ctx)
		close(w.in)
		w.closed = true
	}
	select {
	case <-w.done:
		w.running = false
		return err
	case <-ctx.Done():
		return fmt.Errorf("service: the worker of partition %d did not finish: %w", w.part, ctx.Err())
	}
}

func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	for it := range w.in {
		if it.b != nil && it.b.src != nil {
			w.learnSource(ctx, it.b.src)
			runtime.Gosched() // as below
			continue
		}
		if it.b != nil {
			for i := range it.b.recs {
				if !w.step(ctx, &it.b.recs[i]) {
					break
				}
			}
			clear(it.b.recs) // let go of the JetStream messages
			it.b.recs, it.b.buf = it.b.recs[:0], it.b.buf[:0]
			w.free <- it.b // room: at most cap(free) batches exist
			// Let the loop run. Taking a batch from the queue the loop
			// was blocked on, or giving back the room it waited for,
			// makes it runnable on this worker's processor (P), where it
			// would wait behind this worker's next batches while the
			// other P learns too: the one goroutine every partition
			// waits for would wait for the workers. Yielding costs
			// nanoseconds a batch (BenchmarkCores; performance.md).
			runtime.Gosched()
			continue
		}
		if it.dec != nil {
			w.rdec, w.source = it.dec, it.dec.Name()
			continue
		}
		a := w.answer(ctx, it.ask, w.s.stop)
		switch {
		case it.ask.reply != nil:
			it.ask.reply <- a // room: the asker sized the channel
		case a.err != nil:
			// Nobody waits for this answer (an interval report): its
			// error stops Run, as the loop's own would.
			w.s.fail(a.err)
		}
	}
}

// step processes rec unless an earlier record failed, and says whether
// the worker goes on.
func (w *worker) step(ctx context.Context, rec *connectors.Record) bool {
	if w.failed {
		return false
	}
	if err := w.process(ctx, rec); err != nil {
		w.failed = true
		w.s.fail(err)
		return false
	}
	w.lastDone, w.anyDone = *rec, true
	w.lastDone.Value, w.lastDone.Key = nil, nil
	return true
}

// add copies rec into the batch being filled and hands the batch over when
// it is due (see batchRecords). It blocks while the worker's queue is full.
// An inline worker processes rec at once, in the loop's goroutine.
func (w *worker) add(ctx context.Context, rec *connectors.Record) error {
	if w.inline {
		w.step(w.s.wctx, rec)
		return nil
	}
	if w.cur == nil {
		b, err := w.batch(ctx)
		if err != nil {
			return err
		}
		w.cur = b
	}
	w.cur.add(rec)
	if rec.Lag == 0 || len(w.cur.recs) == batchRecords || len(w.cur.buf) >= batchBytes {
		return w.handOver(ctx)
	}
	return nil
}

// batch returns an empty batch: a recycled one, a new one while fewer than
// cap(free) exist, else the next one the worker is done with.
func (w *worker) batch(ctx context.Context) (*batch, error) {
	select {
	case b := <-w.free:
		return b, nil
	default:
	}
	if w.batches < cap(w.free) {
		w.batches++
		return &batch{recs: make([]connectors.Record, 0, batchRecords)}, nil
	}
	select {
	case b := <-w.free:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// handOver queues the batch being filled, if any.
func (w *worker) handOver(ctx context.Context) error {
	if w.cur == nil || len(w.cur.recs) == 0 && w.cur.src == nil {
		return nil
	}
	if err := w.send(ctx, item{b: w.cur}); err != nil {
		return err
	}
	w.cur = nil
	return nil
}

func (w *worker) send(ctx context.Context, it item) error {
	select {
	case w.in <- it:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setDecoder hands over the batch being filled and has the records after
// it decoded by d.
func (w *worker) setDecoder(ctx context.Context, d *event.RecordDecoder) error {
	if !w.running {
		w.rdec, w.source = d, d.Name()
		return nil
	}
	if err := w.handOver(ctx); err != nil {
		return err
	}
	return w.send(ctx, item{dec: d})
}

// ask hands over the batch being filled and queues a; when the worker
// does not run (before Run, after it), the loop answers a itself.
func (w *worker) ask(ctx context.Context, a *ask) error {
	if !w.running {
		ans := w.answer(ctx, a, nil)
		if a.reply != nil {
			a.reply <- ans
		}
		return ans.err
	}
	if err := w.handOver(ctx); err != nil {
		return err
	}
	return w.send(ctx, item{ask: a})
}

// answer answers a, from the goroutine that owns the model. A checkpoint
// of models per key is given up (gaveUp) once stop is closed (never when
// nil).
func (w *worker) answer(ctx context.Context, a *ask, stop <-chan struct{}) answer {
	ans := answer{w: w, kind: a.kind}
	if w.failed && a.kind == askCheckpoint {
		ans.err = errWorkerFailed
		return ans
	}
	switch a.kind {
	case askMark:
		// A failed worker's position is the record before the one that
		// failed: its outputs are published, the failed one's not.
		ans.rec, ans.ok = w.lastDone, w.anyDone
	case askCheckpoint:
		if w.m.pos != a.savedPos {
			ans.ckpt, ans.err = w.take(a.spare, stop)
			if errors.Is(ans.err, pipeline.ErrFreezeStopped) {
				ans.ckpt, ans.err, ans.spare, ans.gaveUp = nil, nil, a.spare, true
			}
		} else {
			ans.spare = a.spare
		}
	case askSnapshot:
		if w.m.k != nil {
			if ans.err = w.m.k.EvictIdle(time.Now()); ans.err != nil {
				// The models per key may be half evicted: checkpointed
				// no more.
				w.failed = true
				return ans
			}
		}
		ans.report, ans.err = w.reportOf(a.digests)
		if a.curves && w.m.p != nil {
			ans.curves = w.m.p.Tracker().History() // a copy
		}
		if ans.err == nil && a.serve && w.m.events() != a.servedAt {
			ans.served, ans.err = w.servingCopy(a.served, ans.report)
		}
	case askReport:
		ans.err = w.publishReport(ctx)
	}
	return ans
}

// errWorkerFailed answers askCheckpoint of a worker that stopped at an
// error (Service.fail has it): its model may hold part of the record that
// failed, so it is checkpointed no more. Its reports still go out.
var errWorkerFailed = errors.New("service: the partition's worker stopped at an error")

// process runs rec through the model. Only a record processed to the end
// (learned or rejected, its prediction or dead letter published) is in a
// position the loop commits.
func (w *worker) process(ctx context.Context, rec *connectors.Record) error {
	m, s := w.m, w.s
	var start time.Time
	if s.opt.EventDuration != nil {
		start = time.Now()
	}
	if m.skipTo >= 0 {
		if rec.Offset <= m.skipTo && !s.models.volatile {
			// Already in the model, restored from a checkpoint saved
			// after this record and before its commit: acknowledge it
			// only.
			return nil
		}
		m.skipTo = -1 // past the checkpoint: offsets may start again (Files)
	}
	if !w.quiet {
		w.intake.Records++
	}
	// The lag first: a report the record triggers (reports.every) says
	// how many records are left after it.
	m.seen, m.lag = true, rec.Lag
	if err := w.learn(ctx, rec); err != nil {
		return err
	}
	m.pos = m.base + rec.Offset
	if s.opt.EventDuration != nil {
		s.opt.EventDuration.Observe(time.Since(start).Seconds())
	}
	return nil
}

func (w *worker) learn(ctx context.Context, rec *connectors.Record) error {
	m, s := w.m, w.s
	var err error
	if w.rdec != nil {
		err = w.rdec.Decode(rec.Value, rec.Size, &w.ev)
	} else {
		err = w.dec.Decode(rec.Value, &w.ev)
	}
	if err != nil {
		return w.rejectDecode(ctx, rec, err)
	}
	learned := m.learned()
	p := m.p
	var preds []online.Prediction
	var reason event.Reason
	if m.k != nil {
		if p, preds, reason, err = m.k.Process(&w.ev); err != nil {
			return fmt.Errorf("service: partition %d: %w", w.part, err)
		}
	} else {
		preds, reason = p.Process(&w.ev)
	}
	// The labeled rounds this record made: 1 for a labeled event, and
	// with delayed labels 1 for a joined label, plus the expired events
	// learned with the default label before it.
	rounds := m.learned() - learned
	if !w.quiet {
		w.intake.Learned += rounds
	}
	if reason != "" && w.ev.LabelOnly {
		return w.deadLetter(ctx, rec, reason, fmt.Sprintf("%s: label of id %q: %s", w.where(rec), w.ev.ID, labelReason(reason)))
	}
	if reason != "" {
		return w.deadLetter(ctx, rec, reason, fmt.Sprintf("%s: outside the domain of a hypothesis class", w.where(rec)))
	}
	if w.quiet {
		return nil
	}
	if s.out.predictions != nil && !w.ev.LabelOnly { // a label event has no prediction
		var src predictionSource = p
		if mixed := m.mixed(); mixed != nil {
			src = mixed
		}
		w.predBuf = appendPrediction(w.predBuf[:0], &w.ev, w.source, *rec, src, preds)
		var err error
		key := w.outputKey(rec)
		if s.out.predIDs != nil {
			err = s.out.predIDs.PublishID(ctx, OutputID(s.out.idSource, rec.Partition, rec.Offset, "prediction"), key, w.predBuf)
		} else {
			err = s.out.predictions.Publish(ctx, key, w.predBuf)
		}
		if err != nil {
			return fmt.Errorf("service: predictions: %w", err)
		}
		if w.latency != nil && !rec.Time.IsZero() {
			// (A producer's clock ahead of ours gives a negative age: 0.)
			w.latency.Observe(max(time.Since(rec.Time).Seconds(), 0))
		}
	}
	if rounds > 0 && s.out.reports != nil && s.opt.ReportEvery > 0 {
		m.sinceReport += int(rounds)
		if m.sinceReport >= s.opt.ReportEvery {
			m.sinceReport = 0
			if err := w.publishReport(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// rejectDecode counts and dead-letters a record the decoder refused. It is
// apart from learn because errors.As moves its target to the heap: the
// valid records' path stays free of allocations.
func (w *worker) rejectDecode(ctx context.Context, rec *connectors.Record, err error) error {
	var de *event.Error
	if !errors.As(err, &de) {
		return fmt.Errorf("service: decode: %w", err)
	}
	if err := w.m.reject(w.ev.Key, de.Reason); err != nil {
		return fmt.Errorf("service: partition %d: %w", w.part, err)
	}
	de.Offset = rec.Offset
	de.Partition, de.InPartition = rec.Partition, w.rdec == nil && !w.s.src.lined
	return w.deadLetter(ctx, rec, de.Reason, de.Error())
}

// outputKey is the key rec's outputs keep: its event's key (of a bad
// record, read before the fault, when it came first), else its producer's
// (a Kafka message key), so that an output lands on the partition its
// event's key would.
func (w *worker) outputKey(rec *connectors.Record) []byte {
	if len(w.ev.Key) == 0 && w.s.src.producerKeys {
		return rec.Key
	}
	return w.ev.Key
}

// where names rec in messages: source/partition/offset for a broker's
// record, the form of its outputs' identities (OutputID); source:line
// for a file's.
func (w *worker) where(rec *connectors.Record) string {
	if w.rdec != nil || w.s.src.lined {
		return w.source + ":" + strconv.FormatInt(rec.Offset, 10)
	}
	return w.source + "/" + strconv.FormatInt(int64(rec.Partition), 10) + "/" + strconv.FormatInt(rec.Offset, 10)
}

func (w *worker) deadLetter(ctx context.Context, rec *connectors.Record, reason event.Reason, msg string) error {
	s := w.s
	if !w.quiet {
		w.reject(rec, reason, msg)
	}
	if s.out.dl == nil || w.quiet {
		return nil
	}
	err := s.out.dl.publish(ctx, pipeline.DeadLetter{Source: w.source, Partition: rec.Partition, Offset: rec.Offset, Key: w.outputKey(rec), Reason: reason, Err: msg, Raw: rec.Value, Size: rec.Size})
	if err != nil {
		return fmt.Errorf("service: dead letters: %w", err)
	}
	return nil
}

// report returns the model's report, with the learners' state digests.
func (w *worker) report() (Report, error) { return w.reportOf(true) }

// reportOf returns the model's report, with the learners' state digests
// when digests (a pass over every learner's state).
func (w *worker) reportOf(digests bool) (Report, error) {
	r, top, err := w.m.totals(digests)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Source: w.s.opt.Source.Name(), Partition: w.part, Report: r, TopKeys: top}
	if l := r.Labels; l != nil && l.Warning != "" && !w.labelsWarned.Swap(true) {
		w.s.logger.Warn("labels: "+l.Warning, "source", rep.Source, "partition", w.part,
			"joined", l.Joined, "late", l.Late, "unknown", l.Unknown, "expired", l.Expired, "expired_learned", l.ExpiredLearned)
	}
	if w.m.seen && w.m.lag >= 0 {
		lag := w.m.lag // a copy: reports are immutable
		rep.ConsumerLag = &lag
	}
	return rep, nil
}

func (w *worker) publishReport(ctx context.Context) error {
	if w.s.out.reports == nil {
		return nil
	}
	r, err := w.report()
	if err != nil {
		return err
	}
	b, err := marshalReport(r)
	if err != nil {
		return err
	}
	if err := w.s.out.reports.Publish(ctx, []byte(strconv.Itoa(int(w.part))), b); err != nil {
		return fmt.Errorf("service: reports: %w", err)
	}
	return nil
}

// taken is a model's checkpoint as its worker took it: the state frozen
func labelReason(r event.Reason) string {
	switch r {
	case pipeline.ReasonLabelLate:
		return "its event waited longer than labels.wait or was pushed out by labels.max_pending"
	case pipeline.ReasonLabelDuplicate:
		return "its event was labeled already: the first label wins"
	case pipeline.ReasonLabelUnknown:
		return "no event of that id waits (never seen, or resolved too long ago)"
	}
	return string(r)
}
