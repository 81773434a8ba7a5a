package main

import (
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/testproc"
)

// TestMemoryLimitFromConfig: with models per key, run and replay set the
// runtime's soft memory limit from models.max_bytes (max_bytes per
// partition with models per key, or twice its keys' index when that is
// over half of max_bytes, and memoryOverhead less memoryUncounted
// once), follow the
// partitions and keys' index of the snapshots, warn once of a partition
// whose index alone fills its share, and restore the limit there was at
// the end; not when GOMEMLIMIT is set, nor without models per key.
func TestMemoryLimitFromConfig(t *testing.T) {
	const maxBytes = 64 << 20
	keyed := parseTestConfig(t, "models: {by: key, max_bytes: 67108864}\nlearners: [{name: p, algorithm: perceptron}]\n")
	one := parseTestConfig(t, "learners: [{name: p, algorithm: perceptron}]\n")
	defer func(every time.Duration) { memoryLimitEvery = every }(memoryLimitEvery)
	memoryLimitEvery = 5 * time.Millisecond
	before := debug.SetMemoryLimit(-1)
	noEnv := func(string) string { return "" }
	key := "k"
	snap := &service.Snapshot{Reports: []service.Report{
		{Partition: 0, Report: pipeline.Report{Keys: &pipeline.KeysReport{Keys: 1000, IndexBytes: 232_000}}},
		// 180,000 keys: an index of 40 MiB, over half of 64 MiB
		{Partition: 3, Report: pipeline.Report{Keys: &pipeline.KeysReport{Keys: 180000, IndexBytes: 40 << 20}}},
		{Partition: 3, Key: &key, Report: pipeline.Report{Keys: &pipeline.KeysReport{Keys: 1, IndexBytes: 1 << 30}}}, // a key's report
	}}
	var published atomic.Pointer[service.Snapshot] // none yet: one partition, no key
	var log testproc.Buffer
	stop := limitMemory(keyed, published.Load, noEnv, slog.New(slog.NewTextHandler(&log, nil)))
	if got, want := debug.SetMemoryLimit(-1), int64(maxBytes+memoryOverhead-memoryUncounted); got != want {
		t.Errorf("at start: limit %d, want %d", got, want)
	}
	if again := limitMemory(keyed, func() *service.Snapshot { return nil }, noEnv, slog.New(slog.DiscardHandler)); debug.SetMemoryLimit(-1) != maxBytes+memoryOverhead-memoryUncounted {
		t.Errorf("a second limiter changed the first's limit")
	} else {
		again()
	}
	published.Store(snap)
	want := int64(maxBytes + 80<<20 + memoryOverhead - memoryUncounted) // partition 3: twice its index
	for deadline := time.Now().Add(10 * time.Second); debug.SetMemoryLimit(-1) != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("two partitions, one of an index of 40 MiB: limit %d, want %d", debug.SetMemoryLimit(-1), want)
		}
	}
	time.Sleep(20 * memoryLimitEvery)
	if got := strings.Count(log.String(), "level=WARN"); got != 1 || !strings.Contains(log.String(), "partition=3 keys=180000 index_bytes=41943040 max_bytes=67108864") {
		t.Errorf("%d warnings, want one of partition 3's index:\n%s", got, log.String())
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after stop: limit %d, want the one before, %d", got, before)
	}

	for name, c := range map[string]struct {
		cfg *config.Config
		env string
	}{
		"GOMEMLIMIT set":        {keyed, "1GiB"},
		"GOMEMLIMIT off":        {keyed, "off"},
		"a model per partition": {one, ""},
	} {
		stop := limitMemory(c.cfg, func() *service.Snapshot { return snap }, func(k string) string {
			if k == "GOMEMLIMIT" {
				return c.env
			}
			return ""
		}, slog.New(slog.DiscardHandler))
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("%s: limit %d, want it left at %d", name, got, before)
		}
		stop()
	}
}

// parseTestConfig parses yaml as a configuration file, failing t when it
// is not one.
func parseTestConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
