package connectors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// open creates or updates the durable (consumerConfig), has it deliver
// again what an earlier run left unacknowledged (redeliver), and sets the
// source's position, lag, end and message iterator from it. A later call,
// after the first succeeded, is a reopen.
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
	ccfg, err := s.consumerConfig(ctx, js, stream)
	if err != nil {
		return err
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
	if info, floor, err = s.redeliver(ctx, stream, ccfg, info, floor, first); err != nil {
		return err
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

// consumerConfig returns the configuration open creates or updates the
// durable with: a durable that exists keeps its start (and the mark of it
// in its description); one not there yet is created at cfg.Start on the
// first open, and on a reopen where this source left it. It sets startSeq
// when the durable has a start; the consumer itself is left to the
// caller.
func (s *JetStreamSource) consumerConfig(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream) (jetstream.ConsumerConfig, error) {
	cfg := s.cfg
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
			return ccfg, fmt.Errorf("consumer: start %s: %w", cfg.Start, err)
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
		return ccfg, fmt.Errorf("consumer: %w", err)
	}
	return ccfg, nil
}

// redeliver makes the durable deliver again, from its ack floor, what an
// earlier run was delivered but did not acknowledge: it resets the consumer
// (nats-server 2.14 on) or creates it again at floor+1, first at the
// earliest (older servers). It returns the consumer's info and ack floor
// after, the same as given when nothing waited; s.cons is the consumer
// to read from.
func (s *JetStreamSource) redeliver(ctx context.Context, stream jetstream.Stream, ccfg jetstream.ConsumerConfig, info *jetstream.ConsumerInfo, floor, first uint64) (*jetstream.ConsumerInfo, uint64, error) {
	cfg := s.cfg
	var err error
	// Delivered but not acknowledged by an earlier run: deliver again, from
	// the ack floor and in order. The state the reset leaves is checked;
	// when it is not the floor the info said (an info older than the
	// consumer's state: seen once in CI when a test rewound the durable
	// just before), the info is read again and the reset retried.
	for try := 1; info.Delivered.Stream > floor; try++ {
		delivered := info.Delivered.Stream
		if jsServerAtLeast(s.nc.ConnectedServerVersion(), 2, 14) {
			if _, err := stream.ResetConsumer(ctx, cfg.Durable); err != nil {
				return nil, 0, fmt.Errorf("consumer: reset to ack floor %d for redelivery of %d..%d: %w",
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
			return nil, 0, fmt.Errorf("consumer: %w", err)
		}
		f := jsAckFloor(info)
		if f == floor && info.Delivered.Stream == floor {
			break
		}
		if try == 3 {
			return nil, 0, fmt.Errorf("consumer: after the reset to ack floor %d: ack floor %d, delivered %d", floor, f, info.Delivered.Stream)
		}
		floor = f
	}
	return info, floor, nil
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
	return s.rereadMessages(ctx, stream, partition, from, through, fn, fail)
}

// rereadMessages is Reread's read, once stream was checked to hold every
// message of the subject from sequence from on: it calls fn with each
// message of the subject from from through through, with an ordered
// consumer it stops on return. It returns fn's error as it is, a
// *NotRetainedError when a message was removed while it read, and others
// wrapped by fail.
func (s *JetStreamSource) rereadMessages(ctx context.Context, stream jetstream.Stream, partition int32, from, through int64, fn func(*Record) error, fail func(error) error) error {
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
