package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// testYAML has every algorithm: the learners of config.yaml plus a table
// class (whose finite domain makes "domain" rejections possible).
const testYAML = `
input: {positive: [spam], negative: [ham]}
features: {bits: 16}
learners:
  - {name: pct, algorithm: perceptron, bias: true, margin: 0.009}
  - {name: ogd, algorithm: ogd, loss: logistic, eta: 0.5, radius: 10, bias: true}
  - {name: consistent, algorithm: consistent, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: wm-h, algorithm: weighted-majority, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}, seed: 1}
  - {name: wm-l, algorithm: weighted-majority, experts: [pct, ogd, soa], seed: 1}
`

// tableYAML adds an explicit table over feature t with domain {0, 1, 2}:
// an event with t = 5 is outside it.
const tableYAML = `
features: {bits: 16}
learners:
  - {name: pct, algorithm: perceptron}
  - name: tab
    algorithm: soa
    class: {kind: table, feature: t, domain: [0, 1, 2], hypotheses: [[0, 0, 1], [0, 1, 1]]}
`

func parseConfig(t testing.TB, src string) *config.Config {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// genEvents returns n JSONL events (no trailing newlines): v, w uniform,
// label 1 iff v >= 0.37 flipped with probability noise, unlabeled with
// probability unlabeled, and a bad record every badEvery events (0: none),
// cycling through the reasons in badRecords.
func genEvents(n int, seed uint64, noise, unlabeled float64, badEvery int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([][]byte, 0, n)
	bad := 0
	for i := range n {
		if badEvery > 0 && i%badEvery == badEvery-1 {
			out = append(out, []byte(badRecords[bad%len(badRecords)].raw))
			bad++
			continue
		}
		v, w := rng.Float64(), rng.Float64()
		label := 0
		if v >= 0.37 {
			label = 1
		}
		if rng.Float64() < noise {
			label = 1 - label
		}
		lab := fmt.Sprintf(`,"label":%d`, label)
		if rng.Float64() < unlabeled {
			lab = ""
			if i%2 == 0 {
				lab = `,"label":null`
			}
		}
		out = append(out, fmt.Appendf(nil, `{"id":"e-%d","key":"tenant-%d","features":{"v":%.4f,"w":%.4f}%s}`, i, i%8, v, w, lab))
	}
	return out
}

// badRecords are records the decoder rejects, one per reason, each one
// line of valid UTF-8 except the utf8 one.
var badRecords = []struct {
	raw    string
	reason string
}{
	{`{"id":"bad-1","features":{"v":0.5}`, "malformed"},
	{`{"id":2,"features":{"v":0.5},"label":1}`, "type"},
	{`{"id":"bad-3","features":{"v":1e400},"label":1}`, "nonfinite"},
	{`{"id":"bad-4","features":{"v":0.5},"label":"maybe"}`, "label"},
	{`{"id":"bad-5","label":1,"label":0,"features":{"v":0.5}}`, "duplicate"},
	{"{\"id\":\"bad-6\xff\",\"features\":{\"v\":0.5},\"label\":1}", "utf8"},
	{`[1,2,3]`, "type"},
}

// isLabeled reports whether a record of genEvents is a valid labeled event.
func isLabeled(b []byte) bool {
	for _, r := range badRecords {
		if string(b) == r.raw {
			return false
		}
	}
	return bytes.Contains(b, []byte(`"label":0`)) || bytes.Contains(b, []byte(`"label":1`))
}

// memSource is a Source over records in memory. After the records it
// returns ErrEndOfInput, or blocks until ctx is done when block is set, or
// returns failErr when it is set. onCommit, when set, runs inside Commit
// (on the Service's goroutine).
type memSource struct {
	recs     []connectors.Record
	i        int
	block    bool
	failErr  error
	onCommit func(connectors.Record)
	fetched  chan struct{} // when not nil, signalled once all records were fetched

	mu      sync.Mutex
	commits []connectors.Record
	closed  bool
}

func newMemSource(values [][]byte, partitions int32) *memSource {
	s := &memSource{}
	next := make([]int64, partitions)
	for i, v := range values {
		p := int32(0)
		if partitions > 1 {
			p = int32(i) % partitions
		}
		s.recs = append(s.recs, connectors.Record{Value: v, Partition: p, Offset: next[p]})
		next[p]++
	}
	return s
}

func (s *memSource) Fetch(ctx context.Context) (connectors.Record, error) {
	if err := ctx.Err(); err != nil {
		return connectors.Record{}, err
	}
	if s.i < len(s.recs) {
		r := s.recs[s.i]
		s.i++
		// The contract: slices are valid until the next Fetch. Hand out a
		// copy so that a Service keeping one would see it overwritten.
		r.Value = append([]byte(nil), r.Value...)
		return r, nil
	}
	if s.fetched != nil {
		close(s.fetched)
		s.fetched = nil
	}
	switch {
	case s.failErr != nil:
		return connectors.Record{}, s.failErr
	case s.block:
		<-ctx.Done()
		return connectors.Record{}, ctx.Err()
	}
	return connectors.Record{}, connectors.ErrEndOfInput
}

func (s *memSource) Commit(_ context.Context, r connectors.Record) error {
	if s.onCommit != nil {
		s.onCommit(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = append(s.commits, connectors.Record{Partition: r.Partition, Offset: r.Offset})
	return nil
}

func (s *memSource) Name() string { return "mem:test" }

func (s *memSource) Close() error { s.closed = true; return nil }

func (s *memSource) commitLog() []connectors.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

var _ connectors.Source = (*memSource)(nil)

// memSink keeps copies of what it was given; it is safe for concurrent use.
type memSink struct {
	mu      sync.Mutex
	msgs    [][]byte
	keys    [][]byte
	flushes int
	durable int // messages published before the last Flush
	failErr error
}

func (s *memSink) Publish(_ context.Context, key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failErr != nil {
		return s.failErr
	}
	s.msgs = append(s.msgs, bytes.Clone(value))
	s.keys = append(s.keys, bytes.Clone(key))
	return nil
}

func (s *memSink) Flush(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
	s.durable = len(s.msgs)
	return nil
}

// durableHas reports whether a message published before the last Flush
// contains sub.
func (s *memSink) durableHas(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs[:s.durable] {
		if strings.Contains(string(m), sub) {
			return true
		}
	}
	return false
}

// allDurable reports whether every message was published before a Flush.
func (s *memSink) allDurable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable == len(s.msgs)
}

func (s *memSink) Close() error { return nil }

func (s *memSink) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// discardSink drops everything without allocating.
type discardSink struct{}

func (discardSink) Publish(context.Context, []byte, []byte) error { return nil }
func (discardSink) Flush(context.Context) error                   { return nil }
func (discardSink) Close() error                                  { return nil }

func newService(t testing.TB, opt Options) *Service {
	t.Helper()
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t testing.TB, s *Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

type predictionMsg struct {
	ID        string `json:"id"`
	Source    string `json:"source"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Round     uint64 `json:"round"`
	Labeled   bool   `json:"labeled"`
	// Answer is the filter's verdict: one of Predictions.
	Answer      predictedMsg   `json:"answer"`
	Predictions []predictedMsg `json:"predictions"`
}

// predictedMsg is one learner's prediction in a prediction message.
type predictedMsg struct {
	Learner     string   `json:"learner"`
	Class       string   `json:"class"`
	Score       *float64 `json:"score"`
	Probability *float64 `json:"probability"`
	From        string   `json:"from"`
}

// pipelineAndDecoder returns a pipeline of c's learners and a decoder of
// c's events: the work of learning, without the service around it.
func pipelineAndDecoder(tb testing.TB, c *config.Config) (*pipeline.Pipeline, *event.Decoder) {
	tb.Helper()
	p, err := pipeline.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		tb.Fatal(err)
	}
	return p, dec
}

// decodeStrict unmarshals b into v, refusing unknown fields, and checks b
// is valid JSON on its own.
func decodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %q", b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func TestNewRequiresConfigAndSource(t *testing.T) {
	if _, err := New(Options{Source: newMemSource(nil, 1)}); err == nil {
		t.Error("New without Config succeeded")
	}
	if _, err := New(Options{Config: parseConfig(t, testYAML)}); err == nil {
		t.Error("New without Source succeeded")
	}
}

func TestPredictionMessages(t *testing.T) {
	ids := []string{
		"plain",
		`q"uo\te`,
		"ctl\x00\x01\x1f\t\n\r",
		"unicode é€😀 \u2028\u2029 \x7f",
		"",
	}
	var values [][]byte
	for i, id := range ids {
		jid, _ := json.Marshal(id)
		label := `,"label":1`
		if i%2 == 1 {
			label = ""
		}
		values = append(values, fmt.Appendf(nil, `{"id":%s,"key":"k%d","features":{"v":0.%d,"w":1}%s}`, jid, i, i+3, label))
	}
	// A bad record in the middle takes a round but gets no prediction.
	values = slices.Insert(values, 2, []byte(`{"id":`))
	src := newMemSource(values, 1)
	preds := &memSink{}
	c := parseConfig(t, testYAML+"answer: wm-l\n")
	s := newService(t, Options{Config: c, Source: src, Predictions: preds})
	run(t, s)

	msgs := preds.messages()
	if len(msgs) != len(ids) {
		t.Fatalf("%d prediction messages, want %d", len(msgs), len(ids))
	}
	names := make([]string, len(c.Learners))
	for i, l := range c.Learners {
		names[i] = l.Name
	}
	// Each learner's class is the label a pipeline of the same
	// configuration predicts, fed the same good records, named as
	// input.positive and input.negative name it.
	ref, dec := pipelineAndDecoder(t, c)
	var want [][]string
	for _, v := range slices.Delete(slices.Clone(values), 2, 3) {
		var ev event.Event
		if err := dec.Decode(v, &ev); err != nil {
			t.Fatal(err)
		}
		preds, reason := ref.Process(&ev)
		if reason != "" {
			t.Fatalf("reference pipeline: %s", reason)
		}
		classes := make([]string, len(preds))
		for j, pr := range preds {
			classes[j] = map[int8]string{online.Positive: "spam", online.Negative: "ham"}[pr.Label]
		}
		want = append(want, classes)
	}
	for i, b := range msgs {
		var p predictionMsg
		decodeStrict(t, b, &p)
		offset := int64(i)
		if i >= 2 {
			offset++ // after the bad record
		}
		if p.ID != ids[i] || p.Source != "mem:test" || p.Partition != 0 || p.Offset != offset || p.Round != uint64(offset+1) || p.Labeled != (i%2 == 0) {
			t.Errorf("message %d: %+v, want id %q offset %d round %d labeled %v", i, p, ids[i], offset, offset+1, i%2 == 0)
		}
		if string(preds.keys[i]) != fmt.Sprintf("k%d", i) {
			t.Errorf("message %d: key %q, want k%d", i, preds.keys[i], i)
		}
		if len(p.Predictions) != len(names) {
			t.Fatalf("message %d: %d predictions, want %d", i, len(p.Predictions), len(names))
		}
		// The answer is the configured learner's prediction, as it is
		// among the others.
		if a := p.Predictions[6]; p.Answer.Learner != "wm-l" || p.Answer.Class != a.Class || p.Answer.Score == nil || a.Score == nil ||
			*p.Answer.Score != *a.Score || p.Answer.Probability == nil || a.Probability == nil || *p.Answer.Probability != *a.Probability {
			t.Errorf("message %d: answer %+v, want wm-l's prediction %+v", i, p.Answer, a)
		}
		for j, pr := range p.Predictions {
			// The label as input.positive and input.negative name it, and
			// no other; a probability for the logistic OGD and the
			// Weighted-Majority learners, none for the others.
			if pr.Learner != names[j] || pr.Class != want[i][j] || pr.Score == nil || pr.From != "" {
				t.Errorf("message %d prediction %d: %+v (want learner %s, class %s, a score)", i, j, pr, names[j], want[i][j])
			}
			_, prober := map[string]bool{"ogd": true, "wm-h": true, "wm-l": true}[pr.Learner]
			if has := pr.Probability != nil; has != prober || has && !(*pr.Probability >= 0 && *pr.Probability <= 1) {
				t.Errorf("message %d prediction %d (%s): probability %v", i, j, pr.Learner, pr.Probability)
			}
		}
	}
}

func TestDeadLetters(t *testing.T) {
	good := `{"id":"ok","features":{"v":0.5,"t":1},"label":1}`
	values := [][]byte{[]byte(good)}
	var want []deadLetterMsg
	for _, b := range badRecords {
		want = append(want, deadLetterMsg{Reason: b.reason, Raw: b.raw})
		values = append(values, []byte(b.raw), []byte(good))
	}
	// Outside the table's domain {0, 1, 2}: rejected before any model.
	domain := `{"id":"dom","features":{"v":0.5,"t":5},"label":1}`
	want = append(want, deadLetterMsg{Reason: "domain", Raw: domain})
	values = append(values, []byte(domain), []byte(good))

	src := newMemSource(values, 1)
	dl, preds := &memSink{}, &memSink{}
	s := newService(t, Options{Config: parseConfig(t, tableYAML), Source: src, DeadLetters: dl, Predictions: preds})
	run(t, s)

	msgs := dl.messages()
	if len(msgs) != len(want) {
		t.Fatalf("%d dead letters, want %d:\n%s", len(msgs), len(want), bytes.Join(msgs, []byte("\n")))
	}
	for i, b := range msgs {
		var d deadLetterMsg
		decodeStrict(t, b, &d)
		w := want[i]
		offset := int64(2*i + 1)
		raw := d.Raw
		if w.Reason == "utf8" {
			if d.Raw != "" || d.RawBase64 == "" {
				t.Errorf("utf8 dead letter: raw %q raw_base64 %q, want base64 only", d.Raw, d.RawBase64)
			}
			raw = string(mustBase64(t, d.RawBase64))
		}
		if d.RawTruncated || d.RawSize != 0 {
			t.Errorf("dead letter %d of a short record: raw_truncated %v raw_size %d, want neither", i, d.RawTruncated, d.RawSize)
		}
		if d.Source != "mem:test" || d.Offset != offset || d.Reason != w.Reason || raw != w.Raw {
			t.Errorf("dead letter %d: %+v\nwant source mem:test offset %d reason %s raw %q", i, d, offset, w.Reason, w.Raw)
		}
		if !strings.Contains(d.Error, "mem:test") || !strings.Contains(d.Error, fmt.Sprint(offset)) {
			t.Errorf("dead letter %d: error %q does not name the source and offset %d", i, d.Error, offset)
		}
	}
	if got := len(preds.messages()); got != len(badRecords)+2 {
		t.Errorf("%d predictions, want one per good record (%d)", got, len(badRecords)+2)
	}
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.Events != uint64(len(values)) || r.Invalid != uint64(len(want)) || r.Labeled != uint64(len(badRecords)+2) {
		t.Errorf("report: events %d invalid %d labeled %d; want %d, %d, %d", r.Events, r.Invalid, r.Labeled, len(values), len(want), len(badRecords)+2)
	}
	for _, w := range want {
		if r.InvalidByReason[w.Reason] == 0 {
			t.Errorf("invalid_by_reason %v lacks %s", r.InvalidByReason, w.Reason)
		}
	}
	// Bad records never touch a model: the same good records alone give
	// the same learner states.
	clean := newService(t, Options{Config: parseConfig(t, tableYAML), Source: newMemSource(slices.Repeat([][]byte{[]byte(good)}, len(badRecords)+2), 1)})
	run(t, clean)
	creps, _ := clean.Reports()
	for i, l := range r.Learners {
		if l.StateSHA256 != creps[0].Learners[i].StateSHA256 || l.Rounds != creps[0].Learners[i].Rounds {
			t.Errorf("learner %s: bad records changed the model", l.Name)
		}
	}
}

func mustBase64(t testing.TB, s string) []byte {
	t.Helper()
	var b []byte
	if err := json.Unmarshal([]byte(`"`+s+`"`), &b); err != nil { // []byte decodes base64
		t.Fatal(err)
	}
	return b
}

func decodeReports(t testing.TB, msgs [][]byte) []Report {
	t.Helper()
	out := make([]Report, len(msgs))
	for i, b := range msgs {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("report %d: %v: %s", i, err, b)
		}
	}
	return out
}

// Reports go out every ReportEvery labeled events of each model (unlabeled
// and invalid events do not count) and once per model at the end.
func TestReportsEveryLabeled(t *testing.T) {
	const every = 10
	values := genEvents(600, 3, 0.05, 0.3, 37)
	const parts = 3
	src := newMemSource(values, parts)
	reports := &memSink{}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Reports: reports, ReportEvery: every})
	run(t, s)

	// Expected: per partition, a report after its every-th labeled event.
	labeled := make([]int, parts)
	var want []struct {
		part   int32
		events uint64
	}
	seen := make([]uint64, parts)
	for _, r := range src.recs {
		seen[r.Partition]++
		if isLabeled(r.Value) {
			labeled[r.Partition]++
			if labeled[r.Partition]%every == 0 {
				want = append(want, struct {
					part   int32
					events uint64
				}{r.Partition, seen[r.Partition]})
			}
		}
	}
	got := decodeReports(t, reports.messages())
	if len(got) != len(want)+parts {
		t.Fatalf("%d reports, want %d periodic + %d final", len(got), len(want), parts)
	}
	// Each model's worker publishes its reports in its order; the
	// partitions' reports interleave as the workers run.
	next := make([]int, parts) // per partition, the index in want of its next report
	for i, r := range got[:len(want)] {
		k := next[r.Partition]
		for k < len(want) && want[k].part != r.Partition {
			k++
		}
		if k == len(want) || r.Events != want[k].events || r.Labeled%every != 0 || r.Source != "mem:test" {
			t.Errorf("report %d: partition %d events %d labeled %d, not the partition's next periodic report", i, r.Partition, r.Events, r.Labeled)
			continue
		}
		next[r.Partition] = k + 1
	}
	final := got[len(want):]
	finals, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range final {
		f := finals[i]
		if r.Partition != int32(i) || r.Events != seen[i] || r.Labeled != uint64(labeled[i]) {
			t.Errorf("final report %d: partition %d events %d labeled %d, want %d %d %d", i, r.Partition, r.Events, r.Labeled, i, seen[i], labeled[i])
		}
		if !sameLearners(r.Report, f.Report) {
			t.Errorf("final report of partition %d differs from Reports()", i)
		}
	}
	if !reports.allDurable() {
		t.Error("reports published after the last flush")
	}
}

