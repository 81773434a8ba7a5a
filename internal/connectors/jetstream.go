package connectors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamSource reads a JetStream stream through a durable pull
// consumer: at-least-once. The consumer is created or updated with
// AckAllPolicy (an ack covers every earlier message), FilterSubject =
// Subject and MaxAckPending; the client buffers at most FetchBatch
// messages ahead of Fetch (jetstream.PullMaxMessages).
//
// Records come in stream order, each once per source: Record.Offset is the
// stream sequence, strictly increasing. A message the server redelivers
// after AckWait while this source runs was already returned, so it is
// skipped (and counted: Redelivered); the cumulative commit that follows
// covers it.
//
// Commit(r) acknowledges r's message and so everything before it. Messages
// delivered but not committed come again after a restart: on open, a
// durable whose delivered sequence is ahead of its ack floor is reset to
// its ack floor (jetstream.Stream.ResetConsumer, nats-server 2.14+), so
// they come again first and in order, instead of after AckWait and out of
// order (an ack of a later message would then cover them unprocessed).
// Servers older than 2.14 have no consumer reset: there the durable is
// deleted and created again, delivering from its ack floor + 1 (a
// DeliverByStartSequence consumer, whose start later opens keep). A
// durable is therefore used by one process at a time.
//
// It is not safe for concurrent use, except Lag and Redelivered.
type JetStreamSource struct {
	nc       *natsConn
	cons     jetstream.Consumer
	iter     jetstream.MessagesContext
	name     string
	cfg      NATSConfig
	untilEnd bool

	// end is the last stream sequence for the subject when the source was
	// opened (until-end); ended is set once it was returned, or once the
	// consumer had nothing left to deliver.
	end   uint64
	ended bool
	// last is the stream sequence of the last record returned.
	last uint64
	key  []byte

	// ackPre is the prefix of the consumer's ack reply subjects, through
	// "<consumer>.", and ackTrail whether tokens follow <pending> (see
	// jsAckMeta).
	ackPre   string
	ackTrail bool

	// pending is the latest committed message not yet acknowledged
	// (AckBatch > 1), unacked how many commits it stands for, and
	// committed the stream sequence of the latest committed message,
	// acknowledged or pending.
	pending   jetstream.Msg
	unacked   int
	committed uint64

	// wait bounds Fetch's wait for a message by FetchWait.
	wait jsWaiter

	// pos is Position's answer: the durable's ack floor and the stream's
	// identity when the source was opened.
	pos Position
	// opened: open succeeded once (a later open is a reopen, which never
	// applies cfg.Start). startSeq is the sequence the durable was
	// created to begin at (jsStart), 0 when it delivers from the first.
	opened   bool
	startSeq uint64

	lag         atomic.Int64
	redelivered atomic.Int64
	closed      bool
	// reconnected is set by the client when it reconnected to a server:
	// messages the consumer delivered while the connection was down are
	// lost to this client, and the ones after them would leave a gap.
	reconnected atomic.Bool
	// reopenedIdle and reopenedAt: the idle check reopened the consumer at
	// position reopenedAt (see idle).
	reopenedIdle bool
	reopenedAt   uint64
	reopens      int // consecutive reopens for a closed iterator
	// heldIdles counts the idle checks in a row that found messages of
	// the subject after the last one returned still in the stream while
	// the consumer said nothing was pending (see idle).
	heldIdles int
}

var (
	_ Positioned = (*JetStreamSource)(nil)
	_ Rereader   = (*JetStreamSource)(nil)
)

// NewJetStreamSource opens the durable cfg.Durable on cfg.Stream, filtered
// on cfg.Subject. With untilEnd, Fetch returns ErrEndOfInput once every
// message of the subject up to the stream's last one at open has been
// returned; a durable with nothing left to deliver at open ends at once.
func NewJetStreamSource(ctx context.Context, cfg NATSConfig, untilEnd bool) (*JetStreamSource, error) {
	cfg = cfg.withDefaults()
	name := JetStreamName(cfg)
	nc, err := natsConnect(cfg)
	if err != nil {
		return nil, fmt.Errorf("jetstream source: %w", err)
	}
	s := &JetStreamSource{nc: nc, name: name, cfg: cfg, untilEnd: untilEnd}
	nc.SetReconnectHandler(func(*nats.Conn) { s.reconnected.Store(true) })
	if err := s.open(ctx); err != nil {
		_ = nc.close()
		return nil, fmt.Errorf("jetstream source %s: %w", name, err)
	}
	return s, nil
}

// JetStreamName returns the name (Source.Name) of the JetStream source
// cfg opens, "jetstream:<stream>/<durable>", without opening it.
func JetStreamName(cfg NATSConfig) string {
	cfg = cfg.withDefaults()
	return "jetstream:" + cfg.Stream + "/" + cfg.Durable
}

// SplitConsumer splits a source's name into the stream it reads and the
// consumer it names: a JetStream source's "jetstream:EVENTS/da" into
// "jetstream:EVENTS" and "jetstream durable da" (its Position.Consumer).
// Other sources' names name no consumer: name and "".
func SplitConsumer(name string) (stream, consumer string) {
	if rest, ok := strings.CutPrefix(name, "jetstream:"); ok {
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			return name[:len("jetstream:")+i], jsConsumer(rest[i+1:])
		}
	}
	return name, ""
}

// jsConsumer is Position.Consumer of a JetStream durable.
func jsConsumer(durable string) string { return "jetstream durable " + durable }

