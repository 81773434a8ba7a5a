package service

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// WarmStart is a model file the service's new models start from
// (Options.WarmStart).
type WarmStart struct {
	// Path names the file in errors and logs.
	Path string
	// Model is the file's content.
	Model *checkpoint.Model
	// SHA256 is the SHA-256 of the file, which the models' reports carry
	// (pipeline.Report.WarmStart).
	SHA256 [32]byte
	// Err, when not nil, says why the file cannot start models (it could
	// not be read, or is of another configuration): a partition that
	// needs a new model stops the service with it.
	Err error

	checked *config.Config // the configuration Check found it of
}

// LoadWarmStart reads and verifies the model file at path.
func LoadWarmStart(path string) (*WarmStart, error) {
	m, sum, err := checkpoint.ReadModel(path)
	if err != nil {
		return nil, err
	}
	return &WarmStart{Path: path, Model: m, SHA256: sum}, nil
}

// Check verifies that w, when not nil, is of c's model configuration and
// decodes into a pipeline of it, and says what differs otherwise.
func (w *WarmStart) Check(c *config.Config) error {
	if w == nil || w.checked == c {
		return nil // checked already (a command checks before it connects)
	}
	if w.Model.Fingerprint != pipeline.Fingerprint(c) {
		what := "the input, features, labels or learners differ"
		if ch, err := pipeline.CompareState(w.Model.State, c); err == nil {
			what = ch.String()
		}
		return fmt.Errorf("the model %s (%s) was written by another model configuration (%s): start from a model of this one, or use the configuration that wrote it",
			w.Path, w.Model.From, what)
	}
	p, err := pipeline.New(c)
	if err != nil {
		return err
	}
	if err := p.StartFrom(w.Model.State, w.SHA256); err != nil {
		return fmt.Errorf("the model %s: %w", w.Path, err)
	}
	w.checked = c
	return nil
}

// startWarm makes m, partition's new model (no checkpoint holds it), the
// warm start's model, when there is one. It is the one place a new
// model is made (restore, and the reset and rebuild it chooses).
func (s *Service) startWarm(partition int32, m *model) error {
	w := s.opt.WarmStart
	if w == nil {
		return nil
	}
	if w.Err != nil {
		return fmt.Errorf("service: partition %d has no checkpoint, and its model cannot start from the warm start: %w", partition, w.Err)
	}
	if err := m.startFrom(w.Model.State, w.SHA256); err != nil {
		return fmt.Errorf("service: partition %d: warm start: the model %s: %w", partition, w.Path, err)
	}
	if m.p != nil && s.opt.HistoryPoints > 0 && m.p.Tracker().History() == nil {
		// A file written without curves (replay --save): the dashboard's
		// curves start here.
		m.p.Tracker().EnableHistory(s.opt.HistoryPoints)
	}
	s.logger.Info("model started from the warm start", "partition", partition, "model", w.String(), "events", m.events())
	return nil
}

// String says which model file w is, for logs.
func (w *WarmStart) String() string {
	return fmt.Sprintf("%s (sha256 %s)", w.Path, hex.EncodeToString(w.SHA256[:]))
}

// Models returns, after Run, the checkpoint of every model as it ended,
// in the order of Reports: what `replay --save` writes as a model file
// (checkpoint.ModelOf).
func (s *Service) Models() ([]*checkpoint.Checkpoint, error) {
	return eachModel(s, "Models while Run runs", func(w *worker) (*checkpoint.Checkpoint, error) {
		t, err := w.take(nil)
		if err != nil {
			return nil, err
		}
		return t.complete()
	})
}

// warmAssigned makes, with a warm start, the model of every partition a
// consumer group assigned to the service that has none yet: the trained
// model serves before the partition brings a record.
func (s *Service) warmAssigned(ctx context.Context) error {
	if s.opt.WarmStart == nil {
		return nil
	}
	owned, live := s.assignments()
	if !live {
		return nil
	}
	for _, p := range owned {
		if _, ok := s.workers[p]; !ok {
			if _, err := s.worker(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}