// sameLearners compares everything but Seconds.
func sameLearners(a, b pipeline.Report) bool {
	a.Seconds, b.Seconds = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Interval reports and interval commits also happen while the source is
// idle (Fetch blocking), and cancelling ctx drains: Run commits, reports
// once more, flushes and returns nil.
func TestIdleIntervalAndCancelDrain(t *testing.T) {
	values := genEvents(50, 4, 0, 0, 0)
	src := newMemSource(values, 1)
	src.block = true
	fetched := make(chan struct{})
	src.fetched = fetched
	reports, preds := &memSink{}, &memSink{}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Reports: reports, Predictions: preds,
		ReportInterval: 30 * time.Millisecond, CommitEvery: 1 << 20, CommitInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-fetched
	// A commit round may fall while the last records are fetched (a
	// loaded machine takes more than the 20ms interval for 50): the one
	// wanted is the idle source's, of the last record.
	deadline := time.Now().Add(10 * time.Second)
	idleCommit := func() bool {
		c := src.commitLog()
		return len(c) > 0 && c[len(c)-1].Offset == 49
	}
	for !idleCommit() || len(reports.messages()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("idle source: commits %v and %d reports after 10s; want a commit of the last record (offset 49) after CommitInterval and reports every ReportInterval",
				src.commitLog(), len(reports.messages()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	nRep := len(reports.messages())
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	got := decodeReports(t, reports.messages())
	if len(got) < nRep+1 {
		t.Fatalf("no final report after cancel")
	}
	if last := got[len(got)-1]; last.Events != 50 {
		t.Errorf("final report: %d events, want 50", last.Events)
	}
	if !preds.allDurable() || !reports.allDurable() {
		t.Error("outputs published after the last flush")
	}
}

// TestCommitWaitsForOutputs: a position is committed only once every
// output of the records up to it is flushed to its sink — predictions,
// dead letters — so a crash never leaves a committed record without its
// outputs.
func TestCommitWaitsForOutputs(t *testing.T) {
	values := genEvents(3000, 4, 0, 0, 0)
	for i := 7; i < len(values); i += 97 {
		values[i] = []byte(`{"id": broken`)
	}
	src := newMemSource(values, 1)
	preds, dead := &memSink{}, &memSink{}
	var violations []string
	src.onCommit = func(r connectors.Record) {
		preds.mu.Lock()
		dead.mu.Lock()
		defer preds.mu.Unlock()
		defer dead.mu.Unlock()
		bad := 0
		for i := 7; i <= int(r.Offset); i += 97 {
			bad++
		}
		if good := int(r.Offset) + 1 - bad; preds.durable < good || dead.durable < bad {
			violations = append(violations, fmt.Sprintf("offset %d committed with %d of %d predictions and %d of %d dead letters durable",
				r.Offset, preds.durable, good, dead.durable, bad))
		}
	}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds, DeadLetters: dead, CommitEvery: 100})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A round is asked every 100 records, one at a time in flight: a
	// loaded machine coalesces them, but some come before the last.
	if n := len(src.commitLog()); n < 3 {
		t.Fatalf("%d commits, want some before the final one (a round every 100 records)", n)
	}
	if len(dead.messages()) != 31 || len(preds.messages()) != 3000-31 {
		t.Fatalf("%d dead letters and %d predictions, want 31 and %d", len(dead.messages()), len(preds.messages()), 3000-31)
	}
	for _, v := range violations {
		t.Error(v)
	}
}

// Cancel in the middle of a busy stream: the final commit covers exactly
// what was processed.
func TestCancelCommitsProcessed(t *testing.T) {
	values := genEvents(300, 5, 0.1, 0.2, 0)
	src := newMemSource(values, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	preds := &memSink{}
	processed := 0
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: cancelAfter{preds, 123, &processed, cancel},
		CommitEvery: 1000, CommitInterval: time.Hour})
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v, want nil after cancel", err)
	}
	// The workers learn what they were handed when the cancel came (a
	// few records past the 123rd: the batches on their way), no more.
	if processed < 123 || processed > 123+2*(workerQueue+1) {
		t.Fatalf("processed %d records, want 123 and those on their way", processed)
	}
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	var want []connectors.Record
	var events uint64
	for _, r := range reps {
		want = append(want, connectors.Record{Partition: r.Partition, Offset: int64(r.Events) - 1})
		events += r.Events
	}
	if events != uint64(processed) {
		t.Errorf("models hold %d events, %d were processed", events, processed)
	}
	commits := src.commitLog()
	if !slices.EqualFunc(commits, want, func(a, b connectors.Record) bool { return a.Partition == b.Partition && a.Offset == b.Offset }) {
		t.Errorf("commits %v, want %v (the last record in each model)", commits, want)
	}
}

