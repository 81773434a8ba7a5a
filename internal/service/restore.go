package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// Checkpoints make the models survive the process: with Options.Checkpoints
// set, every commit first saves, for each partition with something new,
// a checkpoint of its model holding the position of the last record whose
// effect is in it, and commits that partition's position to the source
// only once the checkpoint is durable. A model is created from its
// partition's checkpoint when there is one, and records at or before the
// checkpoint's position — the ones a crash between the save and the
// commit leaves uncommitted — are skipped (and committed): after a crash
// and a restart, each model equals the one an uninterrupted run would
// have, nothing lost and nothing applied twice (docs/design.md).
//
// A checkpoint written by another model configuration, or for another
// source, or damaged, stops the service with an error saying so: it is
// never silently replaced by a fresh model. One written by another list
// of learners over the same input, features, labels and domain is restored in
// part when the operator names the learners that differ
// (Options.ResetLearners): the others keep their models. A failing save
// (a full disk, an unwritable directory) stops the commits, not the
// learning: the service logs why at each attempt,
// streamlearn_checkpoint_age_seconds grows, and the next successful save
// commits everything learned since.

// Defaults of the checkpoint cadence: a checkpoint encodes every
// learner's state (the weights it learned, up to 2 MiB per linear learner
// at 2^18 slots) and digests it, so it is taken per batch of records or
// seconds, not per commit of the checkpoint-less service.
const (
	DefaultCheckpointEvery    = 100000
	DefaultCheckpointInterval = 5 * time.Second
)

// restore loads partition's checkpoint into m, when there is one, after
// checking it against what the broker says of the partition (see
// RestoreError and Options.OnMismatch).
func (l *models) restore(ctx context.Context, partition int32, m *model) error {
	if l.s.opt.Checkpoints == nil {
		return l.startWarm(partition, m)
	}
	pos, positioned := l.position(partition)
	m.origin, m.consumer = pos.Origin, pos.Consumer
	c, err := l.s.opt.Checkpoints.Load(ctx, partition)
	missing := checkpoint.IsNotExist(err)
	if err != nil && !missing {
		return fmt.Errorf("service: restoring partition %d: %w", partition, err)
	}
	if missing {
		c = nil
	} else {
		if c.Fingerprint != l.fingerprint {
			if err := l.checkLearnersChanged(partition, c); err != nil {
				return err
			}
		}
		// The stream is compared here, the consumer (a JetStream
		// durable, which the source's name holds, or a Kafka group) by
		// checkRestore, whose error has the ways out.
		if err := l.checkSource(partition, c); err != nil {
			return err
		}
		if c.Consumer == "" && pos.Consumer != "" && c.Format < 3 {
			// Written before checkpoints held their consumer: taken as
			// this one's, and saved as such before anything is learned,
			// so that the warning is given once.
			l.s.logger.Warn("the checkpoint's consumer could not be checked: its format version does not hold it (written by an older streamlearn); it is taken as this consumer's, and saved so at once",
				"partition", partition, "store", l.s.opt.Checkpoints.String(), "format", c.Format, "consumer", pos.Consumer)
			m.saveAtOnce = true
		}
	}
	if rerr := l.checkRestore(partition, c, pos, positioned); rerr != nil {
		return l.onMismatch(ctx, partition, m, c, rerr)
	}
	if c == nil {
		return l.startWarm(partition, m)
	}
	if err := l.restoreState(partition, m, c); err != nil {
		return err
	}
	m.restored = true
	l.s.logger.Info("model restored from checkpoint", "store", l.s.opt.Checkpoints.String(), "partition", partition,
		"position", c.Position, "events", m.events(), "created", c.Created)
	return nil
}

