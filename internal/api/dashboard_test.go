package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/service"
)

// setupHistory is setup with the service's curves kept at points per
// learner (0: the default, negative: none).
func setupHistory(t *testing.T, cfg *config.Config, lines [][]byte, partitions int32, points int) (*service.Service, *httptest.Server) {
	t.Helper()
	svc, err := service.New(service.Options{Config: cfg, Source: &sliceSource{lines: lines, partitions: partitions},
		SnapshotInterval: 5 * time.Millisecond, HistoryPoints: points})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(svc.Snapshot))
	ts := httptest.NewServer(New(Options{Snapshot: svc.Snapshot, Gatherer: reg, Config: cfg}))
	t.Cleanup(ts.Close)
	return svc, ts
}

// The page and its files are served with their types, the CSP and
// nosniff; the page loads nothing from elsewhere and runs no inline code.
func TestDashboardFiles(t *testing.T) {
	cfg, _ := demo(t, 0)
	_, ts := setup(t, cfg, &sliceSource{partitions: 1}, nil)
	for _, c := range []struct{ path, contentType string }{
		{"/", "text/html; charset=utf-8"},
		{"/dashboard/app.js", "text/javascript; charset=utf-8"},
		{"/dashboard/app.css", "text/css; charset=utf-8"},
		{"/dashboard/icon.svg", "image/svg+xml"},
	} {
		code, hdr, body := get(t, "GET", ts.URL+c.path)
		if code != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes", c.path, code, len(body))
			continue
		}
		if got := hdr.Get("Content-Type"); got != c.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.contentType)
		}
		csp := hdr.Get("Content-Security-Policy")
		if csp != ContentSecurityPolicy || !strings.Contains(csp, "default-src 'self'") ||
			!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: X-Content-Type-Options %q, X-Frame-Options %q", c.path,
				hdr.Get("X-Content-Type-Options"), hdr.Get("X-Frame-Options"))
		}
		// A reload revalidates: 304 with the ETag.
		req, _ := http.NewRequest("GET", ts.URL+c.path, nil)
		req.Header.Set("If-None-Match", hdr.Get("ETag"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if hdr.Get("ETag") == "" || resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %q: %d, want 304", c.path, hdr.Get("ETag"), resp.StatusCode)
		}
	}

	_, _, page := get(t, "GET", ts.URL+"/")
	for _, want := range []string{`<script src="dashboard/app.js" defer></script>`, `href="dashboard/app.css"`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	for what, re := range map[string]*regexp.Regexp{
		"an inline script":              regexp.MustCompile(`<script[^>]*>\s*[^<\s]`),
		"an inline style":               regexp.MustCompile(`<style|\sstyle=`),
		"an inline event handler":       regexp.MustCompile(`\son[a-z]+=`),
		"a resource from another host":  regexp.MustCompile(`(?:src|href)="(?:https?:)?//`),
		"an import from another origin": regexp.MustCompile(`@import|url\(`),
	} {
		if loc := re.FindIndex(page); loc != nil {
			t.Errorf("index.html has %s: %q", what, page[loc[0]:min(len(page), loc[1]+40)])
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(page, -1) {
		if !bytes.Contains(tag, []byte(`src="dashboard/`)) {
			t.Errorf("index.html loads a script from elsewhere: %s", tag)
		}
	}
	// Data reaches the DOM as text only.
	_, _, js := get(t, "GET", ts.URL+"/dashboard/app.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "https://"} {
		if bytes.Contains(js, []byte(bad)) && !(bad == "http://" && bytes.Count(js, []byte(bad)) == bytes.Count(js, []byte("http://www.w3.org/2000/svg"))) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	_, _, css := get(t, "GET", ts.URL+"/dashboard/app.css")
	if bytes.Contains(css, []byte("@import")) || bytes.Contains(css, []byte("url(")) {
		t.Error("app.css loads other resources")
	}
}

// /v1/history serves each model's curves: exactly the tracker's sampled
// history of a replay of that partition's records, ending at the numbers
// /v1/report serves.
func TestHistory(t *testing.T) {
	cfg, lines := demo(t, 3000)
	lines = append(lines, []byte(`{"id":`), []byte(`[1]`)) // rejected: no round, no point
	svc, ts := setupHistory(t, cfg, lines, 2, 0)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var reports []service.Report
	var hist []History
	code, hdr, body := get(t, "GET", ts.URL+"/v1/history")
	if code != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("/v1/history: %d %q %q", code, hdr.Get("Content-Type"), body)
	}
	if err := json.Unmarshal(body, &hist); err != nil {
		t.Fatal(err)
	}
	_, _, rbody := get(t, "GET", ts.URL+"/v1/report")
	if err := json.Unmarshal(rbody, &reports); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || len(reports) != 2 {
		t.Fatalf("%d histories and %d reports, want 2 each", len(hist), len(reports))
	}
	for i, h := range hist {
		rep := reports[i]
		if h.Partition != rep.Partition || h.Source != rep.Source || len(h.Learners) != len(rep.Learners) {
			t.Fatalf("history %d: partition %d source %q, %d learners; report: partition %d source %q, %d learners",
				i, h.Partition, h.Source, len(h.Learners), rep.Partition, rep.Source, len(rep.Learners))
		}
		want := replayHistory(t, cfg, lines, 2, h.Partition)
		for j, c := range h.Learners {
			l := rep.Learners[j]
			if c.Name != l.Name || c.Algorithm != l.Algorithm {
				t.Errorf("partition %d learner %d: %s (%s), report has %s (%s)", h.Partition, j, c.Name, c.Algorithm, l.Name, l.Algorithm)
			}
			// Exactly the tracker's samples.
			if got := columns(c.Name, c.Algorithm, want[j], nil); !reflect.DeepEqual(got, c) {
				t.Errorf("partition %d %s: served curves differ from the tracker's history of a replay", h.Partition, c.Name)
			}
			n := len(c.Round)
			if n < 2 || n > service.DefaultHistoryPoints+1 {
				t.Fatalf("partition %d %s: %d points, want 2..%d", h.Partition, c.Name, n, service.DefaultHistoryPoints+1)
			}
			for k := 1; k < n; k++ {
				if c.Round[k] <= c.Round[k-1] || c.Mistakes[k] < c.Mistakes[k-1] {
					t.Fatalf("partition %d %s: point %d (round %d, %d mistakes) after round %d, %d mistakes", h.Partition, c.Name,
						k, c.Round[k], c.Mistakes[k], c.Round[k-1], c.Mistakes[k-1])
				}
			}
			// The last point is the report's numbers.
			last := n - 1
			if c.Round[last] != l.Rounds || c.Mistakes[last] != l.Mistakes || c.Loss[last] != l.Loss {
				t.Errorf("partition %d %s: last point round %d, %d mistakes, loss %v; report %d, %d, %v", h.Partition, c.Name,
					c.Round[last], c.Mistakes[last], c.Loss[last], l.Rounds, l.Mistakes, l.Loss)
			}
			if l.Regret != nil && c.Regret[last] != l.Regret.Value {
				t.Errorf("partition %d %s: last regret %v, report %v", h.Partition, c.Name, c.Regret[last], l.Regret.Value)
			}
			if b := l.Bound; b != nil {
				got := c.MistakeBound[last]
				if b.Kind == "regret" {
					got = c.RegretBound[last]
				}
				if got != b.Value {
					t.Errorf("partition %d %s: last %s bound %v, report %v", h.Partition, c.Name, b.Kind, got, b.Value)
				}
			}
		}
	}

	// ?partition=N: that model alone.
	var one History
	if code, _, body := get(t, "GET", ts.URL+"/v1/history?partition=1"); code != 200 || json.Unmarshal(body, &one) != nil ||
		!reflect.DeepEqual(one, hist[1]) {
		t.Errorf("?partition=1: %d, want the second model's curves", code)
	}
	for q, want := range map[string]int{"7": 404, "x": 400, "-1": 404, "99999999999": 400} {
		if code, _, body := get(t, "GET", ts.URL+"/v1/history?partition="+q); code != want || strings.Count(string(body), "\n") != 1 {
			t.Errorf("?partition=%s: %d %q, want %d and one line", q, code, body, want)
		}
	}
	// Polling an unchanged snapshot: 304.
	if code := getIfNoneMatch(t, ts.URL+"/v1/history", hdr.Get("ETag")); code != http.StatusNotModified {
		t.Errorf("/v1/history with its ETag: %d, want 304", code)
	}

	// Compressed for a client that takes gzip (Go's transport asks for it
	// and decompresses by itself, so ask explicitly here), identity
	// otherwise, each under its own ETag.
	fetch := func(enc, inm string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/history", nil)
		req.Header.Set("Accept-Encoding", enc)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		return send(t, req)
	}
	plain, raw := fetch("identity", "")
	zipped, zb := fetch("br;q=1.0, gzip;q=0.8", "")
	if plain.Header.Get("Content-Encoding") != "" || zipped.Header.Get("Content-Encoding") != "gzip" ||
		zipped.Header.Get("Vary") != "Accept-Encoding" || plain.Header.Get("ETag") == zipped.Header.Get("ETag") {
		t.Fatalf("identity: %q %q; gzip: %q %q %q", plain.Header.Get("Content-Encoding"), plain.Header.Get("ETag"),
			zipped.Header.Get("Content-Encoding"), zipped.Header.Get("ETag"), zipped.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, raw) {
		t.Fatalf("gzip body does not decompress to the identity body (%v)", err)
	}
	t.Logf("/v1/history: %d bytes, %d gzipped", len(raw), len(zb))
	if len(zb)*3 > len(raw) {
		t.Errorf("gzip body %d bytes for %d: want at least 3x smaller", len(zb), len(raw))
	}
	if resp, _ := fetch("gzip", zipped.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Errorf("gzip with its ETag: %d, want 304", resp.StatusCode)
	}
	if resp, _ := fetch("gzip;q=0", ""); resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0: Content-Encoding %q, want none", resp.Header.Get("Content-Encoding"))
	}
}

// replayHistory runs the records the sliceSource gives partition part
// through a pipeline with the service's history and returns its curves.
func replayHistory(t *testing.T, cfg *config.Config, lines [][]byte, partitions int32, part int32) [][]regret.Point {
	t.Helper()
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().EnableHistory(service.DefaultHistoryPoints)
	dec, err := event.NewDecoder(pipeline.EventConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	for i, line := range lines {
		if int32(i)%partitions != part {
			continue
		}
		if err := dec.Decode(line, &ev); err != nil {
			var de *event.Error
			if !errors.As(err, &de) {
				t.Fatal(err)
			}
			p.Reject(de.Reason)
			continue
		}
		p.Process(&ev)
	}
	return p.Tracker().History()
}

// The curves stay within Options.HistoryPoints (plus the current round)
// on any stream length, and are empty when the service keeps none.
func TestHistoryBoundedAndDisabled(t *testing.T) {
	cfg, lines := demo(t, 2000)
	for _, c := range []struct {
		points, max int
	}{{16, 17}, {-1, 0}} {
		svc, ts := setupHistory(t, cfg, lines, 1, c.points)
		if err := svc.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		var hist []History
		_, _, body := get(t, "GET", ts.URL+"/v1/history")
		if err := json.Unmarshal(body, &hist); err != nil || len(hist) != 1 || len(hist[0].Learners) != len(cfg.Learners) {
			t.Fatalf("HistoryPoints %d: %s", c.points, body)
		}
		for _, l := range hist[0].Learners {
			n := len(l.Round)
			if n > c.max || (c.max > 0 && (n < c.max/2 || l.Round[n-1] != 2000)) {
				t.Errorf("HistoryPoints %d: %s has %d points ending at round %v, want at most %d ending at 2000", c.points, l.Name, n, l.Round, c.max)
			}
			if c.points < 0 && (l.Mistakes == nil || l.RegretBound == nil) {
				t.Errorf("HistoryPoints %d: %s: null columns, want []", c.points, l.Name)
			}
		}
	}
}

// An idle service publishes a snapshot every interval, but its curves do
// not change: a dashboard's poll gets 304 Not Modified.
func TestHistoryIdleNotModified(t *testing.T) {
	cfg, lines := demo(t, 100)
	svc, err := service.New(service.Options{Config: cfg, Source: &sliceSource{lines: lines, partitions: 1, block: true},
		SnapshotInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(New(Options{Snapshot: svc.Snapshot, Gatherer: prometheus.NewRegistry(), Config: cfg}))
	defer ts.Close()
	runUntil(t, svc, 100)
	// The curves of the last records may reach the snapshots one curve
	// copy later (the service copies them at most every 250ms): once they
	// have, every new snapshot of the idle service answers 304.
	var code int
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, hdr, _ := get(t, "GET", ts.URL+"/v1/history")
		before := svc.Snapshot()
		for svc.Snapshot() == before { // a new snapshot of the idle service
			time.Sleep(time.Millisecond)
		}
		if code = getIfNoneMatch(t, ts.URL+"/v1/history", hdr.Get("ETag")); code == http.StatusNotModified || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusNotModified {
		t.Errorf("/v1/history of an idle service with its last ETag: %d, want 304", code)
	}
}

// Curves copied before the snapshot's reports get the report's numbers as
// their last point: exactly the point the tracker itself would append,
// for every kind of learner and bound.
func TestHistoryAppendsReportPoint(t *testing.T) {
	cfg, lines := demo(t, 700)
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().EnableHistory(64)
	process(t, cfg, p, lines)
	rep, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	full := p.Tracker().History()
	stale := make([][]regret.Point, len(full))
	for i, s := range full {
		if s[len(s)-1].Round != 700 {
			t.Fatalf("%s: history ends at round %d, want 700", rep.Learners[i].Name, s[len(s)-1].Round)
		}
		stale[i] = s[:len(s)-1] // as if copied a few rounds earlier
	}
	snap := &service.Snapshot{Reports: []service.Report{{Source: "mem:demo", Report: rep}},
		Curves: [][][]regret.Point{stale}}
	got := historyOf(snap)
	for i, c := range got[0].Learners {
		want := columns(c.Name, c.Algorithm, full[i], nil)
		if !reflect.DeepEqual(c, want) {
			n := len(c.Round) - 1
			t.Errorf("%s: last point round %d mistakes %d loss %v regret %v bounds %v %v; the tracker's %+v", c.Name,
				c.Round[n], c.Mistakes[n], c.Loss[n], c.Regret[n], c.MistakeBound[n], c.RegretBound[n], full[i][len(full[i])-1])
		}
		if len(stale[i]) != len(full[i])-1 {
			t.Fatalf("%s: historyOf modified the snapshot's curves", c.Name)
		}
	}
}

// TestDashboardBoundStatus: what the dashboard reads says each bound's
// status in the words the text report, the metrics and the page use.
// Label 0 flipped to 1 on the demo's first event makes the stream not
// realizable by the thresholds: /v1/report's bound.status is
// premise_false for consistent, halving and soa (with their violations
// counted), assumed for the Perceptron's margin, holds for the others;
// streamlearn_bound_status is 1 for the same status; and app.js has a word
// and a badge for every status.
func TestDashboardBoundStatus(t *testing.T) {
	cfg, lines := demo(t, 200)
	lines[0] = bytes.Replace(lines[0], []byte(`"label":0`), []byte(`"label":1`), 1)
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1}, &memSink{})
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, _, body := get(t, "GET", ts.URL+"/v1/report")
	var reps []struct {
		Learners []struct {
			Name            string
			BoundViolations uint64 `json:"bound_violations"`
			Bound           *struct {
				Holds  bool
				Status string
			}
		}
	}
	if err := json.Unmarshal(body, &reps); err != nil || len(reps) != 1 {
		t.Fatalf("/v1/report: %v %s", err, body)
	}
	want := map[string]string{"pct": "assumed", "ogd": "holds", "adagrad": "holds", "consistent": "premise_false",
		"halving": "premise_false", "soa": "premise_false", "wm-h": "holds", "wm-l": "holds"}
	metrics := scrape(t, ts.URL)
	for _, l := range reps[0].Learners {
		if l.Bound == nil || l.Bound.Status != want[l.Name] {
			t.Errorf("%s: bound %+v, want status %s", l.Name, l.Bound, want[l.Name])
			continue
		}
		if (l.Bound.Status == "premise_false") != (l.BoundViolations > 0) {
			t.Errorf("%s: %d violations with status %s", l.Name, l.BoundViolations, l.Bound.Status)
		}
		for _, s := range []string{"holds", "violated", "premise_false", "assumed"} {
			v := 0.0
			if s == l.Bound.Status {
				v = 1
			}
			if got, ok := metrics[seriesKey("streamlearn_bound_status", "learner="+l.Name, "partition=0", "status="+s)]; !ok || got != v {
				t.Errorf("%s: streamlearn_bound_status{status=%q} = %v (%v), want %v", l.Name, s, got, ok, v)
			}
		}
	}
	_, _, js := get(t, "GET", ts.URL+"/dashboard/app.js")
	for _, s := range []string{"holds: 'bound holds'", "violated: 'bound violated'", "premise_false: 'premise false'", "assumed: 'bound assumed'"} {
		if !bytes.Contains(js, []byte(s)) {
			t.Errorf("app.js has no %q", s)
		}
	}
}

// With a default label, a learner's report counts its real labels' rounds
// (rounds, mistakes, loss) apart from default_labeled's, while its curves
// are of every round learned: the point historyOf appends from a report
// is of both, the tracker's own last point.
func TestHistoryAppendsReportPointDefaultLabels(t *testing.T) {
	cfg, lines := demo(t, 700)
	def := "0"
	cfg.Labels = config.Labels{Delayed: true, Wait: 5, MaxPending: 1000, DefaultLabel: &def}
	// Every other event comes without its label: it waits 5 records and
	// is learned with the default label.
	for i, l := range lines {
		if i%2 == 1 {
			var ev map[string]any
			if err := json.Unmarshal(l, &ev); err != nil {
				t.Fatal(err)
			}
			delete(ev, "label")
			lines[i], _ = json.Marshal(ev)
		}
	}
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().EnableHistory(64)
	process(t, cfg, p, lines)
	rep, err := p.Report()
	if err != nil {
		t.Fatal(err)
	}
	full := p.Tracker().History()
	stale := make([][]regret.Point, len(full))
	for i, s := range full {
		l := rep.Learners[i]
		if l.DefaultLabeled == nil || l.DefaultLabeled.Rounds == 0 || l.Rounds != 350 || s[len(s)-1].Round != l.Rounds+l.DefaultLabeled.Rounds {
			t.Fatalf("%s: %d real rounds, default-labeled %+v, history ends at round %d: want 350 real ones and the curve at both",
				l.Name, l.Rounds, l.DefaultLabeled, s[len(s)-1].Round)
		}
		stale[i] = s[:len(s)-1]
	}
	snap := &service.Snapshot{Reports: []service.Report{{Source: "mem:demo", Report: rep}},
		Curves: [][][]regret.Point{stale}}
	for i, c := range historyOf(snap)[0].Learners {
		n, last := len(c.Round)-1, full[i][len(full[i])-1]
		// The loss, split into the real labels' and the default label's
		// and summed again, may differ in the last bit.
		if c.Round[n] != last.Round || c.Mistakes[n] != last.Mistakes || math.Abs(c.Loss[n]-last.Loss) > 1e-9*math.Max(1, last.Loss) {
			t.Errorf("%s: last point round %d mistakes %d loss %v; the tracker's %+v", c.Name, c.Round[n], c.Mistakes[n], c.Loss[n], last)
		}
	}
}