func (s *JetStreamSource) open(ctx context.Context) error {
	cfg := s.cfg
	js, err := jetstream.New(s.nc.Conn)
	if err != nil {
		return err
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %q not found: create it with `streamlearn publish --create-stream --url %s --stream %s --subject %s FILE` (which also publishes FILE, which may be empty), or `nats stream add %s --subjects %s`",
				cfg.Stream, cfg.redactedURL(), cfg.Stream, cfg.Subject, cfg.Stream, cfg.Subject)
		}
		return fmt.Errorf("stream %q: %w", cfg.Stream, err)
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "streamlearn source",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: cfg.Subject,
	}
	// A durable that jsRecreate restarted at a sequence (on an older
	// server) keeps that start: servers refuse to change a consumer's
	// deliver policy.
	// A durable created at a start (Start) keeps it, and the mark of it in
	// its description.
	old, err := stream.Consumer(ctx, cfg.Durable)
	switch {
	case err == nil:
		oc := old.CachedInfo().Config
		if oc.DeliverPolicy == jetstream.DeliverByStartSequencePolicy {
			ccfg.DeliverPolicy, ccfg.OptStartSeq = oc.DeliverPolicy, oc.OptStartSeq
		}
		if seq, ok := jsStartedSeq(oc.Description); ok {
			ccfg.Description, s.startSeq = oc.Description, seq
		}
		if cfg.Start != "earliest" && !s.opened {
			cfg.Logger.Warn("the durable exists and resumes from its position: start applies when the durable is created",
				"source", s.name, "start", cfg.Start)
		}
	case errors.Is(err, jetstream.ErrConsumerNotFound) && !s.opened:
		if err := jsStart(ctx, js, stream, cfg, &ccfg); err != nil {
			return fmt.Errorf("consumer: start %s: %w", cfg.Start, err)
		}
		s.startSeq, _ = jsStartedSeq(ccfg.Description)
	case errors.Is(err, jetstream.ErrConsumerNotFound) && s.startSeq > 0:
		// Gone while this source read it (deleted; a server that lost
		// it): created again where it stands, never at the start
		// again, which may lie past records not yet delivered.
		ccfg.DeliverPolicy, ccfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, max(s.startSeq, s.committed+1)
		if ccfg.OptStartSeq == s.startSeq {
			ccfg.Description = jsStartedDesc + strconv.FormatUint(s.startSeq, 10)
		}
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		// Gone while this source read it: created again delivering
		// everything, the records this source returned skipped.
	default:
		return fmt.Errorf("consumer: %w", err)
	}
	s.cons, err = stream.CreateOrUpdateConsumer(ctx, ccfg)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	info := s.cons.CachedInfo()
	floor := jsAckFloor(info)
	// The durable acknowledged something: its floor is a commit. A new
	// durable's floor is the server's, the stream's first sequence less
	// one (0 before 2.10), and so is one a purge or expiry moved past
	// messages nobody acknowledged. A consumer reset (below, on an earlier
	// run) zeroes the consumer-side floor for good, but leaves the floor
	// (with jsRecreate's restart, the start less one) on a message the
	// stream still holds.
	first := stream.CachedInfo().State.FirstSeq
	acked := info.AckFloor.Consumer > 0 || floor > 0 && floor >= first && !jsStartedAt(info, floor+1)
	// Delivered but not acknowledged by an earlier run: deliver again, from
	// the ack floor and in order. The state the reset leaves is checked;
	// when it is not the floor the info said (an info older than the
	// consumer's state: seen once in CI when a test rewound the durable
	// just before), the info is read again and the reset retried.
	for try := 1; info.Delivered.Stream > floor; try++ {
		delivered := info.Delivered.Stream
		if jsServerAtLeast(s.nc.ConnectedServerVersion(), 2, 14) {
			if _, err := stream.ResetConsumer(ctx, cfg.Durable); err != nil {
				return fmt.Errorf("consumer: reset to ack floor %d for redelivery of %d..%d: %w",
					floor, floor+1, delivered, err)
			}
			info, err = s.cons.Info(ctx)
		} else {
			// From the stream's first message at the earliest: a
			// server before 2.10 reports floor 0 for a durable that
			// acknowledged nothing, however far its stream was purged.
			s.cons, info, err = jsRecreate(ctx, stream, ccfg, max(floor+1, first))
			if err != nil {
				err = fmt.Errorf("recreate at ack floor %d for redelivery of %d..%d (nats-server %s has no consumer reset): %w",
					floor, floor+1, delivered, s.nc.ConnectedServerVersion(), err)
			}
		}
		if err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		f := jsAckFloor(info)
		if f == floor && info.Delivered.Stream == floor {
			break
		}
		if try == 3 {
			return fmt.Errorf("consumer: after the reset to ack floor %d: ack floor %d, delivered %d", floor, f, info.Delivered.Stream)
		}
		floor = f
	}
	s.last, s.committed = floor, floor
	s.pos = Position{Committed: -1, First: int64(first), Start: -1, Origin: jsOrigin(stream), Consumer: jsConsumer(cfg.Durable)}
	if s.startSeq > 0 {
		s.pos.Start = int64(s.startSeq)
	}
	s.opened = true
	if acked && floor > 0 {
		s.pos.Committed = int64(floor)
	}
	s.lag.Store(int64(info.NumPending))
	if s.untilEnd {
		if info.NumPending == 0 {
			s.ended = true
		} else if s.end, err = jsLastSeq(ctx, stream, cfg.Subject); err != nil {
			return fmt.Errorf("until-end: %w", err)
		}
	}
	s.iter, err = s.cons.Messages(jetstream.PullMaxMessages(cfg.FetchBatch), jetstream.PullExpiry(cfg.FetchWait))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	return nil
}

