package service_test

// What a second core gives: a source of four partitions that needs no
// broker (a recording of `record --envelope`), learned with GOMAXPROCS=1
// and with GOMAXPROCS=2 in turn, by the same code on the same file.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
)

// coresPartitions and coresPasses shape BenchmarkCores' recording: every
// partition holds a9a coresPasses times (260,488 records), four
// partitions, 1,041,952 records in all.
const (
	coresPartitions = 4
	coresPasses     = 8
	// coresBlock is how many records of one partition follow each other
	// in the recording: what one fetch of a Kafka partition brings.
	coresBlock = 500
)

// coresYAML is the README's default learner set (a Perceptron and plain
// AdaGrad, both with a bias) over a9a's LIBSVM records.
const coresYAML = `
input: {format: libsvm}
learners:
  - {name: perceptron, algorithm: perceptron, bias: true}
  - {name: adagrad, algorithm: adagrad, normalized: false, bias: true}
`

// writeCoresRecording writes the recording BenchmarkCores replays to a
// file in dir and returns its path and its number of records: a9a's
// lines as the LIBSVM records of coresPartitions partitions, each
// partition's coresPasses passes over a9a, the partitions interleaved in
// blocks of coresBlock records, as `record --envelope` writes a topic
// (a LIBSVM record's bytes in value_base64). It returns "" when a9a is
// absent.
func writeCoresRecording(b *testing.B, dir string) (string, int) {
	b.Helper()
	data, err := os.ReadFile("../../../shared/data/a9a/a9a")
	if err != nil {
		return "", 0
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	perPartition := coresPasses * len(lines)
	path := filepath.Join(dir, "a9a-4.envelopes.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	type envelope struct {
		Partition   int32  `json:"partition"`
		Offset      int64  `json:"offset"`
		Key         string `json:"key"`
		ValueBase64 []byte `json:"value_base64"`
	}
	for start := 0; start < perPartition; start += coresBlock {
		for p := range int32(coresPartitions) {
			for o := start; o < min(start+coresBlock, perPartition); o++ {
				if err := enc.Encode(envelope{p, int64(o), "", lines[o%len(lines)]}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	return path, coresPartitions * perPartition
}

// BenchmarkCores: `replay --envelope` of a recording of four partitions
// (a9a eight times in each, 1,041,952 LIBSVM records; the README's default
// learners), a worker per partition, with one core and with two: each
// iteration runs the service at GOMAXPROCS=1 and at GOMAXPROCS=2, in
// turn (the first arm alternates), and the benchmark reports the median
// events/s of each arm, the median of the iterations' 2-core / 1-core
// ratios (speedup), the CPUs the process used with two (its CPU time
// over the wall time: below 2 when the loop cannot keep both busy, or
// when other processes take the cores) and the median CPU time an event
// of each arm (µs, user and system: what the hand-overs between cores
// cost shows there, also on a machine other processes share):
//
//	go test -run '^$' -bench 'Cores$' -benchtime 5x ./internal/service/
//
// With -cpuprofile, each arm's samples carry the label cpus=1 or cpus=2
// (pprof's -tagfocus 'cpus=^2$').
//
// It skips when ../shared/data or a second CPU is absent.
func BenchmarkCores(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("one CPU: nothing to compare")
	}
	path, n := writeCoresRecording(b, b.TempDir())
	if path == "" {
		b.Skip("../shared/data/a9a absent")
	}
	c := parseBenchConfig(b, coresYAML)
	run := func(procs int) (rate, cpus, us float64) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		runtime.GC() // the garbage of the arm before is not this arm's
		src := filesource.NewEnvelopes([]string{path}, nil, -1, c.Input.MaxBytes)
		t0, cpu0 := time.Now(), benchCPU()
		// Every goroutine of the run (the loop, the reader, the workers)
		// carries the arm in a CPU profile: -tagfocus cpus=1 or 2.
		pprof.Do(b.Context(), pprof.Labels("cpus", strconv.Itoa(procs)), func(context.Context) { benchRun(b, c, src, n) })
		elapsed, cpu := time.Since(t0), benchCPU()-cpu0
		return float64(n) / elapsed.Seconds(), float64(cpu) / float64(elapsed), cpu.Seconds() * 1e6 / float64(n)
	}
	var one, two, ratios, cpus, us1, us2 []float64
	i := 0
	for b.Loop() {
		var r1, r2, c2, u1, u2 float64
		if i%2 == 0 {
			r1, _, u1 = run(1)
			r2, c2, u2 = run(2)
		} else {
			r2, c2, u2 = run(2)
			r1, _, u1 = run(1)
		}
		i++
		one, two, ratios, cpus = append(one, r1), append(two, r2), append(ratios, r2/r1), append(cpus, c2)
		us1, us2 = append(us1, u1), append(us2, u2)
	}
	b.Logf("events/s at 1 CPU %.0f, at 2 CPUs %.0f; speedups %.2f; CPUs used at 2 %.2f; CPU µs an event at 1 %.3f, at 2 %.3f", one, two, ratios, cpus, us1, us2)
	b.ReportMetric(median(one), "events/s-1cpu")
	b.ReportMetric(median(two), "events/s-2cpu")
	b.ReportMetric(median(ratios), "speedup")
	b.ReportMetric(median(cpus), "cpus-used-2cpu")
	b.ReportMetric(median(us1), "cpu-µs/event-1cpu")
	b.ReportMetric(median(us2), "cpu-µs/event-2cpu")
}

// median returns the median of xs (the mean of the middle two when their
// number is even); xs is sorted.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
