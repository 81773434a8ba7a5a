package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/learners"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// kafkaCluster starts an in-process Kafka cluster with the topics seeded.
func kafkaCluster(t testing.TB, partitions int32, topics ...string) []string {
	return testbroker.Kafka(t, partitions, topics...)
}

// kafkaConfig lowers every wait so that a join or an idle fetch takes
// milliseconds (as internal/connectors' tests do).
func kafkaTestConfig(brokers []string, topic, group string) connectors.KafkaConfig {
	c := testbroker.KafkaConfig(brokers, topic, group)
	c.QueueCapacity = 256
	return c
}

// publishAll publishes values (with keys, when not nil) through sink and
// closes it.
func publishAll(t testing.TB, sink connectors.Sink, values, keys [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, v := range values {
		var k []byte
		if keys != nil {
			k = keys[i]
		}
		if err := sink.Publish(ctx, k, v); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

func openKafka(t testing.TB, cfg connectors.KafkaConfig) *connectors.KafkaSource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := connectors.NewKafkaSource(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runReports runs a Service over src until its end and returns the final
// report of every model.
func runReports(t testing.TB, c *config.Config, src connectors.Source) []Report {
	t.Helper()
	s := newService(t, Options{Config: c, Source: src, Predictions: discardSink{}, CommitEvery: 100})
	run(t, s)
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	return reps
}

// replayReport is `streamlearn replay` of JSONL data: pipeline.Replay.
func replayReport(t testing.TB, c *config.Config, data []byte) pipeline.Report {
	t.Helper()
	p, err := pipeline.New(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := event.NewReader(bytes.NewReader(data), "replay.jsonl", pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Replay(context.Background(), r, nil, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Labels != nil {
		rep.Labels.StateSHA256 = p.StoreDigest()
	}
	return rep
}

// sameReport checks that got has every number and digest of want: events,
// labeled, invalid, invalid_by_reason, and every learner's rounds,
// mistakes, loss, bound, regret and state_sha256 (Seconds aside).
func sameReport(t testing.TB, what string, got, want pipeline.Report) {
	t.Helper()
	if got.Events != want.Events || got.Labeled != want.Labeled || got.Invalid != want.Invalid || got.Predicted != want.Predicted {
		t.Errorf("%s: events/labeled/predicted/invalid %d/%d/%d/%d, want %d/%d/%d/%d", what,
			got.Events, got.Labeled, got.Predicted, got.Invalid, want.Events, want.Labeled, want.Predicted, want.Invalid)
	}
	for i, l := range got.Learners {
		if i < len(want.Learners) && l.StateSHA256 != want.Learners[i].StateSHA256 {
			t.Errorf("%s: learner %s: state_sha256 %s, want %s", what, l.Name, l.StateSHA256, want.Learners[i].StateSHA256)
		}
	}
	if !sameLearners(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s: reports differ:\n got %s\nwant %s", what, g, w)
	}
}

func loadExampleConfig(t testing.TB) *config.Config {
	t.Helper()
	c, err := config.Load(filepath.Join("..", "..", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	algs := map[string]bool{}
	for _, l := range c.Learners {
		if wm, ok := l.Params.(*learners.WeightedMajorityParams); ok && wm.Class == nil {
			algs["weighted-majority/learners"] = true
		} else {
			algs[l.Algorithm] = true
		}
	}
	for _, a := range []string{"perceptron", "ogd", "consistent", "halving", "soa", "weighted-majority", "weighted-majority/learners"} {
		if !algs[a] {
			t.Fatalf("config.yaml has no %s learner: the test wants every algorithm", a)
		}
	}
	return c
}

// genClasses makes n events of three classes of v (ham below 0.3, promo
// above 0.7, spam between) and a word, a tenth unlabeled and one in a
// hundred labeled with no class.
func genClasses(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out [][]byte
	for i := range n {
		v := rng.Float64()
		label := `"spam"`
		switch {
		case v < 0.3:
			label = `"ham"`
		case v > 0.7:
			label = `"promo"`
		}
		switch r := rng.IntN(100); {
		case r < 10:
			label = "null"
		case r == 10:
			label = `"eggs"`
		}
		out = append(out, fmt.Appendf(nil, `{"id":"m-%d","features":{"v":%.4f,"w%d":1},"label":%s}`, i, v, rng.IntN(20), label))
	}
	return out
}

func splitLines(data []byte) [][]byte {
	var out [][]byte
	for l := range bytes.SplitSeq(data, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// The acceptance test: the same events give identical reports and
// model digests whether replayed from a file (pipeline.Replay), run from a
// file (FileSource), from a one-partition Kafka topic or from a JetStream
// stream, with config.yaml's learners (every algorithm).
func TestTransportsAgree(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	c := loadExampleConfig(t)
	demo, err := os.ReadFile(filepath.Join("..", "..", "testdata", "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	delayed := *c
	delayed.Labels = config.Labels{Delayed: true, Wait: 200, MaxPending: 150}
	multiclass, err := config.Parse("multiclass.yaml", []byte(`input: {classes: [ham, spam, promo]}
features: {bits: 10}
learners:
  - {name: mpct, algorithm: multiclass-perceptron, bias: true}
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: logistic, bias: true}
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 9}}
`))
	if err != nil {
		t.Fatal(err)
	}
	streams := []struct {
		name   string
		values [][]byte
		c      *config.Config
	}{
		{"demo", splitLines(demo), c},
		// Label noise, unlabeled events and every kind of bad record.
		{"noisy", genEvents(3000, 11, 0.1, 0.2, 97), c},
		// Labels after their events, late, twice, for unknown ids, never.
		{"delayed", genDelayed(3000, 150, 13), &delayed},
		// Three classes, unlabeled events and labels that are no class.
		{"multiclass", genClasses(3000, 17), multiclass},
	}
	brokers := kafkaCluster(t, 1, "demo", "noisy", "delayed", "multiclass")
	natsURL := testbroker.NATS(t, "EVENTS", "events.>")

	for _, st := range streams {
		t.Run(st.name, func(t *testing.T) {
			c := st.c
			data := append(bytes.Join(st.values, []byte("\n")), '\n')
			want := replayReport(t, c, data)
			if want.Events != uint64(len(st.values)) || want.Labeled == 0 {
				t.Fatalf("replay: %d events (%d labeled) of %d records", want.Events, want.Labeled, len(st.values))
			}
			if st.name == "noisy" && (want.Invalid == 0 || want.Predicted == 0) {
				t.Fatalf("noisy stream: %d invalid, %d unlabeled", want.Invalid, want.Predicted)
			}
			if l := want.Labels; st.name == "delayed" && (l == nil || l.Joined < 1000 || l.Late == 0 || l.Unknown == 0 || l.Duplicate == 0 || l.Expired == 0) {
				t.Fatalf("delayed stream: labels %+v", l)
			}
			check := func(what string, reps []Report) {
				t.Helper()
				if len(reps) != 1 || reps[0].Partition != 0 {
					t.Fatalf("%s: %d models, want one (partition 0)", what, len(reps))
				}
				sameReport(t, what, reps[0].Report, want)
				// Consumed to the end: a broker says the lag is 0; a file
				// says nothing.
				switch lag := reps[0].ConsumerLag; {
				case what == "file" && lag != nil:
					t.Errorf("file: consumer_lag %d, want none", *lag)
				case what != "file" && (lag == nil || *lag != 0):
					t.Errorf("%s: consumer_lag %v, want 0", what, lag)
				}
			}

			path := filepath.Join(t.TempDir(), st.name+".jsonl")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			fsrc, err := connectors.NewFileSource(path)
			if err != nil {
				t.Fatal(err)
			}
			check("file", runReports(t, c, fsrc))
			fsrc.Close()

			kcfg := kafkaTestConfig(brokers, st.name, "agree-"+st.name)
			ksink, err := connectors.NewKafkaSink(kcfg, st.name)
			if err != nil {
				t.Fatal(err)
			}
			publishAll(t, ksink, st.values, nil)
			ksrc := openKafka(t, kcfg)
			check("kafka", runReports(t, c, ksrc))
			if err := ksrc.Close(); err != nil {
				t.Error(err)
			}

			subject := "events." + st.name
			jsink, err := connectors.NewJetStreamSink(connectors.NATSConfig{URL: natsURL}, "EVENTS", subject)
			if err != nil {
				t.Fatal(err)
			}
			publishAll(t, jsink, st.values, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			jsrc, err := connectors.NewJetStreamSource(ctx, connectors.NATSConfig{URL: natsURL, Stream: "EVENTS",
				Subject: subject, Durable: "agree-" + st.name, JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}, true)
			if err != nil {
				t.Fatal(err)
			}
			check("jetstream", runReports(t, c, jsrc))
			if err := jsrc.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Scale-out: two Services in one consumer group split a 4-partition topic
// of keyed events. Every event is learned exactly once, and each
// partition's model is exactly a replay of that partition's records in
// offset order.
//
// Both members join before either consumes. A rebalance in the middle of
// the run (a member crashing or a session timing out) would hand a
// partition over at its last commit: the new owner would learn the records
// since then again, in a fresh model, and the old owner's model of that
// partition would be stale. Handing models over with their positions is
// the checkpoint issue's job; this test keeps the group stable.
func TestKafkaScaleOut(t *testing.T) {
	const parts, n = 4, 2400
	c := loadExampleConfig(t)
	brokers := kafkaCluster(t, parts, "events")
	values := genEvents(n, 12, 0.1, 0.2, 101)
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "tenant-%d", i%16)
	}
	cfg := kafkaTestConfig(brokers, "events", "scale")
	sink, err := connectors.NewKafkaSink(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, sink, values, keys)

	a, b := openKafka(t, cfg), openKafka(t, cfg)
	deadline := time.Now().Add(15 * time.Second)
	for {
		pa, pb := a.Assignments(), b.Assignments()
		if len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == parts {
			if all := slices.Sorted(slices.Values(append(pa, pb...))); !slices.Equal(all, []int32{0, 1, 2, 3}) {
				t.Fatalf("assignments %v and %v overlap", pa, pb)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no split after 15s: %v and %v", pa, pb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	owned := [][]int32{a.Assignments(), b.Assignments()}

	reps := make([][]Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, src := range []*connectors.KafkaSource{a, b} {
		wg.Go(func() {
			s, err := New(Options{Config: c, Source: src, Predictions: discardSink{}, CommitEvery: 50})
			if err != nil {
				errs[i] = err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if errs[i] = s.Run(ctx); errs[i] == nil {
				reps[i], errs[i] = s.Reports()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
	}
	if got := [][]int32{a.Assignments(), b.Assignments()}; !slices.Equal(got[0], owned[0]) || !slices.Equal(got[1], owned[1]) {
		t.Fatalf("the group rebalanced during the run (%v, then %v): the test needs a stable group", owned, got)
	}
	a.Close()
	b.Close()

	byPart := readByPartition(t, brokers, "events", parts)

	var total uint64
	modelOf := map[int32]int{}
	for who, rs := range reps {
		if len(rs) == 0 {
			t.Errorf("service %d (partitions %v) learned nothing", who, owned[who])
		}
		for _, r := range rs {
			if prev, ok := modelOf[r.Partition]; ok {
				t.Errorf("partition %d has a model in services %d and %d", r.Partition, prev, who)
			}
			modelOf[r.Partition] = who
			if !slices.Contains(owned[who], r.Partition) {
				t.Errorf("service %d has a model of partition %d, which it does not own (%v)", who, r.Partition, owned[who])
			}
			total += r.Events
			data := append(bytes.Join(byPart[r.Partition], []byte("\n")), '\n')
			sameReport(t, fmt.Sprintf("partition %d", r.Partition), r.Report, replayReport(t, c, data))
		}
	}
	if total != n {
		t.Errorf("the models learned %d events, %d were published", total, n)
	}
}

// After Run returns and the Kafka source and sinks are closed, no
// goroutine is left.
func TestKafkaRunLeavesNoGoroutine(t *testing.T) {
	brokers := kafkaCluster(t, 2, "events", "preds", "reports")
	cfg := kafkaTestConfig(brokers, "events", "leak")
	sink, err := connectors.NewKafkaSink(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	values := genEvents(300, 13, 0.1, 0.1, 29)
	keys := make([][]byte, len(values))
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%d", i%5)
	}
	publishAll(t, sink, values, keys)
	before := settleGoroutines(-1)

	src, err := connectors.NewKafkaSource(context.Background(), cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	preds, err := connectors.NewKafkaSink(cfg, "preds")
	if err != nil {
		t.Fatal(err)
	}
	reports, err := connectors.NewKafkaSink(cfg, "reports")
	if err != nil {
		t.Fatal(err)
	}
	dl := connectors.NewFileSink(filepath.Join(t.TempDir(), "dead.jsonl"))
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds, Reports: reports,
		ReportEvery: 50, ReportInterval: 20 * time.Millisecond, DeadLetters: dl, CommitEvery: 40, CommitInterval: 10 * time.Millisecond})
	run(t, s)
	for _, c := range []interface{ Close() error }{src, preds, reports, dl} {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
	if after := settleGoroutines(before); after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Run and Close, %d before:\n%s", after, before, buf[:runtime.Stack(buf, true)])
	}
}

// genDelayed returns n events with ids and features, most without their
// label: it comes as a label event (id and label) 0..maxDelay records
// later, for a tenth never; a tenth are labeled at once; 3% of labels come
// twice, and n/50 are for ids never seen.
func genDelayed(n, maxDelay int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	type timed struct {
		at  float64
		rec []byte
	}
	var all []timed
	for i, ev := range genEvents(n, seed, 0.1, 0, 0) {
		var e struct {
			Features map[string]float64 `json:"features"`
			Label    int                `json:"label"`
		}
		if err := json.Unmarshal(ev, &e); err != nil {
			panic(err)
		}
		feats, _ := json.Marshal(e.Features)
		if rng.IntN(10) == 0 {
			all = append(all, timed{float64(i), fmt.Appendf(nil, `{"id":"e%d","features":%s,"label":%d}`, i, feats, e.Label)})
			continue
		}
		all = append(all, timed{float64(i), fmt.Appendf(nil, `{"id":"e%d","features":%s}`, i, feats)})
		if rng.IntN(10) == 0 {
			continue
		}
		label := fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, e.Label)
		at := float64(i) + float64(rng.IntN(maxDelay+1)) + 0.5
		all = append(all, timed{at, label})
		if rng.IntN(33) == 0 {
			all = append(all, timed{at + float64(rng.IntN(maxDelay+1)) + 0.25, label})
		}
	}
	for k := range n / 50 {
		all = append(all, timed{rng.Float64() * float64(n), fmt.Appendf(nil, `{"id":"x%d","label":1}`, k)})
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].at < all[b].at })
	out := make([][]byte, len(all))
	for i, t := range all {
		out[i] = t.rec
	}
	return out
}