// jsOrigin names stream by its name and creation time: a stream deleted
// and created again under the same name numbers its messages from 1 again,
// and a position of the old one means nothing in it.
func jsOrigin(stream jetstream.Stream) string {
	info := stream.CachedInfo()
	return "jetstream stream " + info.Config.Name + " created " + info.Created.UTC().Format(time.RFC3339Nano)
}

// Position returns the durable's ack floor and the stream's identity as
// they were when the source was opened; the source has one partition, 0.
func (s *JetStreamSource) Position(partition int32) (Position, bool) {
	return s.pos, partition == 0
}

// Reread reads the stream's messages of the source's subject from
// sequence from (from < 0: sequence 1) through sequence through, with an
// ordered consumer of its own: the durable is untouched. It returns a
// *NotRetainedError when a message in that range may have been removed:
// the stream's first sequence is after from, the stream lists a deleted
// sequence in the range, the subject has no message left, or a message
// not yet read was removed while Reread read (a drop of more than one in
// the pending count between two deliveries). The stream does not say
// which subject a removed message had, so a removal of another subject's
// message counts too. It returns an error when the stream is not the one
// the source opened (deleted and created again since).
func (s *JetStreamSource) Reread(ctx context.Context, partition int32, from, through int64, fn func(*Record) error) error {
	fail := func(err error) error {
		return fmt.Errorf("jetstream source %s: reread from %d through %d: %w", s.name, from, through, err)
	}
	if partition != 0 {
		return fail(fmt.Errorf("no partition %d: a stream has one, 0", partition))
	}
	from = max(from, 1)
	if through < from {
		return nil
	}
	js, err := jetstream.New(s.nc.Conn)
	if err != nil {
		return fail(err)
	}
	stream, err := js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return fail(err)
	}
	if o := jsOrigin(stream); o != s.pos.Origin {
		return fail(fmt.Errorf("the source opened %s, the server now has %s", s.pos.Origin, o))
	}
	info, err := stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return fail(err)
	}
	st := info.State
	if int64(st.FirstSeq) > from { // purged to empty: FirstSeq is LastSeq + 1
		return &NotRetainedError{Partition: partition, From: from, First: int64(st.FirstSeq)}
	}
	for _, d := range st.Deleted {
		if int64(d) >= from && int64(d) <= through {
			return &NotRetainedError{Partition: partition, From: from, First: int64(st.FirstSeq), Gap: int64(d)}
		}
	}
	last, err := stream.GetLastMsgForSubject(ctx, s.cfg.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return &NotRetainedError{Partition: partition, From: from, First: int64(st.LastSeq) + 1}
	case err != nil:
		return fail(err)
	case int64(last.Sequence) < from:
		return nil // the subject's messages in the range are none, and none removed
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.cfg.Subject},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    uint64(from),
	})
	if err != nil {
		return fail(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(s.cfg.FetchBatch))
	if err != nil {
		return fail(err)
	}
	defer it.Stop()
	var key []byte
	pending := int64(-1)
	for {
		// A message of the subject at or after from exists (last), and
		// each message says how many follow it: Next never waits for
		// one that is not there.
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fail(err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fail(err)
		}
		seq := int64(md.Sequence.Stream)
		if pending >= 0 && int64(md.NumPending) < pending-1 {
			return &NotRetainedError{Partition: partition, From: from, First: -1, Gap: seq}
		}
		pending = int64(md.NumPending)
		if seq > through {
			return nil
		}
		if k := natsLastToken(msg.Subject()); string(key) != k {
			key = append(key[:0], k...)
		}
		rec := Record{Value: msg.Data(), Key: key, Offset: seq, Time: md.Timestamp, Lag: int64(md.NumPending)}
		if err := fn(&rec); err != nil {
			return err
		}
		if seq >= through || md.NumPending == 0 {
			return nil
		}
	}
}

// jsStartedDesc begins the description of a durable that jsStart made
// begin at a stream sequence, which follows it: its ack floor is then that
// sequence less one before anything is acknowledged, which is no commit.
// (The description, not the consumer's metadata, which servers before
// 2.10 drop.)
const jsStartedDesc = "streamlearn source created to start at stream sequence "

// jsStart makes ccfg, the config of a durable about to be created, begin
// where cfg.Start says: at a stream sequence, marked in the durable's
// description (jsStartedDesc); earliest leaves it delivering everything.
func jsStart(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg NATSConfig, ccfg *jetstream.ConsumerConfig) error {
	st, err := ParseStart(cfg.Start)
	if err != nil || st.Kind == StartEarliest {
		return err
	}
	state := stream.CachedInfo().State
	first, end := max(state.FirstSeq, 1), state.LastSeq+1
	var seq uint64
	switch st.Kind {
	case StartLatest:
		seq = end
	case StartOffset:
		seq = min(max(uint64(st.Offset), first), end)
		if seq != uint64(st.Offset) {
			cfg.Logger.Warn("start offset is outside the stream: starting at its nearest end",
				"stream", cfg.Stream, "start", st.Offset, "first_sequence", state.FirstSeq, "last_sequence", state.LastSeq, "sequence", seq)
		}
	case StartTime:
		if seq, err = jsSeqAt(ctx, js, stream, cfg.Subject, st.Time); err != nil {
			return err
		}
		seq = min(max(seq, first), end)
	}
	ccfg.DeliverPolicy, ccfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq
	ccfg.Description = jsStartedDesc + strconv.FormatUint(seq, 10)
	return nil
}

