package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// stateConfig has every algorithm and every OGD loss, Weighted-Majority
// over a class and over learners, a table class whose finite domain
// rejects some events, and standard scaling.
const stateConfig = `
features: {bits: 10, scale: standard}
learners:
  - {name: pct, algorithm: perceptron}
  - {name: pct-ab, algorithm: perceptron, average: true, bias: true}
  - {name: pct-m, algorithm: perceptron, bias: true, margin: 0.01}
  - {name: ogd-h, algorithm: ogd, loss: hinge, eta: 0.5, radius: 5, bias: true}
  - {name: ogd-l, algorithm: ogd, loss: logistic, eta: 0.5, schedule: fixed}
  - {name: ogd-s, algorithm: ogd, loss: squared, eta: 0.05}
  - {name: cons, algorithm: consistent, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - {name: halv, algorithm: halving, class: {kind: intervals, feature: v, min: 0, max: 1, points: 16}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - name: tab
    algorithm: soa
    class: {kind: table, feature: d, domain: [0, 1, 2], hypotheses: [[0, 0, 1], [0, 1, 1], [1, 1, 1]]}
  - {name: wm-h, algorithm: weighted-majority, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}, seed: 3}
  - {name: wm-l, algorithm: weighted-majority, experts: [pct, ogd-h, soa], seed: 5}
  - {name: ada, algorithm: adagrad, bias: true}
  - {name: ada-p, algorithm: adagrad, loss: logistic, normalized: false}
  - {name: peg, algorithm: pegasos, bias: true}
  - {name: kp, algorithm: kernel-perceptron, kernel: gaussian, sigma: 2, max_support: 20}
  - {name: boost, algorithm: adaboost-ol, weak_learners: 3, weak: {algorithm: ogd, loss: hinge, bias: true}, seed: 4}
`

// stateStream is the first n events of testdata/demo.jsonl salted with an
// unlabeled copy of every 7th event, a malformed record after every 50th
// and an event outside tab's domain (d = 5) after every 40th, with the
// counts a run must report.
type stateStream struct {
	data                                    []byte
	records, labeled, unlabeled, bad, outOf uint64
}

func saltedDemo(t testing.TB, n int) stateStream {
	t.Helper()
	demo, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var s stateStream
	var b bytes.Buffer
	for i, line := range bytes.SplitN(demo, []byte("\n"), n+1)[:n] {
		b.Write(line)
		b.WriteByte('\n')
		s.labeled++
		if i%7 == 3 {
			// Drop the label: {"id":...,"features":{...},"label":0} → {...}.
			k := bytes.LastIndex(line, []byte(`,"label"`))
			b.Write(line[:k])
			b.WriteString("}\n")
			s.unlabeled++
		}
		if i%50 == 49 {
			b.WriteString(`{"id":"bad","features":{"v":0.5},"label":1` + "\n")
			s.bad++
		}
		if i%40 == 39 {
			b.WriteString(`{"id":"far","features":{"v":0.5,"d":5},"label":1}` + "\n")
			s.outOf++
		}
	}
	s.data = b.Bytes()
	s.records = s.labeled + s.unlabeled + s.bad + s.outOf
	return s
}

// feed replays data through p.
func feed(t testing.TB, p *Pipeline, c *config.Config, data []byte) {
	t.Helper()
	feedFrom(t, p, c, bytes.NewReader(data), "state.jsonl", nil)
}

