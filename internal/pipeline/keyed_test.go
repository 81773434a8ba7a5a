package pipeline

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/regret"
)

const keyedConfig = `
features: {bits: 10}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ada, algorithm: adagrad, loss: hinge, bias: true, calibrate: true}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - {name: wm, algorithm: weighted-majority, experts: [pct, ada, soa], seed: 2}
`

// keyedStream makes n events of keys k-0 .. k-(keys-1), interleaved at
// random; each key has a threshold of its own, so each key's model is
// its own. It returns the lines, and each key's lines in order.
func keyedStream(n, keys int, seed uint64) ([][]byte, map[string][][]byte) {
	rng := rand.New(rand.NewPCG(seed, 11))
	var all [][]byte
	byKey := map[string][][]byte{}
	for i := range n {
		k := rng.IntN(keys)
		key := fmt.Sprintf("k-%d", k)
		v := rng.Float64()
		label := 0
		if v >= float64(k%7+1)/8 {
			label = 1
		}
		line := fmt.Appendf(nil, `{"id":"e-%d","key":%q,"features":{"v":%.4f,"w":%.4f},"label":%d}`, i, key, v, rng.Float64(), label)
		all = append(all, line)
		byKey[key] = append(byKey[key], line)
	}
	return all, byKey
}

// feedKeyed decodes each line and runs it through k.
func feedKeyed(tb testing.TB, k *Keyed, dec *event.Decoder, lines [][]byte) {
	tb.Helper()
	var ev event.Event
	for _, line := range lines {
		if err := dec.Decode(line, &ev); err != nil {
			tb.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			tb.Fatal(err)
		}
	}
}