// jsSeqAt returns the stream sequence of the first message stored at or
// after t, or the stream's last sequence plus one when there is none: the
// start the server gives an ephemeral consumer of its own created to
// begin at t.
func jsSeqAt(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, subject string, t time.Time) (uint64, error) {
	c, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "streamlearn: the first message at or after a start time",
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &t,
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     subject,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return 0, fmt.Errorf("find the first message at or after %s: %w", t.Format(time.RFC3339Nano), err)
	}
	info := c.CachedInfo()
	_ = stream.DeleteConsumer(context.WithoutCancel(ctx), info.Name)
	// The server fixes a new consumer's first sequence when it creates
	// it, and reports the one before as delivered (the stream's last,
	// when no message is at or after t).
	return info.Delivered.Stream + 1, nil
}

// jsStartedAt reports whether the durable of info was created to begin at
// stream sequence seq (jsStart).
func jsStartedAt(info *jetstream.ConsumerInfo, seq uint64) bool {
	return info.Config.Description == jsStartedDesc+strconv.FormatUint(seq, 10)
}

// jsStartedSeq returns the sequence a durable of description desc was
// created to begin at (jsStart); false when it was not.
func jsStartedSeq(desc string) (uint64, bool) {
	v, ok := strings.CutPrefix(desc, jsStartedDesc)
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	return seq, err == nil && seq > 0
}

// jsServerAtLeast reports whether a server version ("2.9.10",
// "2.14.0-beta.1") is at least major.minor.
func jsServerAtLeast(version string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// jsAckFloor returns the stream sequence below which the consumer has
// nothing left to deliver: its ack floor, or for a consumer that starts at
// a sequence and has acknowledged nothing yet, the sequence before its
// start (servers before 2.10 report ack floor 0 then).
func jsAckFloor(info *jetstream.ConsumerInfo) uint64 {
	floor := info.AckFloor.Stream
	if c := info.Config; c.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && c.OptStartSeq > 0 {
		floor = max(floor, c.OptStartSeq-1)
	}
	return floor
}

// jsRecreate is the consumer reset of servers older than 2.14, which have
// none: it deletes the durable and creates it again, delivering from
// stream sequence start (the old ack floor + 1) with cfg otherwise; its
// delivered sequence, and its floor by jsAckFloor, are start-1. Not
// atomic: a crash between the delete and the create loses the position,
// and the next open starts the durable from the beginning of the stream
// (at-least-once, but from far back), so the window is kept to two
// requests.
func jsRecreate(ctx context.Context, stream jetstream.Stream, cfg jetstream.ConsumerConfig, start uint64) (jetstream.Consumer, *jetstream.ConsumerInfo, error) {
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	if err := stream.DeleteConsumer(ctx, cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil, fmt.Errorf("delete: %w", err)
	}
	c, err := stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create: %w", err)
	}
	return c, c.CachedInfo(), nil
}

// jsLastSeq returns the stream sequence of subject's last message, or the
// stream's last sequence when the server cannot say (an upper bound: the
// idle check in Fetch ends the source when nothing is left).
func jsLastSeq(ctx context.Context, stream jetstream.Stream, subject string) (uint64, error) {
	m, err := stream.GetLastMsgForSubject(ctx, subject)
	if err == nil {
		return m.Sequence, nil
	}
	info, ierr := stream.Info(ctx)
	if ierr != nil {
		return 0, errors.Join(err, ierr)
	}
	return info.State.LastSeq, nil
}

// Fetch returns the next record. When no message comes for FetchWait it
// asks the server about the consumer: an until-end source with nothing
// left to deliver ends, and a consumer stalled on MaxAckPending (the
// caller commits too rarely) is an error rather than a silent hang.
func (s *JetStreamSource) Fetch(ctx context.Context) (Record, error) {
	if s.closed {
		return Record{}, fmt.Errorf("jetstream source %s: fetch: closed", s.name)
	}
	for {
		if s.ended {
			return Record{}, ErrEndOfInput
		}
		if s.reconnected.Load() {
			if err := s.reopen(ctx); err != nil {
				return Record{}, err
			}
		}
		msg, err := s.iter.Next(s.wait.begin(ctx, s.cfg.FetchWait)...)
		expired := s.wait.end()
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return Record{}, cerr
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) && s.reopens < 30 {
				// The client closed the iterator under us (the server went
				// away, or lost or replaced the consumer): once connected
				// again, deliver again from the ack floor. With backoff,
				// for about a minute in all.
				s.reopens++
				if err := s.backoff(ctx, min(time.Duration(s.reopens)*100*time.Millisecond, 3*time.Second)); err != nil {
					return Record{}, err
				}
				if err := s.reopen(ctx); err != nil && (ctx.Err() != nil || s.reopens >= 30) {
					return Record{}, err
				}
				continue // on a failed reopen, the stopped iterator brings us back here
			}
			// A missed heartbeat is transient: the client pulls again. Treat
			// it as an expired wait rather than a failure of the source.
			if expired || errors.Is(err, jetstream.ErrNoHeartbeat) {
				if err := s.idle(ctx); err != nil {
					return Record{}, err
				}
				continue
			}
			return Record{}, fmt.Errorf("jetstream source %s: fetch: %w", s.name, err)
		}
		seq, pending, ts, ok := s.ackMeta(msg.Reply())
		if !ok {
			md, err := msg.Metadata()
			if err != nil {
				return Record{}, fmt.Errorf("jetstream source %s: fetch: %w", s.name, err)
			}
			seq, pending, ts = md.Sequence.Stream, md.NumPending, md.Timestamp.UnixNano()
		}
		s.reopens = 0
		if seq <= s.last {
			s.redelivered.Add(1)
			continue
		}
		if s.untilEnd && seq > s.end {
			// The last message at open is gone (limits, purge); this one
			// came later. It stays unacknowledged, for the next run.
			s.ended = true
			return Record{}, ErrEndOfInput
		}
		s.last, s.heldIdles = seq, 0
		s.ended = s.untilEnd && seq == s.end
		s.lag.Store(int64(pending))
		if k := natsLastToken(msg.Subject()); string(s.key) != k {
			s.key = append(s.key[:0], k...)
		}
		return Record{Value: msg.Data(), Key: s.key, Offset: int64(seq), Time: time.Unix(0, ts), Lag: int64(pending), ack: msg}, nil
	}
}

