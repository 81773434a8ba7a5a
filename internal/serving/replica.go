package serving

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// DefaultPoll is how often a Replica following a checkpoint store
// looks for newer checkpoints.
const DefaultPoll = 5 * time.Second

// ServeOptions configure a Replica. Config and one of Model and
// Checkpoints are required.
type ServeOptions struct {
	// Config is the model configuration of what is served: a model file
	// or checkpoint of another is refused.
	Config *config.Config
	// Model, when not nil, is the one model served, as partition 0.
	Model *WarmStart
	// Checkpoints, when not nil, is followed: the model of every
	// partition that has a checkpoint is served, and replaced when a
	// checkpoint of a higher position is saved (by the service that
	// learns, elsewhere).
	Checkpoints checkpoint.Store
	// WarmStart, with models per key (models.by: key) and Checkpoints,
	// is the model a key no checkpoint has answers with, as the learning
	// service's new keys start from it (models.warm_start); nil: an
	// empty model.
	WarmStart *WarmStart
	// Poll is how often Checkpoints is read; default DefaultPoll.
	Poll time.Duration
	// Logger gets the models loaded and the checkpoints refused; nil
	// discards them.
	Logger *slog.Logger
}

// A Replica answers predictions and reports from models it does not
// learn: a model file, or the checkpoints a learning service saves, read
// again as they change (`streamlearn serve`). It consumes nothing, so
// any number of them can serve behind a load balancer beside the one
// service that learns. Its Snapshot and Predictor are what the learning
// service offers the HTTP API and the metrics; they are safe for
// concurrent use.
type Replica struct {
	opt    ServeOptions
	logger *slog.Logger
	snap   atomic.Pointer[Snapshot]
	copies atomic.Pointer[Copies]
	// loaded says what each partition's served model was read from (its
	// stamp, checkpoint.Stamper, or its position, time and digest), so
	// that an unchanged checkpoint is not read, or not decoded, again.
	loaded map[int32]string
	build  *pipeline.Builder // of the configuration's pipelines
}

// NewReplica returns a Replica of opt, its models loaded: a model file or
// checkpoint of another configuration, or one that does not decode, is an
// error.
func NewReplica(ctx context.Context, opt ServeOptions) (*Replica, error) {
	if opt.Config == nil || (opt.Model == nil) == (opt.Checkpoints == nil) {
		return nil, errors.New("service: serve: a configuration and either a model file or a checkpoint store")
	}
	if opt.Poll <= 0 {
		opt.Poll = DefaultPoll
	}
	s := &Replica{opt: opt, logger: opt.Logger, loaded: map[int32]string{}, build: pipeline.NewBuilder(opt.Config)}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if opt.Model != nil {
		if err := opt.Model.Check(opt.Config); err != nil {
			return nil, fmt.Errorf("service: serve: %w", err)
		}
		p, err := pipeline.New(opt.Config)
		if err != nil {
			return nil, err
		}
		if err := p.UnmarshalBinary(opt.Model.Model.State); err != nil {
			return nil, fmt.Errorf("service: serve: the model %s: %w", opt.Model.Path, err)
		}
		sum, err := pipeline.ModelDigest(opt.Model.Model.State)
		if err != nil {
			return nil, fmt.Errorf("service: serve: the model %s: %w", opt.Model.Path, err)
		}
		pr := &Predictor{Partition: 0, Events: p.Seen(), Time: time.Now(), SHA256: sum, p: p}
		s.publish(map[int32]*Predictor{0: pr}, "model:"+opt.Model.Path)
		s.logger.Info("serve: model loaded", "model", opt.Model.Path, "events", pr.Events, "model_sha256", hex.EncodeToString(pr.SHA256[:]))
		return s, nil
	}
	if err := s.reload(ctx, true); err != nil {
		return nil, err
	}
	return s, nil
}

// Run follows the checkpoint store, every Poll, until ctx is done; with a
// model file it only waits. A checkpoint that cannot be read or is of
// another configuration is logged and the model it would replace goes on
// serving. It returns nil when ctx is done.
func (s *Replica) Run(ctx context.Context) error {
	if s.opt.Checkpoints == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.opt.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.reload(ctx, false); err != nil && ctx.Err() == nil {
				s.logger.Warn("serve: reading the checkpoints", "store", s.opt.Checkpoints.String(), "err", err)
			}
		}
	}
}

// Reload reads the checkpoint store once now, as Run does every Poll,
// and publishes the models of the partitions whose checkpoints changed;
// it returns the error Run would log, and the models served then stay.
// With a model file it does nothing.
func (s *Replica) Reload(ctx context.Context) error {
	if s.opt.Checkpoints == nil {
		return nil
	}
	return s.reload(ctx, false)
}

