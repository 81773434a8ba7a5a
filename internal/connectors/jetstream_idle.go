package connectors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