// jsAckMeta reads the stream sequence, the pending count and the
// timestamp (Unix ns) from a JetStream message's reply subject without
// allocating (msg.Metadata allocates). The subject is
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
//
// or, from newer servers, with <domain>.<account hash> after $JS.ACK and
// possibly more tokens at the end (nats.go internal/parser). pre is the
// length of its prefix through "<consumer>.", and trail whether tokens may
// follow <pending>.
func jsAckMeta(reply string) (seq, pending uint64, ts int64, pre int, trail, ok bool) {
	const ack = "$JS.ACK."
	if !strings.HasPrefix(reply, ack) {
		return 0, 0, 0, 0, false, false
	}
	skip := 0 // tokens before <delivered>
	switch n := strings.Count(reply[len(ack):], ".") + 1; {
	case n == 7:
		skip = 2
	case n >= 9:
		skip, trail = 4, true
	default:
		return 0, 0, 0, 0, false, false
	}
	pre = len(ack)
	for range skip {
		pre += strings.IndexByte(reply[pre:], '.') + 1
	}
	seq, pending, ts, ok = jsAckNums(reply[pre:], trail)
	return seq, pending, ts, pre, trail, ok
}

// jsAckNums reads <sseq>, <ts> and <pending> from the rest of an ack reply
// subject after its prefix, "<delivered>.<sseq>.<cseq>.<ts>.<pending>",
// followed by ".<more>" if trail: one pass, no cuts.
func jsAckNums(rest string, trail bool) (seq, pending uint64, ts int64, ok bool) {
	i := 0
	for i < len(rest) && rest[i] != '.' { // <delivered>: short, a call costs more
		i++
	}
	seq, i, ok = jsAckNum(rest, i+1)
	if !ok {
		return 0, 0, 0, false
	}
	_, i, ok = jsAckNum(rest, i+1) // <cseq>
	if !ok {
		return 0, 0, 0, false
	}
	t, i, ok := jsAckNum(rest, i+1)
	if !ok {
		return 0, 0, 0, false
	}
	pending, i, ok = jsAckNum(rest, i+1)
	if !ok || i < len(rest) && !trail {
		return 0, 0, 0, false
	}
	return seq, pending, int64(t), true
}

// jsAckNum reads the decimal token of s at i, which ends at a dot or at
// the end of s, and returns its value and where it ends.
func jsAckNum(s string, i int) (v uint64, end int, ok bool) {
	start := i
	for ; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	return v, i, i > start && (i == len(s) || s[i] == '.')
}

// ackMeta is jsAckMeta for the source's messages: the reply subjects of a
// consumer share their prefix, learnt from the first, so that only the
// numbers after it are read.
func (s *JetStreamSource) ackMeta(reply string) (seq, pending uint64, ts int64, ok bool) {
	if p := s.ackPre; p != "" && len(reply) > len(p) && reply[:len(p)] == p {
		if seq, pending, ts, ok = jsAckNums(reply[len(p):], s.ackTrail); ok {
			return seq, pending, ts, true
		}
	}
	seq, pending, ts, pre, trail, ok := jsAckMeta(reply)
	if ok {
		s.ackPre, s.ackTrail = strings.Clone(reply[:pre]), trail
	}
	return seq, pending, ts, ok
}

// backoff waits d, then until the connection is up, or until ctx is done.
func (s *JetStreamSource) backoff(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if s.nc.Conn.IsConnected() {
			return nil
		}
		t.Reset(100 * time.Millisecond)
	}
}

// reopen restarts delivery at the consumer's ack floor after messages may
// have been lost in flight (a reconnection): what this source already
// returned comes again and is skipped (seq ≤ last), what it never
// received comes in order.
func (s *JetStreamSource) reopen(ctx context.Context) error {
	s.reconnected.Store(false)
	s.iter.Stop()
	if err := s.ack(ctx); err != nil && ctx.Err() != nil {
		return ctx.Err()
	} // else: a lower ack floor only means more to skip
	last, end, ended := s.last, s.end, s.ended
	if err := s.open(ctx); err != nil {
		return fmt.Errorf("jetstream source %s: reopen after a reconnection: %w", s.name, err)
	}
	s.last = max(s.last, last)
	if s.untilEnd {
		s.end, s.ended = end, ended || last >= end
	}
	return nil
}