// onMismatch does what Options.OnMismatch says with m, partition's new
// model, when its checkpoint c (nil when none) does not hold what the
// broker says was committed (rerr): stop with rerr, reset the model,
// rebuild it, or restore c as it is.
func (l *models) onMismatch(ctx context.Context, partition int32, m *model, c *checkpoint.Checkpoint, rerr *RestoreError) error {
	args := []any{"partition", partition, "source", rerr.Source, "store", rerr.Store, "problem", rerr.Problem,
		"committed", rerr.Committed, "checkpoint_position", rerr.Checkpoint}
	switch l.s.opt.OnMismatch {
	case MismatchReset:
		if w := l.s.opt.WarmStart; w != nil && w.Err != nil {
			// The fresh model would start from it: say so before the
			// checkpoint is moved away.
			return l.startWarm(partition, m)
		}
		dropped, err := l.s.opt.Checkpoints.Discard(ctx, partition)
		if err != nil {
			return fmt.Errorf("service: reset of partition %d: %w", partition, err)
		}
		// A fresh model that holds, by the operator's decision, what
		// was committed: its checkpoint, saved before anything is
		// learned, says so to the next run.
		m.pos, m.skipTo, m.saveAtOnce = rerr.Committed, rerr.Committed, true
		l.s.logger.Warn("reset: the model starts afresh from the committed position; what was committed before it is not in the model",
			append(args, "checkpoint_moved_to", dropped)...)
		return l.startWarm(partition, m)
	case MismatchRebuild:
		return l.rebuild(ctx, partition, m, c, rerr, args)
	case MismatchAccept:
		l.s.logger.Warn("accept: the checkpoint is restored as it is; "+rerr.Consequence, args...)
		if c == nil {
			if err := l.startWarm(partition, m); err != nil {
				return err
			}
		} else if err := l.restoreState(partition, m, c); err != nil {
			return err
		}
		// The model, as accepted, stands for the committed position:
		// its checkpoint, saved before anything is learned, says so
		// to the next run.
		if rerr.Committed > m.pos {
			m.pos, m.skipTo = rerr.Committed, rerr.Committed
		}
		m.saveAtOnce = true
		return nil
	default:
		return rerr
	}
}

// restoreState loads c, when not nil, into m. A checkpoint of another
// model configuration, which checkLearnersChanged let through, is
// restored in part (pipeline.Pipeline.UnmarshalBinaryReset, with
// Options.ResetLearners), and m is checkpointed at once for its own
// configuration, so that the next restore is a plain one.
func (l *models) restoreState(partition int32, m *model, c *checkpoint.Checkpoint) error {
	if c == nil {
		return nil
	}
	if c.Fingerprint == l.fingerprint {
		if err := m.unmarshal(c.State); err != nil {
			return fmt.Errorf("service: restoring partition %d from %s: %w", partition, l.s.opt.Checkpoints, err)
		}
		if len(l.s.opt.ResetLearners) > 0 {
			l.s.logger.Info("reset-learner: nothing to reset: the checkpoint is of this model configuration (the flag acts on a checkpoint of another list of learners, once)",
				"partition", partition, "learners", l.s.opt.ResetLearners)
		}
	} else if m.k != nil {
		return fmt.Errorf("service: restoring partition %d from %s: the checkpoint is of another model configuration, and models per key (models.by: key) restore only their own",
			partition, l.s.opt.Checkpoints) // checkLearnersChanged refused it first
	} else {
		reset := l.s.opt.ResetLearners
		if len(reset) > 0 {
			// The same learners in another order need no flag: one left
			// in place from an earlier change does nothing here.
			if ch, err := pipeline.CompareState(c.State, l.s.opt.Config); err == nil && !ch.SharedChanged && len(ch.Reset()) == 0 {
				l.s.logger.Info("reset-learner: nothing to reset: the checkpoint has the same learners in another order",
					"partition", partition, "learners", reset)
				reset = nil
			}
		}
		ch, err := m.p.UnmarshalBinaryReset(c.State, reset)
		var re *pipeline.ResetError
		if errors.As(err, &re) {
			return fmt.Errorf("service: restoring partition %d from %s: %w; name with --reset-learner exactly the learners added, changed or dropped: %s",
				partition, l.s.opt.Checkpoints, err, resetFlags(re.Reset()))
		}
		if err != nil {
			return fmt.Errorf("service: restoring partition %d from %s: %w", partition, l.s.opt.Checkpoints, err)
		}
		args := []any{"partition", partition, "store", l.s.opt.Checkpoints.String(), "position", c.Position,
			"kept", ch.Kept, "added", ch.Added, "changed", ch.Changed, "dropped", ch.Dropped}
		if len(ch.Reset()) == 0 {
			l.s.logger.Info("the same learners in another order: each restored by name", args...)
		} else {
			l.s.logger.Warn("learners reset: the learners kept have their models; the ones added or changed start afresh, their rounds counted from the checkpoint's "+
				strconv.FormatUint(m.p.Learned(), 10)+" learned events on; the ones dropped are gone", args...)
		}
		// Checkpointed before anything is learned: the next restore is
		// of this configuration, and the same --reset-learner then does
		// nothing.
		m.saveAtOnce = true
	}
	m.pos = c.Position
	if l.volatile {
		// The records that come are new ones, whatever their offsets:
		// none is skipped, and their positions count on from the
		// checkpoint's, so that every checkpoint of this run is saved
		// (a store keeps the higher position) and the one of a reset is
		// saved over the checkpoint it replaces.
		m.base = c.Position + 1
	} else {
		m.skipTo = c.Position
	}
	return nil
}

