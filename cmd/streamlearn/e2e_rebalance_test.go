package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/testmode"
)

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// TestE2EKafkaKillDuringRebalance: members of one Kafka group sharing one
// Object Store bucket for their checkpoints (on Debian's nats-server), one
// of them SIGKILLed while the group rebalances. Per repetition: members A
// and B start on a 4-partition topic holding the whole stream; at a
// random moment C starts, which makes the group rebalance, and A is
// killed a random 0–400ms later: before, during or after the rebalance,
// holding partitions, a checkpoint write or an ownership lease. B and C
// must then learn the rest: A's partitions come to them once its session
// expires, through its checkpoints in the bucket, once its leases expire.
// When the group has committed every record, B and C are stopped, and
// `run --until-end` of the same group restores every partition from the
// bucket, with nothing left to read: each partition's model must equal a
// replay of that partition (digests, rounds, mistakes, loss, regret).
// One repetition (STREAMLEARN_FULL=1: three, each at other random
// moments).
func TestE2EKafkaKillDuringRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sl, kfakeBin := e2eBuild(t)
	natsBin := e2eTool(t, "nats-server", "nats-server", "/usr/sbin", "/usr/local/sbin")
	const parts = 4
	reps := testmode.Reps(1, 3) // each about 15 s under -race
	n := 100000
	if raceEnabled() {
		n = 20000
	}
	ctx, dir := e2eStart(t, time.Duration(2*reps)*e2eTimeout)
	bootstrap := startKfake(t, ctx, dir, kfakeBin, parts)
	url, _ := natsServer(t, ctx, natsBin, dir)
	source := func(group string) string {
		return fmt.Sprintf("source: {kind: kafka, brokers: [%q], topic: events, group: %s, session_timeout: 2s, rebalance_timeout: 1s, heartbeat_interval: 200ms, request_timeout: 2s, join_group_backoff: 250ms}\n",
			bootstrap, group)
	}
	want := publishKeyed(t, ctx, dir, sl, e2eConfig(t, dir, "publish.yaml", source("publish")), n, parts)
	client := &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 5 * time.Second}

	r := rand.New(rand.NewPCG(33, 1))
	for rep := range reps {
		group := fmt.Sprintf("rebalance-%d", rep)
		cfg := e2eConfig(t, dir, group+".yaml", source(group)+
			fmt.Sprintf("checkpoint: {bucket: STATE%d, url: %q, every: 2000, lease: 3s}\n", rep, url))
		member := func() *proc {
			p, _ := start(t, ctx, dir, false, sl, "run", "-c", cfg, "--http", "off", "--log-level", "debug")
			return p
		}
		a, b := member(), member()
		joinAfter := time.Duration(200+r.IntN(1200)) * time.Millisecond
		killAfter := time.Duration(r.IntN(400)) * time.Millisecond
		what := fmt.Sprintf("repetition %d (C after %v, A killed %v later)", rep, joinAfter, killAfter)
		time.Sleep(joinAfter)
		c := member()
		time.Sleep(killAfter)
		select {
		case <-a.done:
			t.Fatalf("%s: member A exited before its kill: %v\nstderr:\n%s", what, a.err, a.stderr.String())
		default:
		}
		if waited := notParkedInJoin(t, a); waited > 0 {
			what += fmt.Sprintf(" (after its JoinGroup's answer, %v later)", waited.Round(time.Millisecond))
		}
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-a.done
		killed := time.Now()
		// A member that exits, or a group that has not committed every
		// record two minutes after the kill (it takes about 15 s), fails
		// with what B and C logged.
		waitFor(t, ctx, what+": the group to commit every record", func() bool {
			for i, p := range []*proc{b, c} {
				select {
				case <-p.done:
					t.Fatalf("%s: member %c exited: %v\nstderr:\n%s", what, "BC"[i], p.err, tail(p.stderr.String(), 200))
				default:
				}
			}
			if time.Since(killed) > 2*time.Minute {
				t.Fatalf("%s: the group has not committed every record %v after the kill\nB's stderr:\n%s\nC's stderr:\n%s",
					what, time.Since(killed).Round(time.Second), tail(b.stderr.String(), 200), tail(c.stderr.String(), 200))
			}
			resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{"events": {0, 1, 2, 3}}})
			if err != nil {
				return false
			}
			var sum int64
			for _, p := range resp.Topics["events"] {
				sum += max(p.CommittedOffset, 0)
			}
			return sum == int64(n)
		})
		commitAfter := time.Since(killed)
		for _, p := range []*proc{b, c} {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
		for i, p := range []*proc{b, c} {
			p.waitExit(t, ctx)
			if p.err != nil {
				t.Fatalf("%s: member %c: %v\nstderr:\n%s", what, "BC"[i], p.err, p.stderr.String())
			}
		}
		final := runProc(t, ctx, dir, sl, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
		var got []int32
		for line := range bytes.Lines(final) {
			var rep struct {
				Partition int32 `json:"partition"`
			}
			if err := json.Unmarshal(line, &rep); err != nil {
				t.Fatalf("%s: run printed %q: %v", what, line, err)
			}
			got = append(got, rep.Partition)
			w := want[rep.Partition]
			sameReport(t, fmt.Sprintf("%s: partition %d", what, rep.Partition), normReport(t, "run", line, "", w.events), w.report)
		}
		slices.Sort(got)
		if !slices.Equal(got, []int32{0, 1, 2, 3}) {
			t.Errorf("%s: run --until-end reported partitions %v, want all four", what, got)
		}
		t.Logf("%s: every record committed %v after the kill (A's session, then its leases, expire); every model exact",
			what, commitAfter.Round(time.Millisecond))
	}
}

// notParkedInJoin waits (up to 10 s) until member p is not waiting for the
// answer to a JoinGroup, and returns how long it waited. kfake (the test
// broker) has no session timer on a member whose JoinGroup waits for the
// rebalance: it stops the pending timer when the join with the member id
// comes (kfake groups.go, addMemberAndRebalance → stopPending) and arms
// one again only when the answer is delivered (groups.go, reply: the timer
// is armed after creq.reply succeeds, and a dead connection's reply
// fails at random, client_conn.go). A member killed then stays in the
// group for good, and its partitions are never given to another member.
// Apache Kafka's coordinator expires such a member after its session
// timeout; what this test checks is the service, so it kills A at any
// other moment of the rebalance (after the answer, before or during its
// SyncGroup, while it fetches, commits or checkpoints).
func notParkedInJoin(t *testing.T, p *proc) time.Duration {
	t.Helper()
	parked := func() bool {
		log := p.stderr.String()
		joined := strings.LastIndex(log, "joinGroup succeeded for response")
		return joined < 0 || strings.LastIndex(log, "stopped heartbeat for group") > joined
	}
	start := time.Now()
	for parked() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("member A waited 10 s for a JoinGroup answer:\n%s", tail(p.stderr.String(), 50))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}