// cancelAfter is a predictions sink that cancels after n messages.
type cancelAfter struct {
	*memSink
	n      int
	count  *int
	cancel context.CancelFunc
}

func (c cancelAfter) Publish(ctx context.Context, k, v []byte) error {
	*c.count++
	if *c.count == c.n {
		c.cancel()
	}
	return c.memSink.Publish(ctx, k, v)
}

// Commits: only of records processed and with their outputs durable, per
// partition, a round every CommitEvery records (counted over all
// partitions, once the round before is done), and a final one at the last
// record of every partition.
func TestCommitBatching(t *testing.T) {
	const every, parts = 25, 3
	values := genEvents(310, 6, 0.1, 0.2, 13)
	src := newMemSource(values, parts)
	preds, dead := &memSink{}, &memSink{}
	src.onCommit = func(r connectors.Record) {
		// The worker published the record's prediction or dead letter
		// before it answered the round, and the round flushed it before
		// this.
		id := fmt.Sprintf(`"partition":%d,"offset":%d,`, r.Partition, r.Offset)
		if !preds.durableHas(id) && !dead.durableHas(id) {
			t.Errorf("commit of partition %d offset %d before its output is durable", r.Partition, r.Offset)
		}
	}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds, DeadLetters: dead,
		CommitEvery: every, CommitInterval: time.Hour})
	run(t, s)

	n := len(values)
	last := map[int32]int64{}
	commits := map[int32]int{}
	for _, c := range src.commitLog() {
		if prev, ok := last[c.Partition]; ok && c.Offset <= prev {
			t.Errorf("partition %d committed at %d after %d", c.Partition, c.Offset, prev)
		}
		last[c.Partition] = c.Offset
		commits[c.Partition]++
	}
	for p := range int32(parts) {
		if want := int64((n - 1 - int(p)) / parts); last[p] != want {
			t.Errorf("partition %d: last commit at %d, want its last record %d", p, last[p], want)
		}
		// A round every 25 records at most, each committing a partition
		// once; at the end, the round still waiting for its answers and
		// the final one; at least one round before the end.
		if c := commits[p]; c < 2 || c > n/every+2 {
			t.Errorf("partition %d committed %d times, want 2 to %d", p, c, n/every+2)
		}
	}
	// A partition without records since the last commit is not committed
	// again: a second run over nothing commits nothing.
	if before := len(src.commitLog()); s.commits.commit(context.Background(), drainTimeout) != nil || len(src.commitLog()) != before {
		t.Error("commit with nothing processed since the last one committed again")
	}
}

