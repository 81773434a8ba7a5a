package api

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/service"
)

// sliceSource serves lines round-robin over partitions, then ends (or,
// with block, waits for ctx).
type sliceSource struct {
	lines      [][]byte
	partitions int32
	i          int
	block      bool
}

func (s *sliceSource) Fetch(ctx context.Context) (connectors.Record, error) {
	if err := ctx.Err(); err != nil {
		return connectors.Record{}, err
	}
	if s.i < len(s.lines) {
		i := s.i
		s.i++
		p := int32(i) % s.partitions
		return connectors.Record{Value: s.lines[i], Partition: p, Offset: int64(i) / int64(s.partitions)}, nil
	}
	if s.block {
		<-ctx.Done()
		return connectors.Record{}, ctx.Err()
	}
	return connectors.Record{}, connectors.ErrEndOfInput
}

func (s *sliceSource) Commit(context.Context, connectors.Record) error { return nil }
func (s *sliceSource) Name() string                                    { return "mem:demo" }
func (s *sliceSource) Close() error                                    { return nil }

// memSink keeps the messages published to it.
type memSink struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (s *memSink) Publish(_ context.Context, _, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, append([]byte(nil), v...))
	return nil
}
func (s *memSink) Flush(context.Context) error { return nil }
func (s *memSink) Close() error                { return nil }

// demo returns config.yaml and the first n lines of testdata/demo.jsonl
// (both at the repository's root).
func demo(t *testing.T, n int) (*config.Config, [][]byte) {
	t.Helper()
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg, demoLines(t, n)
}

