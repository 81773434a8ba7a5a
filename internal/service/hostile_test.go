package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// hostileYAML has every algorithm, the averaged Perceptron and both OGD
// variants of config.yaml's service tests, and a dense length, so that a
// wrong-length x is a bad record too.
const hostileYAML = `
input: {positive: [spam], negative: [ham]}
features: {bits: 16, dense: 3}
learners:
  - {name: pct, algorithm: perceptron, bias: true, margin: 0.009}
  - {name: avg, algorithm: perceptron, average: true}
  - {name: ogd, algorithm: ogd, loss: logistic, eta: 0.5, radius: 10, bias: true}
  - {name: hinge, algorithm: ogd, loss: hinge, eta: 0.5}
  - {name: consistent, algorithm: consistent, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: halving, algorithm: halving, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}}
  - {name: wm-h, algorithm: weighted-majority, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 101}, seed: 1}
  - {name: wm-l, algorithm: weighted-majority, experts: [pct, ogd, soa], seed: 1}
`

// hostile is a bad record and the reason it must be dead-lettered with.
type hostile struct {
	name   string
	raw    []byte
	reason event.Reason
	once   bool // a big record: salted in once, not cycled
}

// hostileKinds returns one record of every kind of hostile input the
// issue lists, and then some. None holds a line break, so that a JSONL
// file carries each as one record.
func hostileKinds() []hostile {
	deep := strings.Repeat("[", event.MaxDepth+1) + strings.Repeat("]", event.MaxDepth+1)
	h := func(name, raw string, reason event.Reason) hostile {
		return hostile{name: name, raw: []byte(raw), reason: reason}
	}
	big := func(name, raw string, reason event.Reason) hostile {
		return hostile{name: name, raw: []byte(raw), reason: reason, once: true}
	}
	return []hostile{
		// NaN and ±Inf: not JSON as literals; overflowing numbers; strings.
		h("NaN literal", `{"id":"h","features":{"v":NaN},"label":1}`, event.ReasonMalformed),
		h("Infinity literal", `{"id":"h","x":[Infinity,0,0],"label":1}`, event.ReasonMalformed),
		h("1e999 feature", `{"id":"h","features":{"v":1e999,"w":0.5},"label":1}`, event.ReasonNonFinite),
		h("-1e999 in x", `{"id":"h","x":[0,-1e999,0],"label":0}`, event.ReasonNonFinite),
		h("NaN string in x", `{"id":"h","x":["NaN",0,0],"label":1}`, event.ReasonType),
		h("NaN string label", `{"id":"h","features":{"v":0.5},"label":"NaN"}`, event.ReasonLabel),
		h("1e999 label", `{"id":"h","features":{"v":0.5},"label":1e999}`, event.ReasonLabel),
		// Finite but huge: accepted, they would overflow the Perceptron.
		h("1e308 feature", `{"id":"h","features":{"v":1e308,"w":0.5},"label":1}`, event.ReasonRange),
		h("-1e308 in x", `{"id":"h","x":[-1e308,0,0],"label":0}`, event.ReasonRange),
		h("1e200 feature", `{"id":"h","features":{"w":1e200},"label":0}`, event.ReasonRange),
		h("colliding sum beyond the limit", `{"id":"h","features":{"w":6e15,"w":6e15},"label":1}`, event.ReasonRange),
		// Size and nesting.
		big("10 MB message", `{"id":"big","label":1,"text":"`+strings.Repeat("win a prize ", 10<<20/12)+`"}`, event.ReasonOversized),
		big("1 byte over MaxBytes", `{"id":"over","label":1,"features":{"v":0.5}}`+strings.Repeat(" ", event.DefaultMaxBytes), event.ReasonOversized),
		h("nesting deeper than MaxDepth", `{"id":"h","extra":`+deep+`,"label":1}`, event.ReasonDepth),
		h("deep feature value", `{"id":"h","features":{"v":`+deep+`},"label":1}`, event.ReasonDepth),
		// Invalid UTF-8.
		h("invalid UTF-8 in id", "{\"id\":\"h\xff\",\"features\":{\"v\":0.5},\"label\":1}", event.ReasonUTF8),
		h("invalid UTF-8 in text", "{\"id\":\"h\",\"text\":\"win \xc3\x28 now\",\"label\":1}", event.ReasonUTF8),
		h("invalid UTF-8 in a feature name", "{\"id\":\"h\",\"features\":{\"v\xe2\x82\":0.5},\"label\":1}", event.ReasonUTF8),
		h("overlong encoding", "{\"id\":\"\xc0\xaf\",\"label\":1}", event.ReasonUTF8),
		h("surrogate bytes", "{\"id\":\"h\",\"text\":\"\xed\xa0\x80\",\"label\":1}", event.ReasonUTF8),
		// Labels of the wrong type or value.
		h("label array", `{"id":"h","features":{"v":0.5},"label":[1]}`, event.ReasonType),
		h("label object", `{"id":"h","features":{"v":0.5},"label":{"y":1}}`, event.ReasonType),
		h("label 2", `{"id":"h","features":{"v":0.5},"label":2}`, event.ReasonLabel),
		h("label 0.5", `{"id":"h","features":{"v":0.5},"label":0.5}`, event.ReasonLabel),
		h("label maybe", `{"id":"h","features":{"v":0.5},"label":"maybe"}`, event.ReasonLabel),
		h("label True", `{"id":"h","features":{"v":0.5},"label":"True"}`, event.ReasonLabel),
		big("500 kB label", `{"id":"h","features":{"v":0.5},"label":"`+strings.Repeat("spam", 125_000)+`"}`, event.ReasonLabel),
		// Features of the wrong type.
		h("feature object", `{"id":"h","features":{"v":{"value":0.5}},"label":1}`, event.ReasonType),
		h("feature array", `{"id":"h","features":{"v":[0.5]},"label":1}`, event.ReasonType),
		h("features array", `{"id":"h","features":[0.5,0.2],"label":1}`, event.ReasonType),
		h("features string", `{"id":"h","features":"v=0.5","label":1}`, event.ReasonType),
		h("bool in x", `{"id":"h","x":[true,0,0],"label":1}`, event.ReasonType),
		h("null in x", `{"id":"h","x":[null,0,0],"label":1}`, event.ReasonType),
		h("x object", `{"id":"h","x":{"0":1},"label":1}`, event.ReasonType),
		h("text number", `{"id":"h","text":42,"label":1}`, event.ReasonType),
		h("id number", `{"id":7,"features":{"v":0.5},"label":1}`, event.ReasonType),
		h("x of the wrong length", `{"id":"h","x":[0.5,0.5],"label":1}`, event.ReasonLength),
		big("200k digits", `{"id":"h","features":{"v":1`+strings.Repeat("0", 200_000)+`},"label":1}`, event.ReasonNonFinite),
		// Not an event at all.
		h("truncated", `{"id":"e-7","key":"tenant-7","features":{"v":0.4`, event.ReasonMalformed),
		h("empty", ``, event.ReasonMalformed),
		h("blank", " \t ", event.ReasonMalformed),
		h("array", `[1,2,3]`, event.ReasonType),
		h("string", `"event"`, event.ReasonType),
		h("null", `null`, event.ReasonType),
		h("two objects", `{"label":1}{"label":1}`, event.ReasonMalformed),
		h("control character", "{\"id\":\"a\x01b\",\"label\":1}", event.ReasonMalformed),
		h("byte order mark", "\xef\xbb\xbf{\"id\":\"h\",\"label\":1}", event.ReasonMalformed),
		h("binary", "\xff\xfe\x00\x01\x02junk\x80", event.ReasonMalformed),
		h("single quotes", `{'id':'h','label':1}`, event.ReasonMalformed),
		h("duplicate label", `{"id":"h","label":1,"features":{"v":0.5},"label":0}`, event.ReasonDuplicate),
		// No features: learned, they would be all-zero examples.
		h("label only", `{"id":"m42","label":1}`, event.ReasonEmpty),
		h("misspelled features", `{"id":"h","feature":{"v":0.5},"label":0}`, event.ReasonEmpty),
		h("empty object", `{}`, event.ReasonEmpty),
	}
}