// feedFrom replays the events of r, a stream called name, through p, with
// dead letters to dl.
func feedFrom(t testing.TB, p *Pipeline, c *config.Config, r io.Reader, name string, dl DeadLetters) {
	t.Helper()
	er, err := event.NewReader(r, name, EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Replay(context.Background(), er, dl, nil); err != nil {
		t.Fatal(err)
	}
}

func mustNew(t testing.TB, c *config.Config) *Pipeline {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustDecoder(t testing.TB, c *config.Config) *event.Decoder {
	t.Helper()
	d, err := event.NewDecoder(EventConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustReport(t testing.TB, p *Pipeline) Report {
	t.Helper()
	rep, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// snapshot returns p's report, as JSON without the seconds, and its state.
func snapshot(t testing.TB, p *Pipeline) (string, []byte) {
	t.Helper()
	rep := mustReport(t, p)
	rep.Seconds = 0
	j, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return string(j), b
}

// lineStarts returns the offset of every line of data, and len(data).
func lineStarts(data []byte) []int {
	offs := []int{0}
	for i, c := range data {
		if c == '\n' {
			offs = append(offs, i+1)
		}
	}
	return offs
}

// A run checkpointed after k records and restored into a new pipeline
// built from the same config ends exactly as the uninterrupted run: the
// same report (every field, digests included) and the same state bytes.
func TestStateSplitRun(t *testing.T) {
	c := mustConfig(t, stateConfig)
	s := saltedDemo(t, 1200)
	whole := mustNew(t, c)
	feed(t, whole, c, s.data)
	wantJSON, wantBytes := snapshot(t, whole)

	// The uninterrupted run, in numbers the salting fixes.
	rep, _ := whole.Report()
	if rep.Events != s.records || rep.Labeled != s.labeled || rep.Predicted != s.unlabeled || rep.Invalid != s.bad+s.outOf ||
		rep.InvalidByReason["malformed"] != s.bad || rep.InvalidByReason["domain"] != s.outOf || len(rep.InvalidByReason) != 2 {
		t.Fatalf("counts %+v, want %d records: %d labeled, %d unlabeled, %d malformed, %d outside the domain",
			rep, s.records, s.labeled, s.unlabeled, s.bad, s.outOf)
	}
	if s.labeled != 1200 || s.unlabeled != 171 || s.bad != 24 || s.outOf != 30 {
		t.Fatalf("salting changed: %d labeled, %d unlabeled, %d bad, %d outside", s.labeled, s.unlabeled, s.bad, s.outOf)
	}
	for _, l := range rep.Learners {
		if l.Rounds != s.labeled {
			t.Errorf("%s: %d rounds, want %d", l.Name, l.Rounds, s.labeled)
		}
	}
	// The stream must exercise what the state holds: mistakes everywhere,
	// violations of the realizable-case learners on the table (its
	// hypotheses all say 0 at d = 0 except the last, and labels vary).
	for _, l := range rep.Learners {
		if l.Mistakes == 0 {
			t.Errorf("%s: no mistakes, the split test checks little", l.Name)
		}
	}
	if rep.Learners[9].BoundViolations == 0 {
		t.Errorf("tab: no violations: %+v", rep.Learners[9])
	}

	starts := lineStarts(s.data)
	nrec := len(starts) - 1
	if uint64(nrec) != s.records {
		t.Fatalf("%d lines, %d records", nrec, s.records)
	}
	for _, k := range []int{0, 1, 2, 3, 4, 57, 500, nrec / 2, nrec - 1, nrec} {
		a := mustNew(t, c)
		feed(t, a, c, s.data[:starts[k]])
		blob, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		b := mustNew(t, c)
		if err := b.UnmarshalBinary(blob); err != nil {
			t.Fatalf("split at %d: %v", k, err)
		}
		// The restored state is a's, to the byte, before it runs on.
		if got, _ := b.MarshalBinary(); !bytes.Equal(got, blob) {
			t.Fatalf("split at %d: restored state re-marshals differently", k)
		}
		feed(t, b, c, s.data[starts[k]:])
		gotJSON, gotBytes := snapshot(t, b)
		if gotJSON != wantJSON {
			t.Fatalf("split at record %d of %d: reports differ:\n got %s\nwant %s", k, nrec, gotJSON, wantJSON)
		}
		if !bytes.Equal(gotBytes, wantBytes) {
			t.Fatalf("split at record %d: final states differ", k)
		}
	}
}

// The tracker's history is state too: a restored pipeline's curves are
// the uninterrupted run's, and the tracker keeps its identity.
func TestStateHistory(t *testing.T) {
	c := mustConfig(t, stateConfig)
	s := saltedDemo(t, 600)
	starts := lineStarts(s.data)
	half := starts[len(starts)/2]

	whole := mustNew(t, c)
	whole.Tracker().EnableHistory(16)
	feed(t, whole, c, s.data)

	a := mustNew(t, c)
	a.Tracker().EnableHistory(16)
	feed(t, a, c, s.data[:half])
	blob, _ := a.MarshalBinary()
	b := mustNew(t, c)
	tr := b.Tracker()
	if err := b.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	if b.Tracker() != tr {
		t.Error("UnmarshalBinary replaced the tracker")
	}
	feed(t, b, c, s.data[half:])
	hw, hb := whole.Tracker().History(), b.Tracker().History()
	if len(hw) != len(c.Learners) || len(hw[0]) < 8 || !slices.EqualFunc(hw, hb, slices.Equal) {
		t.Errorf("history differs after a restore:\n got %v\nwant %v", hb, hw)
	}
}

// A clone is independent of its original both ways, and equal to it.
func TestCloneIndependent(t *testing.T) {
	c := mustConfig(t, stateConfig)
	s := saltedDemo(t, 800)
	starts := lineStarts(s.data)
	half := starts[len(starts)/2]

	p := mustNew(t, c)
	feed(t, p, c, s.data[:half])
	q, err := p.Clone()
	if err != nil {
		t.Fatal(err)
	}
	pJSON, pBytes := snapshot(t, p)
	if qJSON, qBytes := snapshot(t, q); qJSON != pJSON || !bytes.Equal(qBytes, pBytes) {
		t.Fatal("clone differs from its original")
	}
	if q.Tracker() == p.Tracker() {
		t.Fatal("clone shares the tracker")
	}

	feed(t, q, c, s.data[half:])
	if j, b := snapshot(t, p); j != pJSON || !bytes.Equal(b, pBytes) {
		t.Fatal("running the clone changed the original")
	}
	qJSON, qBytes := snapshot(t, q)
	if qJSON == pJSON {
		t.Fatal("the clone did not move")
	}
	feed(t, p, c, s.data[half:])
	if j, b := snapshot(t, q); j != qJSON || !bytes.Equal(b, qBytes) {
		t.Fatal("running the original changed the clone")
	}
	// Same events, same state.
	if j, b := snapshot(t, p); j != qJSON || !bytes.Equal(b, qBytes) {
		t.Fatal("original and clone differ after the same events")
	}
}

// decodeLines decodes every line of data that is a valid event.
func decodeLines(t testing.TB, c *config.Config, data []byte) []event.Event {
	t.Helper()
	d := mustDecoder(t, c)
	var evs []event.Event
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var ev event.Event
		if d.Decode(line, &ev) != nil {
			continue
		}
		evs = append(evs, ev)
	}
	return evs
}

func samePredictions(a, b []online.Prediction) bool {
	return slices.EqualFunc(a, b, func(x, y online.Prediction) bool {
		return x.Label == y.Label && math.Float64bits(x.Score) == math.Float64bits(y.Score)
	})
}

// Predict on a clone returns, to the bit, what Process returns for the same
// event on the live pipeline — every learner, Weighted-Majority's random
// draws included, scaled as Process scales — and counts nothing.
func TestPredictMatchesProcess(t *testing.T) {
	c := mustConfig(t, stateConfig)
	live := mustNew(t, c)
	evs := decodeLines(t, c, saltedDemo(t, 250).data)
	var domain int
	for i := range evs {
		ev := &evs[i]
		clone, err := live.Clone()
		if err != nil {
			t.Fatal(err)
		}
		before := clone.Counts()
		got, reason := clone.Predict(ev)
		got = slices.Clone(got)
		want, wantReason := live.Process(ev)
		if reason != wantReason || !samePredictions(got, want) {
			t.Fatalf("event %d: Predict %v %q, Process %v %q", i, got, reason, want, wantReason)
		}
		if reason != "" {
			domain++
		}
		if after := clone.Counts(); after.Events != before.Events || after.Invalid != before.Invalid || len(after.InvalidBy) != len(before.InvalidBy) {
			t.Fatalf("event %d: Predict counted: %+v then %+v", i, before, after)
		}
	}
	if domain != 6 {
		t.Errorf("%d events outside the domain, want 6 (one per 40 of 250)", domain)
	}
}

// deterministicConfig is stateConfig without Weighted-Majority: nothing
// draws at random, so Predict leaves the state exactly as it was.
const deterministicConfig = `
features: {bits: 10, scale: standard}
learners:
  - {name: pct-ab, algorithm: perceptron, average: true, bias: true}
  - {name: ogd-h, algorithm: ogd, loss: hinge, eta: 0.5, radius: 5, bias: true}
  - {name: ogd-l, algorithm: ogd, loss: logistic, eta: 0.5, schedule: fixed}
  - {name: halv, algorithm: halving, class: {kind: intervals, feature: v, min: 0, max: 1, points: 16}}
  - {name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}
  - name: tab
    algorithm: soa
    class: {kind: table, feature: d, domain: [0, 1, 2], hypotheses: [[0, 0, 1], [0, 1, 1], [1, 1, 1]]}
`

// Without randomized learners, Predict changes nothing a report or the
// state encoding shows, the scaler's statistics included, on a pipeline
// that then runs on: one clone follows the live pipeline event by event,
// predicting each event before both process it.
func TestPredictLeavesStateUnchanged(t *testing.T) {
	for _, scale := range []string{"standard", "l2", "none"} {
		c := mustConfig(t, strings.Replace(deterministicConfig, "scale: standard", "scale: "+scale, 1))
		live := mustNew(t, c)
		clone, err := live.Clone()
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range decodeLines(t, c, saltedDemo(t, 300).data) {
			j0, b0 := snapshot(t, clone)
			got, reason := clone.Predict(&ev)
			got = slices.Clone(got)
			if j1, b1 := snapshot(t, clone); j1 != j0 || !bytes.Equal(b1, b0) {
				t.Fatalf("scale %s, event %d: Predict changed the state", scale, i)
			}
			want, wantReason := live.Process(&ev)
			if reason != wantReason || !samePredictions(got, want) {
				t.Fatalf("scale %s, event %d: Predict %v %q, Process %v %q", scale, i, got, reason, want, wantReason)
			}
			clone.Process(&ev)
		}
		lj, lb := snapshot(t, live)
		if cj, cb := snapshot(t, clone); cj != lj || !bytes.Equal(cb, lb) {
			t.Fatalf("scale %s: clone and live differ after the same events", scale)
		}
	}
}

// Predict changes nothing, Weighted-Majority's generators included: the
// same event predicted five times gets the same predictions, and every
// learner's digest, every counter and the scaler are as before.
func TestPredictChangesNothing(t *testing.T) {
	c := mustConfig(t, stateConfig)
	p := mustNew(t, c)
	s := saltedDemo(t, 200)
	feed(t, p, c, s.data)
	before, _ := p.Report()
	ev := decodeLines(t, c, s.data)[0]
	var first []online.Prediction
	for k := range 5 {
		preds, reason := p.Predict(&ev)
		if reason != "" {
			t.Fatal(reason)
		}
		if k == 0 {
			first = slices.Clone(preds)
		} else if !slices.Equal(preds, first) {
			t.Fatalf("prediction %d of the same event: %v, first %v", k+1, preds, first)
		}
	}
	after, _ := p.Report()
	for i, l := range after.Learners {
		b := before.Learners[i]
		lj, _ := json.Marshal(l)
		bj, _ := json.Marshal(b)
		if !bytes.Equal(lj, bj) {
			t.Errorf("%s: report changed:\n%s\n%s", l.Name, bj, lj)
		}
	}
	after.Seconds, before.Seconds = 0, 0
	after.Learners, before.Learners = nil, nil
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("counts changed: %+v then %+v", before, after)
	}
	if p.scaler.Kind() != online.ScaleStandard {
		t.Fatal("the config lost its scaler")
	}
}

// scaleAsObserved is Transform's output without Transform's update, to the
// bit, on canonical and non-canonical vectors.
func TestScaleAsObserved(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kind := range []string{online.ScaleStandard, online.ScaleL2, online.ScaleNone} {
		s, err := online.NewScaler(6, kind)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2000 {
			var x online.Vector
			for range rng.IntN(6) {
				x.Idx = append(x.Idx, uint32(rng.IntN(64)))
				x.Val = append(x.Val, math.Round(rng.NormFloat64()*1000)/100)
			}
			if i%2 == 0 { // canonical: strictly increasing, no repeats
				slices.Sort(x.Idx)
				x.Idx = slices.Compact(x.Idx)
				x.Val = x.Val[:len(x.Idx)]
			}
			state, _ := s.MarshalBinary()
			var got, want online.Vector
			scaleAsObserved(s, &got, x)
			if now, _ := s.MarshalBinary(); !bytes.Equal(now, state) {
				t.Fatalf("%s: scaleAsObserved updated the scaler", kind)
			}
			s.Transform(&want, x)
			if !slices.Equal(got.Idx, want.Idx) || !slices.EqualFunc(got.Val, want.Val, func(a, b float64) bool {
				return math.Float64bits(a) == math.Float64bits(b)
			}) {
				t.Fatalf("%s, vector %d %v: got %v, Transform %v", kind, i, x, got, want)
			}
		}
	}
}

// Predict allocates nothing in steady state, like Process.
func TestPredictAllocs(t *testing.T) {
	c := mustConfig(t, stateConfig)
	p := mustNew(t, c)
	evs := decodeLines(t, c, saltedDemo(t, 100).data)
	for i := range evs {
		p.Process(&evs[i])
	}
	k := 0
	if a := testing.AllocsPerRun(500, func() {
		p.Predict(&evs[k%len(evs)])
		k++
	}); a != 0 {
		t.Errorf("%v allocations per Predict, want 0", a)
	}
}

// withCRC returns b with its last four bytes replaced by the checksum of
// the rest, so that a test can reach the structural checks.
func withCRC(b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) >= 4 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	}
	return b
}

// State from a different configuration, and truncated or corrupt state,
// are refused with an error naming what differs, and leave the target
// exactly as it was.
func TestUnmarshalRefuses(t *testing.T) {
	c := mustConfig(t, stateConfig)
	src := mustNew(t, c)
	feed(t, src, c, saltedDemo(t, 300).data)
	blob, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 has no settings digests: the learners' own encodings
	// refuse a state of other settings.
	blob2, err := src.marshal(2)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(from, to string) string {
		if !strings.Contains(stateConfig, from) {
			t.Fatalf("config has no %q", from)
		}
		return strings.Replace(stateConfig, from, to, 1)
	}
	flip := func(i int, v byte) []byte {
		b := bytes.Clone(blob)
		b[i] = v
		return b
	}
	// The bits field follows the magic and version: 16 → 11 with a valid
	// checksum reaches the shape check.
	otherBits := flip(5, 11)
	otherBits = withCRC(otherBits)
	cases := []struct {
		name, config string
		b            []byte
		want         string
	}{
		{"renamed", edit("{name: ogd-s,", "{name: ogd-sq,"), blob,
			`learner 5: state has "ogd-s" (ogd), pipeline has "ogd-sq" (ogd)`},
		{"algorithm", edit("{name: cons, algorithm: consistent", "{name: cons, algorithm: halving"), blob,
			`learner 6: state has "cons" (consistent), pipeline has "cons" (halving)`},
		{"bits", edit("bits: 10", "bits: 11"), blob, "state is of features.bits 10, pipeline has 11"},
		{"scale", edit("scale: standard", "scale: l2"), blob, `state is of features.scale "standard", pipeline has "l2"`},
		{"more learners", stateConfig + "  - {name: extra, algorithm: perceptron}\n", blob,
			"state has 17 learners (pct, pct-ab, pct-m, ogd-h, ogd-l, ogd-s, cons, halv, soa, tab, wm-h, wm-l, ada, ada-p, peg, kp, boost), pipeline has 18 (pct, pct-ab, pct-m, ogd-h, ogd-l, ogd-s, cons, halv, soa, tab, wm-h, wm-l, ada, ada-p, peg, kp, boost, extra)"},
		{"experts", edit("experts: [pct, ogd-h, soa]", "experts: [pct, ogd-l, soa]"), blob,
			`learner "wm-l": state's experts are [pct, ogd-h, soa], pipeline's are [pct, ogd-l, soa]`},
		{"ogd setting", edit("loss: hinge, eta: 0.5", "loss: hinge, eta: 0.25"), blob, `learner "ogd-h": state is of other settings than the pipeline's`},
		{"ogd setting, version 2", edit("loss: hinge, eta: 0.5", "loss: hinge, eta: 0.25"), blob2, `learner "ogd-h": ogd: unmarshal: encoding is of ogd`},
		{"seed", edit("seed: 3", "seed: 4"), blob, `learner "wm-h": state is of other settings than the pipeline's`},
		{"seed, version 2", edit("seed: 3", "seed: 4"), blob2, `learner "wm-h": experts: encoding is for a different weighted-majority configuration`},
		{"class", edit("{name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}",
			"{name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 32}}"), blob,
			`learner "soa": state is of other settings than the pipeline's`},
		{"class, version 2", edit("{name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 33}}",
			"{name: soa, algorithm: soa, class: {kind: thresholds, feature: v, min: 0, max: 1, points: 32}}"), blob2,
			`learner "soa": experts: encoding is for a different class`},
		{"input", "input: {max_bytes: 4096}\n" + stateConfig, blob, "state is of other input, features or labels settings than the pipeline's"},
		{"empty", stateConfig, nil, "0 bytes: truncated encoding"},
		{"magic", stateConfig, flip(0, 'X'), `not a pipeline state (magic "XLPL")`},
		{"version", stateConfig, flip(4, 7), "unsupported state format version 7 (this build reads versions 1 to 6)"},
		{"flipped weight", stateConfig, flip(len(blob)/2, blob[len(blob)/2]^0x10), "checksum mismatch"},
		{"trailing byte", stateConfig, append(bytes.Clone(blob), 0), "checksum mismatch"},
		{"bits, checksum fixed", stateConfig, otherBits, "state is of features.bits 11, pipeline has 10"},
		{"counts, checksum fixed", stateConfig, withCRC(append(bytes.Clone(blob[:len(blob)-4]), 0, 0, 0, 0, 0)), "trailing bytes"},
	}
	for _, tc := range cases {
		p := mustNew(t, mustConfig(t, tc.config))
		feed(t, p, mustConfig(t, tc.config), saltedDemo(t, 20).data)
		j0, b0 := snapshot(t, p)
		err := p.UnmarshalBinary(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pipeline: unmarshal: ") {
			t.Errorf("%s: %v\nwant %q", tc.name, err, tc.want)
		}
		if j1, b1 := snapshot(t, p); j1 != j0 || !bytes.Equal(b1, b0) {
			t.Errorf("%s: a refused state changed the pipeline", tc.name)
		}
	}

	// Every prefix of a small state is refused (a large one: a sample).
	p := mustNew(t, c)
	for _, n := range []int{1, 4, 5, 9, 13, 100, len(blob) / 3, len(blob) - 5, len(blob) - 1} {
		if err := p.UnmarshalBinary(blob[:n]); err == nil {
			t.Errorf("prefix of %d of %d bytes accepted", n, len(blob))
		}
		if err := p.UnmarshalBinary(withCRC(blob[:n])); err == nil {
			t.Errorf("prefix of %d of %d bytes with a valid checksum accepted", n, len(blob))
		}
	}
}

// fuzzConfig is stateConfig over 2^2 slots, so that fuzzed states are small.
var fuzzConfig = strings.Replace(stateConfig, "bits: 10", "bits: 2", 1)

func FuzzPipelineUnmarshal(f *testing.F) {
	c := mustConfig(f, fuzzConfig)
	s := saltedDemo(f, 120)
	starts := lineStarts(s.data)
	for _, k := range []int{0, 1, 5, 42, len(starts) - 1} {
		p := mustNew(f, c)
		feed(f, p, c, s.data[:starts[k]])
		blob, err := p.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(blob)
	}
	evs := decodeLines(f, c, s.data[:starts[3]])
	f.Fuzz(func(t *testing.T, b []byte) {
		p := mustNew(t, c)
		// As is (the checksum rejects nearly everything) and with the
		// checksum made to match, which lets the fuzzer reach every check
		// behind it.
		for _, b := range [][]byte{b, withCRC(b)} {
			if err := p.UnmarshalBinary(b); err != nil {
				continue
			}
			got, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, b) {
				t.Fatalf("accepted state re-marshals differently:\n got %x\nwant %x", got, b)
			}
			// An accepted state runs.
			if _, err := p.Report(); err != nil {
				t.Fatal(err)
			}
			for i := range evs {
				p.Predict(&evs[i])
				p.Process(&evs[i])
			}
		}
	})
}