// checkLearnersChanged returns nil when c, partition's checkpoint written
// by another model configuration, can be restored in part: its state has
// settings digests (pipeline state format 3), the input, features and
// labels are the same, and either the learners that differ are to be
// reset (Options.ResetLearners: the restore checks that they are exactly
// those) or none differs (the same learners in another order). Otherwise
// it returns the error that stops the service, saying what differs and
// the ways out.
func (l *models) checkLearnersChanged(partition int32, c *checkpoint.Checkpoint) error {
	if held, want := pipeline.IsKeyedState(c.State), keyed(l.s.opt.Config); held || want {
		kind := map[bool]string{true: "a model per key (models.by: key)", false: "one model"}
		what := fmt.Sprintf("it holds %s, and this configuration learns %s", kind[held], kind[want])
		if held == want {
			what = "models per key restore only the configuration that wrote them: the input, features, labels, learners or models.global differ"
		}
		return fmt.Errorf("service: the checkpoint of partition %d in %s was written by another model configuration (%s): move it away (or give this configuration another checkpoint directory or bucket) to start afresh, or go back to the configuration that wrote it",
			partition, l.s.opt.Checkpoints, what)
	}
	ch, err := pipeline.CompareState(c.State, l.s.opt.Config)
	if err == nil && !ch.SharedChanged && (len(ch.Reset()) == 0 || len(l.s.opt.ResetLearners) > 0) {
		return nil
	}
	prefix := fmt.Sprintf("service: the checkpoint of partition %d in %s was written by another model configuration", partition, l.s.opt.Checkpoints)
	switch {
	case errors.Is(err, pipeline.ErrNoDigests):
		return fmt.Errorf("%s (%s): move it away to start that model afresh (a checkpoint written by this version would let `run --reset-learner` keep the learners that did not change: run the configuration that wrote it until it checkpoints again, then change the learners)",
			prefix, configDiff(c.Report, l.s.opt.Config.Learners, nil))
	case err != nil:
		return fmt.Errorf("%s (%s), and its state cannot be read (%v): move it away to start that model afresh", prefix, configDiff(c.Report, l.s.opt.Config.Learners, nil), err)
	case ch.SharedChanged:
		return fmt.Errorf("%s (the input, the features or the labels settings differ, or the domain of the learners over a table or conjunctions class, whose events outside it no learner sees: no learner's model can be kept): move it away to start that model afresh (or, for a checkpoint of the first builds of state format 3 with a table or conjunctions class, whose digest left the domain out, run the configuration that wrote it until it checkpoints again, then change the learners)", prefix)
	}
	return fmt.Errorf("%s (%s): keep the other learners' models and start these afresh with `run %s`, or move the checkpoint away to start the whole model afresh",
		prefix, configDiff(c.Report, l.s.opt.Config.Learners, &ch), resetFlags(ch.Reset()))
}

// resetFlags returns the flags that reset the learners names.
func resetFlags(names []string) string {
	flags := make([]string, len(names))
	for i, n := range names {
		flags[i] = "--reset-learner " + n
	}
	return strings.Join(flags, " ")
}