// Each key's model is exactly the one a replay of that key's events
// alone makes (counts, mistakes, bounds, calibration, model digests),
// with every model resident or with 5 resident and the others spilled
// and decoded again on demand; the encodings are equal byte for byte
// either way, and a Keyed restored from one goes on exactly.
func TestKeyedExact(t *testing.T) {
	// Not parallel: it sets compactAfter, which the others read.
	c := mustConfig(t, keyedConfig)
	all, byKey := keyedStream(6000, 40, 1)
	dec := mustDecoder(t, c)
	spillDir := ""
	run := func(max int, lines [][]byte, k *Keyed) *Keyed {
		t.Helper()
		if k == nil {
			var err error
			if k, err = NewKeyed(c, KeyedOptions{Max: max, SpillDir: spillDir}); err != nil {
				t.Fatal(err)
			}
		}
		feedKeyed(t, k, dec, lines)
		return k
	}
	whole := run(0, all, nil)
	small := run(5, all, nil)
	// Evicted to a file, compacted when it holds 64 KiB of dead bytes.
	defer func(n int64) { compactAfter = n }(compactAfter)
	compactAfter = 64 << 10
	spillDir = t.TempDir()
	var refs map[string]StateRef // taken before compactions
	filed, err := NewKeyed(c, KeyedOptions{Max: 5, SpillDir: spillDir})
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range all {
		var ev event.Event
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := filed.Process(&ev); err != nil {
			t.Fatal(err)
		}
		if i == 1000 {
			if refs, err = filed.ServingStates(nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if whole.Len() != 40 || small.Len() != 40 || small.Resident() != 5 || small.Evicted() < 1000 || filed.Evicted() != small.Evicted() {
		t.Fatalf("keys %d and %d, resident %d, evictions %d and %d", whole.Len(), small.Len(), small.Resident(), small.Evicted(), filed.Evicted())
	}
	if n := filed.spill.(*fileSpill).compactions; n < 2 {
		t.Errorf("%d compactions of the spill file, want some", n)
	}
	if names, _ := os.ReadDir(spillDir); len(names) != 0 {
		t.Errorf("the spill file is left in its directory: %v", names)
	}
	early := run(0, all[:1001], nil)
	for key, r := range refs {
		b, err := r.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		p, err := early.peek(key)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Errorf("key %s: the serving copy taken after 1,001 events reads another model after the spill's compactions", key)
		}
	}
	js := func(r Report) string { r.Seconds = 0; b, _ := json.Marshal(r); return string(b) }
	for key, lines := range byKey {
		alone := mustNew(t, c)
		var ev event.Event
		for _, line := range lines {
			if err := dec.Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
			alone.Process(&ev)
		}
		want := js(mustReport(t, alone))
		for name, k := range map[string]*Keyed{"resident": whole, "spilled": small, "filed": filed} {
			got, err := k.KeyReport(key)
			if err != nil {
				t.Fatal(err)
			}
			if js(got) != want {
				t.Errorf("%s: key %s:\n got %s\nwant %s", name, key, js(got), want)
			}
		}
	}
	// The totals are the sums of the keys' reports, resident or not,
	// and the stats each key's.
	for name, k := range map[string]*Keyed{"resident": whole, "spilled": small, "filed": filed} {
		tot := k.Report()
		var sum Report
		sum.Learners = make([]regret.LearnerReport, len(tot.Learners))
		if err := k.Each(func(key string, p *Pipeline) error {
			r := mustReport(t, p)
			sum.Events += r.Events
			sum.Labeled += r.Labeled
			st, _ := k.Stats(key)
			if st.Events != r.Events {
				t.Errorf("%s: key %s: stats %d events, report %d", name, key, st.Events, r.Events)
			}
			for i, l := range r.Learners {
				sum.Learners[i].Rounds += l.Rounds
				sum.Learners[i].Mistakes += l.Mistakes
				if st.Mistakes[i] != l.Mistakes {
					t.Errorf("%s: key %s learner %s: stats %d mistakes, report %d", name, key, l.Name, st.Mistakes[i], l.Mistakes)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if tot.Events != 6000 || sum.Events != tot.Events || sum.Labeled != tot.Labeled || tot.Keys.Keys != 40 {
			t.Errorf("%s: totals %d events %d labeled, keys' %d and %d, %+v", name, tot.Events, tot.Labeled, sum.Events, sum.Labeled, tot.Keys)
		}
		for i, l := range tot.Learners {
			if l.Rounds != sum.Learners[i].Rounds || l.Mistakes != sum.Learners[i].Mistakes || l.Mistakes == 0 {
				t.Errorf("%s: learner %s: totals %d rounds %d mistakes, keys' %d and %d", name, l.Name, l.Rounds, l.Mistakes, sum.Learners[i].Rounds, sum.Learners[i].Mistakes)
			}
		}
		top := k.Top(3)
		if len(top) != 3 || top[0].Events < top[1].Events || top[1].Events < top[2].Events {
			t.Errorf("%s: top %+v", name, top)
		}
		for _, key := range whole.Keys() {
			if st, _ := k.Stats(key); st.Events > top[2].Events {
				found := false
				for _, tp := range top {
					found = found || tp.Key == key
				}
				if !found {
					t.Errorf("%s: key %s of %d events is not in the top 3 %+v", name, key, st.Events, top)
				}
			}
		}
	}

	a, err := whole.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := small.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the encodings of the same models differ with evictions")
	}
	if f, err := filed.MarshalBinary(); err != nil || !bytes.Equal(f, a) {
		t.Errorf("the encoding of models evicted to a file differs (%v)", err)
	}

	// Restored at a cut, run on: the uninterrupted encoding.
	const cut = 2500
	first := run(5, all[:cut], nil)
	state, err := first.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := NewKeyed(c, KeyedOptions{Max: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	got, err := run(0, all[cut:], restored).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, a) {
		t.Error("a Keyed restored at a cut and run on is not the uninterrupted one")
	}
	noKeys := func(r Report) Report { r.Keys = nil; return r } // resident and evicted differ
	if r, w := js(noKeys(restored.Report())), js(noKeys(whole.Report())); r != w {
		t.Errorf("totals restored at a cut and run on:\n got %s\nwant %s", r, w)
	}
	if _, err := restored.KeyReport("nobody"); err == nil {
		t.Error("a report of a key without a model")
	}
	bad := bytes.Clone(state)
	bad[len(bad)/2] ^= 1
	if err := restored.UnmarshalBinary(bad); err == nil {
		t.Error("a damaged keyed state restored")
	}
}

// A new key's model starts from the warm start: each key goes on from
// the trained model, as one replay of the training events and the key's.
func TestKeyedWarmStart(t *testing.T) {
	c := mustConfig(t, keyedConfig)
	train, _ := keyedStream(500, 1, 7)
	trained := mustNew(t, c)
	dec := mustDecoder(t, c)
	var ev event.Event
	for _, line := range train {
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		trained.Process(&ev)
	}
	state, err := trained.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeyed(c, KeyedOptions{Max: 2, WarmStart: state, WarmSHA256: [32]byte{9}})
	if err != nil {
		t.Fatal(err)
	}
	_, byKey := keyedStream(900, 3, 8)
	all, _ := keyedStream(900, 3, 8)
	feedKeyed(t, k, dec, all)
	for key, lines := range byKey {
		ref := mustNew(t, c)
		for _, line := range append(train[:len(train):len(train)], lines...) {
			if err := dec.Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
			ref.Process(&ev)
		}
		got, err := k.KeyReport(key)
		if err != nil {
			t.Fatal(err)
		}
		want := mustReport(t, ref)
		if got.WarmStart == nil || got.WarmStart.Events != 500 {
			t.Errorf("key %s: warm start %+v", key, got.WarmStart)
		}
		for i := range want.Learners {
			if got.Learners[i].StateSHA256 != want.Learners[i].StateSHA256 || got.Events != want.Events {
				t.Errorf("key %s learner %s: not the replay of the training events and the key's", key, want.Learners[i].Name)
			}
		}
	}
}

// A compaction of the spill file that fails (its directory removed)
// fails no eviction: the encodings stay in the old file, the checkpoint
// taken after restores, and the failure is kept.
func TestSpillCompactionFailure(t *testing.T) {
	defer func(n int64) { compactAfter = n }(compactAfter)
	compactAfter = 1
	c := mustConfig(t, keyedConfig)
	dec := mustDecoder(t, c)
	dir := filepath.Join(t.TempDir(), "spill")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k, err := NewKeyed(c, KeyedOptions{Idle: time.Millisecond, SpillDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	process := func(key string) {
		var ev event.Event
		if err := dec.Decode(fmt.Appendf(nil, `{"key":%q,"features":{"v":0.5},"label":1}`, key), &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			t.Fatal(err)
		}
	}
	process("a")
	process("b")
	if err := k.EvictIdle(time.Now().Add(time.Hour)); err != nil { // a and b spilled
		t.Fatal(err)
	}
	os.RemoveAll(dir) // the spill file is open; a compaction cannot create its new one
	for i := 2; i < 10 && err == nil; i++ {
		process("a") // a decoded: its spilled bytes are dead
		err = k.EvictIdle(time.Now().Add(time.Duration(i) * time.Hour))
	}
	if err != nil {
		t.Fatalf("EvictIdle: %v", err)
	}
	if k.spill.(*fileSpill).compactErr == nil {
		t.Error("no compaction failed: the test does not test")
	}
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := NewKeyed(c, KeyedOptions{})
	if err := k2.UnmarshalBinary(b); err != nil {
		t.Errorf("the checkpoint taken after the failed eviction does not restore: %v", err)
	}
}

// BenchmarkKeyedMemory: 1,000,000 events of 100,000 keys of small models
// (features.bits 12, a Perceptron and AdaGrad), the keys drawn from a
// Zipf law (s = 1.1: a few keys are most of the events, as users of a
// spam filter are), at most 1,000 resident, the evicted ones in memory or
// in a file: the heap the models hold per key, the spilled bytes per
// key, the share of events whose model was resident, and events/s.
func BenchmarkKeyedMemory(b *testing.B) {
	c := mustConfig(b, "features: {bits: 12}\nlearners:\n  - {name: pct, algorithm: perceptron, bias: true}\n  - {name: ada, algorithm: adagrad, bias: true}\n")
	dec := mustDecoder(b, c)
	const keys, events = 100000, 1000000
	lines := make([][]byte, 0, events)
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, keys-1)
	for i := range events {
		key := zipf.Uint64()
		if i < keys {
			key = uint64(i) // every key has a model
		}
		lines = append(lines, fmt.Appendf(nil, `{"key":"user-%d","features":{"v":%.3f,"w":%.3f,"t%d":1},"label":%d}`, key, rng.Float64(), rng.Float64(), rng.IntN(50), rng.IntN(2)))
	}
	for _, spill := range []string{"memory", "file"} {
		b.Run("spill="+spill, func(b *testing.B) {
			dir := ""
			if spill == "file" {
				dir = b.TempDir()
			}
			keyedMemory(b, c, dec, lines, keys, events, dir)
		})
	}
}

func keyedMemory(b *testing.B, c *config.Config, dec *event.Decoder, lines [][]byte, keys, events int, dir string) {
	b.ReportAllocs()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		k, err := NewKeyed(c, KeyedOptions{Max: 1000, SpillDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		feedKeyed(b, k, dec, lines)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(keys), "heap-B/key")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "heap-MB")
		b.ReportMetric(float64(k.SpillBytes())/float64(keys), "spill-B/key")
		b.ReportMetric(1-float64(k.Misses())/float64(events), "resident-share")
		b.ReportMetric(float64(len(lines))/b.Elapsed().Seconds()*float64(b.N), "events/s")
		runtime.KeepAlive(k)
	}
}

// With a global model: the global model is the replay of every event,
// each key's model still the replay of its events alone, and each key's
// choice between them (mistakes of each and of the choice) is what the
// rule — the one of fewer mistakes on the key predicts, the global one on
// a tie — gives when simulated beside two plain replays; its bound
// holds for every key and learner; restored at a cut, it goes on exactly.
func TestKeyedGlobal(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	c := mustConfig(t, keyedConfig)
	all, _ := keyedStream(6000, 40, 3)
	dec := mustDecoder(t, c)
	run := func(k *Keyed, lines [][]byte) { t.Helper(); feedKeyed(t, k, dec, lines) }
	k, err := NewKeyed(c, KeyedOptions{Max: 5, Global: true})
	if err != nil {
		t.Fatal(err)
	}
	run(k, all)

	// The simulation: one replay of everything, one per key, the rule.
	global := mustNew(t, c)
	own := map[string]*Pipeline{}
	mix := map[string][]MixCounts{}
	var ev event.Event
	for _, line := range all {
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		gp, _ := global.Process(&ev)
		gpreds := slices.Clone(gp)
		key := string(ev.Key)
		if own[key] == nil {
			own[key], mix[key] = mustNew(t, c), make([]MixCounts, len(gpreds))
		}
		preds, _ := own[key].Process(&ev)
		for i := range preds {
			m := &mix[key][i]
			chosen := gpreds[i]
			if m.Own < m.Global {
				chosen = preds[i]
			}
			m.Rounds++
			if preds[i].Label != ev.Label {
				m.Own++
			}
			if gpreds[i].Label != ev.Label {
				m.Global++
			}
			if chosen.Label != ev.Label {
				m.Mixed++
			}
		}
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	tot := k.Report()
	if want := mustReport(t, global); tot.Global == nil || js(tot.Global.Learners) != js(want.Learners) {
		t.Fatalf("the global model is not the replay of every event:\n got %v\nwant %s", tot.Global, js(want.Learners))
	}
	var mixed, own2 uint64
	for key, p := range own {
		got, err := k.KeyReport(key)
		if err != nil {
			t.Fatal(err)
		}
		want := mustReport(t, p)
		if js(got.Learners) != js(want.Learners) {
			t.Errorf("key %s: its model is not the replay of its events alone", key)
		}
		for i, m := range mix[key] {
			g := got.Mix[i]
			if g.Rounds != m.Rounds || g.OwnMistakes != m.Own || g.GlobalMistakes != m.Global || g.Mistakes != m.Mixed {
				t.Errorf("key %s learner %s: %+v, simulated %+v", key, g.Learner, g, m)
			}
			if !g.Holds || float64(g.Mistakes) > g.Bound {
				t.Errorf("key %s learner %s: %d mistakes, bound %v", key, g.Learner, g.Mistakes, g.Bound)
			}
			if i == 0 {
				mixed, own2 = mixed+m.Mixed, own2+m.Own
			}
		}
	}
	if t0 := tot.Mix[0]; t0.Mistakes != mixed || t0.OwnMistakes != own2 || !t0.Holds {
		t.Errorf("totals %+v: want %d mistakes of the choice, %d of the keys' models", t0, mixed, own2)
	}
	for _, m := range tot.Mix {
		t.Logf("%s: %d rounds; mistakes: own %d, global %d, chosen %d (bound %.0f)", m.Learner, m.Rounds, m.OwnMistakes, m.GlobalMistakes, m.Mistakes, m.Bound)
	}

	// Restored at a cut and run on: the uninterrupted encoding.
	whole, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	first, err := NewKeyed(c, KeyedOptions{Max: 3, Global: true})
	if err != nil {
		t.Fatal(err)
	}
	run(first, all[:2222])
	state, err := first.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := NewKeyed(c, KeyedOptions{Max: 7, Global: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	run(restored, all[2222:])
	if got, err := restored.MarshalBinary(); err != nil || !bytes.Equal(got, whole) {
		t.Errorf("restored at 2,222 and run on: not the uninterrupted state (%v)", err)
	}
	plain, err := NewKeyed(c, KeyedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.UnmarshalBinary(state); err == nil {
		t.Error("a state with a global model restored without one")
	}
}

// The totals' bound is the sum of the keys' bounds, each key's 1 + m*
// counted from its first event: new keys whose first label the global
// model gets wrong (chosen on the tie) keep every bound holding.
func TestKeyedGlobalTotalsBound(t *testing.T) {
	c := mustConfig(t, "features: {bits: 10}\nlearners:\n  - {name: pct, algorithm: perceptron, bias: true}\n")
	dec := mustDecoder(t, c)
	k, err := NewKeyed(c, KeyedOptions{Global: true})
	if err != nil {
		t.Fatal(err)
	}
	process := func(key string, y int) {
		var ev event.Event
		if err := dec.Decode(fmt.Appendf(nil, `{"key":%q,"features":{"v":0.5},"label":%d}`, key, y), &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		process("trainer", 1)             // the global model learns +1
		process(fmt.Sprintf("k%d", i), 0) // a new key: its own empty model says -1 (right), the global +1 (wrong, but chosen on the tie)
	}
	var sum float64
	for i := range 10 {
		r, err := k.KeyReport(fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Mix[0].Holds {
			t.Fatalf("key k%d: %+v", i, r.Mix[0])
		}
		sum += r.Mix[0].Bound
	}
	tr, _ := k.KeyReport("trainer")
	sum += tr.Mix[0].Bound
	tot := k.Report().Mix[0]
	t.Logf("totals %+v; sum of the keys' bounds %.2f", tot, sum)
	if !tot.Holds || tot.Bound < sum-1e-9 {
		t.Errorf("totals: bound %.2f (holds %v), but every key's bound holds and they sum to %.2f", tot.Bound, tot.Holds, sum)
	}
}

// With delayed labels, a record of key a that cannot be decoded ticks a's
// model (Keyed.Reject, Pipeline.Reject), which may learn an expired
// event with the default label: the totals count that round too.
func TestKeyedRejectExpiryTotals(t *testing.T) {
	c := mustConfig(t, "features: {bits: 8}\nlabels: {delayed: true, wait: 1, default_label: \"0\"}\nlearners:\n  - {name: pct, algorithm: perceptron, bias: true}\n")
	dec := mustDecoder(t, c)
	k, err := NewKeyed(c, KeyedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := dec.Decode([]byte(`{"id":"m1","key":"a","features":{"v":0.5}}`), &ev); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := k.Process(&ev); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		err := dec.Decode([]byte(`{"key":"a","features":{"v":0.5},"label":"maybe"}`), &ev)
		de, ok := err.(*event.Error)
		if !ok {
			t.Fatalf("decode: %v", err)
		}
		if err := k.Reject(ev.Key, de.Reason); err != nil {
			t.Fatal(err)
		}
	}
	kr, err := k.KeyReport("a")
	if err != nil {
		t.Fatal(err)
	}
	tot := k.Report()
	t.Logf("key a: labeled %d, pct rounds %d; totals: labeled %d, pct rounds %d", kr.Labeled, kr.Learners[0].Rounds, tot.Labeled, tot.Learners[0].Rounds)
	if kr.Learners[0].Rounds != tot.Learners[0].Rounds || kr.Labeled != tot.Labeled {
		t.Errorf("the only key's model learned %d rounds, the totals say %d", kr.Learners[0].Rounds, tot.Learners[0].Rounds)
	}
}

// BenchmarkKeyedMiss: 20,000 events of 1,000 keys at random, 40 models
// resident (the config of TestKeyedExact: a Perceptron, AdaGrad, SOA
// over 33 thresholds, Weighted-Majority over them, features.bits 10):
// about 96% of the events decode their key's model first, and evict
// another. events/s is the cost of a miss.
func BenchmarkKeyedMiss(b *testing.B) {
	c := mustConfig(b, keyedConfig)
	all, _ := keyedStream(20000, 1000, 1)
	dec := mustDecoder(b, c)
	b.ReportAllocs()
	var misses uint64
	for range b.N {
		k, err := NewKeyed(c, KeyedOptions{Max: 40})
		if err != nil {
			b.Fatal(err)
		}
		feedKeyed(b, k, dec, all)
		misses += k.Misses()
	}
	b.ReportMetric(float64(len(all))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(misses)/float64(len(all)*b.N), "miss-share")
}

// A Keyed frozen and encoded on another goroutine while it learns on
// gives what MarshalBinary gave at the Freeze, byte for byte, and the
// global model's digests of its report then: with the evicted models in
// memory or in a spill file (compacted meanwhile), with a global model
// or none, at successive Freezes that keep the encodings of the models
// that did not learn (the same bytes, not encoded again) and reuse the
// global model's copy; and after the Keyed is restored.
func TestKeyedFreeze(t *testing.T) {
	// Not parallel: it sets compactAfter, which the others read.
	c := mustConfig(t, keyedConfig)
	all, _ := keyedStream(6000, 40, 5)
	dec := mustDecoder(t, c)
	defer func(v int64) { compactAfter = v }(compactAfter)
	compactAfter = 1 << 10
	for _, tc := range []struct {
		name string
		opt  KeyedOptions
	}{
		{"in memory", KeyedOptions{Max: 5}},
		{"spill file, global model", KeyedOptions{Max: 5, Global: true, SpillDir: t.TempDir()}},
		{"all resident, global model", KeyedOptions{Global: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := NewKeyed(c, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var into *Frozen
			var last *FrozenKeyed
			learned := true // since the last Freeze
			freeze := func(next [][]byte) {
				t.Helper()
				f, err := k.Freeze(into)
				if err != nil {
					t.Fatal(err)
				}
				want, err := k.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				rep := k.Report()
				var got []byte
				var digests [][32]byte
				var encErr error
				var wg sync.WaitGroup
				wg.Go(func() { got, digests, encErr = f.Encode() })
				feedKeyed(t, k, dec, next) // while it is encoded
				wg.Wait()
				if encErr != nil {
					t.Fatal(encErr)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("the frozen state (%d bytes) is not MarshalBinary's at the Freeze (%d bytes)", len(got), len(want))
				}
				if rep.Global != nil {
					for i, l := range rep.Global.Learners {
						if hex.EncodeToString(digests[i][:]) != l.StateSHA256 {
							t.Errorf("global %s: digest %x, its report had %q", l.Name, digests[i], l.StateSHA256)
						}
					}
				} else if digests != nil {
					t.Error("digests without a global model")
				}
				if last != nil && !learned {
					// Nothing learned since the last Freeze: every
					// resident model's encoding is the one kept then.
					for i, r := range f.states {
						if r.b != nil && (len(last.states) != len(f.states) || &r.b[0] != &last.states[i].b[0]) {
							t.Fatalf("key %d: encoded again without having learned", i)
						}
					}
				}
				if len(k.frozen) > k.Resident() {
					t.Fatalf("%d encodings kept for %d resident models: the evicted ones' stay in the heap", len(k.frozen), k.Resident())
				}
				last, into, learned = f, f.Global(), len(next) > 0
			}
			feedKeyed(t, k, dec, all[:2000])
			freeze(all[2000:3500])
			freeze(nil)
			freeze(all[3500:]) // nothing learned since the last
			freeze(nil)
			freeze(nil) // nothing learned since the last
			b, err := k.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			// The models are those of a run that was never frozen.
			plain, err := NewKeyed(c, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			feedKeyed(t, plain, dec, all)
			if want, err := plain.MarshalBinary(); err != nil || !bytes.Equal(b, want) {
				t.Fatalf("frozen along the way, the models are not a plain run's: %v", err)
			}
			r, err := NewKeyed(c, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			f, err := r.Freeze(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.MarshalBinary()
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("restored and frozen: %v, equal %v", err, bytes.Equal(got, b))
			}
		})
	}
}

// With models per key, the totals keep the rounds scored against the
// default label apart as each key's model does: they are the sums of the
// keys' reports, and they are state (format versions 3 and 4, 1 and 2
// without such rounds).
func TestKeyedDefaultLabelTotals(t *testing.T) {
	c := mustConfig(t, "features: {bits: 8}\nlabels: {delayed: true, wait: 2, default_label: \"0\"}\nlearners:\n  - {name: last, algorithm: last-label}\n  - {name: pct, algorithm: perceptron, bias: true}\n")
	dec := mustDecoder(t, c)
	k, err := NewKeyed(c, KeyedOptions{Max: 1}) // evictions on the way
	if err != nil {
		t.Fatal(err)
	}
	encoded := func() []byte {
		b, err := k.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := encoded(); b[len(keyedMagic)] != 1 {
		t.Errorf("format version %d before a default-labeled round, want 1", b[len(keyedMagic)])
	}
	var ev event.Event
	for _, line := range []string{
		`{"id":"a1","key":"a","features":{"v":1}}`, `{"id":"a1","key":"a","label":1}`,
		`{"id":"b1","key":"b","features":{"v":-1}}`, `{"id":"b1","key":"b","label":1}`,
		`{"id":"a2","key":"a","features":{"v":1}}`, `{"id":"a3","key":"a","features":{"v":2}}`,
		`{"id":"a4","key":"a","features":{"v":3}}`, `{"id":"a5","key":"a","features":{"v":1}}`, // a2 expires: a's 6th record
		`{"id":"b2","key":"b","features":{"v":1}}`, `{"id":"b2","key":"b","label":0}`,
		`{"id":"a2","key":"a","label":1}`, // a3 expires, then a2's label is late
	} {
		if err := dec.Decode([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			t.Fatal(err)
		}
	}
	tot := k.Report()
	var sum [2][4]uint64 // per learner: real rounds, mistakes; default-labeled rounds, mistakes
	for _, key := range []string{"a", "b"} {
		r, err := k.KeyReport(key)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range r.Learners {
			sum[i][0] += l.Rounds
			sum[i][1] += l.Mistakes
			sum[i][2] += l.DefaultLabeled.Rounds
			sum[i][3] += l.DefaultLabeled.Mistakes
		}
	}
	for i, l := range tot.Learners {
		d := l.DefaultLabeled
		if d == nil {
			t.Fatalf("%s: no default_labeled in the totals", l.Name)
		}
		if got := [4]uint64{l.Rounds, l.Mistakes, d.Rounds, d.Mistakes}; got != sum[i] || got[0] != 3 || got[2] != 2 {
			t.Errorf("%s: totals %v, the keys' sum %v; want 3 real rounds (a1, b1, b2) and 2 on the default label (a2, a3)", l.Name, got, sum[i])
		}
	}
	b := encoded()
	if b[len(keyedMagic)] != 3 {
		t.Errorf("format version %d with default-labeled rounds, want 3", b[len(keyedMagic)])
	}
	back, err := NewKeyed(c, KeyedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(tot.Learners)
	if got, _ := json.Marshal(back.Report().Learners); !bytes.Equal(got, want) {
		t.Errorf("restored totals %s, want %s", got, want)
	}
}

// keyedBenchConfig is BenchmarkKeyedProcess's: streamlearn's default
// learners (a Perceptron and plain AdaGrad, with a bias) at 2^18 slots.
const keyedBenchConfig = `features: {bits: 18}
learners:
  - {name: perceptron, algorithm: perceptron, bias: true}
  - {name: adagrad, algorithm: adagrad, bias: true, normalized: false}
`

// BenchmarkKeyedProcess: 200,000 events over 20,000 keys of Zipf
// frequencies (about 13,000 of them met), twelve features each (four of
// the key's, eight of a shared pool), decoded before the timer, through
// a Keyed at the default bound in bytes: the cost of Keyed.Process, a
// new key's model, the lookups and the counting, beside the learners'
// own rounds (ns/event, and cpu-ns/event: the process's CPU time, the
// collector's included, which a busy machine does not inflate).
func BenchmarkKeyedProcess(b *testing.B) {
	c := mustConfig(b, keyedBenchConfig)
	dec := mustDecoder(b, c)
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, 19999)
	evs := make([]event.Event, 200000)
	for i := range evs {
		k := zipf.Uint64()
		line := fmt.Appendf(nil, `{"key":"k%d","features":{`, k)
		for j := range 4 {
			line = fmt.Appendf(line, `"k%d.%d":%.3f,`, k, j, rng.Float64())
		}
		for j := range 8 {
			line = fmt.Appendf(line, `"s%d":%.3f,`, rng.IntN(1000)*8+j, rng.Float64())
		}
		line = fmt.Appendf(line[:len(line)-1], `},"label":%d}`, rng.IntN(2))
		if err := dec.Decode(line, &evs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		k, err := NewKeyed(c, KeyedOptions{MaxBytes: 512 << 20})
		if err != nil {
			b.Fatal(err)
		}
		for i := range evs {
			if _, _, _, err := k.Process(&evs[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*len(evs)), "cpu-ns/event")
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
