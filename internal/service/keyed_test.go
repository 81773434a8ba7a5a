package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/serving"
)

const keyedPlain = `features: {bits: 8}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`
const keyedConfig = keyedPlain + "models: {by: key, max: 4}\n"

func parseYAML(t *testing.T, src string) *config.Config {
	c, err := config.Parse("r.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyedLines(n int, keys []string) [][]byte {
	var out [][]byte
	for i := range n {
		v := float64((i*37)%100) / 100
		l := 0
		if v > 0.4 {
			l = 1
		}
		out = append(out, fmt.Appendf(nil, `{"key":%q,"features":{"v":%.2f},"label":%d}`, keys[i%len(keys)], v, l))
	}
	return out
}

// warmStartOf returns the model file of the one model of c trained on
// values, as a warm start, and the service that trained it.
func warmStartOf(t *testing.T, c *config.Config, values [][]byte) (*WarmStart, *Service) {
	t.Helper()
	trained := newService(t, Options{Config: c, Source: newMemSource(values, 1)})
	if err := trained.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms, err := trained.Models()
	if err != nil {
		t.Fatal(err)
	}
	m := checkpoint.ModelOf(ms[0])
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return &WarmStart{Path: "model.slm", Model: m, SHA256: sha256.Sum256(b)}, trained
}

// keyedWarmStart returns the warm start of one model of c trained on 300
// events of one key.
func keyedWarmStart(t *testing.T, c *config.Config) *WarmStart {
	t.Helper()
	w, _ := warmStartOf(t, c, keyedLines(300, []string{"x"}))
	return w
}

// With a warm start, a key first seen after a restore from a checkpoint
// starts from the warm start, as in an uninterrupted run.
func TestKeyedWarmAfterRestore(t *testing.T) {
	plain := parseYAML(t, keyedPlain)
	warm := keyedWarmStart(t, plain)

	c := parseYAML(t, keyedConfig)
	first := keyedLines(100, []string{"a", "b"})
	all := append(append([][]byte{}, first...), keyedLines(100, []string{"c"})...)

	whole := newService(t, Options{Config: c, Source: newMemSource(all, 1), WarmStart: warm})
	if err := whole.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, err := whole.Reports()
	if err != nil {
		t.Fatal(err)
	}

	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s1 := newService(t, Options{Config: c, Source: newMemSource(first, 1), Checkpoints: store, WarmStart: warm})
	if err := s1.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := newService(t, Options{Config: c, Source: newMemSource(all, 1), Checkpoints: store, WarmStart: warm})
	if err := s2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := s2.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d key reports, want %d", len(got), len(want))
	}
	for i := range want {
		t.Logf("key %s: events %d (want %d), warm %v (want %v)", *got[i].Key, got[i].Events, want[i].Events, got[i].WarmStart != nil, want[i].WarmStart != nil)
		sameReport(t, "key "+*want[i].Key, got[i].Report, want[i].Report)
	}
}

// A record of key K the decoder rejects (its key was read) is counted in
// K's model, as in K's replay alone: with delayed labels, its clock
// decides which labels are late.
func TestKeyedInvalidRecordOfKey(t *testing.T) {
	const base = `features: {bits: 8}
labels: {delayed: true, wait: 1, default_label: 0}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`
	lines := [][]byte{
		[]byte(`{"key":"K","id":"e1","features":{"v":0.9}}`),
		[]byte(`{"key":"K","features":{"v":0.3},"label":"maybe"}`), // a semantic fault: label not configured
		[]byte(`{"key":"K","id":"e1","label":1}`),
	}
	plain := newService(t, Options{Config: parseYAML(t, base), Source: newMemSource(lines, 1)})
	if err := plain.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, _ := plain.Reports()
	keyed := newService(t, Options{Config: parseYAML(t, base+"models: {by: key}\n"), Source: newMemSource(lines, 1)})
	if err := keyed.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := keyed.Reports()
	t.Logf("replay of K alone: events %d invalid %d labels %+v", want[0].Events, want[0].Invalid, want[0].Labels)
	t.Logf("K's model:         events %d invalid %d labels %+v", got[0].Events, got[0].Invalid, got[0].Labels)
	sameReport(t, "key K", got[0].Report, want[0].Report)
}

