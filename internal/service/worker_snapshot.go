package service

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// (pipeline.Pipeline.Freeze, a copy of the weights) and the report
// without the state digests. complete encodes, digests and reports it,
// off the worker.
type taken struct {
	c      *checkpoint.Checkpoint // State and Report are complete's
	frozen *pipeline.Frozen       // a model per partition's
	keyed  *pipeline.FrozenKeyed  // models per key's
	report Report
	done   bool // complete has run
}

// take returns the checkpoint of the model as of now, its state frozen
// and its report without digests, the least the worker can do between
// two records: for a model per partition, a copy of its weights (into
// spare, an earlier take's frozen state done with, when not nil); for
// models per key, the encodings of the models that learned since the last
// take (the others' are kept, an evicted one's is where it lies) and a
// copy of the global model (into spare). The freeze of models per key
// gives up once stop is closed (pipeline.ErrFreezeStopped; never when
// nil).
func (w *worker) take(spare *pipeline.Frozen, stop <-chan struct{}) (*taken, error) {
	s := w.s
	t := &taken{c: &checkpoint.Checkpoint{
		Created: time.Now(), Fingerprint: s.models.fingerprint, Source: s.opt.Source.Name(),
		Partition: w.part, Position: w.m.pos, Origin: w.m.origin, Consumer: w.m.consumer,
	}}
	var err error
	if w.m.k != nil {
		if t.keyed, err = w.m.k.FreezeUntil(spare, stop); err != nil {
			return nil, fmt.Errorf("service: checkpoint of partition %d: %w", w.part, err)
		}
		if t.report, err = w.reportOf(false); err != nil {
			return nil, err
		}
		return t, nil
	}
	w.premade.took.Store(true) // before the swap: a copy stored after it is dropped (premake)
	if p := w.premade.frozen.Swap(nil); p != nil && spare == nil {
		spare = p
		w.premade.used.Store(true)
	}
	if t.frozen, err = w.m.p.Freeze(spare); err != nil {
		return nil, fmt.Errorf("service: checkpoint of partition %d: %w", w.part, err)
	}
	if t.report, err = w.reportOf(false); err != nil {
		return nil, err
	}
	return t, nil
}

// premake makes, on its own goroutine, the memory the worker's first take
// copies the model into: the frozen state of a new model of c, whose
// weights are as large as the worker's (Pipeline.Freeze takes a copy of
// a pipeline of the same configuration as into). Made by the take, the
// fresh memory would cost the worker a page fault every 4 KiB it wrote,
// between two records; premade, what is left is mostly the first read of
// the model's own weights, never touched before (BenchmarkLatency; the
// figures are in docs/performance.md, "Measurements behind code
// decisions"). It waits for slot (one
// premake at a time) and gives up when ctx is done or a take came first.
func (w *worker) premake(ctx context.Context, slot chan struct{}, c *config.Config, history int) {
	select {
	case slot <- struct{}{}:
		defer func() { <-slot }()
	case <-ctx.Done():
		return
	}
	if w.premade.took.Load() || ctx.Err() != nil {
		return
	}
	m, err := newPartitionModel(c, history)
	if err != nil || m.p == nil {
		return // the take makes its own
	}
	f, err := m.p.Freeze(nil)
	if err != nil {
		return
	}
	w.premade.frozen.Store(f)
	if w.premade.took.Load() {
		w.premade.frozen.Store(nil) // too late: the model has its copies, this would be a third
	}
}

// complete encodes and digests t's frozen state and writes its report,
// on any goroutine, and returns the checkpoint. The frozen state may then
// be the spare of the worker's next take (spare).
func (t *taken) complete() (*checkpoint.Checkpoint, error) {
	if t.done {
		return t.c, nil
	}
	var state []byte
	var digests [][32]byte
	var err error
	var ls []regret.LearnerReport // whose digests these are
	if t.keyed != nil {
		state, digests, err = t.keyed.Encode()
		if g := t.report.Global; g != nil {
			ls = g.Learners // the global model's; a key's are its own report's
		}
	} else {
		state, digests, err = t.frozen.Encode()
		ls = t.report.Learners
	}
	if err != nil {
		return nil, fmt.Errorf("service: checkpoint of partition %d: %w", t.c.Partition, err)
	}
	for i := range ls {
		ls[i].StateSHA256 = hex.EncodeToString(digests[i][:])
	}
	rj, err := json.Marshal(t.report.Report)
	if err != nil {
		return nil, err
	}
	t.c.State, t.c.Report, t.done = state, rj, true
	return t.c, nil
}

// spare returns the memory of t's copy that the worker's next take may
// reuse once t is written: the copy of the model, or of the global model
// with models per key (nil without one).
func (t *taken) spare() *pipeline.Frozen {
	if t.keyed != nil {
		return t.keyed.Global()
	}
	return t.frozen
}

// labelReason says why a label event was rejected.