// A Fetch error ends Run with that error, after committing and reporting
// what was processed.
func TestFetchErrorReturned(t *testing.T) {
	boom := errors.New("boom: broker gone")
	src := newMemSource(genEvents(40, 7, 0, 0, 0), 1)
	src.failErr = boom
	reports := &memSink{}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Reports: reports, CommitInterval: time.Hour})
	err := s.Run(context.Background())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "fetch") {
		t.Fatalf("Run: %v, want the fetch error", err)
	}
	if c := src.commitLog(); len(c) != 1 || c[0].Offset != 39 {
		t.Errorf("commits %v, want the last processed record", c)
	}
	if got := decodeReports(t, reports.messages()); len(got) != 1 || got[0].Events != 40 {
		t.Errorf("want one final report of 40 events, got %d reports", len(got))
	}
}

// A sink failure stops Run with the error, and the record whose prediction
// was not published is not committed.
func TestSinkErrorNotCommitted(t *testing.T) {
	src := newMemSource(genEvents(30, 8, 0, 0, 0), 1)
	preds := &failAfter{n: 20}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds, CommitInterval: time.Hour})
	err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "predictions") {
		t.Fatalf("Run: %v, want the predictions error", err)
	}
	if c := src.commitLog(); len(c) != 1 || c[0].Offset != 19 {
		t.Errorf("commits %v, want offset 19 (the 21st record's prediction failed)", c)
	}
}

