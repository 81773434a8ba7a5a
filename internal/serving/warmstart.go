package serving

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// WarmStart is a model file that new models start from (the service's
// Options.WarmStart, a new key's model with models per key) or that a
// Replica serves (ServeOptions.Model).
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
		var first string
		if own, err := w.Config(); err == nil && own != nil {
			if d, err := config.ModelDifference(own, c, "the model file", "this configuration"); err == nil && d != "" {
				first = "; the first difference is " + d
			}
		}
		return fmt.Errorf("the model %s (%s) was written by another model configuration (%s)%s: start from a model of this one, or use the configuration that wrote it",
			w.Path, w.Model.From, what, first)
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

// Config returns the configuration the model file carries (its model
// sections, checkpoint.Model.Config, with every other section at its
// default): nil, and no error, for a file without one (of format version
// 1, or a checkpoint exported without its configuration). An error says
// the file's configuration does not read.
func (w *WarmStart) Config() (*config.Config, error) {
	if len(w.Model.Config) == 0 {
		return nil, nil
	}
	c, err := config.Parse(w.Path+" (its configuration)", w.Model.Config)
	if err != nil {
		return nil, fmt.Errorf("the model %s: %w", w.Path, err)
	}
	return c, nil
}

// String says which model file w is, for logs.
func (w *WarmStart) String() string {
	return fmt.Sprintf("%s (sha256 %s)", w.Path, hex.EncodeToString(w.SHA256[:]))
}

// Fingerprint identifies the parts of a configuration a model's state
// depends on: how records are decoded (input), how events become vectors
// (features), the learners, and delayed labels. Sources, sinks and HTTP
// settings do not enter it: a model may move to another broker address.
// It is pipeline.Fingerprint, taken of the settings the digests in the
// model's state are (pipeline.SharedDigest, pipeline.LearnerDigest).
//
// With models per key, it is another (and another again with a global
// model): a partition's checkpoint then holds the models of its keys,
// which a model per partition cannot restore, and the other way round.
func Fingerprint(c *config.Config) [32]byte {
	fp := pipeline.Fingerprint(c)
	switch {
	case Keyed(c) && c.Models.Global:
		return sha256.Sum256(append(fp[:], "models.by: key, models.global"...))
	case Keyed(c):
		return sha256.Sum256(append(fp[:], "models.by: key"...))
	}
	return fp
}

// Keyed reports whether c gives each event key a model of its own
// (models.by: key).
func Keyed(c *config.Config) bool { return c.Models.By == "key" }