// models.idle evicts the models of a partition gone quiet.
func TestKeyedIdleAtRest(t *testing.T) {
	c := parseYAML(t, keyedPlain+"models: {by: key, idle: 200ms}\n")
	src := newMemSource(keyedLines(50, []string{"a", "b", "c", "d", "e"}), 1)
	src.block = true
	s := newService(t, Options{Config: c, Source: src, SnapshotInterval: 10 * time.Millisecond, HistoryPoints: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(1200 * time.Millisecond)
	for _, r := range s.Snapshot().Reports {
		t.Logf("partition %d: events %d keys %+v", r.Partition, r.Events, *r.Keys)
		if r.Keys.Resident != 0 {
			t.Errorf("%d models resident 1s after the last event, models.idle 200ms", r.Keys.Resident)
		}
	}
	cancel()
	<-done
}

// Switching a partition that has a checkpoint between one model and a
// model per key, or adding or dropping a global model, is refused, both
// ways, even with --reset (the positions
// agree: nothing to reset), saying how to start afresh; once the
// checkpoint is moved away, the run starts afresh.
func TestKeyedSwitchRefused(t *testing.T) {
	lines := keyedLines(50, []string{"a", "b"})
	global := keyedPlain + "models: {by: key, max: 4, global: true}\n"
	for _, tc := range []struct{ from, to string }{{keyedPlain, keyedConfig}, {keyedConfig, keyedPlain}, {keyedConfig, global}, {global, keyedConfig}} {
		store, err := checkpoint.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := runStore(t, parseYAML(t, tc.from), store, lines, 1, 0); err != nil {
			t.Fatal(err)
		}
		s := newService(t, Options{Config: parseYAML(t, tc.to), Source: newMemSource(lines, 1), Checkpoints: store, OnMismatch: MismatchReset})
		err = s.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "move it away") || !strings.Contains(err.Error(), " per key") {
			t.Fatalf("switching models.by with a checkpoint: %v", err)
		}
		if _, err := store.Discard(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runStore(t, parseYAML(t, tc.to), store, lines, 1, 0); err != nil {
			t.Errorf("after the checkpoint was moved away: %v", err)
		}
	}
}

type trickleSource struct {
	recs []connectors.Record
	i    int
}

func (s *trickleSource) Fetch(ctx context.Context) (connectors.Record, error) {
	if s.i >= len(s.recs) {
		return connectors.Record{}, connectors.ErrEndOfInput
	}
	if s.i%200 == 0 {
		time.Sleep(time.Millisecond)
	}
	r := s.recs[s.i]
	s.i++
	return r, nil
}
func (s *trickleSource) Commit(context.Context, connectors.Record) error { return nil }
func (s *trickleSource) Name() string                                    { return "mem:slow" }
func (s *trickleSource) Close() error                                    { return nil }

// The copies that serve predictions per key, taken every 5ms while 40
// keys learn with 3 resident, are each the replay of its key's events so
// far: digest for digest, under -race.
func TestKeyedServingCopies(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	c := parseYAML(t, keyedPlain+"models: {by: key, max: 3}\n")
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	lines := keyedLines(40000, keys)
	src := &trickleSource{}
	for i, l := range lines {
		src.recs = append(src.recs, connectors.Record{Value: l, Partition: 0, Offset: int64(i)})
	}
	s := newService(t, Options{Config: c, Source: src, SnapshotInterval: 5 * time.Millisecond})
	dec, err := event.NewDecoder(pipeline.EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := dec.Decode([]byte(`{"features":{"v":0.5}}`), &ev); err != nil {
		t.Fatal(err)
	}
	// digests of each key's replay alone after n events
	alone := parseYAML(t, keyedPlain)
	want := map[string][][32]byte{}
	models := map[string]*pipeline.Pipeline{}
	for _, l := range lines {
		var e event.Event
		if err := dec.Decode(l, &e); err != nil {
			t.Fatal(err)
		}
		k := string(e.Key)
		p := models[k]
		if p == nil {
			p, _ = pipeline.New(alone)
			models[k] = p
			want[k] = [][32]byte{{}}
		}
		p.Process(&e)
		b, _ := p.MarshalBinary()
		want[k] = append(want[k], sha256.Sum256(b))
	}
	var bad atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var n atomic.Int64
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				pr, err := s.Predictor(ctx, 0, true, []byte(keys[i%len(keys)]))
				cancel()
				i++
				if err != nil {
					continue
				}
				if pr.Key != "" && pr.SHA256 != want[pr.Key][pr.Events] {
					if bad.Add(1) < 5 {
						t.Errorf("key %s at %d events: digest differs from its replay", pr.Key, pr.Events)
					}
				}
				pr.Predict(nil, &ev)
				pr.Report()
				_ = pr.Time
				n.Add(1)
			}
		}()
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d predictions", n.Load())
}

// A serving replica of checkpoints of models per key answers a key no
// checkpoint has with the warm start's model, as the learning service's
// new keys start from it, and a key it has with that key's model.
func TestKeyedServeNewKey(t *testing.T) {
	plain := parseYAML(t, keyedPlain)
	warm := keyedWarmStart(t, plain)
	c := parseYAML(t, keyedConfig)
	store, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, Options{Config: c, Source: newMemSource(keyedLines(100, []string{"a", "b"}), 1), Checkpoints: store, WarmStart: warm})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string][32]byte{}
	for _, key := range []string{"a", "newcomer"} {
		p, err := pipeline.New(plain)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.StartFrom(warm.Model.State, warm.SHA256); err != nil {
			t.Fatal(err)
		}
		if key == "a" {
			for _, l := range keyedLines(100, []string{"a", "b"}) {
				var ev event.Event
				dec, _ := event.NewDecoder(pipeline.EventConfig(plain))
				if err := dec.Decode(l, &ev); err != nil {
					t.Fatal(err)
				}
				if string(ev.Key) == "a" {
					p.Process(&ev)
				}
			}
		}
		_, sum, err := p.CloneDigest()
		if err != nil {
			t.Fatal(err)
		}
		want[key] = sum
	}
	srv, err := serving.NewReplica(context.Background(), serving.ServeOptions{Config: c, Checkpoints: store, WarmStart: warm})
	if err != nil {
		t.Fatal(err)
	}
	for key, sum := range want {
		pr, err := srv.Predictor(context.Background(), 0, true, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if pr.SHA256 != sum || pr.HasKey != (key == "a") {
			t.Errorf("key %s: served model %x (has key %v), want %x", key, pr.SHA256, pr.HasKey, sum)
		}
	}
}

