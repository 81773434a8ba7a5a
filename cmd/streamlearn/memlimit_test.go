package main

import (
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// TestMemoryLimitFromConfig: with models per key, run and replay set the
// runtime's soft memory limit from models.max_bytes (twice it per
// partition with models per key, memoryOverhead, memoryPerKey a key ever
// seen), follow the partitions and keys of the snapshots, and restore
// the limit there was at the end; not when GOMEMLIMIT is set, nor
// without models per key.
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
		{Partition: 0, Report: pipeline.Report{Keys: &pipeline.KeysReport{Keys: 1000}}},
		{Partition: 3, Report: pipeline.Report{Keys: &pipeline.KeysReport{Keys: 3000}}},
		{Partition: 3, Key: &key, Report: pipeline.Report{Keys: &pipeline.KeysReport{Keys: 1}}}, // a key's report
	}}
	var published atomic.Pointer[service.Snapshot] // none yet: one partition, no key
	stop := limitMemory(keyed, published.Load, noEnv, slog.New(slog.DiscardHandler))
	if got, want := debug.SetMemoryLimit(-1), int64(2*maxBytes+memoryOverhead); got != want {
		t.Errorf("at start: limit %d, want %d", got, want)
	}
	if again := limitMemory(keyed, func() *service.Snapshot { return nil }, noEnv, slog.New(slog.DiscardHandler)); debug.SetMemoryLimit(-1) != 2*maxBytes+memoryOverhead {
		t.Errorf("a second limiter changed the first's limit")
	} else {
		again()
	}
	published.Store(snap)
	want := int64(2*2*maxBytes + memoryOverhead + memoryPerKey*4000)
	for deadline := time.Now().Add(10 * time.Second); debug.SetMemoryLimit(-1) != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("two partitions of 4,000 keys: limit %d, want %d", debug.SetMemoryLimit(-1), want)
		}
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