// saltedRecord is one record of a salted stream; bad is nil for a clean
// event.
type saltedRecord struct {
	raw []byte
	bad *hostile
}

// saltStream inserts hostile records into clean at random places so that
// exactly a tenth of the result is hostile: every kind at least once, the
// big ones exactly once. For a JSONL file, which cannot carry an empty or
// blank record (`run` over a file and `replay` skip blank lines, as JSONL
// tools do), those are replaced by a lone "{".
func saltStream(clean [][]byte, seed uint64, forFile bool) []saltedRecord {
	kinds := hostileKinds()
	nBad := len(clean) / 9
	var bad []*hostile
	for i := range kinds {
		if kinds[i].once {
			bad = append(bad, &kinds[i])
		}
	}
	for i := 0; len(bad) < nBad; i++ {
		if k := &kinds[i%len(kinds)]; !k.once {
			bad = append(bad, k)
		}
	}
	if forFile {
		for i, b := range bad {
			if len(bytes.Trim(b.raw, " \t")) == 0 {
				bad[i] = &hostile{name: "lone brace", raw: []byte("{"), reason: event.ReasonMalformed}
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	rng.Shuffle(len(bad), func(i, j int) { bad[i], bad[j] = bad[j], bad[i] })
	n := len(clean) + len(bad)
	isBad := make([]bool, n)
	for _, k := range rng.Perm(n)[:len(bad)] {
		isBad[k] = true
	}
	out := make([]saltedRecord, 0, n)
	c, b := 0, 0
	for i := range n {
		if isBad[i] {
			out = append(out, saltedRecord{raw: bad[b].raw, bad: bad[b]})
			b++
		} else {
			out = append(out, saltedRecord{raw: clean[c]})
			c++
		}
	}
	return out
}

func rawsOf(recs []saltedRecord) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = r.raw
	}
	return out
}

// deadLetterMsg is a dead letter as DeadLetters writes it.
type deadLetterMsg struct {
	Source       string `json:"source"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	Key          string `json:"key"`
	KeyBase64    string `json:"key_base64"`
	Reason       string `json:"reason"`
	Error        string `json:"error"`
	Raw          string `json:"raw"`
	RawBase64    string `json:"raw_base64"`
	RawTruncated bool   `json:"raw_truncated"`
	RawSize      int    `json:"raw_size"`
}

// hostileRun is what a run over a salted stream gave.
type hostileRun struct {
	what      string
	source    string
	offset0   int64 // the offset of the first record
	report    pipeline.Report
	p         *pipeline.Pipeline
	letters   [][]byte
	rawLimit  int // bytes of a record a dead letter can see (replay: MaxBytes), 0 for all
	skipEmpty bool
}

// checkHostileRun checks a run over salted against the clean stream's
// report: the same learners, bit for bit (rounds, mistakes, loss, regret,
// bounds, state_sha256); every bad record counted by its reason and
// dead-lettered exactly once with its reason, offset and original bytes
// (DeadLetterMaxRaw of them at most); and every learner's weights finite.
func checkHostileRun(t *testing.T, run hostileRun, salted []saltedRecord, clean pipeline.Report) {
	t.Helper()
	rep := run.report
	nBad := 0
	want := map[string]uint64{}
	for _, r := range salted {
		if r.bad != nil {
			nBad++
			want[string(r.bad.reason)]++
		}
	}
	if rep.Events != uint64(len(salted)) || rep.Invalid != uint64(nBad) || rep.Labeled != clean.Labeled || rep.Predicted != clean.Predicted {
		t.Errorf("%s: events/invalid/labeled/predicted %d/%d/%d/%d, want %d/%d/%d/%d", run.what,
			rep.Events, rep.Invalid, rep.Labeled, rep.Predicted, len(salted), nBad, clean.Labeled, clean.Predicted)
	}
	if !maps.Equal(rep.InvalidByReason, want) {
		t.Errorf("%s: invalid_by_reason %v, want what was injected: %v", run.what, rep.InvalidByReason, want)
	}
	got, _ := json.Marshal(rep.Learners)
	wantL, _ := json.Marshal(clean.Learners)
	if !bytes.Equal(got, wantL) {
		t.Errorf("%s: the salted stream's learners differ from the clean stream's:\n got %s\nwant %s", run.what, got, wantL)
	}

	if len(run.letters) != nBad {
		t.Fatalf("%s: %d dead letters, want one per bad record (%d)", run.what, len(run.letters), nBad)
	}
	k := 0
	for i, r := range salted {
		if r.bad == nil {
			continue
		}
		msg := run.letters[k]
		k++
		var d deadLetterMsg
		decodeStrict(t, msg, &d)
		offset := run.offset0 + int64(i)
		if d.Source != run.source || d.Offset != offset || d.Reason != string(r.bad.reason) {
			t.Errorf("%s: record %d (%s): dead letter %s/%d/%s, want %s/%d/%s: %s", run.what, i, r.bad.name,
				d.Source, d.Offset, d.Reason, run.source, offset, r.bad.reason, d.Error)
			continue
		}
		// A file's line as file:line; a broker's record as
		// source/partition/offset, the form of its outputs' identities.
		where := fmt.Sprintf("%s/%d/%d: ", run.source, d.Partition, offset)
		if run.what == "file" || run.what == "replay" {
			where = fmt.Sprintf(":%d: ", offset)
		}
		if !strings.Contains(d.Error, where) || strings.Contains(d.Error, "\n") || len(d.Error) > 512 {
			t.Errorf("%s: record %d (%s): error %.300q: want one short line naming %q", run.what, i, r.bad.name, d.Error, where)
		}
		raw := []byte(d.Raw)
		if d.RawBase64 != "" {
			raw = mustBase64(t, d.RawBase64)
		}
		orig := r.raw
		if run.rawLimit > 0 && len(orig) > run.rawLimit {
			orig = orig[:run.rawLimit] // the reader kept only MaxBytes
		}
		switch {
		case len(orig) <= DeadLetterMaxRaw:
			if !bytes.Equal(raw, orig) || d.RawTruncated || d.RawSize != 0 {
				t.Errorf("%s: record %d (%s): raw %.80q (truncated %v, size %d), want the original %.80q",
					run.what, i, r.bad.name, raw, d.RawTruncated, d.RawSize, orig)
			}
		default:
			if !d.RawTruncated || d.RawSize != len(orig) || len(raw) > DeadLetterMaxRaw || len(raw) < DeadLetterMaxRaw-3 ||
				!bytes.HasPrefix(orig, raw) {
				t.Errorf("%s: record %d (%s) of %d bytes: raw of %d bytes (truncated %v, size %d), want its first %d bytes",
					run.what, i, r.bad.name, len(orig), len(raw), d.RawTruncated, d.RawSize, DeadLetterMaxRaw)
			}
		}
		// Every dead letter fits a broker's default message size.
		if len(msg) >= 1<<20 {
			t.Errorf("%s: record %d (%s): dead letter of %d bytes", run.what, i, r.bad.name, len(msg))
		}
	}
	checkFiniteWeights(t, run.what, run.p)
}

// checkFiniteWeights fails t unless every real-valued weight of every
// learner of p is finite.
func checkFiniteWeights(t *testing.T, what string, p *pipeline.Pipeline) {
	t.Helper()
	for i, name := range p.Names() {
		var w []float64
		switch m := p.Model(i).(type) {
		case *online.Perceptron:
			w = m.Weights()
		case *online.OGD:
			w = m.Weights(nil)
		case *experts.OverLearners:
			w = m.Weights(nil)
		case *experts.WeightedMajority:
			w = m.Weights(nil)
		default:
			continue // version spaces hold no real numbers
		}
		for k, v := range w {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s: learner %s: weight %d is %v", what, name, k, v)
			}
		}
	}
}

// runHostile runs a Service over src with a dead-letter sink and returns
// the run: the one model's report and pipeline, and the dead letters.
func runHostile(t *testing.T, c *config.Config, src connectors.Source, what string, offset0 int64) hostileRun {
	t.Helper()
	dl := &memSink{}
	s := newService(t, Options{Config: c, Source: src, DeadLetters: dl, Predictions: discardSink{}, CommitEvery: 100})
	run(t, s)
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 {
		t.Fatalf("%s: %d models, want 1", what, len(reps))
	}
	return hostileRun{what: what, source: src.Name(), offset0: offset0, report: reps[0].Report,
		p: s.models.workers[reps[0].Partition].m.p, letters: dl.messages()}
}

// startBigNATS starts a NATS server with JetStream whose max_payload is 16
// MiB, and a stream on subject "hostile". The default max_payload, 1 MiB
// (as Kafka's message.max.bytes), refuses a 10 MB message at the producer:
// the service never sees it. A deployment that raises it still gets the
// decoder's own limit (input.max_bytes, 1 MiB by default).
func startBigNATS(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), MaxPayload: 16 << 20, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	js := testbroker.JetStream(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOSTILE", Subjects: []string{"hostile"}}); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

// Issue 5, item 4: a stream salted with 10% hostile records — NaN and ±Inf
// in every spelling, ±1e308 and other huge finite values, a 10 MB message,
// nesting past MaxDepth, invalid UTF-8, labels and features of the wrong
// type or value, truncated, empty and non-object records — gives, from
// memory, from a JSONL file (run and replay) and through a real JetStream
// server, exactly the clean stream's models, one dead letter per bad
// record with its reason and original bytes, counts by reason equal to
// what was injected, and finite weights.
func TestHostileStream(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	c := parseConfig(t, hostileYAML)
	clean := genEvents(2700, 21, 0.1, 0.2, 0)
	want := runHostile(t, c, newMemSource(clean, 1), "clean", 0)
	if want.report.Invalid != 0 || len(want.letters) != 0 || want.report.Labeled < 2000 {
		t.Fatalf("clean stream: %d invalid, %d dead letters, %d labeled", want.report.Invalid, len(want.letters), want.report.Labeled)
	}
	checkFiniteWeights(t, "clean", want.p)

	salted := saltStream(clean, 5, false)
	if n := len(salted) - len(clean); n*10 != len(salted) {
		t.Fatalf("%d hostile records in %d: want exactly 10%%", n, len(salted))
	}
	seen := map[string]bool{}
	for _, r := range salted {
		if r.bad != nil {
			seen[r.bad.name] = true
		}
	}
	if kinds := hostileKinds(); len(seen) != len(kinds) {
		t.Fatalf("%d kinds of hostile records salted in, want all %d", len(seen), len(kinds))
	}

	t.Run("memory", func(t *testing.T) {
		run := runHostile(t, c, newMemSource(rawsOf(salted), 1), "memory", 0)
		checkHostileRun(t, run, salted, want.report)
	})

	fileSalted := saltStream(clean, 5, true)
	path := filepath.Join(t.TempDir(), "salted.jsonl")
	if err := os.WriteFile(path, append(bytes.Join(rawsOf(fileSalted), []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("file", func(t *testing.T) {
		src, err := connectors.NewFileSource(path)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		checkHostileRun(t, runHostile(t, c, src, "file", 1), fileSalted, want.report)
	})

	// `streamlearn replay`: the Reader keeps only MaxBytes of an oversized
	// line, and its dead letters carry what it kept.
	t.Run("replay", func(t *testing.T) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := event.NewReader(f, "salted.jsonl", pipeline.EventConfig(c))
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(c)
		if err != nil {
			t.Fatal(err)
		}
		dl := &memSink{}
		if err := p.Replay(context.Background(), r, &DeadLetters{Sink: dl}, nil); err != nil {
			t.Fatal(err)
		}
		rep, err := p.Report()
		if err != nil {
			t.Fatal(err)
		}
		checkHostileRun(t, hostileRun{what: "replay", source: "salted.jsonl", offset0: 1, report: rep, p: p,
			letters: dl.messages(), rawLimit: c.Input.MaxBytes}, fileSalted, want.report)
	})

	t.Run("jetstream", func(t *testing.T) {
		url := startBigNATS(t)
		sink, err := connectors.NewJetStreamSink(connectors.NATSConfig{URL: url}, "HOSTILE", "hostile")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, sink, rawsOf(salted), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		src, err := connectors.NewJetStreamSource(ctx, connectors.NATSConfig{URL: url, Stream: "HOSTILE", Subject: "hostile",
			Durable: "hostile", JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}, true)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		checkHostileRun(t, runHostile(t, c, src, "jetstream", 1), salted, want.report) // stream sequences start at 1
	})

	t.Run("kafka", func(t *testing.T) {
		// A Kafka broker refuses records over 1 MB: the two larger
		// hostile records are replaced by label-only ones.
		ks := slices.Clone(salted)
		labelOnly := &hostile{name: "label only", raw: []byte(`{"id":"k","label":1}`), reason: event.ReasonEmpty}
		for i := range ks {
			if len(ks[i].raw) > 512<<10 {
				ks[i] = saltedRecord{raw: labelOnly.raw, bad: labelOnly}
			}
		}
		cfg := kafkaTestConfig(kafkaCluster(t, 1, "hostile"), "hostile", "hostile")
		sink, err := connectors.NewKafkaSink(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		publishAll(t, sink, rawsOf(ks), nil)
		checkHostileRun(t, runHostile(t, c, openKafka(t, cfg), "kafka", 0), ks, want.report) // offsets start at 0
	})
}

// A dead letter keeps at most DeadLetterMaxRaw bytes of its record, cut
// before a UTF-8 sequence so that text stays text, and says how long the
// record was; shorter records are kept whole.
func TestDeadLetterTruncation(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"at the limit", bytes.Repeat([]byte("a"), DeadLetterMaxRaw)},
		{"one over", bytes.Repeat([]byte("a"), DeadLetterMaxRaw+1)},
		{"a rune across the limit", append(bytes.Repeat([]byte("a"), DeadLetterMaxRaw-1), "€€"...)},
		{"binary", bytes.Repeat([]byte{0xff, 0x80, 0x00}, DeadLetterMaxRaw)},
		{"control characters", bytes.Repeat([]byte{0x01}, 10*DeadLetterMaxRaw)},
	} {
		sink := &memSink{}
		dl := &DeadLetters{Sink: sink}
		if err := dl.DeadLetter(pipeline.DeadLetter{Source: "s", Offset: 1, Reason: event.ReasonOversized, Err: "e", Raw: tc.raw}); err != nil {
			t.Fatal(err)
		}
		msg := sink.messages()[0]
		var d deadLetterMsg
		decodeStrict(t, msg, &d)
		raw := []byte(d.Raw)
		if d.RawBase64 != "" {
			raw = mustBase64(t, d.RawBase64)
		}
		if !bytes.HasPrefix(tc.raw, raw) || len(raw) > DeadLetterMaxRaw || len(raw) < min(len(tc.raw), DeadLetterMaxRaw-3) {
			t.Errorf("%s: kept %d bytes of %d", tc.name, len(raw), len(tc.raw))
		}
		if truncated := len(tc.raw) > DeadLetterMaxRaw; d.RawTruncated != truncated || (truncated && d.RawSize != len(tc.raw)) {
			t.Errorf("%s: raw_truncated %v raw_size %d", tc.name, d.RawTruncated, d.RawSize)
		}
		if tc.name == "a rune across the limit" && d.Raw == "" {
			t.Errorf("%s: valid UTF-8 cut into base64", tc.name)
		}
		if len(msg) >= 1<<20 {
			t.Errorf("%s: dead letter of %d bytes", tc.name, len(msg))
		}
	}
}

// JSON has no Inf or NaN: a prediction message says null for a score that
// is not finite. (The decoder's max_abs_value keeps scores finite; this is
// the guard behind it.)
func TestPredictionNonFiniteScore(t *testing.T) {
	p, err := pipeline.New(parseConfig(t, "learners: [{name: pct, algorithm: perceptron}, {name: p2, algorithm: perceptron}]"))
	if err != nil {
		t.Fatal(err)
	}
	ev := event.Event{ID: []byte("a")}
	preds := []online.Prediction{{Label: 1, Score: math.Inf(1)}, {Label: -1, Score: math.NaN()}}
	b := appendPrediction(nil, &ev, "s", connectors.Record{}, p, preds)
	var m predictionMsg
	decodeStrict(t, b, &m)
	for _, pr := range m.Predictions {
		if pr.Score != nil {
			t.Errorf("%s: score %v, want null", pr.Learner, *pr.Score)
		}
	}
	// Without answer in the configuration, the first learner answers.
	if m.Answer.Learner != "pct" || m.Answer.Class != "1" || m.Answer.Score != nil {
		t.Errorf("answer %+v, want pct's: class 1, score null", m.Answer)
	}
}
