package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func replayJSON(t *testing.T, args ...string) pipeline.Report {
	t.Helper()
	code, out, errOut := run(t, append([]string{"replay", "--report", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r pipeline.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	return r
}

// The README's first command: the example config on the bundled demo.
func TestReplayDemo(t *testing.T) {
	r := replayJSON(t, "-c", "../../config.yaml", "../../testdata/demo.jsonl")
	if r.Events != 5000 || r.Labeled != 5000 || r.Invalid != 0 {
		t.Fatalf("events %d labeled %d invalid %d, want 5000/5000/0", r.Events, r.Labeled, r.Invalid)
	}
	if len(r.Learners) != 8 {
		t.Fatalf("%d learners, want the config's 8", len(r.Learners))
	}
	// The demo stream is realizable by the thresholds and separable: every
	// theorem holds. SOA's bound is Ldim of 101 thresholds = floor(log2 101).
	for _, l := range r.Learners {
		if l.Bound == nil || !l.Bound.Holds || l.BoundViolations != 0 {
			t.Errorf("%s: bound %+v, %d violations on the realizable demo", l.Name, l.Bound, l.BoundViolations)
		}
		if len(l.StateSHA256) != 64 {
			t.Errorf("%s: state digest %q", l.Name, l.StateSHA256)
		}
		if l.Name == "soa" && (l.Bound.Value != 6 || l.Mistakes > 6) {
			t.Errorf("soa: %d mistakes, bound %v; want <= 6", l.Mistakes, l.Bound.Value)
		}
	}
}

func TestReplayDeterministic(t *testing.T) {
	a := replayJSON(t, "-c", "../../config.yaml", "../../testdata/demo.jsonl")
	b := replayJSON(t, "-c", "../../config.yaml", "../../testdata/demo.jsonl")
	a.Seconds, b.Seconds = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("two replays differ:\n%s\n%s", ja, jb)
	}
}

// The bundled demo is exactly what `generate -n 5000 --seed 1` writes.
func TestDemoReproducible(t *testing.T) {
	code, out, errOut := run(t, "generate", "-n", "5000", "--seed", "1")
	if code != 0 {
		t.Fatal(errOut)
	}
	demo, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(demo) {
		t.Error("testdata/demo.jsonl differs from `streamlearn generate -n 5000 --seed 1`")
	}
}

// TestReplayTextAndPlot: the text report, and the plot in both formats:
// a title, each panel's legend in its title, axis numbers as people write
// them, and the accuracy of a learner without a regret comparator in the
// place of an empty panel.
func TestReplayTextAndPlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"curves.svg", "curves.png"} {
		plot := filepath.Join(dir, name)
		code, out, errOut := run(t, "replay", "-c", "../../config.yaml", "--plot", plot, "../../testdata/demo.jsonl")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"events 5000", "learner", "soa", "mistakes <= 6 holds", "vs best_expert"} {
			if !strings.Contains(out, want) {
				t.Errorf("text report lacks %q:\n%s", want, out)
			}
		}
		data, err := os.ReadFile(plot)
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "curves.svg":
			for _, want := range []string{"<svg", "../../testdata/demo.jsonl: 5000 events, 5000 labeled", "soa (soa): mistakes, bound dashed",
				"wm-h: regret, bound dashed", "pct: accuracy between points (no regret comparator)", ">5000<"} {
				if !bytes.Contains(data, []byte(want)) {
					t.Errorf("SVG lacks %q", want)
				}
			}
			// Axis numbers as people write them; no legend box over the curves.
			for _, bad := range []string{"5000.00", ">1000.0<", ">mistake bound<"} {
				if bytes.Contains(data, []byte(bad)) {
					t.Errorf("SVG has %q", bad)
				}
			}
		case "curves.png":
			if !bytes.HasPrefix(data, []byte("\x89PNG")) || len(data) < 10000 {
				t.Errorf("PNG of %d bytes", len(data))
			}
		}
	}
}

func TestReplayDeadLetters(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(`{"features":{"v":0.5},"label":1}
{"features":{"v":0.5},"label":
{"features":{"v":0.2},"label":"perhaps"}
{"features":{"v":0.1},"label":0}
`), 0o644)
	dead := filepath.Join(dir, "dead.jsonl")
	r := replayJSON(t, "--dead-letters", dead, in)
	if r.Events != 4 || r.Labeled != 2 || r.Invalid != 2 || r.InvalidByReason["malformed"] != 1 || r.InvalidByReason["label"] != 1 {
		t.Errorf("report %+v", r)
	}
	f, err := os.Open(dead)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["offset"] != 2.0 || lines[1]["reason"] != "label" || lines[1]["raw"] != `{"features":{"v":0.2},"label":"perhaps"}` {
		t.Errorf("dead letters = %v", lines)
	}
}

