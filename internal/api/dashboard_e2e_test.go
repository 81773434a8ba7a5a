package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"image"
	"image/png"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testbroker"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// chromium returns the browser the end-to-end test drives: $STREAMLEARN_CHROMIUM,
// else chromium on PATH (Debian's package). Without one the test skips,
// unless STREAMLEARN_REQUIRE_CHROMIUM=1 makes it fail.
func chromium(t *testing.T) string {
	t.Helper()
	require := os.Getenv("STREAMLEARN_REQUIRE_CHROMIUM") == "1"
	if p := os.Getenv("STREAMLEARN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if require {
		t.Fatal("chromium not found (apt-get install chromium) and STREAMLEARN_REQUIRE_CHROMIUM=1")
	}
	t.Skip("chromium not found: apt-get install chromium (STREAMLEARN_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// headless runs chromium on url with extra flags and returns its stdout.
// --virtual-time-budget lets the page's timers run that many virtual
// milliseconds; virtual time stands still while a fetch is in flight, so
// the page sees every poll's answer before the budget ends.
func headless(t *testing.T, bin, url string, budget time.Duration, extra ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1", "--lang=en-US",
		"--enable-logging=stderr", "--v=0", // the page's console: script errors, CSP violations
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		"--virtual-time-budget=" + strconv.FormatInt(budget.Milliseconds(), 10),
	}, extra...)
	args = append(args, url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := testproc.CommandContext(t, ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	cmd.WaitDelay = 5 * time.Second // chromium's helpers may hold the pipes
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v after %v\n%s", bin, strings.Join(extra, " "), err, time.Since(start), stderr.Bytes())
	}
	t.Logf("chromium %s: %v", strings.Join(extra, " "), time.Since(start).Round(time.Millisecond))
	// The page logs nothing: a console line is an uncaught error, a
	// blocked resource or a Content-Security-Policy violation.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			t.Errorf("console of %s: %s", url, line)
		}
	}
	return stdout.Bytes()
}

// domFields indexes the dumped DOM's data-field elements: key
// "partition/learner/field" (learner empty on a model's fields; for
// invalid_by_reason, the reason), value the data-value attribute and the
// text shown.
type domField struct{ value, text string }

var (
	fieldTag = regexp.MustCompile(`<[a-z][a-z0-9]*((?:\s+[^\s=>]+(?:="[^"]*")?)*)\s*>([^<]*)`)
	attrRe   = regexp.MustCompile(`([^\s=>]+)="([^"]*)"`)
)

func domFields(dom []byte) map[string]domField {
	out := map[string]domField{}
	for _, m := range fieldTag.FindAllSubmatch(dom, -1) {
		attrs := map[string]string{}
		for _, a := range attrRe.FindAllSubmatch(m[1], -1) {
			attrs[string(a[1])] = html.UnescapeString(string(a[2]))
		}
		f, ok := attrs["data-field"]
		if !ok {
			continue
		}
		who := attrs["data-learner"]
		if r, ok := attrs["data-reason"]; ok {
			who = r
		}
		if k, ok := attrs["data-key"]; ok {
			who = "key=" + k + ":" + who // a top key's (models per key)
		}
		out[attrs["data-partition"]+"/"+who+"/"+f] = domField{attrs["data-value"], html.UnescapeString(string(m[2]))}
	}
	return out
}

var (
	bodyAttr  = regexp.MustCompile(`<body[^>]*\sdata-seq="(\d+)"`)
	curveLine = regexp.MustCompile(`<polyline points="[^"]+" class="curve"`)
	hiddenDup = regexp.MustCompile(`<div hidden=""><dt>regret bound</dt>`)
)

