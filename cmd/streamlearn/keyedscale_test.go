package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/testproc"
)

// keyedSizes are the streams BenchmarkKeyedReplay replays, as
// EVENTS:KEYS pairs, comma-separated; k and M multiply by 1,000 and
// 1,000,000. The default is the size dense models per key replay in
// seconds; the targets are 1M:1k, 1M:100k and 1M:1M.
var keyedSizes = flag.String("keyed.sizes", "20k:2k", "BenchmarkKeyedReplay's streams: `EVENTS:KEYS` pairs, comma-separated (k, M suffixes)")

// keyedDir, when set, is where BenchmarkKeyedReplay writes its streams
// and configurations, and leaves them (to replay them with another
// binary); by default a temporary directory, removed.
var keyedDir = flag.String("keyed.dir", "", "BenchmarkKeyedReplay's `directory` of streams and configurations, kept (default a temporary one)")

// keyedBenchConfig is the configuration of BenchmarkKeyedReplay: the built-in default's, a
// Perceptron and plain AdaGrad with a bias, at 2^18 slots.
const keyedBenchConfig = `features: {bits: 18}
learners:
  - {name: perceptron, algorithm: perceptron, bias: true}
  - {name: adagrad, algorithm: adagrad, bias: true, normalized: false}
`

// BenchmarkKeyedReplay replays a skewed keyed stream (writeKeyedStream:
// Zipf keys, twelve features, a noisy linear rule) with `streamlearn
// replay` as a subprocess, for each size of -keyed.sizes, as one model
// (models unset), a model per key at the default models.max and a model
// per key with models.max 1000 (the rest spilled). The stream is written
// once per size, before the timer; each iteration is one replay. It
// reports events/s, the replay's peak RSS (MiB, its rusage's maxrss),
// its CPU seconds (user and system) and garbage collections, and the
// distinct keys of the stream.
//
//	go test ./cmd/streamlearn -run '^$' -bench KeyedReplay -benchtime 1x -keyed.sizes 20k:2k
func BenchmarkKeyedReplay(b *testing.B) {
	sl, _ := e2eBuild(b)
	dir := cmp.Or(*keyedDir, b.TempDir())
	for _, size := range strings.Split(*keyedSizes, ",") {
		events, keys, err := parseKeyedSize(size)
		if err != nil {
			b.Fatalf("-keyed.sizes: %v", err)
		}
		stream := filepath.Join(dir, fmt.Sprintf("keyed-%d-%d.jsonl", events, keys))
		st, err := writeKeyedStream(stream, keyedStream{Events: events, Keys: keys, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range []struct{ name, models string }{
			{"one", ""},
			{"by-key", "models: {by: key}\n"},
			{"by-key-max-1000", "models: {by: key, max: 1000}\n"},
		} {
			cfg := filepath.Join(dir, m.name+".yaml")
			if err := os.WriteFile(cfg, []byte(keyedBenchConfig+m.models), 0o644); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("events=%s/keys=%s/models=%s", strings.Split(size, ":")[0], strings.Split(size, ":")[1], m.name), func(b *testing.B) {
				b.ReportAllocs()
				var peak int64
				var cpu time.Duration
				var gcs int
				for b.Loop() {
					u := replayUsed(b, sl, dir, cfg, stream)
					peak, cpu, gcs = max(peak, u.peak), cpu+u.cpu, gcs+u.gcs
				}
				b.ReportMetric(float64(st.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
				b.ReportMetric(float64(gcs)/float64(b.N), "GCs/op")
				b.ReportMetric(float64(st.Keys), "keys")
			})
		}
	}
}

// replayUsage is what a replay used: its peak resident set in bytes,
// its CPU time (user and system) and its garbage collections.
type replayUsage struct {
	peak int64
	cpu  time.Duration
	gcs  int
}

// replayUsed runs `streamlearn replay -c cfg stream` in dir, with
// GODEBUG=gctrace=1 (a line on stderr a collection), and returns what it
// used.
func replayUsed(b *testing.B, sl, dir, cfg, stream string) replayUsage {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	c := testproc.CommandContext(b, ctx, sl, "replay", "-c", cfg, stream)
	c.Dir = dir
	c.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	var stderr strings.Builder
	c.Stderr = &stderr // the report goes to stdout, discarded
	if err := c.Run(); err != nil {
		b.Fatalf("replay -c %s: %v\n%s", filepath.Base(cfg), err, stderr.String())
	}
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no rusage of the replay")
	}
	u := replayUsage{peak: ru.Maxrss << 10, cpu: c.ProcessState.UserTime() + c.ProcessState.SystemTime()} // maxrss in KiB on Linux
	for line := range strings.Lines(stderr.String()) {
		if strings.HasPrefix(line, "gc ") {
			u.gcs++
		}
	}
	return u
}

// parseKeyedSize parses EVENTS:KEYS, each a number with an optional k or
// M suffix.
func parseKeyedSize(s string) (events, keys int, err error) {
	e, k, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want EVENTS:KEYS", s)
	}
	if events, err = parseCount(e); err != nil {
		return 0, 0, err
	}
	if keys, err = parseCount(k); err != nil {
		return 0, 0, err
	}
	return events, keys, nil
}

func parseCount(s string) (int, error) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "k"):
		s, mul = strings.TrimSuffix(s, "k"), 1000
	case strings.HasSuffix(s, "M"):
		s, mul = strings.TrimSuffix(s, "M"), 1000000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive count (k, M suffixes)", s)
	}
	return n * mul, nil
}