// TestReplayDeadLettersInUse: replay whose dead-letter file another sink
// holds (a run writing it) stops before its first record, exit 1, naming
// the file and the holder; a file with a torn last line has it removed
// before the replay's dead letters follow. (Before, the replay appended
// to the file beside the other writer, and to the torn line.)
func TestReplayDeadLettersInUse(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte("{\"features\":{\"v\":0.5},\"label\":1}\n{\"features\":\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, "dead.jsonl")
	if err := os.WriteFile(dead, []byte("{\"offset\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	holder := connectors.NewFileSink(dead)
	if err := holder.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "replay", "--dead-letters", dead, in)
	if want := "replay: --dead-letters: file sink " + dead + ": in use by pid " + strconv.Itoa(os.Getpid()) + " on "; code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("replay beside a writer of its dead-letter file: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dead, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"offset":2,"rea`); err != nil { // a writer killed mid-line
		t.Fatal(err)
	}
	f.Close()
	code, _, errOut = run(t, "replay", "--dead-letters", dead, in)
	if code != 0 || !strings.Contains(errOut, "level=WARN msg=\"file sink: removed a torn last line") || !strings.Contains(errOut, "path="+dead+" bytes=16") {
		t.Errorf("replay once the holder closed: exit %d, stderr %q; want a warning naming the file and the 16 bytes removed", code, errOut)
	}
	b, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != `{"offset":1}` || !strings.HasPrefix(lines[1], `{"source":`) || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("the dead-letter file after the replay: %q, want its whole line and the replay's dead letter", b)
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("learners:\n  - {name: a, algorithm: perceptron, wings: 2}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "Usage"},
		{[]string{"fly"}, 2, `unknown command "fly"`},
		{[]string{"replay"}, 2, "no input files"},
		{[]string{"replay", "--bogus", "x"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"replay", "--report", "xml", "x"}, 2, `--report "xml"`},
		{[]string{"replay", "--format", "parquet", "x"}, 2, `--format "parquet"`},
		{[]string{"replay", "-h"}, 0, "Usage: streamlearn replay"},
		{[]string{"replay", filepath.Join(dir, "missing.jsonl")}, 1, "missing.jsonl: no such file"},
		{[]string{"replay", "-c", bad, "../../testdata/demo.jsonl"}, 1, "bad.yaml:2: learners[0].wings: not used by algorithm perceptron (its keys: bias, average, margin)"},
		{[]string{"generate", "-n", "-3"}, 2, "-n and --delay must be >= 0"},
		{[]string{"generate", "--never", "0.5"}, 2, "--never needs --delay"},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "streamlearn ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}

// An empty input or an empty result is never a silent success: replay of
// a file with no record, and run --until-end on an empty JetStream stream
// (the embedded server, nothing preloaded), exit 1 saying so, and 0 with
// --allow-empty.
func TestEmptyIsAnError(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"replay", empty}, 1, "replay: no record in " + empty + " (--allow-empty accepts an empty input)"},
		{[]string{"replay", "--allow-empty", "--report", "json", empty}, 0, ""},
		{[]string{"run", "--until-end", "--nats-port", "-1", "--http", "off"}, 1, "run: no model to report: jetstream:EVENTS/streamlearn delivered no event"},
		{[]string{"run", "--until-end", "--nats-port", "-1", "--http", "off"}, 1, "if an earlier run committed its end, another source.group or source.durable learns it again, and checkpoint: keeps the models across runs"},
		{[]string{"run", "--until-end", "--allow-empty", "--nats-port", "-1", "--http", "off"}, 0, ""},
	} {
		code, out, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
		if tc.code != 0 && out != "" {
			t.Errorf("%q: failed, yet printed %q", tc.args, out)
		}
	}
}

// The README's first command, on a free port: the embedded JetStream
// server, the demo preloaded, consumed to its end — the same numbers as a
// replay of the file with the same (default) configuration.
func TestRunEmbeddedEqualsReplay(t *testing.T) {
	code, out, errOut := run(t, "run", "--until-end", "--report", "json", "--nats-port", "-1", "--http", "off", "--preload", "../../testdata/demo.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := replayJSON(t, "../../testdata/demo.jsonl")
	if want.Events != 5000 {
		t.Fatalf("replay of the demo: %d events", want.Events)
	}
	sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", want)
}

// sameAsReplay fails t unless out, run's JSON report, comes from source
// and equals the replay's report want (seconds aside).
func sameAsReplay(t *testing.T, out, source string, want pipeline.Report) {
	t.Helper()
	var live struct {
		Source string `json:"source"`
		pipeline.Report
	}
	if err := json.Unmarshal([]byte(out), &live); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if live.Source != source {
		t.Fatalf("live report from %q, want %q", live.Source, source)
	}
	live.Seconds, want.Seconds = 0, 0
	ja, _ := json.Marshal(live.Report)
	jb, _ := json.Marshal(want)
	if !bytes.Equal(ja, jb) {
		t.Errorf("run over %s and replay differ:\n%s\n%s", source, ja, jb)
	}
}

// The live service serves its metrics and report over HTTP while it runs,
// and the two agree; SIGINT (a cancelled context) drains and exits 0.
func TestRunServesMetricsAndReport(t *testing.T) {
	r := startRun(t, "run", "--nats-port", "-1", "--http", "127.0.0.1:0", "--preload", "../../testdata/demo.jsonl")
	base, deadline := r.base, time.Now().Add(20*time.Second)
	get := func(path string) (int, []byte) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var reports []struct {
		pipeline.Report
		Partition int32 `json:"partition"`
	}
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the report never reached 5000 events: %+v", reports)
		}
		if code, body := get("/v1/report"); code == 200 {
			if err := json.Unmarshal(body, &reports); err != nil {
				t.Fatal(err)
			}
			if len(reports) == 1 && reports[0].Events == 5000 {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d", code)
	}
	// Scrape after the report: the service is idle, both read one snapshot.
	_, body := get("/metrics")
	for _, l := range reports[0].Learners {
		want := fmt.Sprintf("streamlearn_mistakes_total{learner=%q,partition=\"0\"} %d\n", l.Name, l.Mistakes)
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
		want = fmt.Sprintf("streamlearn_rounds_total{learner=%q,partition=\"0\"} %d\n", l.Name, l.Rounds)
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(string(body), `streamlearn_events_total{outcome="learned",source="jetstream:EVENTS/streamlearn"} 5000`) {
		t.Errorf("/metrics lacks the learned events count")
	}
	r.stop()
	if !strings.Contains(r.stdout.String(), "events 5000") {
		t.Errorf("final report missing:\n%s", r.stdout.String())
	}
}

// liveRun is a `streamlearn run` in this process (Main in a goroutine)
// serving HTTP at base.
type liveRun struct {
	base           string // http://host:port
	stdout, stderr syncBuffer
	cancel         context.CancelFunc
	done           chan int
	t              *testing.T
}

// startRun runs Main with args, which must serve HTTP, and waits until it
// announces its address.
func startRun(t *testing.T, args ...string) *liveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	r := &liveRun{cancel: cancel, done: make(chan int, 1), t: t}
	go func() { r.done <- Main(ctx, args, &r.stdout, &r.stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for r.base == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no HTTP address announced:\n%s", r.stderr.String())
		}
		if _, rest, ok := strings.Cut(r.stderr.String(), "serving http://"); ok {
			r.base = "http://" + strings.TrimSuffix(strings.Fields(rest)[0], "/metrics")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// stop cancels the run, as SIGINT does, and wants it to drain and exit 0.
func (r *liveRun) stop() {
	r.t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		if code != 0 {
			r.t.Fatalf("exit %d: %s", code, r.stderr.String())
		}
	case <-time.After(20 * time.Second):
		r.t.Fatal("run did not stop after cancel")
	}
}

// TestRunFileEqualsReplay: `run` over a file source and `replay` over the
// same file, with config.yaml's learners, print the same report — every
// count, every reason a record was refused, every learner's numbers and
// state digest — on a stream salted with bad records, blank lines and a
// line longer than input.max_bytes.
func TestRunFileEqualsReplay(t *testing.T) {
	demo, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var salted bytes.Buffer
	for i, line := range bytes.SplitAfter(demo, []byte("\n")) {
		salted.Write(line)
		switch i % 500 {
		case 100:
			salted.WriteString("{\"id\": broken\n")
		case 200:
			salted.WriteString("  \n")
		case 300:
			fmt.Fprintf(&salted, "{\"id\":\"long\",\"label\":1,\"text\":%q}\n", strings.Repeat("word ", 2000))
		}
	}
	dir := t.TempDir()
	stream := filepath.Join(dir, "salted.jsonl")
	if err := os.WriteFile(stream, salted.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "file.yaml")
	// config.yaml with the salted file as its source, no sinks, and a
	// record limit the long lines exceed.
	conf := strings.Replace(string(base), "path: testdata/demo.jsonl", "path: "+stream, 1)
	conf = strings.Replace(conf, "max_bytes: 1048576", "max_bytes: 4096", 1)
	conf, _, _ = strings.Cut(conf, "\nsinks:")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	want := replayJSON(t, "-c", cfg, stream)
	if want.Invalid == 0 || want.InvalidByReason["oversized"] == 0 || want.InvalidByReason["malformed"] == 0 {
		t.Fatalf("replay refused %v: the salt is missing", want.InvalidByReason)
	}
	sameAsReplay(t, out, "file:"+stream, want)
}

// TestVersion: a binary says which code it was built from, never
// "(devel)": the module version under go install; the version Go derives
// from the commit and the commit, marked dirty, under go build in a
// checkout; and that it does not know otherwise.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		main     string
		settings map[string]string
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"v0.0.0-20261126173000-0123456789ab+dirty", map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.time": "2026-11-26T17:30:00Z", "vcs.modified": "true"},
			"v0.0.0-20261126173000-0123456789ab+dirty (commit 0123456789ab-dirty of 2026-11-26T17:30:00Z)"},
		{"(devel)", map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.modified": "false"}, "commit 0123456789ab"},
		{"(devel)", nil, "unknown (built without version control information: go run, or go build -buildvcs=false)"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.main}}
		for k, v := range tc.settings {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
		}
		if got := version(bi); got != tc.want {
			t.Errorf("version(%q, %v) = %q, want %q", tc.main, tc.settings, got, tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "streamlearn ") || strings.Contains(out.String(), "(devel)") {
		t.Errorf("--version: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// TestPublishFlags: publish lists the flags it takes, not record's.
func TestPublishFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"publish", "-h"}, &out, &errOut); code != 0 {
		t.Fatalf("publish -h: exit %d", code)
	}
	if h := errOut.String(); !strings.Contains(h, "-topic") || strings.Contains(h, "-group") || strings.Contains(h, "-durable") {
		t.Errorf("publish -h:\n%s", h)
	}
	errOut.Reset()
	Main(t.Context(), []string{"record", "-h"}, &out, &errOut)
	if h := errOut.String(); !strings.Contains(h, "-group") || !strings.Contains(h, "-durable") {
		t.Errorf("record -h:\n%s", h)
	}
}

// TestReplayGates: replay as a CI gate. --min-accuracy fails (exit 1) a
// learner below its minimum and names it; --fail-on-violation fails a run
// whose published bounds broke (a noisy stream empties the version
// spaces); --junit writes every learner as a test case, failures marked.
func TestReplayGates(t *testing.T) {
	dir := t.TempDir()
	noisy := filepath.Join(dir, "noisy.jsonl")
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"generate", "-n", "2000", "--noise", "0.05", "--seed", "3", "-o", noisy}, &out, &errOut); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errOut.String())
	}
	junit := filepath.Join(dir, "report.xml")
	for _, tc := range []struct {
		args     []string
		code     int
		stderr   string // a part of it
		failures int    // in the JUnit file, -1: not written
	}{
		{[]string{"--min-accuracy", "pct=0.98,soa=0.99"}, 0, "", -1},
		{[]string{"--min-accuracy", "pct=0.99", "--min-accuracy", "soa=0.99", "--junit", junit}, 1, "pct: accuracy 0.9890 is below 0.99", 1},
		{[]string{"--min-accuracy", "pcx=0.5"}, 1, `no learner "pcx" (the learners: pct, ogd, adagrad`, -1},
		{[]string{"--min-accuracy", "pct=1.5"}, 2, "the accuracy is a number from 0 to 1", -1},
		{[]string{"--fail-on-violation", "--junit", junit, noisy}, 1, "bound violations", 3},
		{[]string{noisy}, 0, "", -1},
		{[]string{"--partition", "1"}, 2, "add --envelope", -1},
	} {
		os.Remove(junit)
		args := append([]string{"replay", "-c", "../../config.yaml"}, tc.args...)
		if tc.args[len(tc.args)-1] != noisy {
			args = append(args, "../../testdata/demo.jsonl")
		}
		out.Reset()
		errOut.Reset()
		code := Main(t.Context(), args, &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.stderr)
		}
		if code == 1 && out.Len() == 0 && tc.failures >= 0 {
			t.Errorf("%v: no report printed before failing", tc.args)
		}
		if tc.failures < 0 {
			continue
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var suites junitSuites
		if err := xml.Unmarshal(data, &suites); err != nil {
			t.Fatalf("%v: JUnit file: %v\n%s", tc.args, err, data)
		}
		s := suites.Suites[0]
		n := 0
		for _, c := range s.Cases {
			if c.Failure != nil {
				n++
			}
		}
		if s.Tests != 8 || len(s.Cases) != 8 || s.Failures != tc.failures || n != tc.failures {
			t.Errorf("%v: JUnit %d tests, %d failures (%d marked), want 8 and %d", tc.args, s.Tests, s.Failures, n, tc.failures)
		}
	}
}

// TestPublishCreateStream: publishing to a JetStream stream that does not
// exist fails with the command that creates it; publish --create-stream
// creates it, and leaves it as it is the second time; the records are
// there to read.
func TestPublishCreateStream(t *testing.T) {
	emb, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	to := []string{"--kind", "jetstream", "--url", emb.ClientURL(), "--stream", "ORDERS", "--subject", "orders"}
	demo := "../../testdata/demo.jsonl"
	code, _, errOut := run(t, append(append([]string{"publish"}, to...), demo)...)
	if want := "stream \"ORDERS\" not found: create it with `streamlearn publish --create-stream --url " + emb.ClientURL() + " --stream ORDERS --subject orders FILE`"; code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("publish to a missing stream: exit %d, %q; want 1 and %q", code, errOut, want)
	}
	for i, want := range []string{"created stream ORDERS capturing orders\npublished 5000 records from " + demo + "\n", "published 5000 records from " + demo + "\n"} {
		code, out, errOut := run(t, append(append([]string{"publish", "--create-stream"}, to...), demo)...)
		if code != 0 || out != want {
			t.Fatalf("publish --create-stream #%d: exit %d, %q %q; want %q", i+1, code, out, errOut, want)
		}
	}
	rec := filepath.Join(t.TempDir(), "orders.jsonl")
	if code, _, errOut := run(t, append(append([]string{"record"}, to...), "-o", rec)...); code != 0 {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != 10000 {
		t.Errorf("the stream holds %d records, want 10000", n)
	}
	// record removed the durable it made: a second record reads it all
	// again from a fresh one, and a durable that was there is kept.
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(t.Context(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	for name := range st.ConsumerNames(t.Context()).Name() {
		t.Errorf("record left its durable %s behind", name)
	}
	// A stream that exists but does not capture the subject is an error
	// at once, not a failed publish later.
	if code, _, errOut := run(t, "publish", "--create-stream", "--kind", "jetstream", "--url", emb.ClientURL(), "--stream", "ORDERS", "--subject", "other", demo); code != 1 ||
		!strings.Contains(errOut, `stream "ORDERS" exists and does not capture subject "other" (it captures orders)`) {
		t.Errorf("publish --create-stream to another subject: exit %d, %q", code, errOut)
	}
	if _, err := js.CreateOrUpdateConsumer(t.Context(), "ORDERS", jetstream.ConsumerConfig{Durable: "mine", AckPolicy: jetstream.AckAllPolicy}); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, append(append([]string{"record"}, to...), "--durable", "mine", "-o", rec)...); code != 0 {
		t.Fatalf("record --durable mine: exit %d: %s", code, errOut)
	}
	if _, err := js.Consumer(t.Context(), "ORDERS", "mine"); err != nil {
		t.Errorf("record removed a durable it did not make: %v", err)
	}
	if code, _, errOut := run(t, "publish", "--create-stream", "--kind", "kafka", "--brokers", "127.0.0.1:1", "--topic", "t", demo); code != 2 || !strings.Contains(errOut, "streams are JetStream's") {
		t.Errorf("--create-stream on Kafka: exit %d, %q", code, errOut)
	}
}

// TestCheck: check validates a config and says what a run would do
// without connecting: learners with their bounds, a model's memory (one
// Perceptron over 2^20 slots holds 8 MiB of weights), source, sinks and
// checkpoints; a bad config fails with its file:line message.
func TestCheck(t *testing.T) {
	code, out, errOut := run(t, "check", "-c", "../../config.yaml")
	if code != 0 {
		t.Fatalf("check config.yaml: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"../../config.yaml: valid", "8 learners", "soa ", "mistakes ≤ Ldim(H)", "source:        file testdata/demo.jsonl", "checkpoints:   directory ./state, every 10000 events"} {
		if !strings.Contains(out, want) {
			t.Errorf("check config.yaml: no %q in\n%s", want, out)
		}
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("features: {bits: 20}\nlearners: [{name: p, algorithm: perceptron}]\nsource: {kind: kafka, brokers: [k:9092], topic: events}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "check", "-c", big)
	if code != 0 || !strings.Contains(out, "kafka topic events at k:9092, group streamlearn") {
		t.Fatalf("check big.yaml: exit %d: %s %s", code, out, errOut)
	}
	// Sources and checkpoints as run takes them: every unset key is its
	// default, not an empty name, and a bucket says its lease.
	const js = "source: {kind: jetstream, url: \"nats://n:4222\", subject: e, stream: S, durable: d}\n"
	for _, tc := range []struct{ sections, want string }{
		{"source: {kind: jetstream}\n", " jetstream stream EVENTS, subject events at nats://127.0.0.1:4222, durable streamlearn\n"},
		{"source: {kind: nats, subject: e}\n", " nats subject e at nats://127.0.0.1:4222\n"},
		{js + "checkpoint: {dir: ./state}\n", "directory ./state, every 100000 events\n"},
		{js + "checkpoint: {bucket: B}\n", "object store bucket B, every 100000 events, ownership lease 10s\n"},
		{js + "checkpoint: {bucket: B, every: 500, lease: 3s}\n", "object store bucket B, every 500 events, ownership lease 3s\n"},
	} {
		cfg := filepath.Join(dir, "sections.yaml")
		if err := os.WriteFile(cfg, []byte("learners: [{name: p, algorithm: perceptron}]\n"+tc.sections), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := run(t, "check", "-c", cfg); code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("check of %q: exit %d, want %q in\n%s%s", tc.sections, code, tc.want, out, errOut)
		}
	}
	var mem float64
	for line := range strings.Lines(out) {
		if _, rest, ok := strings.Cut(line, "1 learner, "); ok {
			fmt.Sscanf(rest, "%f MiB", &mem)
		}
	}
	if mem < 8 || mem > 9 {
		t.Errorf("a Perceptron over 2^20 slots: %v MiB per model, want 8 to 9:\n%s", mem, out)
	}
	csv := filepath.Join(dir, "csv.yaml")
	if err := os.WriteFile(csv, []byte("input: {format: csv}\nlearners: [{name: p, algorithm: perceptron}]\nsource: {kind: jetstream, url: nats://x:4222}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "check", "-c", csv); code != 1 || !strings.Contains(errOut, "source.kind jetstream: event: input.format csv: a record of a stream has no header line") {
		t.Errorf("check of csv records on a stream: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "check", "-c", "../../internal/config/testdata/bad/bad_type.yaml"); code != 1 || !strings.Contains(errOut, "bad_type.yaml:2: features.bits:") {
		t.Errorf("check of a bad config: exit %d, %q", code, errOut)
	}
	if code, _, _ := run(t, "check"); code != 2 {
		t.Errorf("check without -c: exit %d, want 2", code)
	}
}

// TestCompletion: the bash script completes commands and each command's
// own flags, read from its flag set, in a real bash.
// The fish script completes the commands, each command's flags, and the
// values of the flags that take one of a few.
func TestCompletionFish(t *testing.T) {
	code, script, errOut := run(t, "completion", "fish")
	if code != 0 {
		t.Fatalf("completion fish: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"complete -c streamlearn -n __fish_use_subcommand -a replay\n",
		"complete -c streamlearn -n '__fish_seen_subcommand_from replay' -l report -x -a \"text json\"\n",
		"complete -c streamlearn -n '__fish_seen_subcommand_from run' -l log-level -x -a \"debug info warn error\"\n",
		"complete -c streamlearn -n '__fish_seen_subcommand_from replay' -o c\n",
		"complete -c streamlearn -n '__fish_seen_subcommand_from publish' -l create-stream\n",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("no %q in\n%s", want, script)
		}
	}
}

func TestCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	code, script, errOut := run(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d: %s", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "streamlearn.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"streamlearn", "re"}, "replay record"},
		{[]string{"streamlearn", "replay", "--min"}, "--min-accuracy"},
		{[]string{"streamlearn", "publish", "--create"}, "--create-stream"},
		{[]string{"streamlearn", "publish", "--grou"}, ""}, // record's flag, not publish's
		{[]string{"streamlearn", "de"}, "delay"},
		{[]string{"streamlearn", "delay", "--id"}, "--id-prefix"},
		{[]string{"streamlearn", "run", "--log"}, "--log-level"},
		{[]string{"streamlearn", "completion", "z"}, "zsh"},
		{[]string{"streamlearn", "replay", "--report", "j"}, "json"},
		{[]string{"streamlearn", "run", "--log-level", "i"}, "info"},
		{[]string{"streamlearn", "replay", "--format", "l"}, "libsvm"},
	} {
		cmd := testproc.Command(t, bash, "-c", fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _streamlearn; echo "${COMPREPLY[@]}"`,
			file, strings.Join(tc.words, " "), len(tc.words)-1))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("completing %q: %q %v, want %q", tc.words, out, err, tc.want)
		}
	}
	// A file name with spaces is one completion.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "my events.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := testproc.Command(t, bash, "-c", fmt.Sprintf(`source %q; COMP_WORDS=(streamlearn replay my); COMP_CWORD=2; _streamlearn; echo "${#COMPREPLY[@]}:${COMPREPLY[0]}"`, file))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1:my events.jsonl" {
		t.Errorf("completing a file name with a space: %q %v, want 1:my events.jsonl", out, err)
	}
	if code, zsh, _ := run(t, "completion", "zsh"); code != 0 || !strings.HasPrefix(zsh, "autoload -U +X bashcompinit") {
		t.Errorf("completion zsh: exit %d: %.60q", code, zsh)
	}
}

