package connectors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
