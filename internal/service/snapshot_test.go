package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// countObserver counts observations; it allocates nothing and, as the
// workers of several partitions observe at once, is safe for concurrent
// use.
type countObserver struct {
	n atomic.Int64
}

func (c *countObserver) Observe(float64) { c.n.Add(1) }

// Before Run the snapshot says not started; Run publishes one at start,
// more while the source is idle, and a final one equal to Reports.
func TestSnapshot(t *testing.T) {
	values := genEvents(120, 21, 0.05, 0.1, 13)
	src := newMemSource(values, 2)
	src.block = true
	fetched := make(chan struct{})
	src.fetched = fetched
	obs := &countObserver{}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src,
		SnapshotInterval: 10 * time.Millisecond, EventDuration: obs})
	first := s.Snapshot()
	if first == nil || first.Started || len(first.Reports) != 0 || first.Source != "mem:test" {
		t.Fatalf("snapshot before Run: %+v, want not started, no reports, source mem:test", first)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-fetched
	// Idle: a snapshot after the last record arrives within the interval.
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap := s.Snapshot()
		if snap.Started && len(snap.Reports) == 2 && snap.Reports[0].Events+snap.Reports[1].Events == 120 {
			if snap.Reports[0].Partition != 0 || snap.Reports[1].Partition != 1 {
				t.Errorf("snapshot partitions %d, %d; want 0, 1", snap.Reports[0].Partition, snap.Reports[1].Partition)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot of all 120 records 10s after the source went idle: %+v", snap)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if first.Started {
		t.Error("the snapshot taken before Run changed: snapshots must be immutable")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	final := s.Snapshot()
	want, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want { // Seconds is the time of the report, not of the stream
		want[i].Seconds = final.Reports[i].Seconds
	}
	if !final.Started || !reflect.DeepEqual(final.Reports, want) {
		t.Errorf("final snapshot %+v\nwant Reports() %+v", final.Reports, want)
	}
	if n := obs.n.Load(); n != 120 {
		t.Errorf("EventDuration observed %d records, want 120", n)
	}
}

// Snapshot may be read by any goroutine while Run works (run with -race).
func TestSnapshotConcurrentReaders(t *testing.T) {
	src := newMemSource(genEvents(3000, 22, 0.05, 0.1, 0), 3)
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, SnapshotInterval: time.Millisecond})
	stop := make(chan struct{})
	readerDone := make(chan uint64)
	go func() {
		var seen uint64
		for {
			select {
			case <-stop:
				readerDone <- seen
				return
			default:
			}
			snap := s.Snapshot()
			var events uint64
			for _, r := range snap.Reports {
				events += r.Events
				for _, l := range r.Learners {
					_ = l.Mistakes
				}
			}
			if events < seen {
				t.Errorf("snapshot went back from %d to %d events", seen, events)
			}
			seen = events
		}
	}()
	run(t, s)
	close(stop)
	if seen := <-readerDone; seen > 3000 {
		t.Errorf("reader saw %d events, more than the stream's 3000", seen)
	}
	var events uint64
	for _, r := range s.Snapshot().Reports {
		events += r.Events
	}
	if events != 3000 {
		t.Errorf("final snapshot: %d events, want 3000", events)
	}
}