// States of format versions 1 (before delayed labels: no flag after the
// tracker), 2 (before the settings digests), 3 (before the model file
// started from) and 4 (before calibrations) still restore, to the same
// model.
func TestUnmarshalVersion1(t *testing.T) {
	c := mustConfig(t, stateConfig)
	src := mustNew(t, c)
	feed(t, src, c, saltedDemo(t, 300).data)
	blob, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for v := uint8(1); v <= 4; v++ {
		old, err := src.marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if old[4] != v || v < 4 && len(old) >= len(blob) || v == 4 && !bytes.Equal(old, blob) {
			t.Fatalf("version %d: %d bytes of version %d, the current version's are %d", v, len(old), old[4], len(blob))
		}
		if v == 1 {
			// Version 2 ends with the delayed-labels flag (false here) and
			// the checksum: version 1 is that without the flag.
			v2, err := src.marshal(2)
			if err != nil {
				t.Fatal(err)
			}
			want := append(bytes.Clone(v2[:len(v2)-5]), 0, 0, 0, 0)
			want[4] = 1
			if !bytes.Equal(old, withCRC(want)) {
				t.Fatal("version 1 is not version 2 without the delayed-labels flag")
			}
		}
		if v == 3 {
			// Version 4 ends with the started-from flag (false here) and
			// the checksum.
			v4, err := src.marshal(4)
			if err != nil {
				t.Fatal(err)
			}
			want := append(bytes.Clone(v4[:len(v4)-5]), 0, 0, 0, 0)
			want[4] = 3
			if !bytes.Equal(old, withCRC(want)) {
				t.Fatal("version 3 is not version 4 without the started-from flag")
			}
		}
		p := mustNew(t, c)
		if err := p.UnmarshalBinary(old); err != nil {
			t.Fatalf("version %d state: %v", v, err)
		}
		again, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, blob) {
			t.Errorf("a version %d state restored to another model", v)
		}
	}
}

