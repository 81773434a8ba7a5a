package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// keyedSource serves lines with their partitions, then waits for ctx.
type keyedSource struct {
	lines [][]byte
	parts []int32
	i     int
	next  []int64 // the next offset per partition
}

func (s *keyedSource) Fetch(ctx context.Context) (connectors.Record, error) {
	if s.i < len(s.lines) {
		i := s.i
		s.i++
		p := s.parts[i]
		off := s.next[p]
		s.next[p]++
		return connectors.Record{Value: s.lines[i], Partition: p, Offset: off}, nil
	}
	<-ctx.Done()
	return connectors.Record{}, ctx.Err()
}

func (s *keyedSource) Commit(context.Context, connectors.Record) error { return nil }
func (s *keyedSource) Name() string                                    { return "mem:keyed" }
func (s *keyedSource) Close() error                                    { return nil }

const keyedYAML = `features: {bits: 8}
models: {by: key, max: 4}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, bias: true}
`

// With models per key, POST /v1/predict answers each event with its key's
// model (the event's key, or ?key=), whose digest and predictions are
// those of a replay of the key's events alone; a key no partition has is
// answered by a new model; GET /v1/report?key= is the key's report; the
// metrics have the totals per partition and the 10 keys of the most
// records, no more.
func TestKeyedAPI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyed.yaml")
	if err := os.WriteFile(path, []byte(keyedYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	alone := *cfg
	alone.Models = config.Models{}
	dec, err := event.NewDecoder(pipeline.EventConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	// 30 keys, key k on partition k%2, key k with about 2(k+1) events:
	// the keys of the most records are the last ones.
	const keys = 30
	rng := rand.New(rand.NewPCG(4, 5))
	src := &keyedSource{next: make([]int64, 2)}
	byKey := map[string]*pipeline.Pipeline{}
	for i := range keys * (keys + 1) {
		k := keys - 1 - int(rng.Float64()*rng.Float64()*keys)
		if i < keys {
			k = i
		}
		key := fmt.Sprintf("user-%d", k)
		v := rng.Float64()
		line := fmt.Appendf(nil, `{"key":%q,"features":{"v":%.3f,"w":%.3f},"label":%d}`, key, v, rng.Float64(), map[bool]int{true: 1}[v > float64(k%5+1)/6])
		src.lines, src.parts = append(src.lines, line), append(src.parts, int32(k%2))
		p := byKey[key]
		if p == nil {
			if p, err = pipeline.New(&alone); err != nil {
				t.Fatal(err)
			}
			byKey[key] = p
		}
		var ev event.Event
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		p.Process(&ev)
	}
	svc, ts := setup(t, cfg, src, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n uint64
		for _, r := range svc.Snapshot().Reports {
			n += r.Events
		}
		if n == uint64(len(src.lines)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events learned", n, len(src.lines))
		}
	}

	predict := func(query, body string) PredictResponse {
		t.Helper()
		code, b := post(t, ts.URL+"/v1/predict"+query, []byte(body))
		if code != http.StatusOK {
			t.Fatalf("predict%s %s: %d %s", query, body, code, b)
		}
		var r PredictResponse
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	const x = `"features":{"v":0.7,"w":0.2}`
	for _, tc := range []struct{ query, body, key string }{
		{"", `{"key":"user-3",` + x + `}`, "user-3"},
		{"?key=user-8", `{` + x + `}`, "user-8"},
		{"?key=user-8", `{"key":"user-3",` + x + `}`, "user-8"}, // ?key= wins
		{"?partition=1&key=user-29", `{` + x + `}`, "user-29"},
	} {
		got := predict(tc.query, tc.body)
		ref := byKey[tc.key]
		state, err := ref.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(state)
		var ev event.Event
		if err := dec.Decode([]byte(`{`+x+`}`), &ev); err != nil {
			t.Fatal(err)
		}
		preds, _ := ref.Predict(&ev)
		if got.Key == nil || *got.Key != tc.key || got.ModelSHA256 != hex.EncodeToString(sum[:]) || got.ModelEvents != ref.Seen() ||
			got.Partition != int32(keyIndex(t, tc.key)%2) || len(got.Predictions) != len(preds) {
			t.Fatalf("predict%s %s: key %v partition %d, %d events, digest %s; want %s of %d events, digest %x",
				tc.query, tc.body, got.Key, got.Partition, got.ModelEvents, got.ModelSHA256, tc.key, ref.Seen(), sum)
		}
		for i, p := range preds {
			if g := got.Predictions[i]; g.Class != ref.LabelName(p.Label) || g.Score == nil || *g.Score != p.Score {
				t.Errorf("predict key %s learner %d: %+v, its replay alone %+v", tc.key, i, g, p)
			}
		}
	}
	if got := predict("", `{"key":"newcomer",`+x+`}`); got.Key != nil || got.ModelEvents != 0 {
		t.Errorf("a new key answered by key %v of %d events, want a new model", got.Key, got.ModelEvents)
	}
	if code, b := post(t, ts.URL+"/v1/predict?partition=0&key=user-3", []byte(`{`+x+`}`)); code != http.StatusOK {
		t.Errorf("key user-3 in partition 0, which has not it: %d %s, want a new key's model", code, b)
	}

	code, _, body := get(t, "GET", ts.URL+"/v1/report?key=user-11")
	var rep service.Report
	if err := json.Unmarshal(body, &rep); code != http.StatusOK || err != nil {
		t.Fatalf("/v1/report?key=user-11: %d %s", code, body)
	}
	want, err := byKey["user-11"].Report()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Key == nil || *rep.Key != "user-11" || rep.Partition != 1 || rep.Events != want.Events {
		t.Fatalf("/v1/report?key=user-11: %s", body)
	}
	for i, l := range want.Learners {
		if g := rep.Learners[i]; g.StateSHA256 != l.StateSHA256 || g.Mistakes != l.Mistakes {
			t.Errorf("/v1/report?key=user-11 learner %s: %s, %d mistakes; replay alone %s, %d", l.Name, g.StateSHA256, g.Mistakes, l.StateSHA256, l.Mistakes)
		}
	}
	if code, _, body := get(t, "GET", ts.URL+"/v1/report?key=nobody"); code != http.StatusNotFound || !strings.Contains(string(body), `no model for key \"nobody\": no partition has learned an event of it yet`) {
		t.Errorf("/v1/report?key=nobody: %d %s", code, body)
	}

	// Metrics: the totals of each partition and its 10 keys of the most
	// records.
	m := scrape(t, ts.URL)
	for part := range int32(2) {
		var mistakes [2]uint64
		type kc struct {
			key    string
			events uint64
		}
		var top []kc
		for key, p := range byKey {
			if int32(keyIndex(t, key)%2) != part {
				continue
			}
			for i := range mistakes {
				mistakes[i] += p.Tracker().Mistakes(i)
			}
			top = append(top, kc{key, p.Seen()})
		}
		ps := fmt.Sprint(part)
		if got := m[seriesKey("streamlearn_mistakes_total", "learner=pct", "partition="+ps)]; got != float64(mistakes[0]) {
			t.Errorf("partition %d: mistakes %v, the keys' replays %d", part, got, mistakes[0])
		}
		if got := m[seriesKey("streamlearn_keys", "partition="+ps, "state=resident")] + m[seriesKey("streamlearn_keys", "partition="+ps, "state=spilled")]; got != keys/2 {
			t.Errorf("partition %d: %v keys, want %d", part, got, keys/2)
		}
		n := 0
		for _, c := range top {
			if v, ok := m[seriesKey("streamlearn_key_events_total", "key="+c.key, "partition="+ps)]; ok {
				n++
				if v != float64(c.events) {
					t.Errorf("key %s: %v events, want %d", c.key, v, c.events)
				}
			}
		}
		if n != service.TopKeys {
			t.Errorf("partition %d: %d keys with series, want %d", part, n, service.TopKeys)
		}
	}
}

// GET /v1/report?key= (the empty key) when no event without a key was
// learned: 404 wanted, as for any key without a model.
func TestKeyedEmptyKeyReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.yaml")
	if err := os.WriteFile(path, []byte(keyedYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	src := &keyedSource{next: make([]int64, 1)}
	for range 20 {
		src.lines = append(src.lines, []byte(`{"key":"a","features":{"v":0.5},"label":1}`))
		src.parts = append(src.parts, 0)
	}
	svc, ts := setup(t, cfg, src, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond)
	get(t, "GET", ts.URL+"/v1/report?key=a") // serving active
	time.Sleep(100 * time.Millisecond)
	if code, _, body := get(t, "GET", ts.URL+"/v1/report?key="); code != 404 {
		t.Errorf("/v1/report?key= with no model of the empty key: %d %s, want 404", code, body)
	}
	if code, _, body := get(t, "GET", ts.URL+"/v1/report?key=a"); code != 200 {
		t.Errorf("/v1/report?key=a: %d %s", code, body)
	}
}

// keyIndex returns k of key user-k.
func keyIndex(t *testing.T, key string) int {
	t.Helper()
	var k int
	if _, err := fmt.Sscanf(key, "user-%d", &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// With a global model beside the models per key, each answer of
// /v1/predict is what is served for the key: every learner's prediction
// says whose it is (from: own or global), the answer is the configured
// learner's (answer: ada), and its from is the choice the key's report
// says predicts next (mix[].next, GET /v1/report?key=); a new key is
// answered by the global model. The report names the answering learner.
func TestKeyedGlobalAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyed.yaml")
	yaml := strings.Replace(keyedYAML, "max: 4}", "max: 4, global: true}", 1) + "answer: ada\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// 12 keys on one partition: most label by v ≥ 0.5, every third by
	// v < 0.5, so that some keys are served best by their own model and
	// others by the global one.
	const keys = 12
	rng := rand.New(rand.NewPCG(7, 8))
	src := &keyedSource{next: make([]int64, 1)}
	for i := range keys * 40 {
		k := i % keys
		v := rng.Float64()
		y := v >= 0.5
		if k%3 == 0 {
			y = !y
		}
		src.lines = append(src.lines, fmt.Appendf(nil, `{"key":"user-%d","features":{"v":%.3f,"w":%.3f},"label":%d}`, k, v, rng.Float64(), map[bool]int{true: 1}[y]))
		src.parts = append(src.parts, 0)
	}
	svc, ts := setup(t, cfg, src, nil)
	runUntil(t, svc, uint64(len(src.lines)))

	froms := map[string]int{}
	for k := range keys + 1 {
		key := fmt.Sprintf("user-%d", k) // user-12: a new key
		code, b := post(t, ts.URL+"/v1/predict", fmt.Appendf(nil, `{"key":%q,"features":{"v":0.3,"w":0.5}}`, key))
		var got PredictResponse
		if err := json.Unmarshal(b, &got); code != http.StatusOK || err != nil || len(got.Predictions) != 2 {
			t.Fatalf("predict key %s: %d %s", key, code, b)
		}
		if !samePrediction(got.Answer, got.Predictions[1]) || got.Answer.Learner != "ada" {
			t.Errorf("key %s: answer %+v, want ada's prediction %+v", key, got.Answer, got.Predictions[1])
		}
		if k == keys {
			if got.Answer.From != "global" || got.Predictions[0].From != "global" {
				t.Errorf("a new key: served %+v, want the global model's", got.Predictions)
			}
			continue
		}
		code, _, b = get(t, "GET", ts.URL+"/v1/report?key="+key)
		var rep service.Report
		if err := json.Unmarshal(b, &rep); code != http.StatusOK || err != nil || len(rep.Mix) != 2 {
			t.Fatalf("/v1/report?key=%s: %d %s", key, code, b)
		}
		if rep.Answer != "ada" {
			t.Errorf("/v1/report?key=%s: answer %q, want ada", key, rep.Answer)
		}
		for i, m := range rep.Mix {
			if got.Predictions[i].From != m.Next {
				t.Errorf("key %s learner %s: served from %q, its report says %q predicts next", key, m.Learner, got.Predictions[i].From, m.Next)
			}
		}
		froms[got.Answer.From]++
	}
	if froms["own"] == 0 || froms["global"] == 0 {
		t.Errorf("the answers of the %d keys came from %v: want both the keys' own models and the global one", keys, froms)
	}
}
