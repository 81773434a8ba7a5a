package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

func post(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, b := send(t, req)
	return resp.StatusCode, b
}

// withoutLabel returns the JSON event line without its label: what
// /v1/predict takes (it refuses a label: predicting never learns).
func withoutLabel(tb testing.TB, line []byte) []byte {
	tb.Helper()
	var ev map[string]any
	if err := json.Unmarshal(line, &ev); err != nil {
		tb.Fatal(err)
	}
	delete(ev, "label")
	out, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// withoutLabels is withoutLabel of each line.
func withoutLabels(tb testing.TB, lines [][]byte) [][]byte {
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = withoutLabel(tb, l)
	}
	return out
}

// runUntil starts svc, stopped when the test ends, and waits until it
// has started and its snapshot has n events in all.
func runUntil(t testing.TB, svc *service.Service, n uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap := svc.Snapshot()
		var seen uint64
		for _, r := range snap.Reports {
			seen += r.Events
		}
		if snap.Started && seen == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events after 10s, want %d", seen, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// process has p process lines, decoded as cfg says, and returns the
// decoder.
func process(t *testing.T, cfg *config.Config, p *pipeline.Pipeline, lines [][]byte) *event.Decoder {
	t.Helper()
	dec, err := event.NewDecoder(pipeline.EventConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	for _, l := range lines {
		if err := dec.Decode(l, &ev); err != nil {
			t.Fatal(err)
		}
		p.Process(&ev)
	}
	return dec
}

// POST /v1/predict answers with the predictions the model makes on the
// events, learning nothing: the answers equal those of a copy of a replay
// of the same stream, bit for bit (Weighted-Majority's draws included,
// as the serving copy's generator continues from the model's), and the
// live model's digests do not move.
func TestPredict(t *testing.T) {
	cfg, lines := demo(t, 340)
	cfg.Answer = "adagrad" // config.yaml's third learner
	train, queries := lines[:300], withoutLabels(t, lines[300:])
	svc, ts := setup(t, cfg, &sliceSource{lines: train, partitions: 1, block: true}, nil)
	runUntil(t, svc, 300)

	// The reference: a replay of the same 300 events, then a copy of it
	// predicting the queries in the order the requests send them.
	ref, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := process(t, cfg, ref, train)
	var ev event.Event
	before, err := ref.Report()
	if err != nil {
		t.Fatal(err)
	}
	served, err := ref.Clone()
	if err != nil {
		t.Fatal(err)
	}
	want := func(line []byte) []PredictedLabel {
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		preds, reason := served.Predict(&ev)
		if reason != "" {
			t.Fatal(reason)
		}
		out := make([]PredictedLabel, len(preds))
		for i, p := range preds {
			out[i] = PredictedLabel{Learner: served.Name(i), Class: served.LabelName(p.Label)}
			if !math.IsInf(p.Score, 0) && !math.IsNaN(p.Score) {
				s := p.Score
				out[i].Score = &s
			}
		}
		return out
	}
	check := func(what string, got PredictResponse, line []byte) {
		t.Helper()
		w := want(line)
		if got.Partition != 0 || got.ModelEvents != 300 || len(got.Predictions) != len(w) {
			t.Fatalf("%s: %+v, want partition 0, model_events 300, %d predictions", what, got, len(w))
		}
		for i := range w {
			g := got.Predictions[i]
			if g.Learner != w[i].Learner || g.Class != w[i].Class || (g.Score == nil) != (w[i].Score == nil) ||
				(g.Score != nil && *g.Score != *w[i].Score) {
				t.Errorf("%s: learner %d: got %s %s %v, want %s %s %v", what, i, g.Learner, g.Class, deref(g.Score), w[i].Learner, w[i].Class, deref(w[i].Score))
			}
		}
		// The filter's verdict: adagrad's prediction, the configured answer.
		if a := got.Answer; a.Learner != "adagrad" || !samePrediction(a, got.Predictions[2]) || a.Class != w[2].Class {
			t.Errorf("%s: answer %+v, want adagrad's %+v", what, a, w[2])
		}
	}

	// One event.
	code, body := post(t, ts.URL+"/v1/predict", queries[0])
	if code != http.StatusOK {
		t.Fatalf("one event: %d %s", code, body)
	}
	var one PredictResponse
	if err := json.Unmarshal(body, &one); err != nil {
		t.Fatalf("one event: %v: %s", err, body)
	}
	if !strings.HasPrefix(one.ID, "e-") && one.ID == "" {
		t.Errorf("id %q", one.ID)
	}
	check("one event", one, queries[0])

	// An array, in order.
	arr := append(append([]byte("[\n"), bytes.Join(queries[1:], []byte(",\n"))...), ']')
	code, body = post(t, ts.URL+"/v1/predict?partition=0", arr)
	if code != http.StatusOK {
		t.Fatalf("array: %d %s", code, body)
	}
	var many []PredictResponse
	if err := json.Unmarshal(body, &many); err != nil {
		t.Fatalf("array: %v: %s", err, body)
	}
	if len(many) != len(queries)-1 {
		t.Fatalf("array: %d answers, want %d", len(many), len(queries)-1)
	}
	for i, r := range many {
		check(fmt.Sprintf("array[%d]", i), r, queries[1+i])
	}

	// Nothing was learned: the live model is the replay's.
	if n := svc.Snapshot().Reports[0].Events; n != 300 {
		t.Errorf("%d events after the predictions, want 300", n)
	}
	live, err := svc.Reports()
	if err == nil && len(live) == 1 {
		for i, l := range live[0].Learners {
			if l.StateSHA256 != before.Learners[i].StateSHA256 || l.Rounds != before.Learners[i].Rounds {
				t.Errorf("%s: state %s rounds %d after predictions, want the replay's %s %d",
					l.Name, l.StateSHA256[:12], l.Rounds, before.Learners[i].StateSHA256[:12], before.Learners[i].Rounds)
			}
		}
	}
}

// samePrediction reports whether a and b are the same prediction, field
// by field (their numbers by value).
func samePrediction(a, b PredictedLabel) bool {
	num := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Learner == b.Learner && a.Class == b.Class && a.From == b.From && num(a.Score, b.Score) && num(a.Probability, b.Probability)
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// Bad requests get a 4xx with a one-line reason naming what is wrong.
func TestPredictErrors(t *testing.T) {
	cfg, lines := demo(t, 20)
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 2, block: true}, nil)
	runUntil(t, svc, 20)
	good := string(withoutLabel(t, lines[0]))
	for _, c := range []struct {
		name, query, body string
		code              int
		msg               string
	}{
		{"two models, none chosen", "", good, 400, "2 models (partitions 0, 1): choose one with ?partition=N"},
		{"no such partition", "?partition=7", good, 404, "no model yet for partition 7"},
		{"bad partition", "?partition=x", good, 400, `partition: want an integer, got "x"`},
		{"empty body", "?partition=0", "", 400, "empty body"},
		{"not JSON", "?partition=0", "hello", 400, "want a JSON event or an array"},
		{"empty array", "?partition=0", "[]", 400, "an empty array"},
		{"broken array", "?partition=0", "[" + good + ",", 400, "not a JSON array of events"},
		{"bad event in an array", "?partition=1", "[" + good + `,{"label":"maybe","features":{"a":1}}]`, 400, `"event":1,`},
		{"bad single event", "?partition=1", `{"features":{"a":1e999}}`, 400, `"event":0,`},
		{"no features", "?partition=1", `{"id":"m42","feature":{"a":1}}`, 400, "empty: no features, x or text"},
		{"no features in an array", "?partition=1", "[" + good + `,{"id":"m42"}]`, 400, "empty: no features, x or text: a record without features"},
		// A misspelled key is named, with the key it is nearest to.
		{"misspelled features", "?partition=1", `{"id":"m42","featurs":{"a":1}}`, 400, `a misspelled key: "featurs", did you mean "features"?`},
		{"message for text", "?partition=1", `{"message":"hi"}`, 400, `a misspelled key: "message" is none of id, key, ts, label, features, x, text`},
	} {
		code, body := post(t, ts.URL+"/v1/predict"+c.query, []byte(c.body))
		var e ErrorBody
		if code != c.code || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, c.msg) && !strings.Contains(string(body), c.msg) ||
			strings.Count(string(body), "\n") != 1 {
			t.Errorf("%s: %d %q, want %d with %q on one line", c.name, code, body, c.code, c.msg)
		}
	}
	big := bytes.Repeat([]byte(" "), MaxPredictBody+1)
	if code, body := post(t, ts.URL+"/v1/predict?partition=0", big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("body of %d bytes: %d %q, want 413", len(big), code, body)
	}
	if code, _, _ := get(t, "GET", ts.URL+"/v1/predict"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/predict: %d, want 405", code)
	}
	if code, body := post(t, ts.URL+"/v1/predict?partition=1", withoutLabel(t, lines[1])); code != http.StatusOK {
		t.Errorf("a good event for partition 1: %d %s", code, body)
	}
}