// setup builds a service over src, its registry and an httptest server.
func setup(t *testing.T, cfg *config.Config, src connectors.Source, reports connectors.Sink) (*service.Service, *httptest.Server) {
	t.Helper()
	hist := metrics.NewEventDuration()
	svc, err := service.New(service.Options{Config: cfg, Source: src, Reports: reports, EventDuration: hist,
		SnapshotInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(svc.Snapshot), hist)
	ts := httptest.NewServer(New(Options{Snapshot: svc.Snapshot, Gatherer: reg, Config: cfg, Predictor: svc.Predictor, WantDigests: svc.WantDigests}))
	t.Cleanup(ts.Close)
	return svc, ts
}

func get(t *testing.T, method, url string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, b := send(t, req)
	return resp.StatusCode, resp.Header, b
}

// getIfNoneMatch does GET url with If-None-Match: etag and returns the
// status code.
func getIfNoneMatch(t *testing.T, url, etag string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", etag)
	resp, _ := send(t, req)
	return resp.StatusCode
}

// send does req and returns the response, its body read and closed.
func send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// series indexes a parsed exposition by metric name and label set.
type series map[string]float64

func seriesKey(name string, labels ...string) string {
	return name + "{" + strings.Join(labels, ",") + "}"
}

func scrape(t *testing.T, url string) series {
	t.Helper()
	code, _, body := get(t, "GET", url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	out := series{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			out[seriesKey(name, labels...)] = v
		}
	}
	return out
}

// Every learner's numbers on /metrics equal those of /v1/report exactly,
// per partition; /v1/report's objects are the reports sink's.
func TestMetricsAgreeWithReport(t *testing.T) {
	cfg, lines := demo(t, 500)
	// Two bad records: one malformed, one of the wrong type.
	lines = append(lines, []byte(`{"id":`), []byte(`[1]`))
	sink := &memSink{}
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 2}, sink)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, ts.URL)
	code, hdr, body := get(t, "GET", ts.URL+"/v1/report")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("/v1/report: %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	var reports []service.Report
	if err := json.Unmarshal(body, &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 || reports[0].Partition != 0 || reports[1].Partition != 1 {
		t.Fatalf("reports of partitions %v, want 0 and 1", reports)
	}
	check := func(key string, want float64) {
		t.Helper()
		if v, ok := got[key]; !ok {
			t.Errorf("%s missing from /metrics", key)
		} else if v != want {
			t.Errorf("%s = %v on /metrics, %v in /v1/report", key, v, want)
		}
	}
	var learned, predicted, invalid uint64
	for _, r := range reports {
		learned += r.Labeled
		predicted += r.Predicted
		invalid += r.Invalid
		part := "partition=" + strconv.Itoa(int(r.Partition))
		for _, l := range r.Learners {
			ln := "learner=" + l.Name
			check(seriesKey("streamlearn_rounds_total", ln, part), float64(l.Rounds))
			check(seriesKey("streamlearn_mistakes_total", ln, part), float64(l.Mistakes))
			check(seriesKey("streamlearn_loss_total", ln, part), l.Loss)
			check(seriesKey("streamlearn_bound_violations_total", ln, part), float64(l.BoundViolations))
			if l.Bound != nil {
				check(seriesKey("streamlearn_bound", "kind="+string(l.Bound.Kind), ln, part), l.Bound.Value)
			}
			if l.Regret != nil {
				check(seriesKey("streamlearn_regret", ln, part), l.Regret.Value)
				if l.Regret.Bound != nil {
					check(seriesKey("streamlearn_regret_bound", ln, part), *l.Regret.Bound)
				}
			}
		}
	}
	if learned != 500 || invalid != 2 {
		t.Errorf("reports: %d learned, %d invalid; want 500 and 2", learned, invalid)
	}
	check(seriesKey("streamlearn_events_total", "outcome=learned", "source=mem:demo"), float64(learned))
	check(seriesKey("streamlearn_events_total", "outcome=predicted", "source=mem:demo"), float64(predicted))
	check(seriesKey("streamlearn_events_total", "outcome=invalid", "source=mem:demo"), float64(invalid))
	check(seriesKey("streamlearn_invalid_events_total", "reason=malformed"), 1)
	check(seriesKey("streamlearn_invalid_events_total", "reason=type"), 1)
	check(seriesKey("streamlearn_invalid_events_total", "reason=domain"), 0)
	check(seriesKey("streamlearn_event_duration_seconds"), 502)

	// The objects are the reports sink's final ones, the time aside.
	sink.mu.Lock()
	final := sink.msgs[len(sink.msgs)-2:]
	sink.mu.Unlock()
	var served []map[string]any
	if err := json.Unmarshal(body, &served); err != nil {
		t.Fatal(err)
	}
	for i, msg := range final {
		var published map[string]any
		if err := json.Unmarshal(msg, &published); err != nil {
			t.Fatal(err)
		}
		delete(published, "seconds")
		delete(served[i], "seconds")
		if !maps.EqualFunc(published, served[i], func(a, b any) bool { return reflect.DeepEqual(a, b) }) {
			t.Errorf("partition %d: /v1/report serves\n%v\nthe reports sink got\n%v", i, served[i], published)
		}
	}

	// ?partition=N: that object alone.
	code, _, body = get(t, "GET", ts.URL+"/v1/report?partition=1")
	var one service.Report
	if code != http.StatusOK || json.Unmarshal(body, &one) != nil || !reflect.DeepEqual(one, reports[1]) {
		t.Errorf("?partition=1: %d %s\nwant %+v", code, body, reports[1])
	}
	for q, want := range map[string]int{"7": 404, "x": 400, "-1": 404, "99999999999": 400} {
		if code, _, body := get(t, "GET", ts.URL+"/v1/report?partition="+q); code != want || strings.Count(string(body), "\n") != 1 {
			t.Errorf("?partition=%s: %d %q, want %d and one line", q, code, body, want)
		}
	}
}

// /readyz is 503 until Run has started, 200 while it runs; /healthz is
// always 200.
func TestReadyz(t *testing.T) {
	cfg, lines := demo(t, 50)
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, nil)
	if code, _, body := get(t, "GET", ts.URL+"/readyz"); code != http.StatusServiceUnavailable || strings.Count(string(body), "\n") != 1 {
		t.Errorf("/readyz before Run: %d %q, want 503 and a one-line reason", code, body)
	}
	if code, _, body := get(t, "GET", ts.URL+"/healthz"); code != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, _, body := get(t, "GET", ts.URL+"/v1/report"); code != http.StatusOK || string(body) != "[]\n" {
		t.Errorf("/v1/report before Run: %d %q, want []", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, body := get(t, "GET", ts.URL+"/readyz")
		if code == http.StatusOK && string(body) == "ok\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 10s after Run: %d %q", code, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The source is idle after its 50 lines: a snapshot still comes.
	for {
		var reports []service.Report
		_, _, body := get(t, "GET", ts.URL+"/v1/report")
		if err := json.Unmarshal(body, &reports); err != nil {
			t.Fatal(err)
		}
		if len(reports) == 1 && reports[0].Events == 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v1/report of the idle service: %s, want 50 events", body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMethodsAndPaths: the API's and the dashboard's paths and no others;
// other methods get 405 with Allow.
func TestMethodsAndPaths(t *testing.T) {
	cfg, _ := demo(t, 0)
	_, ts := setup(t, cfg, &sliceSource{partitions: 1}, nil)
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 200},
		{"HEAD", "/healthz", 200},
		{"POST", "/metrics", 405},
		{"PUT", "/healthz", 405},
		{"DELETE", "/readyz", 405},
		{"POST", "/v1/report", 405},
		{"POST", "/v1/learners", 405},
		{"GET", "/v1/nope", 404},
		{"GET", "/metrics/x", 404},
		// The dashboard, and its curves.
		{"GET", "/", 200},
		{"HEAD", "/", 200},
		{"POST", "/", 405},
		{"GET", "/index.html", 404},
		{"GET", "/dashboard/", 404},
		{"GET", "/dashboard/index.html", 404},
		{"GET", "/dashboard/app.js/x", 404},
		{"GET", "/v1/history", 200},
		{"POST", "/v1/history", 405},
		{"GET", "/v1/history?partition=0", 404}, // no model yet
	} {
		code, hdr, body := get(t, c.method, ts.URL+c.path)
		if code != c.code {
			t.Errorf("%s %s: %d %q, want %d", c.method, c.path, code, body, c.code)
		}
		if code == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
	if _, _, body := get(t, "GET", ts.URL+"/v1/history"); string(body) != "[]\n" {
		t.Errorf("/v1/history before Run: %q, want []", body)
	}
}

// TestMethodNotAllowedJSON: a /v1/ path asked with a method it does not
// take answers 405 as every other /v1/ error, an ErrorBody, with Allow;
// other paths keep the plain text.
func TestMethodNotAllowedJSON(t *testing.T) {
	cfg, _ := demo(t, 0)
	_, ts := setup(t, cfg, &sliceSource{partitions: 1}, nil)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/predict", "POST"},
		{"POST", "/v1/report", "GET, HEAD"},
		{"DELETE", "/v1/learners", "GET, HEAD"},
	} {
		code, hdr, body := get(t, c.method, ts.URL+c.path)
		var e ErrorBody
		if code != 405 || hdr.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil {
			t.Errorf("%s %s: %d %s %q, want 405 application/json", c.method, c.path, code, hdr.Get("Content-Type"), body)
			continue
		}
		if hdr.Get("Allow") != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, hdr.Get("Allow"), c.allow)
		}
		want := c.method + " " + c.path + ": method not allowed; allowed: " + c.allow
		if e.Error.Code != "method_not_allowed" || e.Error.Message != want {
			t.Errorf("%s %s: %+v, want code method_not_allowed, message %q", c.method, c.path, e.Error, want)
		}
	}
	if code, hdr, _ := get(t, "POST", ts.URL+"/metrics"); code != 405 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Errorf("POST /metrics: %d %s, want 405 as text", code, hdr.Get("Content-Type"))
	}
}

