package service

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// Models per key (models.by: key). A partition's model is then a
// pipeline.Keyed: a model per event key, each the replay of its key's
// events alone. Everything the service does with a partition's model —
// checkpoints, restores, warm starts, reports, serving copies — goes
// through the methods below, which choose between the one model and the
// models per key; the worker learns each event with its key's model.

// newModel returns a partition's empty model, of c's kind.
func newPartitionModel(c *config.Config, history int) (*model, error) {
	m := &model{pos: -1, skipTo: -1}
	if keyed(c) {
		dir := cmp.Or(c.Models.SpillDir, os.TempDir())
		k, err := pipeline.NewKeyed(c, pipeline.KeyedOptions{Max: c.Models.Max, MaxBytes: c.Models.MaxBytes, Idle: c.Models.Idle, Global: c.Models.Global,
			SpillDir: dir})
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("models.spill_dir %s: %w: evicted models go there; set it to a directory this process may write", dir, err)
		}
		if err != nil {
			return nil, err
		}
		m.k = k
		return m, nil
	}
	p, err := pipeline.New(c)
	if err != nil {
		return nil, err
	}
	if history > 0 {
		p.Tracker().EnableHistory(history)
	}
	m.p = p
	return m, nil
}

// mixed returns, with a global model, where the last predictions came
// from; nil otherwise.
func (m *model) mixed() *pipeline.Mixed {
	if m.k == nil {
		return nil
	}
	return m.k.Mixed()
}

// events returns the records the model counted; learned its labeled
// rounds; started when it was made.
func (m *model) events() uint64 {
	if m.k != nil {
		return m.k.Seen()
	}
	return m.p.Seen()
}

func (m *model) learned() uint64 {
	if m.k != nil {
		return m.k.Learned()
	}
	return m.p.Learned()
}

func (m *model) started() time.Time {
	if m.k != nil {
		return m.k.Started()
	}
	return m.p.Started()
}

// reject counts a record that could not be decoded; with models per key,
// in the model of key, the key read before the fault (else the empty
// key).
func (m *model) reject(key []byte, reason event.Reason) error {
	if m.k != nil {
		return m.k.Reject(key, reason)
	}
	m.p.Reject(reason)
	return nil
}

// unmarshal restores the model from a checkpoint's state.
func (m *model) unmarshal(b []byte) error {
	if m.k != nil {
		return m.k.UnmarshalBinary(b)
	}
	return m.p.UnmarshalBinary(b)
}

// startFrom makes the model the warm start's: with models per key, every
// new key's model. A partition's model counts the records after apart
// (pipeline.StartFromTracked), which its reports then have.
func (m *model) startFrom(state []byte, sha [32]byte) error {
	if m.k != nil {
		return m.k.StartFrom(state, sha)
	}
	return m.p.StartFromTracked(state, sha)
}

// totals returns the model's report (with the learners' state digests
// when digests): with models per key, their totals and the keys of the
// most records (TopKeys).
func (m *model) totals(digests bool) (pipeline.Report, []KeyReport, error) {
	if m.k == nil {
		if !digests {
			r, err := m.p.ReportWithoutDigests()
			return r, nil, err
		}
		r, err := m.p.Report()
		return r, nil, err
	}
	top := m.k.Top(TopKeys)
	keys := make([]KeyReport, len(top))
	for i, t := range top {
		keys[i] = KeyReport{Key: t.Key, Events: t.Events, Mistakes: t.Mistakes}
		if t.Mix != nil {
			keys[i].Served = make([]uint64, len(t.Mix))
			for j, m := range t.Mix {
				keys[i].Served[j] = m.Mixed
			}
		}
	}
	if !digests {
		return m.k.ReportWithoutDigests(), keys, nil
	}
	return m.k.Report(), keys, nil
}

// eachKeyReport calls of with the report of every key's model, as the
// worker's report of the partition does (report), on every core, and f
// with of's results in key order, one at a time (EachReportOf).
func eachKeyReport[T any](w *worker, of func(Report) (T, error), f func(T) error) error {
	source := w.s.opt.Source.Name()
	return pipeline.EachOrdered(w.m.k, runtime.GOMAXPROCS(0), func(key string, p *pipeline.Pipeline) (T, error) {
		r, err := p.Report()
		if err != nil {
			var zero T
			return zero, err
		}
		if r.Labels != nil {
			r.Labels.StateSHA256 = p.StoreDigest()
		}
		r.Mix = w.m.k.KeyMix(key)
		k := key
		return of(Report{Source: source, Partition: w.part, Key: &k, Report: r})
	}, f)
}