// With delayed labels a label event is decoded as one, and has nothing to
// predict: 400.
func TestPredictLabelEvent(t *testing.T) {
	cfg, lines := demo(t, 20)
	cfg.Labels = config.Labels{Delayed: true, Wait: 100, MaxPending: 100}
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, nil)
	runUntil(t, svc, 20)
	code, body := post(t, ts.URL+"/v1/predict", []byte(`{"id":"m42","label":1}`))
	if code != 400 || !strings.Contains(string(body), "a label event") {
		t.Errorf("label event: %d %q, want 400 saying it is a label event", code, body)
	}
	if code, _ := post(t, ts.URL+"/v1/predict", withoutLabel(t, lines[0])); code != 200 {
		t.Errorf("an event with features: %d, want 200", code)
	}
}

// TestPredictRequestLabel: an event sent to /v1/predict with a label is
// refused, 400 naming the field and the event, saying that predicting
// never learns and that labels go on the stream; a label of null is no
// label. Nothing is learned either way. (Before, the label was silently
// ignored.)
func TestPredictRequestLabel(t *testing.T) {
	cfg, lines := demo(t, 20)
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, nil)
	runUntil(t, svc, 20)
	ask := string(withoutLabel(t, lines[0]))
	for _, c := range []struct {
		body  string
		event int
	}{
		{string(lines[0]), 0},
		{`{"features":{"v":0.7},"label":"spam"}`, 0},
		{"[" + ask + `,{"features":{"v":0.7},"label":0}]`, 1},
	} {
		code, body := post(t, ts.URL+"/v1/predict", []byte(c.body))
		var e ErrorBody
		if err := json.Unmarshal(body, &e); code != http.StatusBadRequest || err != nil || e.Error.Code != "label_in_request" ||
			e.Error.Field != "label" || e.Error.Event == nil || *e.Error.Event != c.event ||
			!strings.Contains(e.Error.Message, "never learns") || !strings.Contains(e.Error.Message, "on the stream") {
			t.Errorf("%s: %d %s, want 400 label_in_request naming field label and event %d", c.body, code, body, c.event)
		}
	}
	if code, body := post(t, ts.URL+"/v1/predict", []byte(`{"features":{"v":0.7},"label":null}`)); code != http.StatusOK {
		t.Errorf("label null: %d %s, want 200", code, body)
	}
	time.Sleep(50 * time.Millisecond) // ten snapshots
	r := svc.Snapshot().Reports[0]
	for _, l := range r.Learners {
		if r.Events != 20 || l.Rounds != 20 {
			t.Errorf("%s: %d rounds of %d events after the requests, want the stream's 20", l.Name, l.Rounds, r.Events)
		}
	}
}

