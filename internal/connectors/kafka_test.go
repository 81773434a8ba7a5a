package connectors

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// kafkaTestCluster starts an in-process Kafka cluster (franz-go's kfake,
// speaking the real wire protocol) with the given topics seeded, and
// returns its broker addresses. Group session timeouts down to 100ms are
// allowed, so tests need not wait kfake's default 6s minimum.
func kafkaTestCluster(t testing.TB, brokers int, partitions int32, topics []string, opts ...kfake.Opt) []string {
	t.Helper()
	opts = append([]kfake.Opt{
		kfake.NumBrokers(brokers),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.SeedTopics(partitions, topics...),
	}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// kafkaTestConfig lowers every wait so that a join, a rebalance or an idle
// fetch takes milliseconds rather than kafka-go's default seconds.
func kafkaTestConfig(brokers []string, topic, group string) KafkaConfig {
	return KafkaConfig{
		Brokers:    brokers,
		Topic:      topic,
		Group:      group,
		KafkaFetch: settings.KafkaFetch{MaxWait: 50 * time.Millisecond},
		KafkaGroup: settings.KafkaGroup{HeartbeatInterval: 50 * time.Millisecond, SessionTimeout: 2 * time.Second,
			RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 50 * time.Millisecond, RequestTimeout: 2 * time.Second},
		DialTimeout:   2 * time.Second,
		KafkaProduce:  settings.KafkaProduce{BatchTimeout: 2 * time.Millisecond},
		QueueCapacity: 64,
	}
}

// kafkaTestTopic starts a cluster of brokers (kafkaTestCluster) with
// topic events of partitions, produces events 0..n-1 into it
// (kafkaProduce) and returns the settings of a member of group.
func kafkaTestTopic(t testing.TB, brokers int, partitions int32, n int, group string) KafkaConfig {
	t.Helper()
	cfg := kafkaTestConfig(kafkaTestCluster(t, brokers, partitions, []string{"events"}), "events", group)
	kafkaProduce(t, cfg, int(partitions), 0, n)
	return cfg
}

type kafkaTestEvent struct {
	ID string `json:"id"`
	P  int    `json:"p"`
	I  int    `json:"i"`
}

// kafkaProduce writes events from..from+n-1 as JSON to cfg.Topic with a
// plain kafka-go Writer, event i to partition i%partitions.
func kafkaProduce(t testing.TB, cfg KafkaConfig, partitions, from, n int) {
	t.Helper()
	tr, err := cfg.transport()
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.Topic,
		Balancer:     kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }),
		BatchTimeout: time.Millisecond,
		BatchSize:    1000,
		RequiredAcks: kafka.RequireAll,
		Transport:    tr,
	}
	defer func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
		tr.CloseIdleConnections()
	}()
	msgs := make([]kafka.Message, 0, n)
	for i := from; i < from+n; i++ {
		p := i % partitions
		v, _ := json.Marshal(kafkaTestEvent{ID: fmt.Sprintf("e-%d", i), P: p, I: i})
		msgs = append(msgs, kafka.Message{Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(msgs) > 0 {
		k := min(len(msgs), 1000)
		if err := w.WriteMessages(ctx, msgs[:k]...); err != nil {
			t.Fatalf("produce: %v", err)
		}
		msgs = msgs[k:]
	}
}

func kafkaOpen(t testing.TB, cfg KafkaConfig, untilEnd bool) *KafkaSource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewKafkaSource(ctx, cfg, untilEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func kafkaDecode(t testing.TB, r Record) kafkaTestEvent {
	t.Helper()
	var e kafkaTestEvent
	if err := json.Unmarshal(r.Value, &e); err != nil {
		t.Fatalf("partition %d offset %d: %v", r.Partition, r.Offset, err)
	}
	return e
}

// drainSource fetches until ErrEndOfInput, committing every `every`
// records (0: never), and returns what it fetched (values copied).
func drainSource(t testing.TB, s Source, every int) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []Record
	for {
		r, err := s.Fetch(ctx)
		if errors.Is(err, ErrEndOfInput) {
			return out
		}
		if err != nil {
			t.Errorf("fetch after %d records: %v", len(out), err)
			return out
		}
		r.Value = slices.Clone(r.Value)
		out = append(out, r)
		if every > 0 && len(out)%every == 0 {
			if err := s.Commit(ctx, r); err != nil {
				t.Errorf("commit: %v", err)
			}
		}
	}
}

// TestKafkaSourceRecords: a source names its topic and owns the one
// partition, and each record carries its key and the partition's lag at
// its fetch: with nothing produced meanwhile, the records after it. A
// record from no Kafka source cannot be committed. (Order, offsets, times,
// the end and commits are the conformance suite's.)
func TestKafkaSourceRecords(t *testing.T) {
	const n = 120
	cfg := kafkaTestTopic(t, 1, 1, n, "g1")
	s := kafkaOpen(t, cfg, true)
	if got, want := s.Name(), "kafka:events"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	recs := drainSource(t, s, 0)
	if len(recs) != n {
		t.Fatalf("got %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("k%d", i); string(r.Key) != want {
			t.Fatalf("record %d: key %q, want %q", i, r.Key, want)
		}
		if want := int64(n - 1 - i); r.Lag != want {
			t.Fatalf("record %d: lag %d, want %d", i, r.Lag, want)
		}
	}
	if got := s.Assignments(); !slices.Equal(got, []int32{0}) {
		t.Errorf("Assignments() = %v, want [0]", got)
	}
	if err := s.Commit(context.Background(), Record{Partition: 0, Offset: 3}); err == nil {
		t.Error("Commit of a record from no Kafka source succeeded")
	}
}

// TestKafkaAssignmentLogged: at info, a member logs the partitions each
// generation assigns it (run -h says --log-level info does).
func TestKafkaAssignmentLogged(t *testing.T) {
	cfg := kafkaTestTopic(t, 1, 3, 30, "g-log")
	var logs testproc.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := kafkaOpen(t, cfg, true)
	if recs := drainSource(t, s, 0); len(recs) != 30 {
		t.Fatalf("got %d records, want 30", len(recs))
	}
	if out := logs.String(); !strings.Contains(out, `level=INFO msg="partitions assigned" source=kafka:events group=g-log generation=`) ||
		!strings.Contains(out, "partitions=\"[0 1 2]\"") {
		t.Errorf("log at info:\n%s\nwant the partitions assigned", out)
	}
}

// TestKafkaSourceEmptyTopicEndsAtOnce: a source opened to stop at the end
// of a topic whose three partitions are all empty ends at once (the
// conformance suite checks a topic of one).
func TestKafkaSourceEmptyTopicEndsAtOnce(t *testing.T) {
	brokers := kafkaTestCluster(t, 1, 3, []string{"empty"})
	s := kafkaOpen(t, kafkaTestConfig(brokers, "empty", "g"), true)
	if recs := drainSource(t, s, 0); len(recs) != 0 {
		t.Fatalf("got %d records from an empty topic", len(recs))
	}
}

// CommitMany commits a position in every partition in one request; a
// reopened group resumes after each, an earlier record does not move a
// partition back, and a record from no Kafka source gets its own error.
func TestKafkaSourceCommitMany(t *testing.T) {
	const n, partitions = 400, 4
	cfg := kafkaTestTopic(t, 1, partitions, n, "many")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := kafkaOpen(t, cfg, false)
	// Commit partition p up to its record 10·(p+1) - 1.
	want := map[int32]int64{0: 10, 1: 20, 2: 30, 3: 40}
	last := map[int32]Record{}
	for len(last) < partitions {
		r, err := s.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset == want[r.Partition]-1 {
			last[r.Partition] = r
		}
	}
	recs := []Record{last[0], last[1], last[2], last[3], {Partition: 1, Offset: 5, ack: last[1].ack}, {Partition: 2, Offset: 99}}
	errs := s.CommitMany(ctx, recs)
	for i, err := range errs {
		if (err != nil) != (i == 5) {
			t.Errorf("CommitMany: record %d (partition %d offset %d): %v", i, recs[i].Partition, recs[i].Offset, err)
		}
	}
	if errs == nil {
		t.Error("CommitMany accepted a record from no Kafka source")
	}
	if errs := s.CommitMany(ctx, recs[:4]); errs != nil {
		t.Errorf("CommitMany of committed positions: %v", errs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	first := map[int32]int64{}
	recs = drainSource(t, kafkaOpen(t, cfg, true), 0)
	for _, r := range recs {
		if _, ok := first[r.Partition]; !ok {
			first[r.Partition] = r.Offset
		}
	}
	if len(recs) != n-100 || !maps.Equal(first, want) {
		t.Errorf("after reopening: %d records, first offsets %v; want %d records from %v", len(recs), first, n-100, want)
	}
}

func TestKafkaSourceGroupSplitsPartitions(t *testing.T) {
	const n, parts = 800, 4
	cfg := kafkaTestTopic(t, 3, parts, n, "split")

	a := kafkaOpen(t, cfg, true)
	b := kafkaOpen(t, cfg, true)
	// Wait for the rebalance that gives each member two partitions, so the
	// test does not depend on which member the first generation favoured.
	deadline := time.Now().Add(15 * time.Second)
	for {
		pa, pb := a.Assignments(), b.Assignments()
		if len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == parts {
			all := slices.Sorted(slices.Values(append(pa, pb...)))
			if !slices.Equal(all, []int32{0, 1, 2, 3}) {
				t.Fatalf("assignments %v and %v overlap", pa, pb)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no split after 15s: %v and %v", pa, pb)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var wg sync.WaitGroup
	got := make([][]Record, 2)
	for i, s := range []*KafkaSource{a, b} {
		wg.Go(func() { got[i] = drainSource(t, s, 25) })
	}
	wg.Wait()

	owner := map[int32]int{}
	seen := map[int]bool{}
	for who, recs := range got {
		last := map[int32]int64{}
		for _, r := range recs {
			if o, ok := owner[r.Partition]; ok && o != who {
				t.Fatalf("partition %d delivered to both members", r.Partition)
			}
			owner[r.Partition] = who
			if l, ok := last[r.Partition]; ok && r.Offset <= l {
				t.Fatalf("member %d partition %d: offset %d after %d", who, r.Partition, r.Offset, l)
			}
			last[r.Partition] = r.Offset
			e := kafkaDecode(t, r)
			if int32(e.P) != r.Partition {
				t.Fatalf("event %d of partition %d read from partition %d", e.I, e.P, r.Partition)
			}
			if seen[e.I] {
				t.Fatalf("event %d delivered twice", e.I)
			}
			seen[e.I] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct events delivered, want %d", len(seen), n)
	}
	if len(got[0]) == 0 || len(got[1]) == 0 {
		t.Fatalf("one member got nothing: %d and %d records", len(got[0]), len(got[1]))
	}
}

// A partition that stays with a member across a rebalance resumes after
// what the member delivered, not at the group's (older) committed offset,
// and a commit for a partition the rebalance gave away is refused.
func TestKafkaSourceRebalanceKeepsPosition(t *testing.T) {
	const n, parts = 400, 2
	cfg := kafkaTestTopic(t, 1, parts, n, "keep")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := kafkaOpen(t, cfg, false)
	lastOf := map[int32]Record{}
	for len(lastOf) < parts || lastOf[0].Offset < 20 || lastOf[1].Offset < 20 { // nothing committed
		r, err := a.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lastOf[r.Partition] = r
	}
	b := kafkaOpen(t, cfg, false)
	var pa []int32
	for pa = a.Assignments(); len(pa) != 1 || len(b.Assignments()) != 1; pa = a.Assignments() {
		if ctx.Err() != nil {
			t.Fatalf("no split: %v and %v", pa, b.Assignments())
		}
		time.Sleep(10 * time.Millisecond)
	}
	kept := pa[0]
	lost := 1 - kept
	if err := a.Commit(ctx, lastOf[lost]); !errors.Is(err, ErrPartitionRevoked) {
		t.Errorf("commit of a revoked partition: %v, want ErrPartitionRevoked", err)
	}
	// 10 more events per partition, so the kept one has some left even if
	// a delivered all of it before the rebalance.
	kafkaProduce(t, cfg, parts, n, 2*10)
	var rest []Record
	for want := int(n/parts+10) - int(lastOf[kept].Offset+1); len(rest) < want; {
		r, err := a.Fetch(ctx)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(rest), want, err)
		}
		if r.Partition != kept {
			t.Fatalf("record of partition %d after the rebalance", r.Partition)
		}
		rest = append(rest, r)
	}
	if rest[0].Offset != lastOf[kept].Offset+1 {
		t.Errorf("partition %d resumed at %d, want %d", kept, rest[0].Offset, lastOf[kept].Offset+1)
	}
	if rest[0].Epoch != lastOf[kept].Epoch || rest[0].Epoch == 0 {
		t.Errorf("kept partition: epoch %d after the rebalance, %d before; want the same, not 0", rest[0].Epoch, lastOf[kept].Epoch)
	}
	if err := a.Commit(ctx, rest[len(rest)-1]); err != nil {
		t.Errorf("commit of a kept partition with a record of the new generation: %v", err)
	}

	// b learns the lost partition a little (from offset 0: nothing was
	// committed) and commits offset 4, then leaves. The partition comes
	// back to a in a new epoch, read from the group's commit, not from
	// where a had been: b had it in between.
	var br Record
	for br.Offset < 4 || br.Partition != lost {
		r, err := b.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		br = r
	}
	if err := b.Commit(ctx, br); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := a.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Partition != lost {
			continue
		}
		if r.Offset != br.Offset+1 || r.Epoch == lastOf[lost].Epoch || r.Epoch == rest[0].Epoch {
			t.Errorf("partition %d back: offset %d epoch %d; want offset %d (b's commit) and a new epoch (was %d)",
				lost, r.Offset, r.Epoch, br.Offset+1, lastOf[lost].Epoch)
		}
		break
	}
}

// Every message published comes back, keyed, each key on one partition,
// with the sink's acknowledgements and codec as configured (the default:
// all replicas, no compression; and each other setting).
func TestKafkaSinkRoundTrip(t *testing.T) {
	variants := []struct{ acks, codec string }{{"", ""}, {"one", "zstd"}, {"all", "gzip"}, {"none", "lz4"}, {"all", "snappy"}}
	var topics []string
	for i := range variants {
		topics = append(topics, fmt.Sprintf("preds-%d", i))
	}
	brokers := kafkaTestCluster(t, 1, 3, topics)
	for i, v := range variants {
		t.Run(v.acks+"/"+v.codec, func(t *testing.T) {
			cfg := kafkaTestConfig(brokers, "", fmt.Sprintf("rt-%d", i))
			cfg.RequiredAcks, cfg.Compression, cfg.BatchTimeout = v.acks, v.codec, time.Millisecond
			kafkaSinkRoundTrip(t, cfg, topics[i])
		})
	}
	if _, err := NewKafkaSink(KafkaConfig{Brokers: brokers, KafkaProduce: settings.KafkaProduce{Compression: "brotli"}}, "p"); err == nil {
		t.Error("a sink of codec brotli")
	}
}

func kafkaSinkRoundTrip(t *testing.T, cfg KafkaConfig, topic string) {
	const n = 500
	sink, err := NewKafkaSink(cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	acks, _ := requiredAcks(cfg.RequiredAcks)
	codec, _ := compression(cfg.Compression)
	if sink.w.RequiredAcks != acks || sink.w.Compression != codec || sink.w.BatchTimeout != cfg.BatchTimeout {
		t.Fatalf("writer: acks %v codec %v batch timeout %v, want %v %v %v", sink.w.RequiredAcks, sink.w.Compression, sink.w.BatchTimeout, acks, codec, cfg.BatchTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key, val := make([]byte, 0, 16), make([]byte, 0, 64)
	for i := range n {
		key = fmt.Appendf(key[:0], "key-%d", i%7)
		val = fmt.Appendf(val[:0], `{"id":"e-%d","i":%d}`, i, i)
		if err := sink.Publish(ctx, key, val); err != nil {
			t.Fatal(err)
		}
		// Publish must not retain the caller's buffers.
		for j := range key {
			key[j] = 'x'
		}
		for j := range val {
			val[j] = 'x'
		}
		if i == n/2 {
			if err := sink.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Publish(ctx, nil, []byte("{}")); err == nil {
		t.Error("Publish after Close succeeded")
	}

	cfg.Topic = topic
	if acks == kafka.RequireNone {
		// Unacknowledged, a flush only says the messages were written to
		// the connection: the broker may append the last ones after the
		// source took the ends it reads up to. Wait until it has them all
		// (a loaded machine read back 358 of 500 without this).
		for {
			_, _, end, err := kafkaListOffsets(ctx, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, e := range end {
				sum += e
			}
			if sum >= n {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the topic holds %d of the %d messages published without acknowledgement", sum, n)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	recs := drainSource(t, kafkaOpen(t, cfg, true), 0)
	if len(recs) != n {
		t.Fatalf("read back %d records, want %d", len(recs), n)
	}
	partOfKey := map[string]int32{}
	seen := map[int]bool{}
	for _, r := range recs {
		e := kafkaDecode(t, r)
		if want := fmt.Sprintf("key-%d", e.I%7); string(r.Key) != want {
			t.Fatalf("event %d: key %q, want %q", e.I, r.Key, want)
		}
		if p, ok := partOfKey[string(r.Key)]; ok && p != r.Partition {
			t.Fatalf("key %q in partitions %d and %d", r.Key, p, r.Partition)
		}
		partOfKey[string(r.Key)] = r.Partition
		seen[e.I] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct events, want %d", len(seen), n)
	}
}

func TestKafkaSASL(t *testing.T) {
	brokers := kafkaTestCluster(t, 1, 1, []string{"events"},
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", "alice-pw"),
		kfake.Superuser("SCRAM-SHA-256", "bob", "bob-pw"),
		kfake.Superuser("SCRAM-SHA-512", "carol", "carol-pw"),
	)
	pwFile := filepath.Join(t.TempDir(), "bob-password")
	if err := os.WriteFile(pwFile, []byte("bob-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sasl    SASLConfig
		wantErr string
	}{
		{SASLConfig{Mechanism: "plain", Username: "alice", Password: "alice-pw"}, ""},
		{SASLConfig{Mechanism: "SCRAM-SHA-256", Username: "bob", Password: "bob-pw"}, ""},
		{SASLConfig{Mechanism: "scram-sha-512", Username: "carol", Password: "carol-pw"}, ""},
		{SASLConfig{Mechanism: "plain", Username: "alice", Password: "wrong"}, `SASL PLAIN as "alice": could not successfully authenticate`},
		{SASLConfig{Mechanism: "scram-sha-256", Username: "bob", Password: "wrong"}, `SASL SCRAM-SHA-256 as "bob": could not successfully authenticate`},
		{SASLConfig{Mechanism: "scram-sha-256", Username: "nobody", Password: "x"}, `SASL SCRAM-SHA-256 as "nobody": could not successfully authenticate`},
		// A mounted secret: the file's trailing newline is not the password's.
		{SASLConfig{Mechanism: "scram-sha-256", Username: "bob", PasswordFile: pwFile}, ""},
		{SASLConfig{Mechanism: "plain", Username: "alice", PasswordFile: pwFile}, `SASL PLAIN as "alice": could not successfully authenticate`},
		{SASLConfig{Mechanism: "plain", Username: "alice", PasswordFile: pwFile + ".missing"}, "sasl: password_file: open " + pwFile + ".missing: no such file or directory"},
	} {
		t.Run(tc.sasl.Mechanism+"/"+tc.sasl.Username+"/"+tc.sasl.Password+filepath.Base(tc.sasl.PasswordFile), func(t *testing.T) {
			cfg := kafkaTestConfig(brokers, "events", "sasl-"+tc.sasl.Username)
			cfg.SASL = &tc.sasl
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := NewKafkaSource(ctx, cfg, true)
			if tc.wantErr != "" {
				if err == nil {
					s.Close()
					t.Fatal("opened with a wrong password")
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "kafka source kafka:events") {
					t.Fatalf("error %q does not say %q and name the source", err, tc.wantErr)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			kafkaSinkWrite(t, cfg, 5)
			if recs := drainSource(t, kafkaOpen(t, cfg, true), 0); len(recs) < 5 {
				t.Fatalf("read %d records over SASL, want at least 5", len(recs))
			}
		})
	}
}

// kafkaSinkWrite publishes events 0..n-1 to cfg.Topic through a KafkaSink.
func kafkaSinkWrite(t testing.TB, cfg KafkaConfig, n int) {
	t.Helper()
	sink, err := NewKafkaSink(cfg, cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	sinkWrite(t, sink, n)
}

// TestKafkaTLS: a round trip through a TLS-only kfake, and the error of a
// client that does not know its CA.
func TestKafkaTLS(t *testing.T) {
	caFile, certFile, keyFile := testPKI(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}

	// A round trip through a TLS-only kfake.
	brokers := kafkaTestCluster(t, 1, 1, []string{"events"}, kfake.TLS(srv))
	cfg := kafkaTestConfig(brokers, "events", "tls")
	cfg.TLS = &TLSConfig{CA: caFile}
	kafkaSinkWrite(t, cfg, 20)
	if recs := drainSource(t, kafkaOpen(t, cfg, true), 0); len(recs) != 20 {
		t.Fatalf("read %d records over TLS, want 20", len(recs))
	}
	// Without the CA, the server's certificate does not verify.
	cfg.TLS = &TLSConfig{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := NewKafkaSource(ctx, cfg, true); err == nil {
		s.Close()
		t.Fatal("opened a TLS source with an unknown CA")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unknown CA: %v, want a certificate error", err)
	}
}

func TestKafkaConfigValidate(t *testing.T) {
	ok := KafkaConfig{Brokers: []string{"127.0.0.1:9092"}, Topic: "t"}
	for _, tc := range []struct {
		name string
		edit func(*KafkaConfig)
		want string // "" = valid
	}{
		{"minimal", func(*KafkaConfig) {}, ""},
		{"no brokers", func(c *KafkaConfig) { c.Brokers = nil }, "brokers: at least one"},
		{"broker without port", func(c *KafkaConfig) { c.Brokers = []string{"localhost"} }, `brokers: "localhost" is not host:port`},
		{"start offset", func(c *KafkaConfig) { c.StartOffset = "middle" }, "start"},
		{"latest", func(c *KafkaConfig) { c.StartOffset = "Latest" }, ""},
		{"negative max wait", func(c *KafkaConfig) { c.MaxWait = -time.Second }, "max_wait: must not be negative"},
		{"negative queue", func(c *KafkaConfig) { c.QueueCapacity = -1 }, "queue_capacity: negative"},
		{"min above max", func(c *KafkaConfig) { c.MinBytes, c.MaxBytes = 10, 5 }, "min_bytes: 10 exceeds max_bytes 5"},
		{"required acks", func(c *KafkaConfig) { c.RequiredAcks = "some" }, `required_acks: "some" is not one of all, one, none`},
		{"heartbeat", func(c *KafkaConfig) { c.HeartbeatInterval, c.SessionTimeout = time.Second, time.Second }, "heartbeat_interval"},
		{"sasl mechanism", func(c *KafkaConfig) { c.SASL = &SASLConfig{Mechanism: "gssapi", Username: "u"} }, `mechanism "gssapi"`},
		{"sasl no mechanism", func(c *KafkaConfig) { c.SASL = &SASLConfig{Username: "u"} }, "mechanism is required"},
		{"sasl no user", func(c *KafkaConfig) { c.SASL = &SASLConfig{Mechanism: "plain"} }, "username is required"},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewKafkaSource(context.Background(), KafkaConfig{Brokers: ok.Brokers}, false); err == nil || !strings.Contains(err.Error(), "topic is required") {
		t.Errorf("source without topic: %v", err)
	}
	if _, err := NewKafkaSink(KafkaConfig{Brokers: ok.Brokers}, ""); err == nil || !strings.Contains(err.Error(), "topic is required") {
		t.Errorf("sink without topic: %v", err)
	}
	if d := (KafkaConfig{}).withDefaults(); d.Group != "streamlearn" || d.MaxWait != time.Second || d.QueueCapacity != 1000 || d.StartOffset != "earliest" {
		t.Errorf("defaults: %+v", d)
	}
}

func TestKafkaSourceMissingTopic(t *testing.T) {
	brokers := kafkaTestCluster(t, 1, 1, []string{"events"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := NewKafkaSource(ctx, kafkaTestConfig(brokers, "nope", "g"), true)
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("missing topic: %v", err)
	}
}

// Close waits for every goroutine the source and the sink started: after
// they close, the count returns to what it was (kfake's own connection
// goroutines wind down asynchronously, hence the retries).
func TestKafkaNoGoroutinesAfterClose(t *testing.T) {
	cfg := kafkaTestTopic(t, 1, 4, 100, "leak")
	goroutinesSettle(t, -1)
	before := goroutinesSettle(t, -1)

	s, err := NewKafkaSource(context.Background(), cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	recs := drainSource(t, s, 10)
	if len(recs) != 100 {
		t.Fatalf("read %d records, want 100", len(recs))
	}
	// A second source, closed while it is still fetching mid-stream.
	cfg2 := cfg
	cfg2.Group = "leak2"
	s2, err := NewKafkaSource(context.Background(), cfg2, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	kafkaSinkWrite(t, cfg, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := s2.Fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Fetch after Close: %v", err)
	}
	goroutinesSettle(t, before)
}

// BenchmarkKafkaFetch reads b.N events of a 1-partition kfake topic: "source"
// with KafkaSource.Fetch and a Commit every 1000 records, "reader" with a
// bare kafka-go partition Reader (no group, no commits), for comparison.
// Events are ~150-byte JSON objects, as in DESIGN.md.
//
//	go test ./internal/connectors/ -run '^$' -bench KafkaFetch -benchtime 200000x
func BenchmarkKafkaFetch(b *testing.B) {
	for _, mode := range []string{"source", "reader"} {
		b.Run(mode, func(b *testing.B) {
			brokers := kafkaTestCluster(b, 1, 1, []string{"events"})
			cfg := kafkaTestConfig(brokers, "events", "bench")
			cfg.QueueCapacity = 1000
			kafkaProduceBench(b, cfg, b.N+1)
			ctx := context.Background()
			var fetch func() (Record, error)
			var commit func(Record) error
			switch mode {
			case "source":
				s := kafkaOpen(b, cfg, true)
				fetch = func() (Record, error) { return s.Fetch(ctx) }
				commit = func(r Record) error { return s.Commit(ctx, r) }
			case "reader":
				d, _ := cfg.dialer()
				r := kafka.NewReader(kafka.ReaderConfig{
					Brokers: brokers, Topic: "events", Dialer: d,
					QueueCapacity: 1000, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: cfg.MaxWait,
				})
				b.Cleanup(func() { r.Close() })
				fetch = func() (Record, error) {
					m, err := r.FetchMessage(ctx)
					return Record{Value: m.Value, Offset: m.Offset}, err
				}
				commit = func(Record) error { return nil }
			}
			if _, err := fetch(); err != nil { // joined and connected
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 1; i <= b.N; i++ {
				r, err := fetch()
				if err != nil {
					b.Fatal(err)
				}
				if r.Offset != int64(i) {
					b.Fatalf("offset %d, want %d", r.Offset, i)
				}
				if i%1000 == 0 || i == b.N {
					if err := commit(r); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

func kafkaProduceBench(b *testing.B, cfg KafkaConfig, n int) {
	w := &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...), Topic: "events", BatchTimeout: time.Millisecond,
		BatchSize: 5000, BatchBytes: 8 << 20, RequiredAcks: kafka.RequireAll,
	}
	defer w.Close()
	msgs := make([]kafka.Message, 0, 5000)
	for i := range n {
		msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil,
			`{"id":"m-%d","key":"tenant-%d","ts":"2026-11-22T10:00:00Z","label":%d,"features":{"len":42,"has_url":1},"text":"WIN a FREE prize now"}`,
			i, i%10, i%2)})
		if len(msgs) == cap(msgs) || i == n-1 {
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// TestKafkaSourceUntilEndDeadMembers: a source opened with untilEnd that
// has read its share of the topic does not end while a member that died
// without leaving the group holds the rest. The source joins first; then a
// ghost joins — this test binary run again as a process that opens a
// source in the group, with a 30s session — takes a partition in the
// rebalance its join starts, and is SIGKILLed. The source must deliver
// every record of both partitions and end well within those 30s, having
// asked the group to rebalance, which removes the ghost: it cannot rejoin.
// (Ending with its own partition's records, as it did before, leaves half
// the topic unlearned.)
func TestKafkaSourceUntilEndDeadMembers(t *testing.T) {
	const n, parts = 200, 2
	cfg := kafkaTestTopic(t, 1, parts, n, "ghosts")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t0 := time.Now()
	s := kafkaOpen(t, cfg, true)
	for len(s.Assignments()) != parts {
		if ctx.Err() != nil {
			t.Fatal("the source never owned the topic")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ghost := testproc.CommandContext(t, ctx, os.Args[0], "-test.run=^TestKafkaGhostProcess$")
	ghost.Env = append(os.Environ(), "STREAMLEARN_KAFKA_GHOST="+strings.Join(cfg.Brokers, ","))
	out, err := ghost.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ghost.Stderr = os.Stderr
	if err := ghost.Start(); err != nil {
		t.Fatal(err)
	}
	defer ghost.Wait()
	defer ghost.Process.Kill()
	owned, _ := bufio.NewReader(out).ReadString('\n')
	if owned != "owned\n" {
		t.Fatalf("the ghost process said %q, want \"owned\"", owned)
	}
	for len(s.Assignments()) != 1 {
		if ctx.Err() != nil {
			t.Fatalf("the source owns %v after the ghost took a partition", s.Assignments())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ghost.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	// Delivery is at least once from the group's commit (none here): a
	// partition back in a new epoch is read again from its start.
	recs := drainSource(t, s, 0)
	took := time.Since(t0)
	seen := map[int]bool{}
	for _, r := range recs {
		seen[kafkaDecode(t, r).I] = true
	}
	if len(seen) != n {
		t.Fatalf("the source ended after delivering %d of the %d records (partitions %v)", len(seen), n, s.Assignments())
	}
	if got := s.Assignments(); !slices.Equal(got, []int32{0, 1}) {
		t.Errorf("the source ends owning %v, want both partitions", got)
	}
	if took > 15*time.Second {
		t.Errorf("the source took %v: it waited for the ghost's session (30s) instead of asking for a rebalance", took)
	}
	t.Logf("ended after %v owning %v", took.Round(time.Millisecond), s.Assignments())
}

// TestKafkaGhostProcess is the ghost of TestKafkaSourceUntilEndDeadMembers
// when run with STREAMLEARN_KAFKA_GHOST=brokers: a member of group ghosts
// with a 30s session that says "owned" once it owns a partition and then
// waits to be killed.
func TestKafkaGhostProcess(t *testing.T) {
	brokers := os.Getenv("STREAMLEARN_KAFKA_GHOST")
	if brokers == "" {
		t.Skip("the ghost of TestKafkaSourceUntilEndDeadMembers")
	}
	cfg := kafkaTestConfig(strings.Split(brokers, ","), "events", "ghosts")
	cfg.SessionTimeout = 30 * time.Second
	s := kafkaOpen(t, cfg, false)
	for len(s.Assignments()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("owned")
	time.Sleep(time.Minute)
}

// TestKafkaSourceUntilEndNothingOwned: a source opened with untilEnd that
// its group gives no partition (one partition, a live member sorted before
// it holds it) ends with an error naming the group, the partition and the
// member holding it — not with an empty success — unless AllowEmpty.
func TestKafkaSourceUntilEndNothingOwned(t *testing.T) {
	brokers := kafkaTestCluster(t, 1, 1, []string{"events"})
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_empty=%v", allow), func(t *testing.T) {
			group := fmt.Sprintf("owned-%v", allow)
			cfg := kafkaTestConfig(brokers, "events", group)
			kafkaProduce(t, cfg, 1, 0, 10)
			live := cfg
			// Member ids begin with the client id; with more members than
			// partitions, kafka-go's range balancer gives the partition
			// to the member sorted last.
			live.ClientID = "z-live"
			holder := kafkaOpen(t, live, false)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for len(holder.Assignments()) != 1 {
				if ctx.Err() != nil {
					t.Fatal("the live member never owned the partition")
				}
				time.Sleep(10 * time.Millisecond)
			}
			cfg.ClientID, cfg.AllowEmpty = "a-late", allow
			s := kafkaOpen(t, cfg, true)
			_, err := s.Fetch(ctx)
			if allow {
				if !errors.Is(err, ErrEndOfInput) || len(s.Assignments()) != 0 {
					t.Fatalf("Fetch with AllowEmpty: %v owning %v, want ErrEndOfInput owning nothing", err, s.Assignments())
				}
				return
			}
			if !errors.Is(err, ErrNoPartitions) {
				t.Fatalf("Fetch: %v, want ErrNoPartitions", err)
			}
			for _, want := range []string{"group " + group, "partitions 0 are held by 1 member: z-live-"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// The holder takes the partition back in the generation the
			// source's rebalance formed, which it may not have seen yet.
			for got := holder.Assignments(); !slices.Equal(got, []int32{0}); got = holder.Assignments() {
				if ctx.Err() != nil {
					t.Fatalf("the live member owns %v after the source's rebalance, want [0]", got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestKafkaSilentBroker: an address that accepts connections and never
// answers (not a Kafka broker, or a hung one) fails the source within the
// dial timeout, with an error that names the address and what it waited
// for.
func TestKafkaSilentBroker(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	cfg := kafkaTestConfig([]string{addr}, "events", "silent")
	cfg.DialTimeout = 0 // the default: DefaultConnectTimeout
	start := time.Now()
	s, err := NewKafkaSource(t.Context(), cfg, true)
	if err == nil {
		s.Close()
		t.Fatal("opened a source on a broker that never answers")
	}
	took := time.Since(start)
	want := "kafka source kafka:events: brokers " + addr + ": no answer to a metadata request within 5s"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if took > DefaultConnectTimeout+time.Second {
		t.Errorf("took %v to fail, want about %v", took, DefaultConnectTimeout)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}

// TestNATSSilentServer: a NATS URL whose server accepts connections and
// never answers fails within the default connect timeout, naming the
// server.
func TestNATSSilentServer(t *testing.T) {
	t.Parallel()
	url := "nats://" + silentListener(t)
	start := time.Now()
	_, err := natsConnect(NATSConfig{URL: url})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "connect "+url) {
		t.Fatalf("error %v does not name %s", err, url)
	}
	if took > DefaultConnectTimeout+time.Second {
		t.Errorf("took %v to fail, want at most about %v", took, DefaultConnectTimeout)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}

// TestKafkaSilentBrokersTogether: brokers that accept a connection and
// never answer the SASL handshake cost one dial timeout together, not one
// each, and the error names every one of them.
func TestKafkaSilentBrokersTogether(t *testing.T) {
	t.Parallel()
	addrs := []string{silentListener(t), silentListener(t), silentListener(t)}
	cfg := kafkaTestConfig(addrs, "events", "silent")
	cfg.DialTimeout = time.Second
	cfg.SASL = &SASLConfig{Mechanism: "plain", Username: "alice", Password: "pw"}
	start := time.Now()
	s, err := NewKafkaSource(t.Context(), cfg, true)
	if err == nil {
		s.Close()
		t.Fatal("opened a source on brokers that never answer")
	}
	took := time.Since(start)
	for _, a := range addrs {
		if !strings.Contains(err.Error(), "broker "+a+": no answer within 1s (connect_timeout)") {
			t.Errorf("error %q does not name broker %s", err, a)
		}
	}
	if took > 2*cfg.DialTimeout {
		t.Errorf("took %v to fail with 3 silent brokers, want about one dial timeout (%v)", took, cfg.DialTimeout)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}

// TestNATSSilentServersTogether: servers of one URL list that accept and
// never answer fail within the connect timeout as a whole, not one each.
func TestNATSSilentServersTogether(t *testing.T) {
	t.Parallel()
	urls := []string{"nats://" + silentListener(t), "nats://" + silentListener(t), "nats://" + silentListener(t)}
	url := strings.Join(urls, ",")
	start := time.Now()
	_, err := natsConnect(NATSConfig{URL: url, ConnectTimeout: 1500 * time.Millisecond})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "connect "+url) {
		t.Fatalf("error %v does not name %s", err, url)
	}
	if took > 2500*time.Millisecond {
		t.Errorf("took %v to fail with 3 silent servers, want about the connect timeout, 1.5s", took)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}

// silentListener returns the address of a TCP listener that accepts
// connections and never answers on them (a hung broker or server), closed
// with the connections it holds when t ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A Kafka sink's Check asks again while the brokers answer a passing
// error (a partition without a leader yet, as while another client
// creates the topic), and gives up with it when its context is done.
func TestKafkaSinkCheckRetriesPassingErrors(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	// failing is how many metadata requests more are answered with the
	// topic's partition leaderless (-1: all); answered counts them.
	var failing, answered atomic.Int32
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if failing.Load() == 0 {
			return nil, nil, false
		}
		failing.Add(-1)
		answered.Add(1)
		mreq := req.(*kmsg.MetadataRequest)
		resp := mreq.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = mreq.Version
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr("events"), 5 // LEADER_NOT_AVAILABLE
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	check := func(within time.Duration) error {
		sink, err := NewKafkaSink(kafkaTestConfig([]string{addr}, "", ""), "events")
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		return sink.Check(ctx)
	}
	failing.Store(3)
	if err := check(10 * time.Second); err != nil {
		t.Fatalf("a topic whose leader comes after three answers: %v", err)
	}
	if n := answered.Load(); n != 3 {
		t.Fatalf("%d answers without a leader, want 3: the check did not ask again", n)
	}
	failing.Store(-1)
	err = check(500 * time.Millisecond)
	if !errors.Is(err, kafka.LeaderNotAvailable) || !strings.Contains(err.Error(), `"events"`) {
		t.Fatalf("a topic that never gets a leader: %v, want LeaderNotAvailable naming it", err)
	}
}
