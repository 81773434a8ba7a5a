package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/service"
)

// fuzzService starts a service over lines (a blocking source: it idles
// once they are learned), waits until it learned them and returns it with
// its handler. With no lines the service runs without a model.
func fuzzService(f *testing.F, cfg *config.Config, lines [][]byte) (*service.Service, http.Handler) {
	f.Helper()
	svc, err := service.New(service.Options{Config: cfg, Source: &sliceSource{lines: lines, partitions: 1, block: true},
		SnapshotInterval: 5 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	runUntil(f, svc, uint64(len(lines)))
	h := New(Options{Snapshot: svc.Snapshot, Gatherer: prometheus.NewRegistry(), Config: cfg, Predictor: svc.Predictor})
	return svc, h
}

// digests returns the state_sha256 of every learner of every model in the
// service's latest snapshot, and the events the models have seen.
func digests(svc *service.Service) (string, uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc.WantDigests(ctx) // a snapshot has them while they are read
	var b strings.Builder
	var n uint64
	for _, r := range svc.Snapshot().Reports {
		n += r.Events
		for _, l := range r.Learners {
			b.WriteString(l.StateSHA256)
		}
	}
	return b.String(), n
}

// FuzzPredictHandler posts arbitrary bodies to POST /v1/predict of a
// handler over a running service (config.yaml's learners after 200 demo
// events) and of one over a service that has no model yet. It never
// panics and never answers 5xx, except 503 while there is no model; a 200
// is one JSON object (a single event) or an array of as many objects as
// the body had events, each with a prediction per learner; any other
// answer is one line of text; and the live model never changes (its
// learners' state_sha256 and its event count stay as they were).
func FuzzPredictHandler(f *testing.F) {
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		f.Fatal(err)
	}
	lines := demoLines(f, 200)
	svc, h := fuzzService(f, cfg, lines)
	asks := withoutLabels(f, lines[:3])
	_, empty := fuzzService(f, cfg, nil)
	want, wantEvents := digests(svc)
	if wantEvents != 200 || want == "" {
		f.Fatalf("the service saw %d events", wantEvents)
	}

	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	for _, s := range []string{
		string(asks[0]), string(lines[0]), `{"id":"q","features":{"v":0.5,"w":0.1}}`,
		"[" + string(asks[1]) + "," + string(asks[2]) + "]", `[{"features":{"v":0.9}},{"x":[0.1,0.2]},{"text":"win now"}]`,
		`{"features":{"v":1e308}}`, `{"x":[-1e308]}`, `{"features":{"v":1e999}}`, `{"features":{"v":NaN}}`,
		`{"x":["NaN"]}`, `{"label":"NaN","features":{"v":0.5}}`, `{"features":{"v":` + deep + `}}`, deep,
		"{\"id\":\"\xff\"}", "[{\"id\":\"\xfe\"}]", `{"label":[1]}`, `{"features":[1]}`, `{"x":{"0":1}}`,
		`{"features":{"v":0.5}`, ``, ` `, `[]`, `[1,2]`, `null`, `"event"`, `{}{}`, `[{}, 1]`, `[{"id":"a"},{"id":`,
		"\xef\xbb\xbf{}", `{"features":{"v":0.5}} trailing`, `{"id":"` + strings.Repeat("é", 2000) + `"}`,
		`[` + strings.Repeat(`{},`, 50) + `{}]`, `{"features":{"a":6e15,"a":6e15}}`, `{"text":"` + strings.Repeat("a ", 5000) + `"}`,
	} {
		for q := range uint8(5) {
			f.Add([]byte(s), q)
		}
	}
	queries := []string{"", "?partition=0", "?partition=1", "?partition=x", "?partition=99999999999"}

	f.Fuzz(func(t *testing.T, body []byte, q uint8) {
		query := queries[int(q)%len(queries)]
		for _, tc := range []struct {
			name  string
			h     http.Handler
			model bool
		}{{"live", h, true}, {"no model", empty, false}} {
			rec := httptest.NewRecorder()
			h := tc.h
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/predict"+query, bytes.NewReader(body)))
			code, out := rec.Code, rec.Body.Bytes()
			switch {
			case code == http.StatusServiceUnavailable && !tc.model:
			case code >= 500:
				t.Fatalf("%s: %d %q for body %q", tc.name, code, out, body)
			case code == http.StatusOK && !tc.model:
				t.Fatalf("%s: 200 without a model: %q", tc.name, out)
			}
			if code != http.StatusOK {
				var e ErrorBody
				if len(out) == 0 || out[len(out)-1] != '\n' || bytes.Count(out, []byte("\n")) != 1 || !utf8.Valid(out) ||
					json.Unmarshal(out, &e) != nil || e.Error.Code == "" || e.Error.Message == "" || strings.Contains(e.Error.Message, "\n") {
					t.Fatalf("%s: %d: the reason is not one line of JSON with a code and a message: %q", tc.name, code, out)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Fatalf("%s: %d with Content-Type %q", tc.name, code, ct)
				}
				continue
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("%s: 200 with Content-Type %q", tc.name, ct)
			}
			checkPredictJSON(t, out, len(cfg.Learners), cfg.Input.Positive[0], cfg.Input.Negative[0])
		}
		if got, n := digests(svc); got != want || n != wantEvents {
			t.Fatalf("the live model changed: %d events (want %d), digests %t", n, wantEvents, got == want)
		}
	})
}

// checkPredictJSON fails t unless out is one PredictResponse or a
// non-empty array of them, each with a prediction per learner, whose
// class is pos or neg (the configuration's names of the labels), and the
// first learner's as the answer (config.yaml names none).
func checkPredictJSON(t *testing.T, out []byte, learners int, pos, neg string) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("200 with invalid JSON: %q", out)
	}
	var many []PredictResponse
	if bytes.HasPrefix(out, []byte("[")) {
		if err := json.Unmarshal(out, &many); err != nil || len(many) == 0 {
			t.Fatalf("200 with %q: %v", out, err)
		}
	} else {
		var one PredictResponse
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&one); err != nil {
			t.Fatalf("200 with %q: %v", out, err)
		}
		many = []PredictResponse{one}
	}
	for _, r := range many {
		if len(r.Predictions) != learners || r.ModelEvents == 0 {
			t.Fatalf("answer %+v: want %d predictions from a model", r, learners)
		}
		for _, p := range r.Predictions {
			if p.Class != pos && p.Class != neg {
				t.Fatalf("answer %+v: class %q", r, p.Class)
			}
		}
		if !samePrediction(r.Answer, r.Predictions[0]) {
			t.Fatalf("answer %+v: want the first learner's prediction", r)
		}
	}
}

// demoLines returns the first n lines of testdata/demo.jsonl.
func demoLines(tb testing.TB, n int) [][]byte {
	tb.Helper()
	file, err := os.Open("../../testdata/demo.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	defer file.Close()
	var lines [][]byte
	sc := bufio.NewScanner(file)
	for len(lines) < n && sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	return lines
}
