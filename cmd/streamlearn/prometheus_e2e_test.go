package main

// End-to-end tests of the metrics with Debian's Prometheus (apt-get install
// prometheus: promtool and the server, 2.42 on Debian 12): promtool lints
// a live /metrics, and a real Prometheus server scrapes a running
// streamlearn and answers queries with exactly the numbers of /v1/report.
// Without the binaries these tests skip, except with
// STREAMLEARN_REQUIRE_PROMETHEUS=1 (set by .ci/run), where they fail.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// requireTool returns the path of an external command, looking in PATH and
// then in dirs. When it is missing the test skips, or fails when the
// environment variable env is "1" (CI sets it: the tool must be there).
func requireTool(t *testing.T, env, name, pkg string, dirs ...string) string {
	t.Helper()
	if p := lookTool(name, dirs...); p != "" {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (Debian: apt-get install %s)", name, pkg)
	if os.Getenv(env) == "1" {
		t.Fatalf("%s, and %s=1: .ci/run must install it", msg, env)
	}
	t.Skipf("%s; set %s=1 to fail instead", msg, env)
	return ""
}

// learning is a `streamlearn run` process and the base URL of its HTTP API.
type learning struct {
	*proc
	base    string // http://127.0.0.1:PORT
	natsURL string // the embedded server's, when run has no -c
}

// startService starts `streamlearn run args...` (args include --http; no
// --until-end: the service keeps serving once the stream is consumed) and
// waits for the HTTP address it announces. t's cleanup stops it with
// SIGTERM.
func startService(t *testing.T, ctx context.Context, dir, sl string, args ...string) *learning {
	t.Helper()
	p, _ := start(t, ctx, dir, false, sl, args...)
	l := &learning{proc: p}
	waitFor(t, ctx, "streamlearn run to announce its HTTP address", func() bool {
		select {
		case <-p.done:
			t.Fatalf("streamlearn run exited: %v\n%s", p.err, p.stderr.String())
		default:
		}
		out := p.stderr.String()
		if _, rest, ok := strings.Cut(out, "embedded NATS JetStream at "); ok {
			l.natsURL = strings.TrimSuffix(strings.Fields(rest)[0], ":")
		}
		if _, rest, ok := strings.Cut(out, "serving http://"); ok {
			l.base = "http://" + strings.TrimSuffix(strings.Fields(rest)[0], "/metrics")
			return true
		}
		return false
	})
	t.Logf("streamlearn %s: serving %s (pid %d)", strings.Join(args, " "), l.base, p.cmd.Process.Pid)
	return l
}

// waitEvents waits until /v1/report counts n records over all models.
func (l *learning) waitEvents(t *testing.T, ctx context.Context, n uint64) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%s/v1/report to reach %d events", l.base, n), func() bool {
		reports, body := l.reports(t, ctx)
		var got uint64
		for _, r := range reports {
			got += r.Events
		}
		if got > n {
			t.Fatalf("%s/v1/report: %d events, want %d: %s", l.base, got, n, body)
		}
		return got == n
	})
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, ctx context.Context, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, b
}

// reports returns the decoded /v1/report and its body (nil reports when the
// server does not answer 200).
func (l *learning) reports(t *testing.T, ctx context.Context) ([]service.Report, []byte) {
	t.Helper()
	code, body := httpGet(t, ctx, l.base+"/v1/report")
	if code != http.StatusOK {
		return nil, body
	}
	var reports []service.Report
	if err := json.Unmarshal(body, &reports); err != nil {
		t.Fatalf("%s/v1/report: %v\n%s", l.base, err, body)
	}
	return reports, body
}

