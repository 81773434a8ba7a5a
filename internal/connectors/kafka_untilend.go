package connectors

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// Where a source opened with untilEnd stands (untilEndLocked).
const (
	endReading   = iota // records of owned partitions are still to come
	endProbe            // own share read, others hold the rest: ask for a rebalance
	endWait             // waiting for the rebalance asked for
	endDone             // the end: ErrEndOfInput
	endEmpty            // settled, and this member owns no partition
	endUnsettled        // waited too long for the group to settle
)

// untilEndLocked says where a source opened with untilEnd stands and, for
// endWait, until when it waits at most.
func (s *KafkaSource) untilEndLocked() (state int, until time.Time) {
	if s.gen != nil && !s.shareReadLocked() {
		s.waitSince = time.Time{}
		return endReading, time.Time{}
	}
	if s.gen == nil && s.waitSince.IsZero() {
		return endReading, time.Time{} // a rebalance while reading
	}
	now := time.Now()
	if s.waitSince.IsZero() {
		s.waitSince = now
	}
	if s.gen != nil {
		switch {
		case len(s.gen.owned) == len(s.end):
			return endDone, time.Time{} // the whole topic
		case s.gen.asked:
			// The generation ends: wait for the next one.
		case !s.gen.probed:
			return endProbe, time.Time{}
		case len(s.gen.owned) == 0 && !s.cfg.AllowEmpty:
			return endEmpty, time.Time{}
		default:
			return endDone, time.Time{}
		}
	}
	giveUp := s.waitSince.Add(s.cfg.settleTimeout())
	if !now.Before(giveUp) {
		return endUnsettled, time.Time{}
	}
	return endWait, giveUp
}

// shareReadLocked reports whether every partition of the live generation
// is delivered up to its end at open.
func (s *KafkaSource) shareReadLocked() bool {
	for _, p := range s.gen.owned {
		if s.next[p] < s.end[p] {
			return false
		}
	}
	return true
}

// ending returns what Fetch returns when a source opened with untilEnd ends in
// state st during generation gen (nil between generations).
func (s *KafkaSource) ending(ctx context.Context, st int, gen *kafkaGen) error {
	var owned []int
	if gen != nil {
		owned = gen.owned
	}
	if st == endDone {
		if !s.waitSince.IsZero() && len(owned) == len(s.end) {
			s.cfg.Logger.Info(fmt.Sprintf("group %s settled: this member owns every partition", s.cfg.Group),
				"source", s.name, "owned", partitionList(owned), "waited", time.Since(s.waitSince).Round(time.Millisecond))
		}
		if len(owned) < len(s.end) {
			s.cfg.Logger.Warn("ending with part of the topic: the rest is held by members that rejoined the group after this one read its share",
				"source", s.name, "group", s.cfg.Group, "owned", partitionList(owned),
				"held_by_others", s.holders(ctx, gen))
		}
		return ErrEndOfInput
	}
	if st == endEmpty {
		return fmt.Errorf("kafka source %s: group %s: %w: partitions %s are held by %s",
			s.name, s.cfg.Group, ErrNoPartitions, partitionList(s.others(owned)), s.holders(ctx, gen))
	}
	return fmt.Errorf("kafka source %s: group %s: %w within %v: this member read partitions %s to their end; partitions %s are held by %s",
		s.name, s.cfg.Group, ErrGroupUnsettled, s.cfg.settleTimeout(), partitionList(owned),
		partitionList(s.others(owned)), s.holders(ctx, gen))
}

// logProbe logs that this member, having read its share of generation gen,
// asked the group to rebalance.
func (s *KafkaSource) logProbe(ctx context.Context, gen *kafkaGen) {
	s.cfg.Logger.Warn(fmt.Sprintf("waiting for partitions %s of group %s, held by other members: asking the group to rebalance, which removes members that died without leaving",
		partitionList(s.others(gen.owned)), s.cfg.Group),
		"source", s.name, "owned_and_read", partitionList(gen.owned), "held_by", s.holders(ctx, gen),
		"gives_up_in", s.cfg.settleTimeout())
}

// others returns the topic's partitions not in owned, sorted.
func (s *KafkaSource) others(owned []int) []int {
	var out []int
	for p := range s.end {
		if !slices.Contains(owned, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// holders describes, for errors and logs, the other members of the group
// and the partitions of the topic each holds, as the coordinator reports
// them now: "2 members: streamlearn-8c1f… (host /127.0.0.1) partitions 0,1;
// …".
func (s *KafkaSource) holders(ctx context.Context, gen *kafkaGen) string {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	t, err := s.cfg.transport()
	if err != nil {
		return "unknown members (" + err.Error() + ")"
	}
	defer t.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Transport: t, Timeout: s.cfg.RequestTimeout}
	resp, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{s.cfg.Group}})
	if err == nil && len(resp.Groups) == 1 {
		err = resp.Groups[0].Error
	}
	if err != nil || len(resp.Groups) != 1 {
		return fmt.Sprintf("unknown members (describing group %s: %v)", s.cfg.Group, err)
	}
	var self string
	if gen != nil {
		self = gen.g.MemberID
	}
	var b strings.Builder
	n := 0
	for _, m := range resp.Groups[0].Members {
		if m.MemberID == self {
			continue
		}
		var parts []int
		for _, tp := range m.MemberAssignments.Topics {
			if tp.Topic == s.cfg.Topic {
				parts = append(parts, tp.Partitions...)
			}
		}
		slices.Sort(parts)
		if n > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (host %s) partitions %s", m.MemberID, m.ClientHost, partitionList(parts))
		n++
	}
	switch n {
	case 0:
		return "no other member (group " + resp.Groups[0].GroupState + ")"
	case 1:
		return "1 member: " + b.String()
	}
	return strconv.Itoa(n) + " members: " + b.String()
}

// partitionList formats partition ids as "0,1,2", or "none".
func partitionList(ps []int) string {
	if len(ps) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}