// rebuild makes m the model the committed position stands for, when
// partition's checkpoint does not hold it (rerr): it learns the
// partition's records again, read from the source apart from its consumer
// (connectors.Rereader), through the committed position — from the
// checkpoint's position when the checkpoint is only behind, else from the
// partition's first record. Their outputs (predictions, dead letters,
// reports) went out when they were first learned and are not published
// again. A model at a position depends only on the partition's records up
// to it, so the rebuilt model is the one an uninterrupted run has there.
// When the broker no longer holds every record the rebuild needs, it
// stops with an error saying so, and the checkpoint stays as it was.
func (l *models) rebuild(ctx context.Context, partition int32, m *model, c *checkpoint.Checkpoint, rerr *RestoreError, args []any) error {
	rr, ok := l.s.opt.Source.(connectors.Rereader)
	if !ok {
		return fmt.Errorf("%w; rebuild: %s cannot read a partition again (Kafka and JetStream sources can)", rerr, l.s.opt.Source.Name())
	}
	from := int64(-1) // the partition's first record, or where the consumer began
	if rerr.start > 0 {
		from = rerr.start
	}
	if rerr.behind {
		if err := l.restoreState(partition, m, c); err != nil {
			return err
		}
		from = c.Position + 1
	} else if err := l.startWarm(partition, m); err != nil {
		return err
	}
	w, err := l.s.newWorker(partition, m)
	if err != nil {
		return err
	}
	w.quiet = true
	start := time.Now()
	l.s.logger.Warn("rebuild: the partition is learned again from the broker's log up to the committed position; its outputs are not published again",
		append(args, "from", from)...)
	var n int64
	err = rr.Reread(ctx, partition, from, rerr.Committed, func(rec *connectors.Record) error {
		n++
		return w.process(ctx, rec)
	})
	var nr *connectors.NotRetainedError
	if errors.As(err, &nr) {
		return fmt.Errorf("service: partition %d of %s: %s, and a rebuild cannot make the model the committed position %d stands for: %w. Put the partition's own checkpoint back; or start its model afresh from the committed position with `run --reset`; or restore the checkpoint as it is with `run --accept`",
			partition, rerr.Source, rerr.Problem, rerr.Committed, err)
	}
	if err != nil {
		return fmt.Errorf("service: rebuild of partition %d: %w", partition, err)
	}
	dropped, err := l.s.opt.Checkpoints.Discard(ctx, partition)
	if err != nil {
		return fmt.Errorf("service: rebuild of partition %d: %w", partition, err)
	}
	// The rebuilt model stands for the committed position: its
	// checkpoint, saved before anything more is learned, says so to the
	// next run.
	m.pos, m.skipTo, m.saveAtOnce = rerr.Committed, rerr.Committed, true
	l.s.logger.Warn("rebuilt: the model holds the partition's records through the committed position",
		append(args, "records", n, "events", m.events(), "seconds", time.Since(start).Seconds(), "checkpoint_moved_to", dropped)...)
	return nil
}

// Mismatch is what Run does with a checkpoint that does not hold what
// the broker says was committed (Options.OnMismatch).
type Mismatch int

const (
	MismatchFail    Mismatch = iota // stop with a *RestoreError
	MismatchReset                   // discard the checkpoint, start afresh at the committed position
	MismatchAccept                  // restore the checkpoint as it is
	MismatchRebuild                 // learn the partition again from the log, up to the committed position
)

// ParseMismatch returns the Mismatch of name: "fail" (or ""), "reset",
// "accept" or "rebuild".
func ParseMismatch(name string) (Mismatch, error) {
	switch name {
	case "", "fail":
		return MismatchFail, nil
	case "reset":
		return MismatchReset, nil
	case "accept":
		return MismatchAccept, nil
	case "rebuild":
		return MismatchRebuild, nil
	}
	return 0, fmt.Errorf("on_mismatch %q: want fail, reset, accept or rebuild", name)
}