// startBothRuns starts the two services the tests observe, on the given
// HTTP addresses: `streamlearn run` as README's first command has it
// (embedded NATS JetStream server on a free port, default learners), and
// `streamlearn run -c` with config.yaml's seven learners on a durable of
// its own on that same server, so that every kind of bound and regret is
// exported. With preload, the first service publishes
// testdata/demo.jsonl before it consumes, and both have learned it when
// startBothRuns returns; without, the stream is the caller's to publish.
func startBothRuns(t *testing.T, ctx context.Context, dir, sl string, preload bool, httpEmbedded, httpFull string) (embedded, full *learning) {
	t.Helper()
	args := []string{"run", "--nats-port", "-1", "--store", filepath.Join(dir, "jetstream"), "--http", httpEmbedded}
	if preload {
		demo := e2eDemoFile(t)
		args = append(args, "--preload", demo)
	}
	embedded = startService(t, ctx, dir, sl, args...)
	if embedded.natsURL == "" {
		t.Fatalf("streamlearn run announced no embedded NATS server:\n%s", embedded.stderr.String())
	}
	cfg := e2eConfig(t, dir, "full.yaml", fmt.Sprintf(
		"source: {kind: jetstream, url: %q, subject: events, stream: EVENTS, durable: full}\n", embedded.natsURL))
	full = startService(t, ctx, dir, sl, "run", "-c", cfg, "--http", httpFull)
	if preload {
		embedded.waitEvents(t, ctx, 5000)
		full.waitEvents(t, ctx, 5000)
	}
	return embedded, full
}

// TestPromtoolCheckMetrics: the whole /metrics of a running service that
// has learned a stream — streamlearn's metrics, the Go and process
// collectors — passes `promtool check metrics` without a single problem.
func TestPromtoolCheckMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (builds binaries, runs processes): skipped in -short mode")
	}
	promtool := requireTool(t, "STREAMLEARN_REQUIRE_PROMETHEUS", "promtool", "prometheus")
	sl, _ := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	if out, err := testproc.CommandContext(t, ctx, promtool, "--version").CombinedOutput(); err == nil {
		t.Logf("%s", bytes.SplitN(out, []byte("\n"), 2)[0])
	}
	embedded, full := startBothRuns(t, ctx, dir, sl, true, "127.0.0.1:0", "127.0.0.1:0")
	for _, l := range []*learning{embedded, full} {
		code, body := httpGet(t, ctx, l.base+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("%s/metrics: %d %s", l.base, code, body)
		}
		for _, name := range []string{"streamlearn_events_total", "streamlearn_mistakes_total",
			"streamlearn_regret", "streamlearn_bound", "streamlearn_event_duration_seconds_bucket"} {
			if !bytes.Contains(body, []byte("\n"+name+"{")) {
				t.Errorf("%s/metrics has no %s series", l.base, name)
			}
		}
		cmd := testproc.CommandContext(t, ctx, promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("promtool check metrics on %s/metrics (%d lines): %v\n%s", l.base, bytes.Count(body, []byte("\n")), err, out)
		} else {
			t.Logf("promtool check metrics: %s/metrics (%d lines) has no problem", l.base, bytes.Count(body, []byte("\n")))
		}
	}
}

// promSample is one series of an instant query's vector result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// float returns the sample's value, exactly as Prometheus formatted it.
func (s promSample) float(t *testing.T) float64 {
	t.Helper()
	str, ok := s.Value[1].(string)
	if !ok {
		t.Fatalf("sample value %v is not a string", s.Value)
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("sample value %q: %v", str, err)
	}
	return v
}

// promQuery runs an instant query through Prometheus' HTTP API. It returns
// the vector, or an error when Prometheus does not answer success (yet).
func promQuery(t *testing.T, ctx context.Context, base, query string) ([]promSample, error) {
	t.Helper()
	code, body := httpGet(t, ctx, base+"/api/v1/query?query="+url.QueryEscape(query))
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%d %s", code, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %q, want vector", r.Data.ResultType)
	}
	return r.Data.Result, nil
}

// startPrometheus runs Debian's prometheus on addr with a temporary
// configuration scraping each job's target every second and a temporary
// TSDB, and returns its base URL once it is ready. t's cleanup stops it
// (SIGTERM, then SIGKILL).
func startPrometheus(t *testing.T, ctx context.Context, dir, bin, addr string, jobs map[string]string) (string, *proc) {
	t.Helper()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, jobs[job])
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := start(t, ctx, dir, false, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	base := "http://" + addr
	waitFor(t, ctx, "prometheus to be ready at "+base, func() bool {
		select {
		case <-p.done:
			t.Fatalf("prometheus exited: %v\n%s", p.err, p.stderr.String())
		default:
		}
		code, _ := httpGet(t, ctx, base+"/-/ready")
		return code == http.StatusOK
	})
	return base, p
}