// An interval report the reports sink refuses stops Run with the error,
// as it did before workers: a worker's answer nobody waits for is not
// dropped.
func TestIntervalReportErrorStopsRun(t *testing.T) {
	src := newMemSource(genEvents(30, 8, 0, 0, 0), 2)
	src.block = true
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Reports: &failAfter{}, ReportInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err := s.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "reports") {
		t.Fatalf("Run: %v, want the reports error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run ended %v after the first failed report, at its context's end", d)
	}
}

type failAfter struct {
	discardSink
	n int
}

func (f *failAfter) Publish(context.Context, []byte, []byte) error {
	if f.n == 0 {
		return errors.New("sink down")
	}
	f.n--
	return nil
}

// The hot path — decode, predict, update, track and the prediction message
// to a sink — allocates nothing per record in steady state (DESIGN.md).
func TestProcessAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	values := genEvents(512, 9, 0.05, 0.2, 0)
	src := newMemSource(values, 1)
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: discardSink{}})
	ctx := context.Background()
	recs := src.recs
	s.startIntake(t)
	for _, r := range recs { // warm up: every feature slot seen, buffers grown
		if err := s.dispatch(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		if err := s.dispatch(ctx, &recs[i%len(recs)]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per record, want 0", allocs)
	}
}

// startIntake starts s's workers as Run does, for a test that hands them
// records itself (dispatch, as Run's loop does); they stop with the test.
func (s *Service) startIntake(t testing.TB) {
	t.Helper()
	s.wctx, s.wcancel = context.WithCancel(context.Background())
	s.intake = true
	t.Cleanup(func() {
		if err := s.stopWorkers(context.Background()); err != nil {
			t.Error(err)
		}
		s.wcancel()
		if err := s.failed(); err != nil {
			t.Error(err)
		}
	})
}

// Run starts no goroutine that outlives it.
func TestRunLeavesNoGoroutine(t *testing.T) {
	before := settleGoroutines(-1)
	for range 2 {
		src := newMemSource(genEvents(200, 10, 0.1, 0.1, 17), 2)
		s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: discardSink{},
			Reports: &memSink{}, ReportInterval: 20 * time.Millisecond, ReportEvery: 50, DeadLetters: &memSink{},
			CommitEvery: 10, CommitInterval: time.Millisecond})
		run(t, s)
	}
	if after := settleGoroutines(before); after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Run, %d before:\n%s", after, before, buf[:runtime.Stack(buf, true)])
	}
}

