package service

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// learnGap is the idle gap between the two bursts of the LearnSeconds
// tests.
const learnGap = time.Second

// checkLearnSeconds checks s learned 2n records in a time over 0 (the
// bursts were timed) and under the wall time of its Run less most of
// learnGap (the gap was not): whatever the machine's speed, a learning
// time that counted the gap would be above that.
func checkLearnSeconds(t *testing.T, s *Service, n int, wall time.Duration) {
	t.Helper()
	reps, err := s.Reports()
	if err != nil {
		t.Fatal(err)
	}
	var events uint64
	for _, r := range reps {
		events += r.Events
	}
	if events != uint64(2*n) {
		t.Errorf("%d events learned, want %d", events, 2*n)
	}
	limit := (wall - learnGap*8/10).Seconds()
	if sec := s.LearnSeconds(); sec <= 0 || sec >= limit {
		t.Errorf("LearnSeconds = %gs, want over 0 and under %gs (the run's %v less most of the %v gap): the bursts, not the gap between them",
			sec, limit, wall, learnGap)
	}
}

// A live source whose records come in two bursts with idle fetches
// between and after them: LearnSeconds is the time spent on the bursts,
// not the idle gap, whether a burst is shorter than the clock's period of
// clockEvery records or much longer. (A burst that was counted from a
// clock reading taken before the wait that preceded it counted that wait
// twice, and the learning time came out 0.)
func TestLearnSecondsLeavesOutIdleGaps(t *testing.T) {
	c := loadExampleConfig(t)
	for _, n := range []int{clockEvery / 3, 3000} {
		values := genEvents(2*n, 3, 0, 0, 0)
		src := &chanSource{ch: make(chan []byte, len(values))}
		// Snapshots every 10ms: the idle source's fetches end at
		// their deadlines, as a broker source's do.
		s := newService(t, Options{Config: c, Source: src, SnapshotInterval: 10 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.Run(ctx) }()
		time.Sleep(learnGap / 4) // idle from the start
		for _, v := range values[:n] {
			src.ch <- v
		}
		time.Sleep(learnGap)
		for _, v := range values[n:] {
			src.ch <- v
		}
		for len(src.ch) > 0 { // every record fetched: the stop drains what was
			time.Sleep(time.Millisecond)
		}
		time.Sleep(learnGap / 4) // idle until the stop
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		checkLearnSeconds(t, s, n, time.Since(start))
	}
}

// pausedReader returns first, then blocks for the pause, then returns
// rest: standard input whose writer pauses.
type pausedReader struct {
	first, rest io.Reader
	pause       time.Duration
	paused      bool
}

func (r *pausedReader) Read(p []byte) (int, error) {
	k, err := r.first.Read(p)
	if err != io.EOF {
		return k, err
	}
	if !r.paused {
		r.paused = true
		time.Sleep(r.pause)
	}
	return r.rest.Read(p)
}

// Replaying standard input that pauses between two halves: the time its
// reads were blocked is waiting, not learning.
func TestLearnSecondsLeavesOutStdinPause(t *testing.T) {
	c := loadExampleConfig(t)
	const n = 2500
	values := genEvents(2*n, 3, 0, 0, 0)
	half := func(vs [][]byte) io.Reader { return bytes.NewReader(append(bytes.Join(vs, []byte("\n")), '\n')) }
	stdin := &pausedReader{first: half(values[:n]), rest: half(values[n:]), pause: learnGap}
	s := newService(t, Options{Config: c, Source: filesource.NewFiles([]string{"-"}, pipeline.EventConfig(c), stdin)})
	start := time.Now()
	run(t, s)
	checkLearnSeconds(t, s, n, time.Since(start))
}