// TestRunEmbeddedConfig: source.kind embedded runs a user's config on an
// embedded NATS JetStream server, before any broker exists: the demo
// preloaded and learned to its end gives the numbers of a replay with the
// same config; check describes it; publish and record reach it at its
// port, and say what to give when the port is picked at start.
func TestRunEmbeddedConfig(t *testing.T) {
	example, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// config.yaml with its file source replaced by an embedded server on a
	// free port, and no checkpoints or dead-letter file.
	var b strings.Builder
	skip := false
	for line := range strings.Lines(string(example)) {
		switch {
		case strings.HasPrefix(line, "source:"), strings.HasPrefix(line, "sinks:"), strings.HasPrefix(line, "checkpoint:"), strings.HasPrefix(line, "http:"):
			skip = true
			continue
		case skip && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "#") || strings.TrimSpace(line) == ""):
			continue
		}
		skip = false
		b.WriteString(line)
	}
	b.WriteString("source: {kind: embedded, port: -1}\n")
	cfg := filepath.Join(t.TempDir(), "embedded.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off", "--preload", "../../testdata/demo.jsonl")
	if code != 0 {
		t.Fatalf("run -c embedded.yaml: exit %d: %s", code, errOut)
	}
	want := replayJSON(t, "-c", cfg, "../../testdata/demo.jsonl")
	if want.Events != 5000 || len(want.Learners) != 8 {
		t.Fatalf("replay: %d events, %d learners", want.Events, len(want.Learners))
	}
	sameAsReplay(t, out, "jetstream:EVENTS/streamlearn", want)
	if code, out, _ := run(t, "check", "-c", cfg); code != 0 || !strings.Contains(out, "an embedded NATS JetStream server on 127.0.0.1:-1") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
	if code, _, errOut := run(t, "publish", "-c", cfg, "../../testdata/demo.jsonl"); code != 1 || !strings.Contains(errOut, "port picked at start (port: -1): give its URL") {
		t.Errorf("publish -c embedded.yaml with port -1: exit %d, %q", code, errOut)
	}
}