// checkPage asserts that every number the page shows equals the report's.
func checkPage(t *testing.T, dom []byte, reports []service.Report) {
	t.Helper()
	if !bytes.Contains(dom, []byte(`data-ready="true"`)) {
		t.Fatalf("the page never rendered a poll:\n%s", dom)
	}
	got := domFields(dom)
	check := func(key, want string) {
		t.Helper()
		f, ok := got[key]
		switch {
		case !ok:
			t.Errorf("%s: not on the page", key)
		case f.value != want:
			t.Errorf("%s: page has %q, /v1/report %q", key, f.value, want)
		}
	}
	num := func(key string, want float64) {
		t.Helper()
		f, ok := got[key]
		if !ok {
			t.Errorf("%s: not on the page", key)
			return
		}
		v, err := strconv.ParseFloat(f.value, 64)
		if err != nil || v != want {
			t.Errorf("%s: page has %q, /v1/report %v", key, f.value, want)
		}
	}
	// The text a user reads: integers with thousands separators.
	shown := func(key string, want uint64) {
		t.Helper()
		if f := got[key]; strings.ReplaceAll(f.text, ",", "") != strconv.FormatUint(want, 10) {
			t.Errorf("%s: page shows %q, /v1/report %d", key, f.text, want)
		}
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var total uint64
	for _, r := range reports {
		p := strconv.Itoa(int(r.Partition)) + "/"
		total += r.Events
		check(p+"/events", u(r.Events))
		shown(p+"/events", r.Events)
		check(p+"/labeled", u(r.Labeled))
		check(p+"/predicted", u(r.Predicted))
		check(p+"/invalid", u(r.Invalid))
		for reason, n := range r.InvalidByReason {
			check(p+reason+"/invalid_by_reason", u(n))
		}
		var violations uint64
		answers := 0
		for _, l := range r.Learners {
			k := p + l.Name + "/"
			violations += l.BoundViolations
			// The filter's verdict is marked on its learner's card alone.
			check(k+"answer", strconv.FormatBool(l.Name == r.Answer))
			if f := got[k+"answer"]; f.text == "answer" {
				answers++
			}
			check(k+"rounds", u(l.Rounds))
			check(k+"mistakes", u(l.Mistakes))
			shown(k+"mistakes", l.Mistakes)
			num(k+"accuracy", l.Accuracy)
			num(k+"loss", l.Loss)
			check(k+"violations", u(l.BoundViolations))
			check(k+"state_sha256", l.StateSHA256)
			if f := got[k+"state_sha256"]; !strings.HasPrefix(l.StateSHA256, f.text) || len(f.text) < 8 {
				t.Errorf("%sstate_sha256: page shows %q of %s", k, f.text, l.StateSHA256)
			}
			if b := l.Bound; b != nil {
				num(k+"bound", b.Value)
				check(k+"bound_kind", string(b.Kind))
				check(k+"status", string(b.Status))
				if f, badge := got[k+"status"], statusWords[b.Status]; badge == "" || !strings.Contains(f.text, badge) {
					t.Errorf("%sstatus: badge %q, want %q", k, f.text, badge)
				}
			} else {
				check(k+"bound", "")
				check(k+"status", "")
			}
			if rg := l.Regret; rg != nil {
				num(k+"regret", rg.Value)
				if rg.Bound != nil {
					num(k+"regret_bound", *rg.Bound)
				} else {
					check(k+"regret_bound", "")
				}
			} else {
				check(k+"regret", "")
			}
			if c := l.Certificate; c != nil {
				num(k+"certificate", c.Value)
			}
		}
		if answers != 1 {
			t.Errorf("partition %s: %d learners marked as the answer, want 1 (%q)", p, answers, r.Answer)
		}
		check(p+"/violations", u(violations))
	}
	check("//total_events", u(total))
	// Every learner's two charts have their curve: mistakes, and regret or,
	// without a comparator, the accuracy between points (no empty box);
	// and every learner its recent accuracy, a fraction.
	learners := 0
	for _, r := range reports {
		learners += len(r.Learners)
		for _, l := range r.Learners {
			k := strconv.Itoa(int(r.Partition)) + "/" + l.Name + "/recent_accuracy"
			if v, err := strconv.ParseFloat(got[k].value, 64); err != nil || v < 0 || v > 1 || !strings.HasSuffix(got[k].text, "%") {
				t.Errorf("%s: %+v, want a fraction shown as a percentage", k, got[k])
			}
		}
	}
	// Every number once: a regret bound that is the learner's bound is not
	// shown a second time.
	if n := len(hiddenDup.FindAll(dom, -1)); n == 0 {
		t.Error("no regret bound hidden as the bound's duplicate")
	}
	if n := len(curveLine.FindAll(dom, -1)); n < 2*learners {
		t.Errorf("%d curves drawn for %d learners' two charts", n, learners)
	}
}

// checkLatency asserts that the page shows the prediction latency's p50
// and p99 of /v1/latency, as histogram_quantile computes them (no
// prediction came while the page was open: over the whole run).
func checkLatency(t *testing.T, dom []byte, base string) {
	t.Helper()
	code, _, body := get(t, "GET", base+"/v1/latency")
	var ls []Latency
	if code != 200 || json.Unmarshal(body, &ls) != nil || len(ls) != 1 || ls[0].Count == 0 {
		t.Fatalf("/v1/latency: %d %s", code, body)
	}
	got := domFields(dom)
	for _, q := range []struct {
		field string
		q     float64
	}{{"latency_p50", 0.5}, {"latency_p99", 0.99}} {
		f := got[strconv.Itoa(int(ls[0].Partition))+"//"+q.field]
		want := histogramQuantile(q.q, ls[0])
		if v, err := strconv.ParseFloat(f.value, 64); err != nil || v != want || !strings.HasSuffix(f.text, " ms") {
			t.Errorf("%s: page has %+v, /v1/latency's histogram %v s", q.field, f, want)
		}
	}
}

// TestDashboardInChromium drives the dashboard in headless Chromium
// against a live service learning from an embedded NATS JetStream stream:
// the page shows exactly /v1/report's numbers, follows the stream while it
// stays open, and renders to a non-trivial screenshot
// ($STREAMLEARN_ARTIFACTS/dashboard.png).
func TestDashboardInChromium(t *testing.T) {
	t.Parallel() // a headless Chromium of its own, mostly waited for
	bin := chromium(t)
	start := time.Now()
	cfg, lines := demo(t, 3000)
	first := append([][]byte{}, lines[:1200]...)
	first = append(first,
		[]byte(`{"id":`), // malformed
		[]byte(`[1]`),    // type
		[]byte(`{"id":"u-1","features":{"v":0.8,"w":0.1}}`), // unlabeled: predicted only
		[]byte(`{"id":"u-2","features":{"v":0.2,"w":0.7}}`),
	)
	// The second batch breaks the stream's realizability: every 60th
	// event, a point far above the threshold (v >= 0.37) labeled 0 empties
	// the threshold learners' version spaces, and their mistakes soon
	// exceed their bounds.
	var second [][]byte
	for i, l := range lines[1200:] {
		second = append(second, l)
		if i%60 == 30 {
			second = append(second, fmt.Appendf(nil, `{"id":"flip-%d","features":{"v":%.2f,"w":0.5},"label":0}`, i, 0.5+float64(i%50)/100))
		}
	}
	second = append(second,
		[]byte(`{"id":"bad-label","features":{"v":0.5},"label":"maybe"}`), // label
		[]byte(`{"id":"nan","features":{"v":1e999}}`),                     // nonfinite
	)

	natsURL := testbroker.NATS(t, "EVENTS", "events")
	nc := connectors.NATSConfig{URL: natsURL}
	sink, err := connectors.NewJetStreamSink(nc, "EVENTS", "events")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	publish := func(values [][]byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, v := range values {
			if err := sink.Publish(ctx, nil, v); err != nil {
				return err
			}
		}
		return sink.Flush(ctx)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := connectors.NewJetStreamSource(ctx, connectors.NATSConfig{URL: natsURL, Stream: "EVENTS",
		Subject: "events", Durable: "dashboard", JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	hist := metrics.NewEventDuration()
	lat := metrics.NewPredictionLatency()
	svc, err := service.New(service.Options{Config: cfg, Source: src, EventDuration: hist,
		Predictions: &memSink{}, Latency: lat, SnapshotInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(svc.Snapshot), hist, lat)
	h := New(Options{Snapshot: svc.Snapshot, Gatherer: reg, Config: cfg, WantDigests: svc.WantDigests})

	// onReport, when set, runs before the n-th GET /v1/report is served:
	// the page is open and has rendered n-1 polls.
	var reportGets atomic.Int32
	var onReport atomic.Pointer[func(n int32)]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ln.Addr().String(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/report" {
			n := reportGets.Add(1)
			if f := onReport.Load(); f != nil {
				(*f)(n)
			}
		}
		h.ServeHTTP(w, r)
	}))
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	runDone := make(chan error, 1)
	go func() { runDone <- svc.Run(ctx) }()

	events := func() uint64 {
		var n uint64
		for _, r := range svc.Snapshot().Reports {
			n += r.Events
		}
		return n
	}
	waitFor := func(n uint64) error {
		deadline := time.Now().Add(30 * time.Second)
		for events() < n {
			if time.Now().After(deadline) {
				return fmt.Errorf("the service processed %d of %d events in 30s", events(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}
	report := func() []service.Report {
		t.Helper()
		code, _, body := get(t, "GET", base+"/v1/report")
		var reps []service.Report
		if code != 200 || json.Unmarshal(body, &reps) != nil {
			t.Fatalf("/v1/report: %d %s", code, body)
		}
		return reps
	}
	artifacts := os.Getenv("STREAMLEARN_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	} else if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	// 1. N events, processed: a freshly loaded page shows their numbers.
	if err := publish(first); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(uint64(len(first))); err != nil {
		t.Fatal(err)
	}
	dom := headless(t, bin, base+"/", 3*time.Second, "--dump-dom")
	_ = os.WriteFile(filepath.Join(artifacts, "dashboard-1.html"), dom, 0o644)
	reps := report()
	if len(reps) != 1 || reps[0].Events != uint64(len(first)) || reps[0].Invalid != 2 || reps[0].Predicted != 2 {
		t.Fatalf("report after the first batch: %+v", reps)
	}
	checkPage(t, dom, reps)
	checkLatency(t, dom, base)

	// 2. The same page stays open while M more events arrive: once it has
	// rendered two polls, the third waits until the service has learned
	// them; the page ends up showing the new numbers without a reload.
	var published atomic.Bool
	var hookErr atomic.Pointer[error]
	reportGets.Store(0)
	hook := func(n int32) {
		if n != 3 || !published.CompareAndSwap(false, true) {
			return
		}
		err := publish(second)
		if err == nil {
			err = waitFor(uint64(len(first) + len(second)))
		}
		if err != nil {
			hookErr.Store(&err)
		}
	}
	onReport.Store(&hook)
	dom = headless(t, bin, base+"/", 5*time.Second, "--dump-dom")
	onReport.Store(nil)
	_ = os.WriteFile(filepath.Join(artifacts, "dashboard-2.html"), dom, 0o644)
	if p := hookErr.Load(); p != nil {
		t.Fatal(*p)
	}
	if !published.Load() {
		t.Fatalf("the open page polled /v1/report %d times, want at least 3", reportGets.Load())
	}
	if m := bodyAttr.FindSubmatch(dom); m == nil {
		t.Error("no data-seq on <body>")
	} else if seq, _ := strconv.Atoi(string(m[1])); seq < 4 {
		t.Errorf("the page rendered %d polls, want at least 4 (two before the new events, two after)", seq)
	}
	reps = report()
	if len(reps) != 1 || reps[0].Events != uint64(len(first)+len(second)) {
		t.Fatalf("report after the second batch: %+v", reps)
	}
	// The flipped labels empty the version spaces: their premise is false.
	disproved := 0
	for _, l := range reps[0].Learners {
		if l.Bound != nil && l.Bound.Status == regret.StatusPremiseFalse {
			disproved++
		}
	}
	if disproved == 0 {
		t.Errorf("no premise false after the flipped labels: %+v", reps[0].Learners)
	}
	checkPage(t, dom, reps)
	if !bytes.Contains(dom, []byte("Premise false")) && !bytes.Contains(dom, []byte("Bound violated")) {
		t.Error("the page shows no alert of a premise false")
	}

	// 3. The screenshot, kept as an artifact.
	shot := filepath.Join(artifacts, "dashboard.png")
	headless(t, bin, base+"/", 3*time.Second, "--screenshot="+shot, "--window-size=1280,2000")
	t.Logf("screenshot: %s", shot)
	checkScreenshot(t, shot, 1280, 2000)

	cancel()
	if err := <-runDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Error(err)
	}
	t.Logf("end-to-end: %v", time.Since(start).Round(time.Millisecond))
}

// checkScreenshot decodes the PNG and checks its size and that it shows
// more than a blank page: many colours, the curve's blue, and the green
// and red badges.
func checkScreenshot(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s: %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
	colours := map[[3]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}]++
		}
	}
	if len(colours) < 64 {
		t.Errorf("%s: %d colours, want a drawn page", path, len(colours))
	}
	for name, want := range map[string][3]uint32{
		"curve blue":      {0x00, 0x72, 0xb2},
		"green badge":     {0xdc, 0xf5, 0xe3},
		"red badge":       {0xc6, 0x28, 0x28},
		"header":          {0x0f, 0x1b, 0x2d},
		"bound vermilion": {0xd5, 0x5e, 0x00},
	} {
		if !hasColour(img, want) {
			t.Errorf("%s: no %s pixel (#%02x%02x%02x)", path, name, want[0], want[1], want[2])
		}
	}
}

func hasColour(img image.Image, want [3]uint32) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r>>8, want[0]) && near(g>>8, want[1]) && near(bl>>8, want[2]) {
				return true
			}
		}
	}
	return false
}

