package main

import (
	"log/slog"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/service"
)

// The soft memory limit of a process with models per key (models.by:
// key), as memoryLimit computes it: per partition with models per key,
// twice its models.max_bytes; memoryOverhead once; and memoryPerKey for
// every key ever seen. Measured (docs/performance.md, "Models per key at
// scale"): the live heap is the resident models (up to about 1.3 ×
// max_bytes in a replay), about 210 bytes per key ever seen (its counts,
// its place in the spill, its name) and the rest of the process; the
// garbage made since the last collection comes on top. The limit leaves
// the collector room for that garbage in proportion to the models and
// the keys: at 1.5 × max_bytes it ran half as often again and cost a
// third more CPU, at twice max_bytes no more than without a limit.
const (
	memoryOverhead = 128 << 20
	memoryPerKey   = 512
)

// memoryLimit returns the soft memory limit of cfg's models per key over
// partitions partitions (counted as one when fewer) and keys keys ever
// seen, in bytes: 2 × max_bytes × partitions + memoryOverhead +
// memoryPerKey × keys, at most math.MaxInt64. It returns 0 when cfg has
// no models per key: nothing bounds a model per partition's memory.
func memoryLimit(cfg *config.Config, partitions, keys int) int64 {
	if cfg.Models.By != "key" || cfg.Models.MaxBytes <= 0 {
		return 0
	}
	limit := 2 * float64(cfg.Models.MaxBytes) * float64(max(partitions, 1))
	limit += memoryOverhead + memoryPerKey*float64(max(keys, 0))
	if limit >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(limit)
}

// memoryLimited is set while a limitMemory keeps the limit: one at a
// time sets it (tests run commands side by side in one process).
var memoryLimited atomic.Bool

// memoryLimitEvery is how often limitMemory reads the snapshot again:
// the service publishes one a second.
var memoryLimitEvery = time.Second

// limitMemory sets the runtime's soft memory limit (debug.SetMemoryLimit)
// to memoryLimit of cfg over the partitions and keys that snapshot shows
// (at first, one partition and no key), and keeps it so, reading
// snapshot every memoryLimitEvery, until stop, which restores the limit
// there was. It does nothing, and stop nothing, when cfg has no models
// per key or when the user set GOMEMLIMIT (getenv's answer; "off" keeps
// the runtime without a limit): the user's limit is the limit. While one
// keeps the limit, another does nothing. logger gets the first limit
// set.
func limitMemory(cfg *config.Config, snapshot func() *service.Snapshot, getenv func(string) string, logger *slog.Logger) (stop func()) {
	limit := memoryLimit(cfg, 1, 0)
	if limit == 0 || getenv("GOMEMLIMIT") != "" || !memoryLimited.CompareAndSwap(false, true) {
		return func() {}
	}
	prev := debug.SetMemoryLimit(limit)
	logger.Info("soft memory limit set from models.max_bytes (GOMEMLIMIT overrides it)", "bytes", limit)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(memoryLimitEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if snap := snapshot(); snap != nil {
				partitions, keys := keyedPartitions(snap)
				if l := memoryLimit(cfg, partitions, keys); l != limit {
					limit = l
					debug.SetMemoryLimit(limit)
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		debug.SetMemoryLimit(prev)
		memoryLimited.Store(false)
	}
}

// keyedPartitions returns how many of snap's partitions have models per
// key, and their keys in all.
func keyedPartitions(snap *service.Snapshot) (partitions, keys int) {
	for _, r := range snap.Reports {
		if r.Keys != nil && r.Key == nil {
			partitions++
			keys += r.Keys.Keys
		}
	}
	return partitions, keys
}