// checkRestore compares c, partition's checkpoint (nil when there is none),
// with partition and with pos, what the source says of it (when
// positioned); it returns nil when restoring c (or starting afresh,
// without one) leaves out nothing the broker says was committed and still
// holds.
func (l *models) checkRestore(partition int32, c *checkpoint.Checkpoint, pos connectors.Position, positioned bool) *RestoreError {
	e := &RestoreError{Partition: partition, Source: l.s.opt.Source.Name(), Store: l.s.opt.Checkpoints.String(), Committed: -1, Checkpoint: -1, start: -1}
	if positioned {
		e.Committed, e.start = pos.Committed, pos.Start
	}
	if c != nil {
		e.Checkpoint = c.Position
		if c.Partition != partition {
			e.Problem = fmt.Sprintf("the checkpoint is of partition %d", c.Partition)
			e.Consequence = fmt.Sprintf("restoring it would go on learning partition %d on partition %d's model", partition, c.Partition)
			return e
		}
	}
	if !positioned {
		return nil
	}
	switch {
	case c == nil:
		if pos.Committed < 0 {
			return nil
		}
		e.Problem = "no checkpoint"
		e.Consequence = fmt.Sprintf("the broker says position %d was committed: a fresh model would lack every record up to it", pos.Committed)
	case c.Origin != "" && pos.Origin != "" && c.Origin != pos.Origin:
		e.Problem = fmt.Sprintf("the checkpoint is of %s, the source reads %s", c.Origin, pos.Origin)
		e.Consequence = fmt.Sprintf("its position %d is one of another stream: restoring it would skip this stream's records up to it", c.Position)
	case c.Consumer != "" && pos.Consumer != "" && c.Consumer != pos.Consumer:
		// Another consumer's checkpoint (a Kafka group or a JetStream
		// durable pointed at the store of another): its position is no
		// commit of this one.
		e.otherConsumer(c, pos.Consumer)
	case pos.Committed < 0 && pos.Start > 0:
		// Nothing committed, and the consumer begins at a start
		// (connectors.Start) rather than at the first record: a
		// checkpoint behind it would leave the records between it and
		// the start unlearned. The start stands for the commit: a reset
		// starts the model there, a rebuild learns up to it.
		from := max(c.Position+1, pos.First)
		if from >= pos.Start {
			return nil
		}
		e.Committed = pos.Start - 1
		e.Problem = fmt.Sprintf("the checkpoint is behind position %d, where the consumer, which has committed nothing, begins (its start)", pos.Start)
		e.behind = true
		e.Consequence = fmt.Sprintf("the records from position %d to %d would never be learned", from, pos.Start-1)
	default:
		// Behind the commit, and the records between still held: they
		// would never be learned. (Records a purge or retention removed
		// are lost to every model alike.)
		from := max(c.Position+1, pos.First)
		if from > pos.Committed {
			return nil
		}
		e.Problem = "the checkpoint is behind the committed position"
		e.behind = true
		e.Consequence = fmt.Sprintf("the broker says position %d was committed: the records from position %d to it would never be learned", pos.Committed, from)
	}
	return e
}

// otherConsumer makes e say that c is the checkpoint of another consumer
// than ours.
func (e *RestoreError) otherConsumer(c *checkpoint.Checkpoint, ours string) {
	e.Problem = fmt.Sprintf("the checkpoint is of %s, this source reads as %s", c.Consumer, ours)
	e.Consequence = fmt.Sprintf("its position %d is %s's: restoring it would take over that consumer's model and skip the partition's records up to it, with no output for them, as %s",
		c.Position, c.Consumer, ours)
	e.own = fmt.Sprintf("Run as %s, whose checkpoint it is, or give %s a checkpoint directory or bucket of its own", c.Consumer, ours)
}

// checkSource returns the error that stops the service when c, the
// checkpoint of partition, is of another stream than the source reads.
// The consumer is not compared here: a JetStream checkpoint that does
// not hold its consumer (written before checkpoints held a JetStream
// durable) gets the one its source's name holds, for checkRestore.
func (l *models) checkSource(partition int32, c *checkpoint.Checkpoint) error {
	theirs, consumer := connectors.SplitConsumer(c.Source)
	ours, _ := connectors.SplitConsumer(l.s.opt.Source.Name())
	if theirs != ours {
		return fmt.Errorf("service: the checkpoint of partition %d in %s is of source %s, not %s",
			partition, l.s.opt.Checkpoints, c.Source, l.s.opt.Source.Name())
	}
	if c.Consumer == "" {
		c.Consumer = consumer
	}
	return nil
}

// CheckConsumer refuses, before a source named name is opened, a
// checkpoint of partition 0 in store that is another consumer's: a
// JetStream source of the same stream with another durable. A JetStream
// source creates its durable when it opens; so a refused run leaves no
// durable behind. It returns nil when there is no such checkpoint (or it
// cannot be read: the run's restore says why), and the *RestoreError the
// run would stop with when there is one. Only for a run that stops on a
// mismatch (MismatchFail): the others need the source opened.
func CheckConsumer(ctx context.Context, store checkpoint.Store, name string) error {
	ours, consumer := connectors.SplitConsumer(name)
	if consumer == "" {
		return nil
	}
	c, err := store.Load(ctx, 0)
	if err != nil {
		return nil
	}
	theirs, theirConsumer := connectors.SplitConsumer(c.Source)
	if c.Consumer == "" {
		c.Consumer = theirConsumer
	}
	if theirs != ours || c.Partition != 0 || c.Consumer == "" || c.Consumer == consumer {
		return nil
	}
	e := &RestoreError{Partition: 0, Source: name, Store: store.String(), Committed: -1, Checkpoint: c.Position, start: -1}
	e.otherConsumer(c, consumer)
	return e
}