// idle runs when no message came for FetchWait.
func (s *JetStreamSource) idle(ctx context.Context) error {
	info, err := s.cons.Info(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("jetstream source %s: consumer info: %w", s.name, err)
	}
	s.lag.Store(int64(info.NumPending))
	if s.untilEnd && info.NumPending == 0 {
		if s.last < s.end && info.Delivered.Stream > s.last && !(s.reopenedIdle && s.reopenedAt == s.last) {
			// Delivered, yet never received (lost with a connection):
			// deliver them again now rather than after AckWait. Once per
			// position: if nothing new comes, what is left was deleted.
			s.reopenedIdle, s.reopenedAt = true, s.last
			return s.reopen(ctx)
		}
		if s.last < s.end {
			// The end at open is not reached. A consumer that says
			// nothing is pending while the stream still holds messages of
			// the subject after the last one returned (a server still
			// recovering after a restart answers so) is not the end:
			// ending would report a model that lacks them. Reopen once,
			// then wait; after a minute of this, an error.
			held, err := s.heldAfterLast(ctx)
			if err != nil {
				return err
			}
			if held {
				s.heldIdles++
				switch {
				case !(s.reopenedIdle && s.reopenedAt == s.last):
					s.reopenedIdle, s.reopenedAt = true, s.last
					return s.reopen(ctx)
				case time.Duration(s.heldIdles)*s.cfg.FetchWait > time.Minute:
					return fmt.Errorf("jetstream source %s: the stream holds messages of %s after sequence %d, up to %d at open, but the consumer delivers none",
						s.name, s.cfg.Subject, s.last, s.end)
				}
				return nil
			}
		}
		// Every message of the subject was delivered and, after FetchWait
		// without one, returned: nothing up to the end at open is left.
		s.ended = true
		return nil
	}
	if info.NumPending > 0 && info.NumAckPending >= s.cfg.MaxAckPending {
		return fmt.Errorf("jetstream source %s: %d messages await a commit and max_ack_pending is %d: commit more often or raise max_ack_pending",
			s.name, info.NumAckPending, s.cfg.MaxAckPending)
	}
	return nil
}

// heldAfterLast reports whether the stream still holds a message of the
// source's subject after the last one returned.
func (s *JetStreamSource) heldAfterLast(ctx context.Context) (bool, error) {
	js, err := jetstream.New(s.nc.Conn)
	if err != nil {
		return false, err
	}
	stream, err := js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return false, fmt.Errorf("jetstream source %s: stream: %w", s.name, err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, s.cfg.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("jetstream source %s: last message of %s: %w", s.name, s.cfg.Subject, err)
	}
	return m.Sequence > s.last, nil
}

// Commit acknowledges r's message and, by AckAllPolicy, every earlier one.
// With AckBatch 1 it returns once the server confirmed the ack; with a
// larger AckBatch only every AckBatch-th call sends one. Committing a
// record no later than the last one committed does nothing.
func (s *JetStreamSource) Commit(ctx context.Context, r Record) error {
	m, ok := r.ack.(jetstream.Msg)
	if !ok {
		return fmt.Errorf("jetstream source %s: commit offset %d: record is not from a JetStream source", s.name, r.Offset)
	}
	if s.closed {
		return fmt.Errorf("jetstream source %s: commit offset %d: closed", s.name, r.Offset)
	}
	if uint64(r.Offset) <= s.committed {
		return nil
	}
	s.pending, s.committed = m, uint64(r.Offset)
	s.unacked++
	if s.unacked < s.cfg.AckBatch {
		return nil
	}
	return s.ack(ctx)
}

// ack sends the pending acknowledgement and waits for the server.
func (s *JetStreamSource) ack(ctx context.Context) error {
	m := s.pending
	if m == nil {
		return nil
	}
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("jetstream source %s: commit: %w", s.name, err)
	}
	if err := m.DoubleAck(ctx); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return fmt.Errorf("jetstream source %s: commit offset %d: %w", s.name, md.Sequence.Stream, err)
	}
	s.pending, s.unacked = nil, 0
	return nil
}

// Name returns "jetstream:<stream>/<durable>".
func (s *JetStreamSource) Name() string { return s.name }

// Lag returns how many messages of the subject the server had not yet
// delivered when the last record was returned (or at the last idle
// check): the consumer lag. It is safe for concurrent use.
func (s *JetStreamSource) Lag() int64 { return s.lag.Load() }

// Redelivered returns how many redeliveries of already returned records
// were skipped (their ack was later than AckWait). It is safe for
// concurrent use.
func (s *JetStreamSource) Redelivered() int64 { return s.redelivered.Load() }

// Close acknowledges the pending commit (AckBatch > 1), stops consuming
// (buffered messages stay unacknowledged, for the next run) and closes
// the connection.
func (s *JetStreamSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), natsCloseWait)
	defer cancel()
	err := s.ack(ctx)
	s.iter.Stop()
	s.wait.stop()
	return errors.Join(err, s.nc.close())
}

