package connectors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

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
