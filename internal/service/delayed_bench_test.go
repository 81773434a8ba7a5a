package service_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// BenchmarkDelayedLabels: the throughput of delayed labels on a stream as
// `run` reads it, from a JSONL file, decoded, through the service, with
// the Perceptron and logistic OGD. The stream is benchEventCount() events
// of DESIGN.md's shape (default 1,000,000 here); in delayed/, half of them
// come without their label, which follows as a label event
// {"id","key","label"} 0..2,000 events later (mean 1,000), under
// labels.delayed; inline/ is the same events with every label in place,
// without labels.delayed. Both report events/s (events, not records: the
// delayed file has half as many records again) and allocs/event. ratio/
// runs the two in turn and reports the median over its pairs of delayed
// events/s over inline events/s.
//
//	go test -run '^$' -bench DelayedLabels -benchtime 2x -count 5 ./internal/service/
func BenchmarkDelayedLabels(b *testing.B) {
	n := 1_000_000
	if os.Getenv("STREAMLEARN_BENCH_EVENTS") != "" {
		n = benchEventCount(b)
	}
	const learners = `
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ogd, algorithm: ogd, loss: logistic, eta: 0.5, bias: true}
`
	inlineCfg := mustBenchConfig(b, learners)
	delayedCfg := mustBenchConfig(b, learners+"labels: {delayed: true, wait: 10000, max_pending: 10000}\n")
	dir := b.TempDir()
	inline, delayed := filepath.Join(dir, "inline.jsonl"), filepath.Join(dir, "delayed.jsonl")
	writeDelayedBench(b, inline, delayed, n)

	run := func(b *testing.B, c *config.Config, path string) {
		benchRun(b, c, service.NewFiles([]string{path}, pipeline.EventConfig(c), nil), n)
	}
	for _, mode := range []struct {
		name string
		c    *config.Config
		path string
	}{{"inline", inlineCfg, inline}, {"delayed", delayedCfg, delayed}} {
		b.Run(mode.name, func(b *testing.B) {
			m := newBenchMeter(b, n)
			iters := 0
			for b.Loop() {
				run(b, mode.c, mode.path)
				iters++
			}
			m.report(iters)
		})
	}
	// The two in turn, so that both see the same machine: the median of
	// the pairs' ratios holds still where each rate alone does not.
	b.Run("ratio", func(b *testing.B) {
		var ratios []float64
		for b.Loop() {
			t0 := time.Now()
			run(b, inlineCfg, inline)
			t1 := time.Now()
			run(b, delayedCfg, delayed)
			ratios = append(ratios, float64(t1.Sub(t0))/float64(time.Since(t1)))
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "delayed/inline")
	})
}

func mustBenchConfig(tb testing.TB, yaml string) *config.Config {
	tb.Helper()
	c, err := config.Parse("bench.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// writeDelayedBench writes the n events of BenchmarkDelayedLabels to
// inline, and to delayed with half of their labels sent late.
func writeDelayedBench(tb testing.TB, inline, delayed string, n int) {
	tb.Helper()
	fi, err := os.Create(inline)
	if err != nil {
		tb.Fatal(err)
	}
	fd, err := os.Create(delayed)
	if err != nil {
		tb.Fatal(err)
	}
	wi, wd := bufio.NewWriter(fi), bufio.NewWriter(fd)
	// Labels due at record i wait in ring[i%len(ring)], in the order
	// their events came.
	type label struct{ event, key, y int }
	const maxDelay = 2000
	ring := make([][]label, maxDelay+1)
	flush := func(at int) {
		b := &ring[at%len(ring)]
		for _, l := range *b {
			fmt.Fprintf(wd, `{"id":"m-%d","key":"tenant-%d","label":%d}`+"\n", l.event, l.key, l.y)
		}
		*b = (*b)[:0]
	}
	r, dr := rand.New(rand.NewPCG(10, 10)), rand.New(rand.NewPCG(11, 11))
	var line []byte
	for i := range n {
		key, y := r.IntN(10), r.IntN(2)
		f := [...]any{r.IntN(200), r.IntN(2), r.Float64(), r.IntN(20), r.IntN(5), r.IntN(24), r.IntN(2), r.Float64()}
		event := func(labeled bool) []byte {
			line = fmt.Appendf(line[:0], `{"id":"m-%d","key":"tenant-%d","ts":"2026-11-22T10:00:00Z",`, i, key)
			if labeled {
				line = fmt.Appendf(line, `"label":%d,`, y)
			}
			line = fmt.Appendf(line, `"features":{"len":%d,"has_url":%d,"sender=bulk.example":1,"caps":%.3f,"digits":%d,"exclaim":%d,"hour":%d,"reply":%d,"lang=en":1,"score":%.4f}}`+"\n", f[:]...)
			return line
		}
		wi.Write(event(true))
		if dr.IntN(2) == 0 {
			wd.Write(event(false))
			at := i + dr.IntN(maxDelay+1)
			ring[at%len(ring)] = append(ring[at%len(ring)], label{i, key, y})
		} else {
			wd.Write(event(true))
		}
		flush(i)
	}
	for at := n; at <= n+maxDelay; at++ {
		flush(at)
	}
	for _, err := range []error{wi.Flush(), wd.Flush(), fi.Close(), fd.Close()} {
		if err != nil {
			tb.Fatal(err)
		}
	}
}