// TestPrometheusScrapes: Debian's Prometheus server scrapes two running
// services every second while they learn a JetStream stream published in
// chunks; once the stream is learned, its query API returns for every
// learner exactly the mistakes, regret, bounds, rounds and loss of
// /v1/report, and every query of the Grafana dashboard (deploy/grafana)
// evaluates without error and finds series.
func TestPrometheusScrapes(t *testing.T) {
	t.Parallel() // see parallelTests
	if testing.Short() {
		t.Skip("end-to-end test (builds binaries, runs processes): skipped in -short mode")
	}
	prom := requireTool(t, "STREAMLEARN_REQUIRE_PROMETHEUS", "prometheus", "prometheus")
	sl, _ := e2eBuild(t)
	ctx, dir := e2eStart(t, e2eTimeout)
	if out, err := testproc.CommandContext(t, ctx, prom, "--version").CombinedOutput(); err == nil {
		t.Logf("%s", bytes.SplitN(out, []byte("\n"), 2)[0])
	}

	// Prometheus first, so that it scrapes the services from their start.
	ports := freePorts(t, 3)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	jobs := map[string]string{"embedded": addr(0), "full": addr(1)}
	t0 := time.Now()
	base, promProc := startPrometheus(t, ctx, dir, prom, addr(2), jobs)
	t.Logf("prometheus ready at %s in %v", base, time.Since(t0).Round(time.Millisecond))
	embedded, full := startBothRuns(t, ctx, dir, sl, false, jobs["embedded"], jobs["full"])
	runs := map[string]*learning{"embedded": embedded, "full": full}

	// The demo in five chunks, 1.5s apart: Prometheus sees the counters
	// grow while the services learn.
	data, err := os.ReadFile(e2eDemo)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	const chunks = 5
	for i := range chunks {
		if i > 0 {
			time.Sleep(1500 * time.Millisecond)
		}
		chunk := filepath.Join(dir, fmt.Sprintf("chunk%d.jsonl", i))
		if err := os.WriteFile(chunk, bytes.Join(lines[i*len(lines)/chunks:(i+1)*len(lines)/chunks], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		runProc(t, ctx, dir, sl, "publish", "--kind", "jetstream", "--url", embedded.natsURL, "--stream", "EVENTS", "--subject", "events", chunk)
	}
	embedded.waitEvents(t, ctx, uint64(len(lines)))
	full.waitEvents(t, ctx, uint64(len(lines)))
	learnedAt := time.Now()

	// The stream is consumed and the services idle: their reports no
	// longer change, so the next scrapes must give these numbers.
	want := map[string]float64{} // series key (see key) -> value
	key := func(metric, job, learner, partition, kind string) string {
		return strings.Join([]string{metric, job, learner, partition, kind}, "|")
	}
	learners := map[string]bool{}
	for job, l := range runs {
		reports, body := l.reports(t, ctx)
		if len(reports) != 1 {
			t.Fatalf("%s: %d reports, want one (one partition): %s", job, len(reports), body)
		}
		for _, r := range reports {
			part := strconv.Itoa(int(r.Partition))
			for _, lr := range r.Learners {
				learners[lr.Name] = true
				want[key("streamlearn_mistakes_total", job, lr.Name, part, "")] = float64(lr.Mistakes)
				want[key("streamlearn_rounds_total", job, lr.Name, part, "")] = float64(lr.Rounds)
				want[key("streamlearn_loss_total", job, lr.Name, part, "")] = lr.Loss
				if b := lr.Bound; b != nil {
					want[key("streamlearn_bound", job, lr.Name, part, string(b.Kind))] = b.Value
				}
				if g := lr.Regret; g != nil {
					want[key("streamlearn_regret", job, lr.Name, part, "")] = g.Value
					if g.Bound != nil {
						want[key("streamlearn_regret_bound", job, lr.Name, part, "")] = *g.Bound
					}
				}
			}
		}
	}
	for _, m := range []string{"streamlearn_bound", "streamlearn_regret", "streamlearn_regret_bound"} {
		if n := countPrefix(want, m+"|"); n < 3 {
			t.Fatalf("the reports have %d %s values; the test needs learners with bounds and regrets", n, m)
		}
	}

	// Poll each metric until Prometheus has scraped the final numbers:
	// up to 20s (2.42 answers its first queries some seconds after start).
	deadline := learnedAt.Add(20 * time.Second)
	for _, metric := range []string{"streamlearn_mistakes_total", "streamlearn_regret", "streamlearn_bound",
		"streamlearn_regret_bound", "streamlearn_rounds_total", "streamlearn_loss_total"} {
		var diffs []string
		for {
			diffs = diffs[:0]
			got := map[string]float64{}
			samples, err := promQuery(t, ctx, base, metric)
			if err != nil {
				diffs = append(diffs, err.Error())
			}
			for _, s := range samples {
				m := s.Metric
				got[key(m["__name__"], m["job"], m["learner"], m["partition"], m["kind"])] = s.float(t)
			}
			for _, k := range slices.Sorted(maps.Keys(got)) {
				if w, ok := want[k]; !ok {
					diffs = append(diffs, fmt.Sprintf("Prometheus has %s = %v, which /v1/report does not have", k, got[k]))
				} else if got[k] != w {
					diffs = append(diffs, fmt.Sprintf("%s: Prometheus %v, /v1/report %v", k, got[k], w))
				}
			}
			for _, k := range slices.Sorted(maps.Keys(want)) {
				if _, ok := got[k]; !ok && strings.HasPrefix(k, metric+"|") {
					diffs = append(diffs, fmt.Sprintf("%s: not in Prometheus, %v in /v1/report", k, want[k]))
				}
			}
			if len(diffs) == 0 {
				t.Logf("%s: %d series through Prometheus equal /v1/report exactly (%v after the stream was learned)",
					metric, len(got), time.Since(learnedAt).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("query %s, 20s after the stream was learned:\n%s\nprometheus stderr:\n%s",
					metric, strings.Join(diffs, "\n"), promProc.stderr.String())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	// Prometheus saw the stream being learned, not only its end.
	for job := range runs {
		q := fmt.Sprintf(`changes(streamlearn_rounds_total{job=%q}[5m])`, job)
		samples, err := promQuery(t, ctx, base, q)
		if err != nil || len(samples) == 0 {
			t.Fatalf("%s: %v (%d series)", q, err, len(samples))
		}
		if c := samples[0].float(t); c < 1 {
			t.Errorf("%s = %v: Prometheus saw no intermediate count of rounds", q, c)
		} else {
			t.Logf("%s = %v", q, c)
		}
	}

	// The dashboard's template variable and every panel query, on this
	// data. Rates need two samples in the window: 5s at a 1s interval.
	code, body := httpGet(t, ctx, base+"/api/v1/label/learner/values?match[]=streamlearn_rounds_total")
	var labels struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(body, &labels); code != http.StatusOK || err != nil {
		t.Fatalf("label values: %d %v %s", code, err, body)
	}
	if got := slices.Sorted(maps.Keys(learners)); !slices.Equal(labels.Data, got) {
		t.Errorf("label_values(streamlearn_rounds_total, learner) = %v, want %v", labels.Data, got)
	}
	queries := loadDashboard(t).queries()
	for _, q := range queries {
		found := false
		for _, l := range slices.Sorted(maps.Keys(learners)) {
			samples, err := promQuery(t, ctx, base, grafanaExpand(q.Expr, l, "5s"))
			if err != nil {
				t.Errorf("dashboard panel %q: %s: %v", q.Panel, q.Expr, err)
				break
			}
			if found = len(samples) > 0; found || !strings.Contains(q.Expr, "$learner") {
				break
			}
		}
		if !found {
			t.Errorf("dashboard panel %q: %s finds no series for any learner", q.Panel, q.Expr)
		}
	}
	t.Logf("the dashboard's %d queries find series", len(queries))
}

// countPrefix counts the keys of m that start with prefix.
func countPrefix(m map[string]float64, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
