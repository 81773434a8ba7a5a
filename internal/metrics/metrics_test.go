package metrics

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

var update = flag.Bool("update", false, "rewrite testdata/demo200.prom")

// named gives a source a fixed name, so that the golden file does not
// depend on where the test wrote its input.
type named struct {
	connectors.Source
	name string
}

func (n named) Name() string { return n.name }

// runDemo runs the service over the first lines of testdata/demo.jsonl
// with the learners of config.yaml (both at the repository's root) and
// returns it after the end of input.
func runDemo(t *testing.T, lines int, opt service.Options) *service.Service {
	t.Helper()
	return runEdited(t, lines, opt, func(int, []byte) []byte { return nil })
}

// runEdited is runDemo with line i (from 0) replaced by edit(i, line)
// where that is not nil.
func runEdited(t *testing.T, lines int, opt service.Options, edit func(i int, line []byte) []byte) *service.Service {
	t.Helper()
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("../../testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	sc := bufio.NewScanner(f)
	for i := 0; i < lines && sc.Scan(); i++ {
		line := sc.Bytes()
		if e := edit(i, line); e != nil {
			line = e
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "demo.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := connectors.NewFileSource(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	opt.Config, opt.Source = cfg, named{src, "file:demo200"}
	s, err := service.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// The exposition of a deterministic run equals the golden file (rewrite
// it with -update after checking the change). Its numbers are those of
// `streamlearn replay -c config.yaml` over the same 200 lines.
func TestGolden(t *testing.T) {
	s := runDemo(t, 200, service.Options{})
	c := NewCollector(s.Snapshot)
	golden := filepath.Join("testdata", "demo200.prom")
	if *update {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			if _, err := writeText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	if err := testutil.CollectAndCompare(c, want); err != nil {
		t.Error(err)
	}
}

// GatherAndLint finds nothing to fault in the collector and the histogram.
func TestLint(t *testing.T) {
	s := runDemo(t, 200, service.Options{})
	reg := prometheus.NewPedanticRegistry()
	h := NewEventDuration()
	h.Observe(3e-6)
	reg.MustRegister(NewCollector(s.Snapshot), h)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// The metrics equal the snapshot's reports: counters summed over
// partitions, learner series per partition.
func TestCollectorMatchesSnapshot(t *testing.T) {
	h := NewEventDuration()
	s := runDemo(t, 300, service.Options{EventDuration: h})
	snap := s.Snapshot()
	c := NewCollector(func() *service.Snapshot { return snap })
	if len(snap.Reports) != 1 {
		t.Fatalf("%d reports, want one (a file is one partition)", len(snap.Reports))
	}
	r := snap.Reports[0]
	if n := histCount(t, h); n != r.Events {
		t.Errorf("event duration count %d, want %d (one per record)", n, r.Events)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	// 3 outcomes, 11 reasons, the checkpoint age (a file source has no
	// lag), and per learner rounds, mistakes, loss, violations plus the
	// bound (with its four statuses), regret and regret bound it has.
	want := 3 + len(reasons()) + 1
	for _, l := range r.Learners {
		want += 4
		if l.Bound != nil {
			want += 1 + 4
		}
		if l.Regret != nil {
			want++
			if l.Regret.Bound != nil {
				want++
			}
		}
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != want {
		t.Errorf("%d series (%v), want %d", n, err, want)
	}
	if len(reasons()) != len(event.Reasons())+1 {
		t.Errorf("reasons %v: want event.Reasons() and domain", reasons())
	}
}

// streamlearn_consumer_lag has one series per partition whose source
// reports a lag, with the lag of the last record processed;
// streamlearn_checkpoint_age_seconds is the time since Durable at the
// scrape, 0 when everything processed is committed.
func TestLagAndCheckpointAge(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	lag := int64(42)
	snap := &service.Snapshot{
		Time: t0, Source: "kafka:events", Started: true, Durable: t0.Add(-2500 * time.Millisecond),
		Reports: []service.Report{
			{Source: "kafka:events", Partition: 0, ConsumerLag: &lag},
			{Source: "kafka:events", Partition: 3},
		},
	}
	c := &collector{snapshot: func() *service.Snapshot { return snap }, now: func() time.Time { return t0.Add(500 * time.Millisecond) }}
	want := `# HELP streamlearn_checkpoint_age_seconds Seconds since the model state last matched the positions committed to the source; 0 while everything processed is committed.
# TYPE streamlearn_checkpoint_age_seconds gauge
streamlearn_checkpoint_age_seconds 3
# HELP streamlearn_consumer_lag Records of the partition the broker held beyond the last one processed, when it was fetched.
# TYPE streamlearn_consumer_lag gauge
streamlearn_consumer_lag{partition="0",source="kafka:events"} 42
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "streamlearn_consumer_lag", "streamlearn_checkpoint_age_seconds"); err != nil {
		t.Error(err)
	}
	snap.Durable = time.Time{}
	want = strings.Replace(want, "streamlearn_checkpoint_age_seconds 3", "streamlearn_checkpoint_age_seconds 0", 1)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "streamlearn_consumer_lag", "streamlearn_checkpoint_age_seconds"); err != nil {
		t.Error(err)
	}
}

// With no snapshot (nil) the collector exports nothing and does not fail.
func TestNilSnapshot(t *testing.T) {
	if n := testutil.CollectAndCount(NewCollector(func() *service.Snapshot { return nil })); n != 0 {
		t.Errorf("%d metrics from a nil snapshot, want 0", n)
	}
}

// Observe on the histogram allocates nothing: it runs once per record.
func TestEventDurationAllocs(t *testing.T) {
	h := NewEventDuration()
	if a := testing.AllocsPerRun(1000, func() { h.Observe(4e-6) }); a != 0 {
		t.Errorf("%v allocations per Observe, want 0", a)
	}
}

// With delayed labels, each model exports its label outcomes, the events
// waiting and the histogram of label delays, from its report; they lint.
func TestLabelMetrics(t *testing.T) {
	l := &pipeline.LabelsReport{Joined: 5, Pending: 3, Expired: 2, Unknown: 1, Late: 4, Duplicate: 6, DelaySum: 1234}
	l.DelayCounts[1], l.DelayCounts[3], l.DelayCounts[5] = 1, 3, 1 // delays ≤1, ≤100 (×3), ≤10000
	snap := &service.Snapshot{Source: "jetstream:EVENTS/d", Reports: []service.Report{
		{Source: "jetstream:EVENTS/d", Partition: 2, Report: pipeline.Report{Labels: l, InvalidByReason: map[string]uint64{}}}}}
	c := NewCollector(func() *service.Snapshot { return snap })
	want := `
# HELP streamlearn_label_delay_events With delayed labels: how many records of the partition came between an event and its label, over joined labels.
# TYPE streamlearn_label_delay_events histogram
streamlearn_label_delay_events_bucket{partition="2",le="0"} 0
streamlearn_label_delay_events_bucket{partition="2",le="1"} 1
streamlearn_label_delay_events_bucket{partition="2",le="10"} 1
streamlearn_label_delay_events_bucket{partition="2",le="100"} 4
streamlearn_label_delay_events_bucket{partition="2",le="1000"} 4
streamlearn_label_delay_events_bucket{partition="2",le="10000"} 5
streamlearn_label_delay_events_bucket{partition="2",le="100000"} 5
streamlearn_label_delay_events_bucket{partition="2",le="1e+06"} 5
streamlearn_label_delay_events_bucket{partition="2",le="+Inf"} 5
streamlearn_label_delay_events_sum{partition="2"} 1234
streamlearn_label_delay_events_count{partition="2"} 5
# HELP streamlearn_labels_total With delayed labels: events joined by their label or expired, and labels rejected as unknown, late or duplicate.
# TYPE streamlearn_labels_total counter
streamlearn_labels_total{outcome="duplicate",partition="2"} 6
streamlearn_labels_total{outcome="expired",partition="2"} 2
streamlearn_labels_total{outcome="joined",partition="2"} 5
streamlearn_labels_total{outcome="late",partition="2"} 4
streamlearn_labels_total{outcome="unknown",partition="2"} 1
# HELP streamlearn_pending_events With delayed labels: events waiting for their label.
# TYPE streamlearn_pending_events gauge
streamlearn_pending_events{partition="2"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "streamlearn_labels_total", "streamlearn_pending_events", "streamlearn_label_delay_events"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// streamlearn_bound_status is 1 for each bound's status and 0 for the
// three others. Label 0 flipped to 1 on the demo's first event (v =
// 0.1303, below the threshold 0.37) makes the stream not realizable by
// the thresholds: the version spaces of consistent, halving and soa
// empty, and their premise is false; the Perceptron's margin stays the
// user's word (assumed); OGD, AdaGrad and Hedge are unconditional.
func TestBoundStatusMetric(t *testing.T) {
	s := runEdited(t, 200, service.Options{}, func(i int, line []byte) []byte {
		if i == 0 {
			return bytes.Replace(line, []byte(`"label":0`), []byte(`"label":1`), 1)
		}
		return nil
	})
	c := NewCollector(s.Snapshot)
	var want strings.Builder
	want.WriteString("# HELP streamlearn_bound_status " + "1 for the bound's current status, 0 for the others: holds (proved for this stream and within it), violated (exceeded though proved), premise_false (the theorem's premise failed on this stream), assumed (within it, proved if the user's margin is true).\n")
	want.WriteString("# TYPE streamlearn_bound_status gauge\n")
	status := map[string]string{"adagrad": "holds", "consistent": "premise_false", "halving": "premise_false", "ogd": "holds",
		"pct": "assumed", "soa": "premise_false", "wm-h": "holds", "wm-l": "holds"}
	for _, l := range []string{"adagrad", "consistent", "halving", "ogd", "pct", "soa", "wm-h", "wm-l"} {
		for _, st := range []string{"assumed", "holds", "premise_false", "violated"} {
			v := 0
			if st == status[l] {
				v = 1
			}
			fmt.Fprintf(&want, "streamlearn_bound_status{learner=%q,partition=\"0\",status=%q} %d\n", l, st, v)
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want.String()), "streamlearn_bound_status"); err != nil {
		t.Error(err)
	}
	// The emptied version spaces still count as bound violations.
	for _, l := range s.Snapshot().Reports[0].Learners {
		if v := l.BoundViolations; (status[l.Name] == "premise_false") != (v > 0) {
			t.Errorf("%s: %d bound violations, status %s", l.Name, v, status[l.Name])
		}
	}
}

// Rounds scored against the default label are series of their own:
// streamlearn_rounds_total and streamlearn_mistakes_total count the real
// labels'. The stream (testdata/default-label.jsonl) and its counts are
// those of cmd/streamlearn's TestReplayDefaultLabelApart: last-label has 3 rounds (1 mistake) on
// real labels and 2 (1) on the default label, majority 3 (2) and 2 (1).
func TestDefaultLabelMetrics(t *testing.T) {
	data, err := os.ReadFile("../../testdata/default-label.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("default-label.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	path := "../../testdata/default-label.jsonl"
	src, err := connectors.NewFileSource(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	s, err := service.New(service.Options{Config: cfg, Source: named{src, "file:s"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := NewCollector(s.Snapshot)
	want := `
# HELP streamlearn_default_label_loss_total With labels.default_label: cumulative loss on the rounds scored against the default label.
# TYPE streamlearn_default_label_loss_total counter
streamlearn_default_label_loss_total{learner="last",partition="0"} 1
streamlearn_default_label_loss_total{learner="maj",partition="0"} 1
# HELP streamlearn_default_label_mistakes_total With labels.default_label: rounds whose prediction differed from the default label they were scored against.
# TYPE streamlearn_default_label_mistakes_total counter
streamlearn_default_label_mistakes_total{learner="last",partition="0"} 1
streamlearn_default_label_mistakes_total{learner="maj",partition="0"} 1
# HELP streamlearn_default_label_rounds_total With labels.default_label: rounds scored against the default label (expired events learned with it), apart from streamlearn_rounds_total.
# TYPE streamlearn_default_label_rounds_total counter
streamlearn_default_label_rounds_total{learner="last",partition="0"} 2
streamlearn_default_label_rounds_total{learner="maj",partition="0"} 2
# HELP streamlearn_mistakes_total Rounds whose prediction differed from the label the stream gave.
# TYPE streamlearn_mistakes_total counter
streamlearn_mistakes_total{learner="last",partition="0"} 1
streamlearn_mistakes_total{learner="maj",partition="0"} 2
# HELP streamlearn_rounds_total Labeled rounds the learner was scored on, against a label the stream gave (not a default label).
# TYPE streamlearn_rounds_total counter
streamlearn_rounds_total{learner="last",partition="0"} 3
streamlearn_rounds_total{learner="maj",partition="0"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "streamlearn_rounds_total", "streamlearn_mistakes_total",
		"streamlearn_default_label_rounds_total", "streamlearn_default_label_mistakes_total", "streamlearn_default_label_loss_total"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	// And Debian's promtool, when it is installed, finds nothing either.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Logf("promtool check metrics not run: %v", err)
		return
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := writeText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	cmd := testproc.Command(t, promtool, "check", "metrics")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