// With a global model beside the models per key, each prediction the
// service publishes is, learner by learner, the key's replay's or the
// partition's replay's, as the rule chooses (the one of fewer mistakes on
// the key, the global one on a tie); the serving copy answers the next
// event of a key the same way; each key's report has its choice's counts
// and the totals the global model's report.
func TestKeyedGlobalPredictions(t *testing.T) {
	const yaml = `features: {bits: 8}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: logistic, bias: true}
`
	plain := parseYAML(t, yaml)
	c := parseYAML(t, yaml+"models: {by: key, max: 2, global: true}\nanswer: ada\n")
	keys := []string{"a", "b", "c", "d", "e"}
	lines := keyedLines(600, keys)
	// keyedLines labels every key alike; give each key a twist of its own.
	for i := range lines {
		if i%len(keys) == 3 {
			lines[i] = bytes.Replace(lines[i], []byte(`"label":1`), []byte(`"label":0`), 1)
		}
	}
	sink := &memSink{}
	s := newService(t, Options{Config: c, Source: newMemSource(lines, 1), Predictions: sink, SnapshotInterval: time.Millisecond})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	dec, err := event.NewDecoder(pipeline.EventConfig(plain))
	if err != nil {
		t.Fatal(err)
	}
	global, _ := pipeline.New(plain)
	own := map[string]*pipeline.Pipeline{}
	mix := map[string][]pipeline.MixCounts{}
	choose := func(key string, i int) bool { m := mix[key][i]; return m.Own < m.Global } // own?
	for n, line := range lines {
		var ev event.Event
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		key := string(ev.Key)
		gp, _ := global.Process(&ev)
		gpreds := slices.Clone(gp)
		if own[key] == nil {
			own[key], _ = pipeline.New(plain)
			mix[key] = make([]pipeline.MixCounts, 2)
		}
		preds, _ := own[key].Process(&ev)
		var msg predictionMsg
		decodeStrict(t, sink.msgs[n], &msg)
		// The answer is ada's prediction as served for the key.
		if a, w := msg.Answer, msg.Predictions[1]; a.Learner != "ada" || a.Class != w.Class || a.From != w.From || *a.Score != *w.Score {
			t.Fatalf("event %d (key %s): answer %+v, want ada's %+v", n, key, a, w)
		}
		for i := range preds {
			want, from := gpreds[i], "global"
			if choose(key, i) {
				want, from = preds[i], "own"
			}
			if got := msg.Predictions[i]; got.Class != global.LabelName(want.Label) || got.From != from {
				t.Fatalf("event %d (key %s) learner %d: published %s from %s, the rule gives %s from %s", n, key, i, got.Class, got.From, global.LabelName(want.Label), from)
			}
			m := &mix[key][i]
			m.Rounds++
			if preds[i].Label != ev.Label {
				m.Own++
			}
			if gpreds[i].Label != ev.Label {
				m.Global++
			}
			if want.Label != ev.Label {
				m.Mixed++
			}
		}
	}
	var owns, globals int
	for key := range mix {
		for i := range mix[key] {
			if choose(key, i) {
				owns++
			} else {
				globals++
			}
		}
	}
	if owns == 0 || globals == 0 {
		t.Errorf("at the end, %d keys' learners follow their own model and %d the global one: want both", owns, globals)
	}
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != len(keys) {
		t.Fatalf("%d reports, want one per key", len(reps))
	}
	for _, r := range reps {
		if len(r.Mix) != 2 {
			t.Fatalf("key %s: %d learners' choices, want 2", *r.Key, len(r.Mix))
		}
		for i, m := range r.Mix {
			w := mix[*r.Key][i]
			if m.Rounds != w.Rounds || m.OwnMistakes != w.Own || m.GlobalMistakes != w.Global || m.Mistakes != w.Mixed || !m.Holds {
				t.Errorf("key %s learner %s: %+v, simulated %+v", *r.Key, m.Learner, m, w)
			}
		}
	}
	snap := s.Snapshot()
	if g := snap.Reports[0].Global; g == nil || g.Events != uint64(len(lines)) {
		t.Fatalf("the totals' global model: %+v", g)
	}

	// The serving copy: the next event of each key, and of a new one.
	srv := newService(t, Options{Config: c, Source: newMemSource(lines, 1)})
	srv.snaps.serveUntil.Store(time.Now().Add(time.Hour).UnixNano())
	if err := srv.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := dec.Decode([]byte(`{"features":{"v":0.55}}`), &ev); err != nil {
		t.Fatal(err)
	}
	gpreds, _ := global.Predict(&ev)
	gpreds = slices.Clone(gpreds)
	for _, key := range append(slices.Clone(keys), "newcomer") {
		pr, err := srv.Predictor(context.Background(), 0, true, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := pr.Predict(nil, &ev)
		for i, g := range got {
			want, from := gpreds[i], "global"
			if key != "newcomer" && choose(key, i) {
				p, _ := own[key].Predict(&ev)
				want, from = p[i], "own"
			}
			if g.Label != want.Label || g.Score != want.Score || g.From != from {
				t.Errorf("key %s learner %d: served %+v from %q, the rule gives %+v from %q", key, i, g.Prediction, g.From, want, from)
			}
		}
		if pr.Answer() != 1 {
			t.Errorf("key %s: learner %d answers, want ada (1)", key, pr.Answer())
		}
		if _, ok := pr.GlobalSHA256(); !ok {
			t.Errorf("key %s: no global model's digest", key)
		}
		if key == "newcomer" {
			continue
		}
		r, err := pr.Report()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Mix) != 2 || r.Mix[1].Mistakes != mix[key][1].Mixed || r.Mix[1].OwnMistakes != mix[key][1].Own {
			t.Errorf("key %s: the serving copy's report has choices %+v, want %+v", key, r.Mix, mix[key])
		}
	}
}
