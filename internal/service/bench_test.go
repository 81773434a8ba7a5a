package service_test

// End-to-end throughput of the live loop against the broker client it sits
// on (the acceptance test): `run` (service.Run over the source the
// command opens, a Perceptron and its tracker) versus a bare consumer of
// the same client library reading the same topic or stream, on brokers in
// this process (franz-go's kfake, an embedded nats-server).
//
//	go test -run '^$' -bench 'Kafka|JetStream' -count 5 ./internal/service/
//
// Every benchmark preloads benchEventCount() events once (the DESIGN.md
// event shape: id, key, ts, label and ten named features), then each
// iteration reads all of them from the start, with a fresh consumer group
// or durable, open and close included, and reports events/s and
// allocs/event. The bare consumers do what a bare consumer must to be
// at-least-once like the source they are compared with: they commit (Kafka)
// or acknowledge (JetStream) every service.DefaultCommitEvery records and
// the last one, synchronously, as service.Run does.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// benchSeq numbers consumer groups and durables: every iteration starts
// a new one, which reads the topic from the start.
var benchSeq atomic.Int64

func benchName(prefix string) string { return prefix + "-" + strconv.FormatInt(benchSeq.Add(1), 10) }

// benchTimeout bounds one iteration, so that a stuck consumer fails the
// benchmark instead of hanging it.
const benchTimeout = 5 * time.Minute

// benchEventCount is how many events a benchmark preloads and every
// iteration reads: STREAMLEARN_BENCH_EVENTS, default 100000.
func benchEventCount(tb testing.TB) int {
	if s := os.Getenv("STREAMLEARN_BENCH_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			tb.Fatalf("STREAMLEARN_BENCH_EVENTS=%q: want a positive integer", s)
		}
		return n
	}
	return 100_000
}

// benchAppendEvent appends event i (no newline): DESIGN.md's shape with ten
// named features, a label and a key of ten tenants.
func benchAppendEvent(b []byte, i int, r *rand.Rand) []byte {
	return fmt.Appendf(b, `{"id":"m-%d","key":"tenant-%d","ts":"2026-11-22T10:00:00Z","label":%d,"features":{"len":%d,"has_url":%d,"sender=bulk.example":1,"caps":%.3f,"digits":%d,"exclaim":%d,"hour":%d,"reply":%d,"lang=en":1,"score":%.4f}}`,
		i, r.IntN(10), r.IntN(2), r.IntN(200), r.IntN(2), r.Float64(), r.IntN(20), r.IntN(5), r.IntN(24), r.IntN(2), r.Float64())
}

// benchEvents returns n events.
func benchEvents(n int) [][]byte {
	r := rand.New(rand.NewPCG(10, 10))
	out := make([][]byte, n)
	for i := range out {
		out[i] = benchAppendEvent(nil, i, r)
	}
	return out
}

// benchYAML is the learner set of the benchmarks: `run` with a Perceptron
// (and, always, the regret tracker).
const benchYAML = `
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`

func benchConfig(tb testing.TB) *config.Config { return parseBenchConfig(tb, benchYAML) }

