package connectors

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/segmentio/kafka-go"
)

// kafkaGen is one generation of the group as this member saw it.
type kafkaGen struct {
	g     *kafka.Generation
	owned []int          // sorted partition ids
	epoch map[int]uint64 // per owned partition: its epoch (Record.Epoch)
	// probed: the group formed this generation in a rebalance this member
	// asked for after it had read its share, so every other member in it
	// rejoined since, alive. probe, closed, ends the generation to ask.
	probed bool
	probe  chan struct{}
	asked  bool // probe is closed
}

func (g *kafkaGen) owns(p int) bool {
	_, ok := slices.BinarySearch(g.owned, p)
	return ok
}

// probeBalancer is one of kafka-go's group balancers whose member metadata
// carries the number of rebalances this source asked for. A member that
// rejoins with changed metadata makes the coordinator rebalance even when
// it is not the group's leader (a leader's rejoin always does); the
// assignment ignores the number, so members of earlier builds, which send
// none, assign alike.
//
// It also sorts the partitions before assigning them: kafka-go's balancers
// take them in the order of the broker's metadata response, which brokers
// need not keep (kfake does not), so that a rebalance among the same
// members could swap partitions between them. Sorted, the same members
// get the same partitions, and asking for a rebalance moves none.
type probeBalancer struct {
	kafka.GroupBalancer
	probes *atomic.Uint64
}

func (b probeBalancer) UserData() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, b.probes.Load()), nil
}

func (b probeBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	partitions = slices.Clone(partitions)
	slices.SortFunc(partitions, func(x, y kafka.Partition) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.ID, y.ID))
	})
	return b.GroupBalancer.AssignGroups(members, partitions)
}

// run follows the group's generations until the source closes.
func (s *KafkaSource) run(ctx context.Context) {
	for {
		g, err := s.group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			if kafkaFatal(err) {
				s.fail(fmt.Errorf("kafka source %s: group %s: %w", s.name, s.cfg.Group, err))
			}
			continue // kafka-go backs off before the next join
		}
		s.startGeneration(g)
	}
}

// startGeneration installs g and starts one fetcher per assigned partition.
// kafka-go returns a generation only after every function started in the
// previous one has returned, so no fetcher of an older generation runs.
func (s *KafkaSource) startGeneration(g *kafka.Generation) {
	assigned := g.Assignments[s.cfg.Topic]
	kg := &kafkaGen{g: g, owned: make([]int, 0, len(assigned)), epoch: make(map[int]uint64, len(assigned)), probe: make(chan struct{})}
	starts := make(map[int]int64, len(assigned))
	s.mu.Lock()
	kg.probed, s.probing = s.probing, false
	prev := s.lastGen
	s.lastGen = kg
	for _, a := range assigned {
		p, start := a.ID, a.Offset
		kg.owned = append(kg.owned, p)
		// A partition continues only when this member owned it in the
		// generation just before; otherwise another member may have had
		// it: a new epoch, read from the group's committed offset.
		continues := prev != nil && g.ID == prev.g.ID+1 && prev.owns(p)
		if continues {
			kg.epoch[p] = prev.epoch[p]
		} else {
			s.epochs++
			kg.epoch[p] = s.epochs
			delete(s.next, p)
		}
		switch start {
		case kafka.FirstOffset: // the group committed nothing for p
			start = s.first[p]
			if st, ok := s.starts[p]; ok {
				start = st
			}
			if s.start.Kind == StartOffset && start != s.start.Offset && !continues {
				s.cfg.Logger.Warn("the start offset is outside the partition's log: starting at its nearest end",
					"source", s.name, "partition", p, "start", s.start.Offset, "log_start", s.first[p], "log_end", s.end[p], "offset", start)
			}
		case kafka.LastOffset:
			start = s.end[p]
		default:
			s.committed[p] = start
			if s.start.Kind != StartEarliest && !continues {
				level := slog.LevelInfo
				if !s.startWarned { // once a process: a start kept in the config applies to new partitions
					level, s.startWarned = slog.LevelWarn, true
				}
				s.cfg.Logger.Log(context.Background(), level, "partition resumes from its group's committed offset: the start applies to a partition without one",
					"source", s.name, "partition", p, "offset", start, "start", s.start)
			}
		}
		// A partition this process delivered further than the group's
		// committed offset resumes after what it delivered.
		if n, ok := s.next[p]; ok && n > start {
			start = n
		}
		s.next[p] = start
		starts[p] = start
	}
	slices.Sort(kg.owned)
	// What this member reads from now on, each generation: the one line
	// at info an operator needs to see who owns what.
	s.cfg.Logger.Info("partitions assigned", "source", s.name, "group", s.cfg.Group, "generation", g.ID, "partitions", kg.owned)
	s.setGenLocked(kg)
	s.mu.Unlock()

	s.kafkaStart(g, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-kg.probe: // returning ends the generation: kafka-go rejoins
		}
		s.mu.Lock()
		if s.gen == kg {
			s.setGenLocked(nil)
		}
		s.mu.Unlock()
	})
	for _, p := range kg.owned {
		start := starts[p]
		end, ok := s.end[p]
		if s.untilEnd && (!ok || start >= end) {
			continue // nothing to read up to the end at open
		}
		s.kafkaStart(g, func(ctx context.Context) { s.fetchPartition(ctx, kg, p, start, end) })
	}
}

// kafkaStart runs fn within generation g and counts it in s.wg, so that
// Close waits for it even when g had already ended (kafka-go then runs fn
// without tracking it).
func (s *KafkaSource) kafkaStart(g *kafka.Generation, fn func(ctx context.Context)) {
	s.wg.Add(1)
	g.Start(func(ctx context.Context) {
		defer s.wg.Done()
		fn(ctx)
	})
}

// setGenLocked replaces the live generation and wakes Fetch and Commit.
func (s *KafkaSource) setGenLocked(kg *kafkaGen) {
	s.gen = kg
	close(s.wake)
	s.wake = make(chan struct{})
}

// kafkaGenerationError reports whether err says the generation a commit was
// sent with is over (or its connection is), so that the commit belongs to
// the next generation.
func kafkaGenerationError(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.RebalanceInProgress, kafka.IllegalGeneration, kafka.UnknownMemberId,
			kafka.NotCoordinatorForGroup, kafka.GroupCoordinatorNotAvailable, kafka.GroupLoadInProgress:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, kafka.ErrGenerationEnded)
}