// The hot path stays free of allocations with EventDuration set.
func TestProcessAllocsWithEventDuration(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	values := genEvents(512, 9, 0.05, 0.2, 0)
	src := newMemSource(values, 1)
	obs := &countObserver{}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: discardSink{}, EventDuration: obs})
	ctx := context.Background()
	s.startIntake(t)
	for _, r := range src.recs {
		if err := s.dispatch(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		if err := s.dispatch(ctx, &src.recs[i%len(src.recs)]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per record, want 0", allocs)
	}
}

// A snapshot asks only the models that learned since the last one: the
// others' reports are the last ones again (the same learner reports, a
// later Seconds), and their curves too.
func TestSnapshotModelsAtRest(t *testing.T) {
	src := newMemSource(genEvents(90, 23, 0.05, 0.1, 0), 3)
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src})
	ctx := context.Background()
	s.startIntake(t)
	dispatch := func(recs []connectors.Record) {
		t.Helper()
		for i := range recs {
			if err := s.dispatch(ctx, &recs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot := func() *Snapshot {
		t.Helper()
		s.snaps.curvesAt = time.Time{} // the curves are due every time
		if err := s.publishSnapshot(ctx); err != nil {
			t.Fatal(err)
		}
		return s.Snapshot()
	}
	same := func(a, b Report) bool { return &a.Learners[0] == &b.Learners[0] }

	dispatch(src.recs[:87])
	first := snapshot()
	second := snapshot()
	for i := range 3 {
		if !same(first.Reports[i], second.Reports[i]) || !reflect.DeepEqual(first.Curves[i], second.Curves[i]) {
			t.Errorf("partition %d at rest: its report was taken again", i)
		}
		if second.Reports[i].Seconds < first.Reports[i].Seconds {
			t.Errorf("partition %d: seconds went back from %v to %v", i, first.Reports[i].Seconds, second.Reports[i].Seconds)
		}
	}
	dispatch(src.recs[87:88]) // partition 0 learns one more
	third := snapshot()
	if same(second.Reports[0], third.Reports[0]) || third.Reports[0].Events != second.Reports[0].Events+1 {
		t.Errorf("partition 0 learned: report of %d events, want a new one of %d", third.Reports[0].Events, second.Reports[0].Events+1)
	}
	if n := len(third.Curves[0][0]); n == len(second.Curves[0][0]) && third.Reports[0].Labeled != second.Reports[0].Labeled {
		t.Errorf("partition 0 learned: its curves did not move (%d points)", n)
	}
	for _, i := range []int{1, 2} {
		if !same(second.Reports[i], third.Reports[i]) {
			t.Errorf("partition %d at rest: its report was taken again", i)
		}
	}
	want, err := s.reportsNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Seconds = third.Reports[i].Seconds
	}
	if !reflect.DeepEqual(third.Reports, want) {
		t.Errorf("snapshot %+v\nwant the models' reports %+v", third.Reports, want)
	}
}

// reportsNow asks every worker for its report.
func (s *Service) reportsNow(ctx context.Context) ([]Report, error) {
	answers, err := s.askAll(ctx, s.models.sorted(), func(*worker) *ask { return &ask{kind: askSnapshot} })
	if err != nil {
		return nil, err
	}
	out := make([]Report, len(answers))
	for i, a := range answers {
		out[i] = a.report
	}
	return out, nil
}

// BenchmarkSnapshotAtRest: a snapshot of models that learned nothing since
// the last one, for 1 to 64 models of the test configuration (seven
// learners each). Its cost must not grow with the models' size, and
// barely with their count.
//
//	go test -run '^$' -bench SnapshotAtRest ./internal/service/
func BenchmarkSnapshotAtRest(b *testing.B) {
	for _, models := range []int32{1, 16, 64} {
		b.Run(fmt.Sprintf("models=%d", models), func(b *testing.B) {
			src := newMemSource(genEvents(int(models)*20, 24, 0.05, 0.1, 0), models)
			s := newService(b, Options{Config: parseConfig(b, testYAML), Source: src})
			ctx := context.Background()
			s.startIntake(b)
			for i := range src.recs {
				if err := s.dispatch(ctx, &src.recs[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.publishSnapshot(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.publishSnapshot(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// gateSink is a sink whose Publish waits, while closed is set, until the
// gate opens or its context is done.
type gateSink struct {
	discardSink
	closed atomic.Bool
	gate   chan struct{}
}

func (g *gateSink) Publish(ctx context.Context, _, _ []byte) error {
	if !g.closed.Load() {
		return nil
	}
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A snapshot that fails waiting for a busy worker (Run's context ends
// meanwhile) does not take that worker's model for one at rest: the next
// snapshot asks it again and has every record.
func TestSnapshotAfterFailedAsk(t *testing.T) {
	src := newMemSource(genEvents(2, 25, 0, 0, 0), 1)
	sink := &gateSink{gate: make(chan struct{})}
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: sink})
	ctx := context.Background()
	s.startIntake(t)
	if err := s.dispatch(ctx, &src.recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.publishSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	sink.closed.Store(true)
	if err := s.dispatch(ctx, &src.recs[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.handOverAll(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.publishSnapshot(short); err == nil {
		t.Fatal("a snapshot of a worker held in its sink succeeded")
	}
	close(sink.gate)
	if err := s.publishSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Snapshot().Reports[0].Events; got != 2 {
		t.Errorf("snapshot after a failed one: %d events, want 2", got)
	}
}

// With a file source the loop processes the records itself; a sink that
// never answers still cannot hold Run past the drain once its context is
// done.
func TestInlineDrainBounded(t *testing.T) {
	defer func(d time.Duration) { drainTimeout = d }(drainTimeout)
	drainTimeout = 50 * time.Millisecond
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, bytes.Join(genEvents(5, 26, 0, 0, 0), []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	c := parseConfig(t, testYAML)
	sink := &gateSink{gate: make(chan struct{})}
	sink.closed.Store(true)
	s := newService(t, Options{Config: c, Source: filesource.NewFiles([]string{path}, pipeline.EventConfig(c), nil), Predictions: sink})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run over a sink that never answered returned nil")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still held by its sink 20s after its context ended")
	}
}

// The snapshots carry the learners' state digests only while someone
// reads them (WantDigests): without a reader, a snapshot costs no pass
// over the models' states; once asked, a snapshot has them, equal to the
// final report's.
func TestDigestsOnDemand(t *testing.T) {
	// The learners' states: of the model, or, with models per key, of the
	// partition's global model (a key's digests are its own report's).
	perKey := parseYAML(t, keyedPlain+"models: {by: key, max: 4, global: true}\n")
	for _, tc := range []struct {
		name string
		c    *config.Config
	}{{"config.yaml", loadExampleConfig(t)}, {"models per key with a global model", perKey}} {
		t.Run(tc.name, func(t *testing.T) {
			learners := func(r Report) []regret.LearnerReport {
				if r.Global != nil {
					return r.Global.Learners
				}
				return r.Learners
			}
			src := newMemSource(genEvents(500, 3, 0, 0, 0), 1)
			src.block = true
			s := newService(t, Options{Config: tc.c, Source: src, SnapshotInterval: 2 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				if snap := s.Snapshot(); len(snap.Reports) == 1 && snap.Reports[0].Events == 500 {
					if snap.Digests || learners(snap.Reports[0])[0].StateSHA256 != "" {
						t.Fatalf("a snapshot nobody asked digests of has them (%v)", snap.Digests)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the events were not learned")
				}
			}
			wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
			s.WantDigests(wctx)
			wcancel()
			snap := s.Snapshot()
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			if !snap.Digests {
				t.Fatal("no digests after WantDigests")
			}
			// The last snapshot of a run has them always; a model per
			// partition's are its final report's too.
			final := learners(s.Snapshot().Reports[0])
			if tc.c.Models.By == "" {
				reps, err := s.Reports()
				if err != nil {
					t.Fatal(err)
				}
				final = reps[0].Learners
			}
			for i, l := range learners(snap.Reports[0]) {
				if l.StateSHA256 == "" || l.StateSHA256 != final[i].StateSHA256 {
					t.Errorf("%s: snapshot digest %q, final %q", l.Name, l.StateSHA256, final[i].StateSHA256)
				}
			}
		})
	}
}
