package service

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
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