// TestPredictLineFormatConfig: with input.format libsvm or tsv (the
// stream's records), /v1/predict still takes a JSON event.
func TestPredictLineFormatConfig(t *testing.T) {
	for _, f := range []string{"libsvm", "tsv"} {
		cfg, _ := demo(t, 20)
		cfg.Input.Format = f
		lines := [][]byte{[]byte("1\tspam words"), []byte("+1 1:0.5")} // a record of either format, and one that is not
		svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, nil)
		runUntil(t, svc, 2)
		if code, body := post(t, ts.URL+"/v1/predict", []byte(`{"features":{"v":0.7}}`)); code != 200 || !strings.Contains(string(body), `"answer"`) {
			t.Errorf("input.format %s: /v1/predict of a JSON event: %d %s", f, code, body)
		}
	}
}

// An error answer is JSON ({"error": {"code", "message", "event",
// "field", "reason"}}), its message the same for the same bad event
// however often and wherever it is sent, its "event" the index in the
// request, and no message nests the decoder's own prefixes.
func TestPredictErrorsJSON(t *testing.T) {
	cfg, lines := demo(t, 20)
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, nil)
	runUntil(t, svc, 20)
	bad := `{"id":"x","features":{"v":1e999}}`
	answer := func(body string) (int, APIError) {
		t.Helper()
		req, err := http.NewRequest("POST", ts.URL+"/v1/predict", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var e ErrorBody
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" || json.Unmarshal(out, &e) != nil {
			t.Fatalf("%s: %d %s %q, want a JSON error", body, resp.StatusCode, ct, out)
		}
		return resp.StatusCode, e.Error
	}
	var first APIError
	for i := range 6 {
		code, e := answer(bad)
		if code != 400 || e.Code != "bad_event" || e.Event == nil || *e.Event != 0 || e.Field != "features.v" || e.Reason != "nonfinite" {
			t.Fatalf("send %d: %d %+v", i, code, e)
		}
		if i == 0 {
			first = e
		} else if e.Message != first.Message {
			t.Fatalf("send %d: message %q, the first was %q", i, e.Message, first.Message)
		}
	}
	good := string(withoutLabel(t, lines[0]))
	code, e := answer("[" + good + "," + good + "," + bad + "]")
	if code != 400 || e.Event == nil || *e.Event != 2 || e.Message != first.Message {
		t.Fatalf("third of an array: %d %+v, want event 2 and %q", code, e, first.Message)
	}
	if strings.Contains(first.Message, "event:") || strings.Contains(first.Message, "record ") {
		t.Errorf("message %q has a decoder's prefix", first.Message)
	}
	for _, c := range []struct{ path, code string }{{"/v1/report?partition=x", "bad_partition"}, {"/v1/report?partition=9", "no_model"},
		{"/v1/history?partition=x", "bad_partition"}, {"/v1/latency?partition=x", "bad_partition"}} {
		code, hdr, body := get(t, "GET", ts.URL+c.path)
		var e ErrorBody
		if code < 400 || hdr.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e.Error.Code != c.code {
			t.Errorf("%s: %d %s %q, want error code %s", c.path, code, hdr.Get("Content-Type"), body, c.code)
		}
	}
}
