package connectors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

func TestParseStart(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want Start
		err  string
	}{
		{"", Start{}, ""},
		{"earliest", Start{}, ""},
		{"LATEST", Start{Kind: StartLatest}, ""},
		{"offset:0", Start{Kind: StartOffset}, ""},
		{"offset:1234", Start{Kind: StartOffset, Offset: 1234}, ""},
		{"time:2026-11-26T08:00:00Z", Start{Kind: StartTime, Time: at}, ""},
		{"time:2026-11-26T09:00:00+01:00", Start{Kind: StartTime, Time: at}, ""},
		{"offset:-1", Start{}, "whole number ≥ 0"},
		{"offset:", Start{}, "whole number ≥ 0"},
		{"offset:1e3", Start{}, "whole number ≥ 0"},
		{"time:yesterday", Start{}, "RFC 3339"},
		{"latest:5", Start{}, "want earliest, latest"},
		{"middle", Start{}, "want earliest, latest"},
	} {
		got, err := ParseStart(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseStart(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got.Kind != c.want.Kind || got.Offset != c.want.Offset || !got.Time.Equal(c.want.Time) {
			t.Errorf("ParseStart(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if back, err := ParseStart(got.String()); err != nil || back.Kind != got.Kind || back.Offset != got.Offset || !back.Time.Equal(got.Time) {
			t.Errorf("ParseStart(%q).String() = %q does not parse back: %+v, %v", c.in, got.String(), back, err)
		}
	}
}

// kafkaProduceAt writes, to each of partitions, records 0..n-1 stamped
// base + i seconds.
func kafkaProduceAt(t *testing.T, cfg KafkaConfig, partitions, n int, base time.Time) {
	t.Helper()
	tr, err := cfg.transport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.Topic, Transport: tr, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }), RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for p := range partitions {
		for i := range n {
			v, _ := json.Marshal(kafkaTestEvent{ID: fmt.Sprintf("p%d-%d", p, i), P: p, I: i})
			msgs = append(msgs, kafka.Message{Partition: p, Value: v, Time: base.Add(time.Duration(i) * time.Second)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// firstOffsets returns, per partition, the offset of the first record of
// recs and how many there are.
func firstOffsets(recs []Record) (first map[int32]int64, n map[int32]int) {
	first, n = map[int32]int64{}, map[int32]int{}
	for _, r := range recs {
		if _, ok := first[r.Partition]; !ok {
			first[r.Partition] = r.Offset
		}
		n[r.Partition]++
	}
	return first, n
}

// TestKafkaStart: a group that committed nothing begins each partition
// where StartOffset says — the first record, after the last, at an offset
// (moved into the log when outside it), at the first record stamped at or
// after a time — and, once it committed, resumes from its commit whatever
// StartOffset says.
func TestKafkaStart(t *testing.T) {
	const partitions, n = 3, 10
	base := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	cfg := kafkaTestConfig(kafkaTestCluster(t, 1, partitions, []string{"events"}), "events", "")
	kafkaProduceAt(t, cfg, partitions, n, base)
	for i, c := range []struct {
		start string
		first int64 // on every partition; n: nothing read
	}{
		{"earliest", 0},
		{"latest", n},
		{"offset:4", 4},
		{"offset:0", 0},
		{"offset:99", n},
		{"time:2026-11-26T08:00:06Z", 6},
		{"time:2026-11-26T08:00:05.5Z", 6},
		{"time:2026-11-26T07:00:00Z", 0},
		{"time:2026-11-26T09:00:00Z", n},
		{"time:2026-11-26T08:00:04.0005Z", 5}, // records are stamped in whole milliseconds
		{"time:1969-12-31T23:59:59.998Z", 0},  // -2 ms, Kafka's "earliest" when sent
		{"time:1960-01-01T00:00:00Z", 0},
	} {
		t.Run(c.start, func(t *testing.T) {
			cfg := cfg
			cfg.Group, cfg.StartOffset = fmt.Sprintf("g%d", i), c.start
			recs := drainSource(t, kafkaOpen(t, cfg, true), 0)
			first, count := firstOffsets(recs)
			for p := range int32(partitions) {
				if want := int(n - c.first); count[p] != want {
					t.Errorf("partition %d: %d records, want %d", p, count[p], want)
				}
				if c.first < n && first[p] != c.first {
					t.Errorf("partition %d: first offset %d, want %d", p, first[p], c.first)
				}
			}
		})
	}

	// A group with a commit resumes from it: the start is a first start's.
	cfg.Group, cfg.StartOffset = "resume", "offset:2"
	s := kafkaOpen(t, cfg, true)
	recs := drainSource(t, s, 0)
	if len(recs) != partitions*(n-2) {
		t.Fatalf("%d records, want %d", len(recs), partitions*(n-2))
	}
	ctx := t.Context()
	var mid []Record
	for _, r := range recs {
		if r.Offset == 5 {
			mid = append(mid, r)
		}
	}
	for _, err := range s.CommitMany(ctx, mid) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	for _, start := range []string{"offset:2", "earliest", "latest"} {
		cfg.StartOffset = start
		s := kafkaOpen(t, cfg, true)
		first, count := firstOffsets(drainSource(t, s, 0))
		for p := range int32(partitions) {
			if first[p] != 6 || count[p] != n-6 {
				t.Errorf("start %s after a commit at offset 5: partition %d read from %d (%d records), want from 6", start, p, first[p], count[p])
			}
			if pos, _ := s.Position(p); pos.Committed != 5 {
				t.Errorf("start %s: partition %d committed %d, want 5", start, p, pos.Committed)
			}
		}
		s.Close()
	}

	cfg.StartOffset = "offset:x"
	if _, err := NewKafkaSource(ctx, cfg, true); err == nil || !strings.Contains(err.Error(), "start") {
		t.Errorf("start_offset offset:x: %v, want an error naming the start", err)
	}
}

// TestJetStreamStart: a durable created by the source begins where Start
// says; until it acknowledges something its position says nothing was
// committed (a model restored at its first start, without a checkpoint,
// is right), and after a commit it resumes from it whatever Start says.
func TestJetStreamStart(t *testing.T) {
	url := jsTestServer(t, 10) // sequences 1..10
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	jsPublish(t, url, "events", 10, 15) // sequences 11..15
	ctx := t.Context()
	open := func(t *testing.T, durable, start string) *JetStreamSource {
		t.Helper()
		s, err := NewJetStreamSource(ctx, NATSConfig{URL: url, Durable: durable, Start: start, JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	for i, c := range []struct {
		start string
		first int64 // 16: nothing read
	}{
		{"earliest", 1},
		{"latest", 16},
		{"offset:4", 4},
		{"offset:0", 1},
		{"offset:99", 16},
		{"time:" + mid.Format(time.RFC3339Nano), 11},
		{"time:2000-01-01T00:00:00Z", 1},
		{"time:" + time.Now().Add(time.Hour).Format(time.RFC3339), 16},
	} {
		t.Run(c.start, func(t *testing.T) {
			s := open(t, fmt.Sprintf("d%d", i), c.start)
			if pos, _ := s.Position(0); pos.Committed != -1 {
				t.Errorf("a new durable's position says %d was committed", pos.Committed)
			}
			recs := drainSource(t, s, 0)
			if len(recs) != int(16-c.first) || len(recs) > 0 && recs[0].Offset != c.first {
				t.Fatalf("%d records from %v, want %d from %d", len(recs), recs[:min(1, len(recs))], 16-c.first, c.first)
			}
			// Reopened before any commit (a crash before the first
			// one): still nothing committed, and the same records.
			s.Close()
			s = open(t, fmt.Sprintf("d%d", i), "earliest")
			if pos, _ := s.Position(0); pos.Committed != -1 {
				t.Errorf("reopened before a commit: position says %d was committed", pos.Committed)
			}
			again := drainSource(t, s, 0)
			if len(again) != len(recs) {
				t.Fatalf("reopened before a commit: %d records, want %d", len(again), len(recs))
			}
			if len(recs) < 2 {
				return
			}
			// After a commit: resumes from it, and the commit is one.
			if err := s.Commit(ctx, again[0]); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s = open(t, fmt.Sprintf("d%d", i), "latest")
			if pos, _ := s.Position(0); pos.Committed != c.first {
				t.Errorf("after a commit of %d: position says %d", c.first, pos.Committed)
			}
			if rest := drainSource(t, s, 0); len(rest) != len(recs)-1 || rest[0].Offset != c.first+1 {
				t.Errorf("after a commit of %d: %d records, want %d from %d", c.first, len(rest), len(recs)-1, c.first+1)
			}
		})
	}
}

// TestJetStreamStartReopen: a durable deleted while the source reads it
// is created again where the source stands, not at the start again (which
// would skip what was published meanwhile).
func TestJetStreamStartReopen(t *testing.T) {
	url := jsTestServer(t, 10)
	ctx := t.Context()
	s, err := NewJetStreamSource(ctx, NATSConfig{URL: url, Start: "latest", JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jsPublish(t, url, "events", 10, 12) // sequences 11, 12
	natsFetchN(t, s, 2, 10)
	_, js := jsTestClient(t, url)
	if err := js.DeleteConsumer(ctx, "EVENTS", DefaultJetStreamDurable); err != nil {
		t.Fatal(err)
	}
	jsPublish(t, url, "events", 12, 20) // sequences 13..20
	if err := s.reopen(ctx); err != nil {
		t.Fatal(err)
	}
	natsFetchN(t, s, 8, 12)
}