// JetStreamSink publishes to a subject of a JetStream stream and collects
// the server's acknowledgements asynchronously: at most PublishWindow
// publishes are in flight, Publish blocks beyond that, and Flush waits
// for every acknowledgement (Barrier's wait for those before it, while
// later ones are published). A failed publish is returned by the next
// Flush or wait. Keys are not sent. Publish is meant for one goroutine;
// Flush, Barrier's wait and Close may be called from any.
type JetStreamSink struct {
	nc      *natsConn
	js      jetstream.JetStream
	stream  string
	subject string
	name    string

	// collecting is held by the one goroutine that waits for the oldest
	// acknowledgement (collect); mu guards the rest.
	collecting sync.Mutex
	mu         sync.Mutex
	// inflight is a ring of futures in publish order; published and
	// acked count the publishes and the acknowledgements collected.
	inflight  []jetstream.PubAckFuture
	head, n   int
	published uint64
	acked     uint64
	failed    failures // failures collected and not reported yet, by message number
	closed    bool
}

var (
	_ IDSink      = (*JetStreamSink)(nil)
	_ BarrierSink = (*JetStreamSink)(nil)
)

// jsPublishTimeout bounds the wait for one publish acknowledgement.
const jsPublishTimeout = 30 * time.Second

// NewJetStreamSink connects with cfg (cfg.Stream and cfg.Subject are not
// used) and publishes to subject, which stream must capture.
func NewJetStreamSink(cfg NATSConfig, stream, subject string) (*JetStreamSink, error) {
	name := "jetstream sink " + stream + "/" + subject
	if stream == "" || subject == "" || strings.ContainsAny(subject, " \t\r\n*>") {
		return nil, fmt.Errorf("%s: need a stream and a subject without white space or wildcards", name)
	}
	cfg = cfg.withDefaults()
	nc, err := natsConnect(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &JetStreamSink{nc: nc, stream: stream, subject: subject, name: name,
		inflight: make([]jetstream.PubAckFuture, cfg.PublishWindow)}
	fail := func(err error) (*JetStreamSink, error) {
		_ = nc.close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.js, err = jetstream.New(nc.Conn,
		jetstream.WithPublishAsyncMaxPending(cfg.PublishWindow+1),
		jetstream.WithPublishAsyncTimeout(jsPublishTimeout))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsCloseWait)
	defer cancel()
	if _, err := s.js.Stream(ctx, stream); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fail(fmt.Errorf("stream %q not found: create it with `streamlearn publish --create-stream --url %s --stream %s --subject %s FILE`, or `nats stream add %s --subjects %s`",
				stream, cfg.redactedURL(), stream, subject, stream, subject))
		}
		return fail(err)
	}
	return s, nil
}

// Check asks the server whether the sink's stream captures its subject: a
// publish to a subject no stream captures fails (NewJetStreamSink checked
// that the stream exists). A run checks its sinks before it opens its
// source.
func (s *JetStreamSink) Check(ctx context.Context) error {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	subjects := info.Config.Subjects
	if len(subjects) == 0 {
		return nil // a mirror or a stream of sources: the server says at the first publish
	}
	for _, f := range subjects {
		if subjectMatches(f, s.subject) {
			return nil
		}
	}
	return fmt.Errorf("%s: stream %q does not capture subject %q (its subjects: %s): publish to one of them, or add it with `nats stream edit %s --subjects %s`",
		s.name, s.stream, s.subject, strings.Join(subjects, ", "), s.stream, strings.Join(append(slices.Clone(subjects), s.subject), ","))
}

// Publish sends a copy of value (the client keeps it for retries until
// the server acknowledges it).
func (s *JetStreamSink) Publish(ctx context.Context, _, value []byte) error {
	return s.PublishID(ctx, "", nil, value)
}

// PublishID is Publish with the message's identity, sent as Nats-Msg-Id
// (none when id is empty): the stream drops a message whose id it stored
// within its duplicate window.
func (s *JetStreamSink) PublishID(ctx context.Context, id string, _, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.n == len(s.inflight) && !s.closed {
		s.mu.Unlock()
		err := s.collect(ctx)
		s.mu.Lock()
		if err != nil {
			return err
		}
	}
	if s.closed {
		return fmt.Errorf("%s: publish: closed", s.name)
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	f, err := s.js.PublishAsync(s.subject, bytes.Clone(value), opts...)
	if err != nil {
		return fmt.Errorf("%s: publish: %w", s.name, err)
	}
	s.inflight[(s.head+s.n)%len(s.inflight)] = f
	s.n++
	s.published++
	return nil
}

// collect waits for the oldest acknowledgement, if any, and keeps its
// failure for the Flush or wait that covers it; it returns ctx's error
// only.
func (s *JetStreamSink) collect(ctx context.Context) error {
	s.collecting.Lock()
	defer s.collecting.Unlock()
	s.mu.Lock()
	if s.n == 0 {
		s.mu.Unlock()
		return nil
	}
	f := s.inflight[s.head]
	s.mu.Unlock()
	var err error
	select {
	case ack := <-f.Ok():
		if ack.Stream != s.stream {
			err = fmt.Errorf("%s: published into stream %q, not %q", s.name, ack.Stream, s.stream)
		}
	case perr := <-f.Err():
		err = fmt.Errorf("%s: publish: %w", s.name, perr)
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for an ack: %w", s.name, ctx.Err())
	}
	s.mu.Lock()
	s.inflight[s.head] = nil
	s.head = (s.head + 1) % len(s.inflight)
	s.n--
	if err != nil {
		s.failed.add(s.acked, err)
	}
	s.acked++
	s.mu.Unlock()
	return nil
}

// Flush waits for the acknowledgement of everything published so far and
// returns (and forgets) their failures not reported yet.
func (s *JetStreamSink) Flush(ctx context.Context) error { return s.Barrier()(ctx) }

// Barrier returns a function that waits for the acknowledgement of
// everything published before the call, while later messages are
// published, and returns (and forgets) the failures among them not
// reported yet: not those of later messages, which are the next wait's
// (BarrierSink).
func (s *JetStreamSink) Barrier() func(context.Context) error {
	s.mu.Lock()
	target := s.published
	s.mu.Unlock()
	return func(ctx context.Context) error {
		for {
			s.mu.Lock()
			if s.acked >= target {
				err := s.failed.before(target)
				s.mu.Unlock()
				return err
			}
			s.mu.Unlock()
			if err := s.collect(ctx); err != nil {
				return err
			}
		}
	}
}

// Close flushes (waiting at most 30s) and closes the connection.
func (s *JetStreamSink) Close() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsPublishTimeout)
	defer cancel()
	err := s.Flush(ctx)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return errors.Join(err, s.nc.close())
}

