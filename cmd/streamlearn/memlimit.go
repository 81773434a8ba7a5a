package main

import (
	"log/slog"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// memoryOverhead is X, what a process with models per key holds beside
// them, within which the soft memory limit (memoryLimit) holds its RSS
// above models.max_bytes a partition: the runtime, the loop, the
// batches, the decoders, the final reports being made, and the binary's
// own pages. A replay of the 1M-key stream as one model peaks at 47 MiB
// of RSS; docs/performance.md ("The memory limit") has the measures.
// memoryUncounted of it is left out of the limit: the pages RSS counts
// and the runtime's limit does not (the binary's code and data), which
// took RSS 3 MiB over a limit of max_bytes + X.
const (
	memoryOverhead  = 128 << 20
	memoryUncounted = 16 << 20
)

// memoryLimit returns the soft memory limit of cfg's models per key over
// partitions whose keys' index holds index bytes each (IndexBytes; none
// counts as one partition of no key), in bytes: models.max_bytes a
// partition, or for a partition whose index alone is over its share of
// it (pipeline.LiveBytes) the bound it would take (pipeline.BoundOf),
// plus memoryOverhead less memoryUncounted once; at most math.MaxInt64.
// It returns 0 when cfg has no models per key: nothing bounds a model per
// partition's memory.
//
// models.max_bytes is what the models per key of a partition may hold:
// pipeline.Keyed keeps its resident models and its keys' index within
// half of it, and the other half is the collector's room for the garbage
// made between two collections, which the limit holds it to.
func memoryLimit(cfg *config.Config, index []int64) int64 {
	if cfg.Models.By != "key" || cfg.Models.MaxBytes <= 0 {
		return 0
	}
	if len(index) == 0 {
		index = []int64{0}
	}
	limit := float64(memoryOverhead - memoryUncounted)
	for _, n := range index {
		limit += float64(max(cfg.Models.MaxBytes, pipeline.BoundOf(n)))
	}
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
// to memoryLimit of cfg over the partitions with models per key that
// snapshot shows and their keys' index (at first, one partition and no
// key), and keeps it so, reading snapshot every memoryLimitEvery, until
// stop, which restores the limit there was. It does nothing, and stop
// nothing, when cfg has no models per key or when the user set
// GOMEMLIMIT (getenv's answer; "off" keeps the runtime without a limit):
// the user's limit is the limit. While one keeps the limit, another does
// nothing. logger gets the first limit set, and a warning the first time
// a partition's keys' index alone is over its share of models.max_bytes.
func limitMemory(cfg *config.Config, snapshot func() *service.Snapshot, getenv func(string) string, logger *slog.Logger) (stop func()) {
	limit := memoryLimit(cfg, nil)
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
		warned := false
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			snap := snapshot()
			if snap == nil {
				continue
			}
			index := keyedIndex(snap)
			if l := memoryLimit(cfg, index); l != limit {
				limit = l
				debug.SetMemoryLimit(limit)
			}
			if !warned {
				warned = warnIndex(cfg, snap, limit, logger)
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

// keyedIndex returns the keys' index bytes of each of snap's partitions
// with models per key.
func keyedIndex(snap *service.Snapshot) []int64 {
	var index []int64
	for _, r := range snap.Reports {
		if r.Keys != nil && r.Key == nil {
			index = append(index, r.Keys.IndexBytes)
		}
	}
	return index
}

// warnIndex warns, and reports whether it did, when one of snap's
// partitions has a keys' index over its share of models.max_bytes: every
// model of it but the one in use is spilled, and the index goes on
// growing with the keys past the bound, the limit with it.
func warnIndex(cfg *config.Config, snap *service.Snapshot, limit int64, logger *slog.Logger) bool {
	for _, r := range snap.Reports {
		if r.Keys == nil || r.Key != nil || r.Keys.IndexBytes <= pipeline.LiveBytes(cfg.Models.MaxBytes) {
			continue
		}
		logger.Warn("models per key: the keys' index fills half of models.max_bytes: only the model in use stays resident, and memory grows with the keys past the bound; raise models.max_bytes",
			"partition", r.Partition, "keys", r.Keys.Keys, "index_bytes", r.Keys.IndexBytes, "max_bytes", cfg.Models.MaxBytes, "memory_limit", limit)
		return true
	}
	return false
}