// TestRunFollowsFile: run on a file source is a service: at the end of
// the file it keeps serving and learns the lines appended to it (a line
// written in two parts is one event), until stopped; the final report
// counts every event. With --until-end it stops at the end, as before.
func TestRunFollowsFile(t *testing.T) {
	dir := t.TempDir()
	demo, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	stream := filepath.Join(dir, "stream.jsonl")
	if err := os.WriteFile(stream, demo, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "file.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("source: {kind: file, path: %q}\nlearners: [{name: p, algorithm: perceptron, bias: true}]\n", stream)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Main(ctx, []string{"run", "-c", cfg, "--http", "127.0.0.1:0", "--report", "json"}, &stdout, &stderr)
	}()
	events := func() uint64 {
		_, rest, ok := strings.Cut(stderr.String(), "serving http://")
		if !ok {
			return 0
		}
		addr, _, _ := strings.Cut(rest, "/")
		resp, err := http.Get("http://" + addr + "/v1/report")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		var reps []struct{ Events uint64 }
		if json.NewDecoder(resp.Body).Decode(&reps) != nil || len(reps) == 0 {
			return 0
		}
		return reps[0].Events
	}
	waitEvents := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for events() < n {
			select {
			case code := <-exit:
				t.Fatalf("run exited (%d) at %d events, want it to follow the file to %d:\n%s", code, events(), n, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d events after 30s, want %d", events(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitEvents(5000)
	f, err := os.OpenFile(stream, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(demo, []byte("\n"))[:10]
	for _, l := range lines[:9] {
		f.Write(l)
	}
	f.Write(lines[9][:10]) // half a line: not an event until its end comes
	waitEvents(5009)
	time.Sleep(1200 * time.Millisecond) // a snapshot later (one a second)
	if n := events(); n != 5009 {
		t.Errorf("%d events with half a line appended, want 5009", n)
	}
	f.Write(lines[9][10:])
	f.Close()
	waitEvents(5010)
	cancel()
	if code := <-exit; code != 0 {
		t.Fatalf("run stopped: exit %d:\n%s", code, stderr.String())
	}
	var rep struct{ Events uint64 }
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil || rep.Events != 5010 {
		t.Errorf("final report %q: %v, want 5010 events", stdout.String(), err)
	}
	if code, out, errOut := run(t, "run", "-c", cfg, "--until-end", "--report", "json", "--http", "off"); code != 0 || !strings.Contains(out, `"events":5010`) {
		t.Errorf("run --until-end: exit %d, %s %s", code, out, errOut)
	}
}

// TestHelpExamples: every command's -h lists its flags and examples of
// it, and each example's flags are the command's own.
func TestHelpExamples(t *testing.T) {
	for _, c := range commands {
		code, _, help := run(t, c.name, "-h")
		if code != 0 || !strings.Contains(help, "Usage: streamlearn "+c.name) || !strings.Contains(help, "\nExamples:\n") {
			t.Errorf("%s -h: exit %d:\n%s", c.name, code, help)
			continue
		}
		flags := commandFlags(t.Context(), c)
		for _, ex := range examples[c.name] {
			for _, f := range strings.Fields(ex) {
				if f == "#" || f == "|" {
					break // a comment, or another command
				}
				name, _, _ := strings.Cut(f, "=")
				if strings.HasPrefix(name, "-") && name != "-" && !slices.Contains(flags, name) && !(c.name == "version" && name == "--version") {
					t.Errorf("%s: example %q has flag %s, not one of %v", c.name, ex, name, flags)
				}
			}
		}
	}
}

// TestProgress: a replay's progress line says the records and their rate,
// and with the files' size known the share read and the time left; the
// files source counts what it read up to their whole size.
func TestProgress(t *testing.T) {
	if got, want := progressLine(5000, 2*time.Second, 250, 1000), "5000 records, 2500/s, 25%, 6s left"; got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
	if got, want := progressLine(10, time.Second, 0, -1), "10 records, 10/s"; got != want {
		t.Errorf("progressLine of stdin = %q, want %q", got, want)
	}
	demo := "../../testdata/demo.jsonl"
	st, err := os.Stat(demo)
	if err != nil {
		t.Fatal(err)
	}
	src := filesource.NewFiles([]string{demo, demo}, event.Config{}, nil)
	for {
		if _, err := src.Fetch(t.Context()); err != nil {
			break
		}
	}
	if read, total := src.Progress(); total != 2*st.Size() || read != total {
		t.Errorf("after both files: read %d of %d, want %d of %d", read, total, 2*st.Size(), 2*st.Size())
	}
	if _, total := filesource.NewFiles([]string{"-"}, event.Config{}, nil).Progress(); total != -1 {
		t.Errorf("stdin's size: %d, want -1 (unknown)", total)
	}
}

// A flag after the file names is a usage error that says so (exit 2),
// not a file that does not exist (exit 1): the flag package stops at the
// first argument that is not a flag. A file named like a flag, or
// arguments after "--", are still files.
func TestFlagAfterArguments(t *testing.T) {
	code, _, errOut := run(t, "replay", "../../testdata/demo.jsonl", "--report", "json")
	if code != 2 || !strings.Contains(errOut, "flag --report after the arguments: flags come first") {
		t.Errorf("replay FILE --report json: exit %d: %.300s", code, errOut)
	}
	if code, _, errOut := run(t, "replay", "../../testdata/demo.jsonl", "-report=json"); code != 2 || !strings.Contains(errOut, "flag -report=json after the arguments") {
		t.Errorf("replay FILE -report=json: exit %d: %.300s", code, errOut)
	}
	dir := t.TempDir()
	named := filepath.Join(dir, "-c")
	data, err := os.ReadFile("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(named, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if code, _, errOut := run(t, "replay", "--report", "json", "--", "-c"); code != 0 {
		t.Errorf("replay -- -c (a file named -c): exit %d: %.300s", code, errOut)
	}
	if err := os.WriteFile("a.jsonl", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "replay", "--report", "json", "a.jsonl", "-c"); code != 0 {
		t.Errorf("replay a.jsonl -c, a file named -c there: exit %d: %.300s", code, errOut)
	}
}

// TestPublishCreateStreamOnly: publish --create-stream with no file
// creates the stream, says so on stderr and exits 0; a second time it says
// the stream exists; the stream then takes a publish without
// --create-stream. Without --create-stream, no file is still a usage
// error. (Before, --create-stream without a file was that usage error.)
func TestPublishCreateStreamOnly(t *testing.T) {
	emb, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	to := []string{"--kind", "jetstream", "--url", emb.ClientURL(), "--stream", "ORDERS", "--subject", "orders"}
	if code, _, errOut := run(t, append([]string{"publish"}, to...)...); code != 2 || !strings.Contains(errOut, "no input files") {
		t.Errorf("publish with no file: exit %d, %q; want 2 and no input files", code, errOut)
	}
	for i, want := range []string{"created stream ORDERS capturing orders\n", "stream ORDERS exists and captures orders: left as it is\n"} {
		code, out, errOut := run(t, append([]string{"publish", "--create-stream"}, to...)...)
		if code != 0 || out != "" || errOut != want {
			t.Fatalf("publish --create-stream with no file #%d: exit %d, stdout %q, stderr %q; want 0, nothing, %q", i+1, code, out, errOut, want)
		}
	}
	demo := "../../testdata/demo.jsonl"
	if code, out, errOut := run(t, append(append([]string{"publish"}, to...), demo)...); code != 0 || out != "published 5000 records from "+demo+"\n" {
		t.Errorf("publish into the created stream: exit %d, %q %q", code, out, errOut)
	}
}

// TestPublishBeforeRun: publish and record to the embedded server of a run
// not started say to start it first; to another server, whose address the
// user gave, they say only that it cannot be reached.
func TestPublishBeforeRun(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "embedded.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("learners: [{name: p, algorithm: perceptron}]\nsource: {kind: embedded, port: %d}\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	const hint = "the embedded server listens while `streamlearn run` runs: start it first, or give --url the address it printed"
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for _, args := range [][]string{
		{"publish", "-c", cfg, "../../testdata/demo.jsonl"},
		{"record", "-c", cfg, "-o", filepath.Join(dir, "out.jsonl")},
	} {
		code, _, errOut := run(t, args...)
		if code != 1 || !strings.Contains(errOut, "connect "+url) || !strings.Contains(errOut, hint) {
			t.Errorf("%s before run: exit %d, %q, want exit 1 naming %s and %q", args[0], code, errOut, url, hint)
		}
	}
	code, _, errOut := run(t, "publish", "--kind", "jetstream", "--url", url, "--stream", "S", "--subject", "s", "../../testdata/demo.jsonl")
	if code != 1 || !strings.Contains(errOut, "no servers available") || strings.Contains(errOut, "streamlearn run") {
		t.Errorf("publish to a server of the user's: exit %d, %q, want exit 1 without the embedded server's hint", code, errOut)
	}
}