// parseBenchConfig parses the configuration src of a benchmark.
func parseBenchConfig(tb testing.TB, src string) *config.Config {
	tb.Helper()
	c, err := config.Parse("bench.yaml", []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// benchRun runs the service over src until the end of input, closes src
// and checks that every one of n events was learned. Run gets a
// cancellable context, as under `run` (a signal context).
func benchRun(tb testing.TB, c *config.Config, src connectors.Source, n int) {
	tb.Helper()
	svc, err := service.New(service.Options{Config: c, Source: src})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	runErr := svc.Run(ctx)
	if err := errors.Join(runErr, src.Close()); err != nil {
		tb.Fatal(err)
	}
	reps, err := svc.Reports()
	if err != nil {
		tb.Fatal(err)
	}
	var learned uint64
	for _, r := range reps {
		learned += r.Labeled
	}
	if learned != uint64(n) {
		tb.Fatalf("learned %d events, want %d", learned, n)
	}
}

// benchMeter reports events/s and allocs/event of the loop around it.
type benchMeter struct {
	b      *testing.B
	events int
	ms     runtime.MemStats
	allocs uint64
	cpu    time.Duration
}

// benchCPU returns the CPU time the process has used.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func newBenchMeter(b *testing.B, events int) *benchMeter {
	b.ReportAllocs()
	m := &benchMeter{b: b, events: events}
	runtime.ReadMemStats(&m.ms)
	m.allocs = m.ms.Mallocs
	m.cpu = benchCPU()
	return m
}

func (m *benchMeter) report(iters int) {
	runtime.ReadMemStats(&m.ms)
	total := float64(iters * m.events)
	m.b.ReportMetric(total/m.b.Elapsed().Seconds(), "events/s")
	m.b.ReportMetric(float64(m.ms.Mallocs-m.allocs)/total, "allocs/event")
	m.b.ReportMetric(float64(benchCPU()-m.cpu)/float64(m.b.Elapsed()), "cpus")
}

// Kafka.

const benchTopic = "bench-events"

// benchKafkaTuning lowers kafka-go's waits as the connector tests do, so
// that a group join takes milliseconds; fetch sizes and queue capacity are
// the source's defaults, which the bare reader is given too.
func benchKafkaTuning() connectors.KafkaConfig {
	c := testbroker.KafkaConfig(nil, "", "")
	c.BatchTimeout = 0
	return c
}

// benchOpen opens the source `run --until-end` opens of src (kind kafka
// or jetstream), with benchKafkaTuning or benchNATSTuning: the connector
// built as the command builds it from the configuration.
func benchOpen(ctx context.Context, src config.Source) (connectors.Source, error) {
	if src.Kind == "kafka" {
		k := benchKafkaTuning()
		k.Brokers, k.Topic, k.Group = src.Brokers, src.Topic, src.Group
		s, err := connectors.NewKafkaSource(ctx, k, true)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	n := benchNATSTuning()
	n.URL, n.Subject, n.Stream, n.Durable = src.URL, src.Subject, src.Stream, src.Durable
	s, err := connectors.NewJetStreamSource(ctx, n, true)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Defaults of connectors.KafkaConfig, given to the bare reader.
const (
	benchKafkaQueueCapacity = 1000
	benchKafkaMinBytes      = 1
	benchKafkaMaxBytes      = 1 << 20
)

// benchKafka starts a one-broker kfake cluster with a topic of partitions
// partitions holding n events (spread round-robin) and returns the broker
// addresses.
func benchKafka(b testing.TB, n, partitions int) []string {
	b.Helper()
	brokers := testbroker.Kafka(b, int32(partitions), benchTopic)
	benchKafkaPreload(b, brokers, n)
	return brokers
}

// benchKafkaPreload writes n events to benchTopic on brokers.
func benchKafkaPreload(b testing.TB, brokers []string, n int) {
	b.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        benchTopic,
		BatchTimeout: time.Millisecond,
		BatchSize:    1000,
		BatchBytes:   4 << 20,
		RequiredAcks: kafka.RequireAll,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	evs := benchEvents(n)
	msgs := make([]kafka.Message, 0, 1000)
	for i, v := range evs {
		msgs = append(msgs, kafka.Message{Key: []byte("tenant-" + strconv.Itoa(i%10)), Value: v})
		if len(msgs) == cap(msgs) || i == len(evs)-1 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				b.Fatalf("preload: %v", err)
			}
			msgs = msgs[:0]
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRunKafka: `run --until-end` over a Kafka topic of one and of
// four partitions — the source `run` opens (a consumer-group member
// reading each assigned partition with a partition kafka.Reader),
// service.Run with a Perceptron and its tracker (a model and a worker per
// partition), commits every service.DefaultCommitEvery records. With -cpu
// 1,2 it shows what the workers gain from a second core:
//
//	go test -run '^$' -bench RunKafka -cpu 1,2 -count 5 ./internal/service/
func BenchmarkRunKafka(b *testing.B) {
	n := benchEventCount(b)
	for _, parts := range []int{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			brokers := benchKafka(b, n, parts)
			c := benchConfig(b)
			ctx := context.Background()
			m := newBenchMeter(b, n)
			i := 0
			for b.Loop() {
				i++
				src, err := benchOpen(ctx, config.Source{Kind: "kafka", Conn: config.Conn{Brokers: brokers},
					Topic: benchTopic, Group: benchName("run")})
				if err != nil {
					b.Fatal(err)
				}
				benchRun(b, c, src, n)
			}
			m.report(i)
		})
	}
}

// BenchmarkBareKafka: a bare kafka-go consumer reading the same topic to
// the end, with the source's fetch settings.
//
//   - group: what `run` is compared with. A group kafka.Reader (GroupID
//     set): a consumer-group member, as KafkaSource is, which also reads
//     each assigned partition with kafka-go's partition reader underneath;
//     it commits synchronously (CommitInterval 0) every
//     service.DefaultCommitEvery records and the last one, as Run does.
//   - partition: a partition kafka.Reader with no group and no commits:
//     the library's floor, for reference.
func BenchmarkBareKafka(b *testing.B) {
	n := benchEventCount(b)
	brokers := benchKafka(b, n, 1)
	tc := benchKafkaTuning()
	b.Run("group", func(b *testing.B) {
		m := newBenchMeter(b, n)
		i := 0
		for b.Loop() {
			i++
			bareKafkaGroup(b, brokers, benchName("bare"), n, nil)
		}
		m.report(i)
	})
	b.Run("partition", func(b *testing.B) {
		m := newBenchMeter(b, n)
		i := 0
		for b.Loop() {
			i++
			bareKafkaRead(b, kafka.NewReader(kafka.ReaderConfig{
				Brokers:         brokers,
				Topic:           benchTopic,
				Partition:       0,
				Dialer:          bareKafkaDialer(tc),
				QueueCapacity:   benchKafkaQueueCapacity,
				MinBytes:        benchKafkaMinBytes,
				MaxBytes:        benchKafkaMaxBytes,
				MaxWait:         tc.MaxWait,
				ReadLagInterval: -1,
			}), n, false, nil)
		}
		m.report(i)
	})
}

func bareKafkaDialer(tc connectors.KafkaConfig) *kafka.Dialer {
	return &kafka.Dialer{ClientID: "bare", Timeout: tc.DialTimeout, DualStack: true}
}

// bareKafkaGroup is what `run` is compared with on Kafka: a group
// kafka.Reader (GroupID group) with the source's fetch settings reads
// benchTopic's n records from the start and commits as Run does
// (bareKafkaRead).
func bareKafkaGroup(b *testing.B, brokers []string, group string, n int, each func([]byte)) {
	tc := benchKafkaTuning()
	bareKafkaRead(b, kafka.NewReader(kafka.ReaderConfig{
		Brokers:           brokers,
		Topic:             benchTopic,
		GroupID:           group,
		Dialer:            bareKafkaDialer(tc),
		QueueCapacity:     benchKafkaQueueCapacity,
		MinBytes:          benchKafkaMinBytes,
		MaxBytes:          benchKafkaMaxBytes,
		MaxWait:           tc.MaxWait,
		ReadLagInterval:   -1,
		HeartbeatInterval: tc.HeartbeatInterval,
		SessionTimeout:    tc.SessionTimeout,
		RebalanceTimeout:  tc.RebalanceTimeout,
		JoinGroupBackoff:  tc.JoinGroupBackoff,
		StartOffset:       kafka.FirstOffset,
	}), n, true, each)
}

// bareKafkaRead fetches n records with r, calls each (when not nil) with
// every record's value, and closes r; with commit, it commits
// synchronously every service.DefaultCommitEvery records and the last
// one, as Run does.
func bareKafkaRead(b *testing.B, r *kafka.Reader, n int, commit bool, each func([]byte)) {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	defer func() {
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}()
	for k := range n {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if each != nil {
			each(msg.Value)
		}
		if commit && ((k+1)%service.DefaultCommitEvery == 0 || k == n-1) {
			if err := r.CommitMessages(ctx, msg); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// JetStream.

const (
	benchStream  = "BENCH"
	benchSubject = "bench.events"
)

// benchNATSTuning: the source's defaults except a 1s pull expiry (the
// least FetchWait allows); the bare consumer gets the same.
func benchNATSTuning() connectors.NATSConfig {
	var c connectors.NATSConfig
	c.FetchWait = time.Second
	return c
}

// benchJetStream starts an embedded server (file storage, as `run` with no
// config uses) with a stream holding n events and returns its URL.
func benchJetStream(b testing.TB, n int) string {
	b.Helper()
	e, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Port: -1, StoreDir: b.TempDir(),
		Stream: benchStream, Subjects: []string{benchSubject}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Shutdown)
	url := e.ClientURL()
	benchJetStreamPreload(b, url, n)
	return url
}

// benchJetStreamPreload publishes n events to benchSubject at url.
func benchJetStreamPreload(b testing.TB, url string, n int) {
	b.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range benchEvents(n) {
		// A loaded machine acks slowly: wait for room in the window
		// rather than fail after the default 200ms.
		if _, err := js.PublishAsync(benchSubject, v, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		b.Fatal("preload: no acks")
	}
}

// benchDeleteConsumer removes an iteration's durable, off the clock.
func benchDeleteConsumer(b *testing.B, url, durable string) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteConsumer(ctx, benchStream, durable); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRunJetStream: `run --until-end` over a JetStream stream — the
// source `run` opens (a durable pull consumer, AckAll, 500 messages
// buffered ahead), service.Run with a Perceptron and its tracker,
// a confirmed ack every service.DefaultCommitEvery records.
func BenchmarkRunJetStream(b *testing.B) {
	n := benchEventCount(b)
	url := benchJetStream(b, n)
	c := benchConfig(b)
	ctx := context.Background()
	m := newBenchMeter(b, n)
	i := 0
	for b.Loop() {
		i++
		durable := benchName("run")
		src, err := benchOpen(ctx, config.Source{Kind: "jetstream", Conn: config.Conn{URL: url},
			Subject: benchSubject, Stream: benchStream, Durable: durable})
		if err != nil {
			b.Fatal(err)
		}
		benchRun(b, c, src, n)
		benchDeleteConsumer(b, url, durable)
	}
	m.report(i)
}

// BenchmarkBareJetStream: a bare nats.go jetstream pull consumer on the
// same stream, configured as the source configures its durable (AckAll,
// same MaxAckPending, AckWait and filter), the same batch
// (PullMaxMessages 500) and pull expiry, a confirmed ack (DoubleAck) every
// service.DefaultCommitEvery messages and on the last one.
func BenchmarkBareJetStream(b *testing.B) {
	n := benchEventCount(b)
	url := benchJetStream(b, n)
	m := newBenchMeter(b, n)
	i := 0
	for b.Loop() {
		i++
		durable := benchName("bare")
		bareJetStream(b, url, durable, n, nil)
		benchDeleteConsumer(b, url, durable)
	}
	m.report(i)
}

// bareJetStream is what `run` is compared with on JetStream: a pull
// consumer (durable) on benchStream, configured as the source configures
// its durable (AckAll, same MaxAckPending, AckWait and filter), the same
// batch (PullMaxMessages) and pull expiry, reads n messages and acks
// (DoubleAck: confirmed) every service.DefaultCommitEvery messages and
// the last one; it calls each (when not nil) with every message's data.
func bareJetStream(b *testing.B, url, durable string, n int, each func([]byte)) {
	tn := benchNATSTuning()
	ctx := context.Background()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, benchStream, jetstream.ConsumerConfig{
		Durable:       durable,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       connectors.DefaultNATSAckWait,
		MaxAckPending: connectors.DefaultNATSMaxAckPending,
		FilterSubject: benchSubject,
	})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(connectors.DefaultNATSFetchBatch), jetstream.PullExpiry(tn.FetchWait))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	watchdog := time.AfterFunc(benchTimeout, it.Stop) // Next fails instead of hanging
	defer watchdog.Stop()
	for k := range n {
		msg, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if each != nil {
			each(msg.Data())
		}
		if (k+1)%service.DefaultCommitEvery == 0 || k == n-1 {
			if err := msg.DoubleAck(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Replay.

// BenchmarkReplay: `replay` — the service on a Files source, a Perceptron
// and its tracker — against the bare read-parse-update loop (event.Reader
// and a Perceptron's fused Round, no service, no tracker), on a9a
// (LIBSVM, 123 binary features) read once and ten times over (a9a×10:
// the file given ten times, as a replay of a longer recording, where the
// run's fixed cost — allocating the model, the final report's digest —
// weighs a tenth as much), and on JSONL events of DESIGN.md's shape, all
// read from files; ratio/ runs the two in turn and reports the ratio of
// their times and the nanoseconds a line the service spends over the
// bare loop:
//
//	go test -run '^$' -bench Replay -count 5 ./internal/service/
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	jsonl := filepath.Join(dir, "events.jsonl")
	var buf []byte
	for _, v := range benchEvents(20000) {
		buf = append(append(buf, v...), '\n')
	}
	if err := os.WriteFile(jsonl, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	const a9a = "../../../shared/data/a9a/a9a"
	inputs := []struct {
		name  string
		paths []string
	}{
		{"a9a", []string{a9a}},
		{"a9a×10", slices.Repeat([]string{a9a}, 10)},
		{"jsonl", []string{jsonl}},
	}
	c := benchConfig(b)
	for _, in := range inputs {
		var size, records int
		for _, path := range in.paths {
			data, err := os.ReadFile(path)
			if err != nil {
				b.Logf("%s: %v (../shared absent?): skipped", in.name, err)
				break
			}
			size, records = size+len(data), records+bytes.Count(data, []byte("\n"))
		}
		if size == 0 {
			continue
		}
		replay := func(b *testing.B) {
			src := filesource.NewFiles(in.paths, pipeline.EventConfig(c), nil)
			svc, err := service.New(service.Options{Config: c, Source: src, HistoryPoints: -1})
			if err != nil {
				b.Fatal(err)
			}
			if err := errors.Join(svc.Run(context.Background()), src.Close()); err != nil {
				b.Fatal(err)
			}
		}
		bare := func(b *testing.B) {
			pct, err := online.NewPerceptron(c.Features.Bits, online.PerceptronConfig{Bias: true})
			if err != nil {
				b.Fatal(err)
			}
			for _, path := range in.paths {
				bareFile(b, path, pipeline.EventConfig(c), pct)
			}
		}
		for _, run := range []struct {
			name string
			f    func(*testing.B)
		}{{"service", replay}, {"bare", bare}} {
			b.Run(run.name+"/"+in.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					run.f(b)
				}
				b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
			})
		}
		// The two in turn, so that both see the same machine: the ratio
		// of their times holds still where each time alone does not.
		b.Run("ratio/"+in.name, func(b *testing.B) {
			var ts, tb time.Duration
			for b.Loop() {
				t0 := time.Now()
				replay(b)
				t1 := time.Now()
				bare(b)
				ts, tb = ts+t1.Sub(t0), tb+time.Since(t1)
			}
			b.ReportMetric(float64(ts)/float64(tb), "service/bare")
			// The target: at most 100 ns a line over the bare loop.
			b.ReportMetric(float64(ts-tb)/float64(b.N*records), "ns-over/line")
		})
	}
}

// bareFile plays every record of the file at path through pct's Round.
func bareFile(b *testing.B, path string, cfg event.Config, pct *online.Perceptron) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := event.NewReader(f, path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var ev event.Event
	for {
		err := r.Next(&ev)
		if err == io.EOF {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		pct.Round(ev.X, ev.Label)
	}
}

// BenchmarkRebuild: `run --rebuild` of a partition whose checkpoint is
// lost while the broker's committed position is at the end of the stream:
// the model learned again from the log (a partition kafka.Reader outside
// the group; a JetStream ordered consumer), through the same worker as
// live records, without outputs. One partition; compare with RunKafka
// and RunJetStream, which learn the same events from the consumer.
//
//	go test -run '^$' -bench Rebuild -count 5 ./internal/service/
func BenchmarkRebuild(b *testing.B) {
	n := benchEventCount(b)
	c := benchConfig(b)
	ctx := context.Background()
	for _, kind := range []string{"kafka", "jetstream"} {
		b.Run(kind, func(b *testing.B) {
			src := config.Source{Kind: kind, Topic: benchTopic, Group: benchName("rebuild"),
				Subject: benchSubject, Stream: benchStream, Durable: benchName("rebuild")}
			if kind == "kafka" {
				src.Conn.Brokers = benchKafka(b, n, 1)
			} else {
				src.Conn.URL = benchJetStream(b, n)
			}
			open := func() connectors.Source {
				s, err := benchOpen(ctx, src)
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			benchRun(b, c, open(), n) // commits the whole stream
			m := newBenchMeter(b, n)
			i := 0
			for b.Loop() {
				i++
				b.StopTimer()
				store, err := checkpoint.OpenDir(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				s := open()
				svc, err := service.New(service.Options{Config: c, Source: s, Checkpoints: store, OnMismatch: service.MismatchRebuild})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := errors.Join(svc.Run(ctx), s.Close()); err != nil {
					b.Fatal(err)
				}
				reps, err := svc.Reports()
				if err != nil || len(reps) != 1 || reps[0].Labeled != uint64(n) {
					b.Fatalf("rebuilt %v (%v), want one model of %d events", reps, err, n)
				}
			}
			m.report(i)
		})
	}
}