// A pipeline started from another's state (a model file) goes on exactly
// as the one that wrote it: learner for learner the same models and
// reports as a pipeline fed every event, its report naming the file and
// the events it held, through its own encoding and restore.
func TestStartFrom(t *testing.T) {
	c := mustConfig(t, stateConfig)
	data := saltedDemo(t, 600).data
	cut := lineStarts(data)[250]
	whole := mustNew(t, c)
	feed(t, whole, c, data)
	first := mustNew(t, c)
	feed(t, first, c, data[:cut])
	state, err := first.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256([]byte("the model file"))
	p := mustNew(t, c)
	if err := p.StartFrom(state, sha); err != nil {
		t.Fatal(err)
	}
	feed(t, p, c, data[cut:])
	for _, name := range whole.Names() {
		sameLearner(t, "started from", name, p, whole, true)
	}
	rep := mustReport(t, p)
	held := mustReport(t, first).Events
	if w := rep.WarmStart; w == nil || w.SHA256 != hex.EncodeToString(sha[:]) || w.Events != held || held == 0 {
		t.Fatalf("warm start in the report: %+v, want %x and %d events", w, sha, held)
	}
	if mustReport(t, whole).WarmStart != nil {
		t.Error("a pipeline not started from a model reports a warm start")
	}
	// Its state keeps it: restored, the report still names the file.
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	q := mustNew(t, c)
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if w := mustReport(t, q).WarmStart; w == nil || *w != *rep.WarmStart {
		t.Errorf("restored: warm start %+v, want %+v", w, rep.WarmStart)
	}
	if _, err := p.marshal(3); err == nil {
		t.Error("format version 3 encoded a model file started from")
	}
	// A state of another configuration is refused, and p is unchanged.
	other := mustConfig(t, strings.Replace(stateConfig, "bits: 10", "bits: 11", 1))
	r := mustNew(t, other)
	if err := r.StartFrom(state, sha); err == nil || mustReport(t, r).WarmStart != nil {
		t.Errorf("a state of another configuration: %v", err)
	}
}