func near(a, b uint32) bool { return a+4 >= b && b+4 >= a }

// Learner names are the user's: the page shows them as text, never as
// markup, in headless Chromium.
func TestDashboardEscapesNames(t *testing.T) {
	t.Parallel() // a headless Chromium of its own, mostly waited for
	bin := chromium(t)
	cfg, lines := demo(t, 200)
	const evil = `<img src=x onerror="document.body.dataset.pwned=1">"&'`
	cfg.Learners[3].Name = evil // halving: no other learner refers to it
	svc, ts := setup(t, cfg, &sliceSource{lines: lines, partitions: 1}, nil)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dom := headless(t, bin, ts.URL+"/", time.Second, "--dump-dom")
	if bytes.Contains(dom, []byte(`data-pwned`)) {
		t.Fatalf("the learner name ran as markup:\n%s", dom)
	}
	if bytes.Contains(dom, []byte(`<img src="x"`)) || bytes.Contains(dom, []byte(`<img src=x`)) {
		t.Fatalf("the learner name became an element:\n%s", dom)
	}
	if !bytes.Contains(dom, []byte(`&lt;img src=x onerror="document.body.dataset.pwned=1"&gt;"&amp;'`)) {
		t.Errorf("the name is not shown as text:\n%s", dom)
	}
	got := domFields(dom)
	if f := got["0/"+evil+"/rounds"]; f.value != "200" {
		t.Errorf("rounds of the learner %q: %+v, want 200", evil, f)
	}
}