// position returns what a Positioned source says of partition; false when
// it says nothing, or its offsets do not survive a restart.
func (l *models) position(partition int32) (connectors.Position, bool) {
	src, ok := l.s.opt.Source.(connectors.Positioned)
	if !ok || l.volatile {
		return connectors.Position{}, false
	}
	return src.Position(partition)
}

// A RestoreError says that a partition's checkpoint does not hold what the
// broker says this consumer committed: there is none, it is behind the
// committed position, or it is of another partition, stream or consumer.
// A model restored from it, or started afresh, would silently lack records
// the broker counts as learned, or skip records it never learned. The ways
// out are the operator's: put the right checkpoint back, start the
// partition afresh, or take the checkpoint as it is (Options.OnMismatch).
type RestoreError struct {
	Partition   int32
	Source      string // the source's name
	Store       string // the checkpoint store
	Committed   int64  // the broker's committed position; -1 when none or not known
	Checkpoint  int64  // the checkpoint's position; -1 when there is none
	Problem     string // what is wrong
	Consequence string // what a restore would do

	// behind: the checkpoint is the partition's own, of the stream the
	// source reads, and only behind the commit (a rebuild starts from it).
	behind bool
	// start: where the consumer was begun, when it was begun at a start
	// (connectors.Position.Start), else -1: a rebuild without a
	// checkpoint learns from there, as the model did.
	start int64
	// own, when not empty, is the first way out, instead of putting
	// the partition's own checkpoint back (another consumer's).
	own string
}

func (e *RestoreError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "service: partition %d of %s: %s", e.Partition, e.Source, e.Problem)
	if e.Checkpoint >= 0 {
		fmt.Fprintf(&b, " (checkpoint at position %d in %s)", e.Checkpoint, e.Store)
	} else {
		fmt.Fprintf(&b, " in %s", e.Store)
	}
	own := e.own
	if own == "" {
		own = "Put the partition's own checkpoint back"
	}
	fmt.Fprintf(&b, "; %s. %s; or rebuild its model, learning the partition again from the broker's log up to the committed position, with `run --rebuild`; or start it afresh from the committed position, dropping the checkpoint, with `run --reset`; or restore the checkpoint as it is, knowing what it lacks, with `run --accept` (checkpoint.on_mismatch: rebuild, reset or accept)", e.Consequence, own)
	return b.String()
}

// configDiff says how the configuration that wrote a checkpoint, as its
// report names its learners, differs from ours: the learners added,
// dropped or of another algorithm, and, with ch (the checkpoint's state
// has settings digests), the learners whose settings changed; without ch
// and with the same learners, that the input, the features or a
// learner's settings differ.
func configDiff(report []byte, ours []config.Learner, ch *pipeline.Changes) string {
	var rep struct {
		Learners []struct{ Name, Algorithm string }
	}
	if json.Unmarshal(report, &rep) != nil {
		if ch != nil {
			return ch.String()
		}
		return "input, features or learners differ"
	}
	theirs := map[string]string{}
	for _, l := range rep.Learners {
		theirs[l.Name] = l.Algorithm
	}
	var diffs []string
	seen := map[string]bool{}
	for _, l := range ours {
		seen[l.Name] = true
		switch alg, ok := theirs[l.Name]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("learner %s (%s) added", l.Name, l.Algorithm))
		case alg != l.Algorithm:
			diffs = append(diffs, fmt.Sprintf("learner %s is %s, was %s", l.Name, l.Algorithm, alg))
		case ch != nil && slices.Contains(ch.Changed, l.Name):
			diffs = append(diffs, fmt.Sprintf("learner %s (%s): settings changed", l.Name, l.Algorithm))
		}
	}
	for _, l := range rep.Learners {
		if !seen[l.Name] {
			diffs = append(diffs, fmt.Sprintf("learner %s (%s) dropped", l.Name, l.Algorithm))
		}
	}
	if len(diffs) == 0 {
		return "the same learners: the input, the features, the labels or a learner's settings differ"
	}
	return strings.Join(diffs, "; ")
}