// TestNotFoundJSON: a /v1/ path that is no endpoint answers 404 as every
// other /v1/ error, an ErrorBody of code not_found naming the request;
// other paths keep the mux's plain-text 404.
func TestNotFoundJSON(t *testing.T) {
	cfg, _ := demo(t, 0)
	_, ts := setup(t, cfg, &sliceSource{partitions: 1}, nil)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/nope"},
		{"POST", "/v1/nope"},
		{"GET", "/v1/report/x"},
		{"GET", "/v1/"},
	} {
		code, hdr, body := get(t, c.method, ts.URL+c.path)
		var e ErrorBody
		if code != 404 || hdr.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil {
			t.Errorf("%s %s: %d %s %q, want 404 application/json", c.method, c.path, code, hdr.Get("Content-Type"), body)
			continue
		}
		want := c.method + " " + c.path + ": no such endpoint"
		if e.Error.Code != "not_found" || e.Error.Message != want {
			t.Errorf("%s %s: %+v, want code not_found, message %q", c.method, c.path, e.Error, want)
		}
	}
	for _, path := range []string{"/metrics/x", "/dashboard/nope", "/nope"} {
		if code, hdr, _ := get(t, "GET", ts.URL+path); code != 404 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
			t.Errorf("GET %s: %d %s, want 404 as text", path, code, hdr.Get("Content-Type"))
		}
	}
}

func TestLearners(t *testing.T) {
	cfg, _ := demo(t, 0)
	_, ts := setup(t, cfg, &sliceSource{partitions: 1}, nil)
	code, _, body := get(t, "GET", ts.URL+"/v1/learners")
	var got []Learner
	if code != 200 || json.Unmarshal(body, &got) != nil {
		t.Fatalf("/v1/learners: %d %s", code, body)
	}
	want := []Learner{{"pct", "perceptron"}, {"ogd", "ogd"}, {"adagrad", "adagrad"}, {"consistent", "consistent"}, {"halving", "halving"},
		{"soa", "soa"}, {"wm-h", "weighted-majority"}, {"wm-l", "weighted-majority"}} // config.yaml
	if !reflect.DeepEqual(got, want) {
		t.Errorf("/v1/learners: %+v, want %+v", got, want)
	}
}

// Every timeout and the header limit are set: a slow client cannot hold a
// connection open.
func TestServerLimits(t *testing.T) {
	s := NewServer("127.0.0.1:0", http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout < s.ReadHeaderTimeout || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("server limits: header %v read %v write %v idle %v max header %d; want all set",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	if s.Addr != "127.0.0.1:0" {
		t.Errorf("Addr %q", s.Addr)
	}
}