// With delayed labels the page shows, per model, the events waiting for
// their labels, the labels joined and rejected and the label delay, as
// /v1/report says; a bound proved for immediate labels reads "not
// checked", one proved under delay is checked (halving, soa).
func TestDashboardDelayedLabels(t *testing.T) {
	t.Parallel() // a headless Chromium of its own, mostly waited for
	bin := chromium(t)
	cfg, lines := demo(t, 600)
	cfg.Labels = config.Labels{Delayed: true, Wait: 300, MaxPending: 1000}
	// Every third event's label comes 40 records later as a label event;
	// the last ones never come; two labels are for nobody.
	var stream [][]byte
	var due []struct {
		at    int
		label []byte
	}
	for i, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			lab := ev["label"]
			delete(ev, "label")
			b, _ := json.Marshal(ev)
			l = b
			if i < 560 {
				due = append(due, struct {
					at    int
					label []byte
				}{i + 40, fmt.Appendf(nil, `{"id":%q,"label":%v}`, ev["id"], lab)})
			}
		}
		stream = append(stream, l)
		for len(due) > 0 && due[0].at <= i {
			stream = append(stream, due[0].label)
			due = due[1:]
		}
	}
	stream = append(stream, []byte(`{"id":"nobody","label":1}`), []byte(`{"id":"nobody-2","label":0}`))
	svc, ts := setup(t, cfg, &sliceSource{lines: stream, partitions: 1}, nil)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reps, err := svc.Reports()
	if err != nil {
		t.Fatal(err)
	}
	lb := reps[0].Labels
	if lb == nil || lb.Pending == 0 || lb.Joined == 0 || lb.Unknown != 2 {
		t.Fatalf("labels %+v: the case under test needs events waiting, joined and unknown labels", lb)
	}
	dom := headless(t, bin, ts.URL+"/", time.Second, "--dump-dom")
	got := domFields(dom)
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for key, want := range map[string]string{
		"0//pending":          u(lb.Pending),
		"0//labels_joined":    u(lb.Joined),
		"0//label_delay_max":  u(lb.Delay.Max),
		"0//labels_rejected":  u(lb.Late + lb.Duplicate + lb.Unknown),
		"0//label_delay_mean": strconv.FormatFloat(lb.Delay.Mean, 'g', -1, 64),
	} {
		if f := got[key]; f.value != want {
			t.Errorf("%s: page has %q, /v1/report %q", key, f.value, want)
		}
	}
	checked := 0
	for _, l := range reps[0].Learners {
		b := l.Bound
		if b == nil {
			continue
		}
		f := got["0/"+l.Name+"/status"]
		switch {
		case !strings.Contains(f.text, statusWords[b.Status]):
			t.Errorf("%s: badge %q for a bound %s (assumes %q)", l.Name, f.text, b.Status, b.Assumes)
		case b.Assumes == "":
			checked++
		}
	}
	if checked == 0 {
		t.Error("no bound checked under delay: the example config has halving and soa")
	}
}