// jsWaiter is what JetStreamSource.Fetch waits for a message under: a
// context done when the caller's context is or when the wait has lasted
// its limit d (FetchWait). A context.WithTimeout per record costs four
// allocations and a timer started and stopped per record; here the context
// is derived once per caller context (told apart by its Done channel) and
// again only after a wait expired.
//
// Nor does a wait read the clock or take a lock: begin and end each add one
// to a count of wait edges in st (odd while a wait is in progress), and one
// timer, ticking every d/16 while it is armed, looks at the count. A wait
// it sees in progress under the same count for d since it first saw it (or
// since begin armed the timer for it) expires: a wait expires after d and
// at most a tick more. A tick that finds no wait in progress lets the
// timer rest until the next begin arms it again, so a source whose caller
// does not fetch costs no wake-ups, and a flowing one at most 16 per d.
//
// begin and end are called by Fetch's goroutine, fire by the timer's.
type jsWaiter struct {
	// st: jsWaitArmed, jsWaitExpired and, from jsWaitOne up, the count of
	// begins and ends. Only fire sets the two flags and only under the
	// count it saw; begin clears them, under mu.
	st atomic.Uint64

	// Fetch's goroutine only.
	opts   []jetstream.NextOpt // NextContext(ctx); nil before the first wait
	parent <-chan struct{}     // Done of the caller's context ctx derives from

	mu      sync.Mutex
	ctx     context.Context // derived from the caller's
	cancel  context.CancelFunc
	timer   *time.Timer
	d, tick time.Duration
	seen    uint64    // the count of the wait fire watches
	seenAt  time.Time // when that wait was first seen (at most when it began)
	stopped bool
}

const (
	jsWaitArmed   uint64 = 1 << iota // the timer will call fire
	jsWaitExpired                    // fire cancelled ctx: the wait expired
	jsWaitOne                        // the count's unit; its bit is set while waiting
)

// begin starts a wait of at most d under parent and returns the options
// that make MessagesContext.Next honour it.
func (w *jsWaiter) begin(parent context.Context, d time.Duration) []jetstream.NextOpt {
	done := parent.Done()
	if w.opts == nil || done != w.parent || d != w.d || w.st.Load()&jsWaitExpired != 0 {
		w.renew(parent, done, d)
	}
	if s := w.st.Add(jsWaitOne); s&jsWaitArmed == 0 {
		w.arm(s)
	}
	return w.opts
}

// end ends the wait begin started and reports whether it expired.
func (w *jsWaiter) end() bool {
	return w.st.Add(jsWaitOne)&jsWaitExpired != 0
}

// renew derives a new context from parent, for waits of at most d, and
// clears the expiry of the last wait. No wait is in progress.
func (w *jsWaiter) renew(parent context.Context, done <-chan struct{}, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
	w.ctx, w.cancel = context.WithCancel(parent)
	w.opts = append(w.opts[:0], jetstream.NextContext(w.ctx))
	w.parent = done
	w.d, w.tick = d, max(d/16, time.Microsecond)
	w.st.And(^jsWaitExpired)
}

// arm starts the timer for the wait begin started, st s, while the timer
// rests: fire is not pending and does not run.
func (w *jsWaiter) arm(s uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.st.Or(jsWaitArmed)
	w.seen, w.seenAt = s&^(jsWaitArmed|jsWaitExpired), time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(w.tick, w.fire)
	} else {
		w.timer.Reset(w.tick)
	}
}

// fire runs on the timer: it expires the wait in progress once it has
// been seen for d, ticks on while a wait is in progress, and otherwise lets
// the timer rest until the next begin.
func (w *jsWaiter) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	now := time.Now()
	for {
		s := w.st.Load()
		count := s &^ (jsWaitArmed | jsWaitExpired)
		switch {
		case s&jsWaitOne == 0: // between waits
			if w.st.CompareAndSwap(s, s&^jsWaitArmed) {
				return
			}
		case count != w.seen: // a wait begun since the last look
			w.seen, w.seenAt = count, now
			w.timer.Reset(w.tick)
			return
		case now.Sub(w.seenAt) < w.d:
			w.timer.Reset(min(w.tick, w.d-now.Sub(w.seenAt)))
			return
		default: // the same wait for d: expire it, unless it just ended
			if w.st.CompareAndSwap(s, (s|jsWaitExpired)&^jsWaitArmed) {
				w.cancel()
				return
			}
		}
	}
}

// stop releases the timer and the derived context.
func (w *jsWaiter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.cancel != nil {
		w.cancel()
	}
}