// reload reads every partition's checkpoint and publishes the models of
// those that changed beside the others. At the first load (strict) any
// checkpoint that cannot be served is an error; later it is logged and
// the partition's model, if any, stays.
func (s *Replica) reload(ctx context.Context, strict bool) error {
	st := s.opt.Checkpoints
	stamper, _ := st.(checkpoint.Stamper)
	var stamps map[int32]string
	var parts []int32
	var err error
	if stamper != nil {
		if stamps, err = stamper.Stamps(ctx); err == nil {
			for p := range stamps {
				parts = append(parts, p)
			}
			slices.Sort(parts)
		}
	} else {
		parts, err = st.Partitions(ctx)
	}
	if err != nil {
		return fmt.Errorf("service: serve: %w", err)
	}
	fp := Fingerprint(s.opt.Config)
	models := map[int32]*Predictor{}
	changed := false
	if old := s.copies.Load(); old != nil {
		for part, pr := range old.byPartition {
			if slices.Contains(parts, part) {
				models[part] = pr
				continue
			}
			// Its checkpoint was moved away (a reset, an operator): the
			// model it held is no longer the partition's.
			delete(s.loaded, part)
			changed = true
			s.logger.Info("serve: a checkpoint is gone: its model is no longer served", "partition", part)
		}
	}
	for _, part := range parts {
		stamp := stamps[part]
		if stamp != "" && stamp == s.loaded[part] {
			continue // unchanged: not read again
		}
		c, err := st.Load(ctx, part)
		if err != nil {
			if checkpoint.IsNotExist(err) {
				if _, ok := models[part]; ok {
					delete(models, part)
					delete(s.loaded, part)
					changed = true
				}
				continue // removed since it was listed
			}
			if strict {
				return fmt.Errorf("service: serve: %w", err)
			}
			s.logger.Warn("serve: a checkpoint cannot be read: the partition's model served stays", "partition", part, "err", err)
			continue
		}
		from := stamp
		if stamp == "" {
			from = fmt.Sprintf("%d %d %x", c.Position, c.Created.UnixNano(), sha256.Sum256(c.State))
		}
		if l, ok := s.loaded[part]; ok && l == from {
			continue
		}
		pr, err := s.predictorOf(c, fp)
		if err != nil {
			if strict {
				return err
			}
			s.logger.Warn("serve: a checkpoint cannot be served: the partition's model served stays", "partition", part, "err", err)
			continue
		}
		s.loaded[part], models[part], changed = from, pr, true
		s.logger.Info("serve: model loaded", "partition", part, "position", c.Position, "events", pr.Events, "created", c.Created,
			"model_sha256", hex.EncodeToString(pr.SHA256[:]))
	}
	if changed || s.snap.Load() == nil {
		s.publish(models, st.String())
	}
	return nil
}

// predictorOf decodes checkpoint c, which must be of fingerprint fp.
func (s *Replica) predictorOf(c *checkpoint.Checkpoint, fp [32]byte) (*Predictor, error) {
	if c.Fingerprint != fp {
		what := "the input, features, labels or learners differ"
		if ch, err := pipeline.CompareState(c.State, s.opt.Config); err == nil {
			what = ch.String()
		}
		return nil, fmt.Errorf("service: serve: the checkpoint of partition %d in %s was written by another model configuration (%s)",
			c.Partition, s.opt.Checkpoints, what)
	}
	if Keyed(s.opt.Config) {
		k, err := pipeline.NewKeyed(s.opt.Config, pipeline.KeyedOptions{Global: s.opt.Config.Models.Global})
		if err != nil {
			return nil, err
		}
		var states map[string]pipeline.StateRef
		if err = k.UnmarshalBinary(c.State); err == nil {
			states, err = k.ServingStates(nil)
		}
		if err != nil {
			return nil, fmt.Errorf("service: serve: the checkpoint of partition %d in %s: %w", c.Partition, s.opt.Checkpoints, err)
		}
		var global *Predictor
		var mixes map[string][]pipeline.MixReport
		if g := k.Global(); g != nil {
			if global, err = NewPredictor(c.Partition, g); err != nil {
				return nil, err
			}
			global.Time, mixes = c.Created, k.Mixes()
		}
		pr, err := NewKeyed(s.build, KeyedCopy{Partition: c.Partition, Events: k.Seen(), States: states, Warm: s.opt.WarmStart,
			Totals: k.Report(), Global: global, Mixes: mixes})
		if err != nil {
			return nil, err
		}
		pr.Stamp(c.Created)
		pr.SHA256 = sha256.Sum256(c.State)
		return pr, nil
	}
	p, err := pipeline.New(s.opt.Config)
	if err != nil {
		return nil, err
	}
	if err := p.UnmarshalBinary(c.State); err != nil {
		return nil, fmt.Errorf("service: serve: the checkpoint of partition %d in %s: %w", c.Partition, s.opt.Checkpoints, err)
	}
	sum, err := pipeline.ModelDigest(c.State)
	if err != nil {
		return nil, fmt.Errorf("service: serve: the checkpoint of partition %d in %s: %w", c.Partition, s.opt.Checkpoints, err)
	}
	return &Predictor{Partition: c.Partition, Events: p.Seen(), Time: c.Created, SHA256: sum, p: p}, nil
}

// publish makes models the ones served, and their reports the snapshot.
func (s *Replica) publish(models map[int32]*Predictor, source string) {
	order := slices.Sorted(maps.Keys(models))
	sv := NewCopies(len(order), Keyed(s.opt.Config))
	for _, part := range order {
		sv.Add(part, models[part])
	}
	// Ready (Started) once there is a model to serve: /readyz keeps a
	// load balancer away from a replica that would answer 503.
	snap := &Snapshot{Time: time.Now(), Source: source, Started: len(sv.order) > 0, Reports: make([]Report, 0, len(sv.order))}
	for _, part := range sv.order {
		pr := models[part]
		r, err := pr.Report()
		if err != nil {
			s.logger.Error("serve: a model's report", "partition", part, "err", err)
			continue
		}
		snap.Reports = append(snap.Reports, Report{Source: source, Partition: part, Report: r})
	}
	s.copies.Store(sv)
	s.snap.Store(snap)
}

// Snapshot returns the reports of the models served; never nil once
// NewReplica returned.
func (s *Replica) Snapshot() *Snapshot { return s.snap.Load() }

// Predictor returns the model of partition that answers predictions, or,
// when only is true, the only model there is (see Copies.Pick).
func (s *Replica) Predictor(_ context.Context, partition int32, only bool, key []byte) (*Predictor, error) {
	sv := s.copies.Load()
	if sv == nil {
		return nil, ErrNoModel
	}
	return sv.Pick(partition, only, key)
}