// statusWords is what the page's badge says of each status, the text
// report's words.
var statusWords = map[regret.BoundStatus]string{
	regret.StatusHolds:        "bound holds",
	regret.StatusViolated:     "bound violated",
	regret.StatusPremiseFalse: "premise false",
	regret.StatusAssumed:      "bound assumed",
}

// TestDashboardDefaultLabels: with labels.default_label, each learner's
// card shows the real labels' rounds, mistakes and accuracy, as
// /v1/report has them, and the rounds scored against the default label
// apart (their rounds and accuracy).
func TestDashboardDefaultLabels(t *testing.T) {
	t.Parallel() // a headless Chromium of its own, mostly waited for
	bin := chromium(t)
	cfg, lines := demo(t, 600)
	def := "0"
	cfg.Labels = config.Labels{Delayed: true, Wait: 20, MaxPending: 1000, DefaultLabel: &def}
	// Every third event's label comes 40 records later, after its event
	// expired (wait 20) and was learned with the default label: late.
	var stream [][]byte
	var due []struct {
		at    int
		label []byte
	}
	for i, l := range lines {
		if i%3 == 0 {
			var ev map[string]any
			if err := json.Unmarshal(l, &ev); err != nil {
				t.Fatal(err)
			}
			lab := ev["label"]
			delete(ev, "label")
			l, _ = json.Marshal(ev)
			due = append(due, struct {
				at    int
				label []byte
			}{i + 40, fmt.Appendf(nil, `{"id":%q,"label":%v}`, ev["id"], lab)})
		}
		stream = append(stream, l)
		for len(due) > 0 && due[0].at <= i {
			stream = append(stream, due[0].label)
			due = due[1:]
		}
	}
	svc, ts := setup(t, cfg, &sliceSource{lines: stream, partitions: 1}, nil)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reps, err := svc.Reports()
	if err != nil {
		t.Fatal(err)
	}
	// Up to 200 labels late (the last events still wait), but 400 in
	// time, with their events: no warning.
	if lb := reps[0].Labels; lb == nil || lb.ExpiredLearned < 150 || lb.Late < 150 || lb.Warning != "" {
		t.Fatalf("labels %+v: want events learned with the default label, late labels, and no warning", lb)
	}
	dom := headless(t, bin, ts.URL+"/", time.Second, "--dump-dom")
	got := domFields(dom)
	for _, l := range reps[0].Learners {
		k := "0/" + l.Name + "/"
		d := l.DefaultLabeled
		if d == nil || d.Rounds == 0 || l.Rounds != 400 {
			t.Fatalf("%s: %d rounds, default-labeled %+v: want 400 real rounds and the others apart", l.Name, l.Rounds, d)
		}
		if f := got[k+"rounds"]; f.value != strconv.FormatUint(l.Rounds, 10) {
			t.Errorf("%srounds: page has %q, /v1/report %d", k, f.value, l.Rounds)
		}
		if f := got[k+"accuracy"]; parseFloat(f.value) != l.Accuracy {
			t.Errorf("%saccuracy: page has %q, /v1/report %v", k, f.value, l.Accuracy)
		}
		// (Counts below 1,000: no thousands separators.)
		if f := got[k+"default_rounds"]; f.value != strconv.FormatUint(d.Rounds, 10) || f.text != f.value {
			t.Errorf("%sdefault_rounds: page has %q (%q), /v1/report %d", k, f.value, f.text, d.Rounds)
		}
		if f, want := got[k+"default_accuracy"], fmt.Sprintf("%.2f%%", 100*d.Accuracy); parseFloat(f.value) != d.Accuracy || f.text != want {
			t.Errorf("%sdefault_accuracy: page has %q (%q), /v1/report %v (%s)", k, f.value, f.text, d.Accuracy, want)
		}
	}
}

// parseFloat is the number s, NaN when it is not one.
func parseFloat(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