// settleGoroutines waits until the count is at most limit (limit < 0:
// until it holds still for 100ms) and returns it.
func settleGoroutines(limit int) int {
	n := runtime.NumGoroutine()
	still := 0
	for range 400 {
		time.Sleep(25 * time.Millisecond)
		m := runtime.NumGoroutine()
		if limit >= 0 && m <= limit {
			return m
		}
		if limit < 0 {
			if m == n {
				still++
				if still == 4 {
					return m
				}
			} else {
				still = 0
			}
		}
		n = m
	}
	return n
}

// revokingSource refuses commits of one partition as a Kafka source does
// after a rebalance gave it away.
type revokingSource struct {
	*memSource
	revoked int32
}

func (s revokingSource) Commit(ctx context.Context, r connectors.Record) error {
	if r.Partition == s.revoked {
		return fmt.Errorf("kafka source kafka:events: commit partition %d offset %d: %w", r.Partition, r.Offset+1, connectors.ErrPartitionRevoked)
	}
	return s.memSource.Commit(ctx, r)
}

// A commit refused because a rebalance revoked the partition does not stop
// the service: the new owner reads the partition from the last commit.
func TestRevokedPartitionCommitIsNotFatal(t *testing.T) {
	src := newMemSource(genEvents(100, 14, 0, 0, 0), 2)
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: revokingSource{src, 1}, CommitEvery: 10, CommitInterval: time.Hour})
	run(t, s)
	for _, c := range src.commitLog() {
		if c.Partition != 0 {
			t.Fatalf("commit of partition %d went through", c.Partition)
		}
	}
	if c := src.commitLog(); len(c) == 0 || c[len(c)-1].Offset != 49 {
		t.Errorf("partition 0 commits %v, want the last at offset 49", c)
	}
}
