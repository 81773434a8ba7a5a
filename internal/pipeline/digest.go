package pipeline

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/streamlearn/streamlearn/internal/config"
)

// The digests of what a model's state depends on. A checkpoint carries the
// Fingerprint of the whole model configuration; the pipeline's state
// (format version 3) carries the digest of the settings every learner
// shares and one per learner, so that a state written by another list of
// learners can be restored in part (UnmarshalBinaryReset). They are taken
// of the same JSON: the configuration's input, features, learners
// (config.Learner.MarshalJSON) and, with delayed labels, labels. Equal
// shared digests and equal learners, digest for digest in the same order,
// make equal fingerprints.

// delayedLabels returns what of c's labels a model depends on: nothing
// without delayed labels (so that fingerprints of configurations from
// before delayed labels stay as they were).
func delayedLabels(c *config.Config) *config.Labels {
	if !c.Labels.Delayed {
		return nil
	}
	l := c.Labels
	return &l
}

// Fingerprint identifies the parts of a configuration a model's state
// depends on: how records are decoded (input), how events become vectors
// (features), the learners, and delayed labels. Sources, sinks and HTTP
// settings do not enter it: a model may move to another broker address.
func Fingerprint(c *config.Config) [32]byte {
	return digestJSON(struct {
		Input    config.Input
		Features config.Features
		Learners []config.Learner
		Labels   *config.Labels `json:",omitempty"`
	}{c.Input, c.Features, c.Learners, delayedLabels(c)})
}

// SharedDigest is Fingerprint without the learners: the settings every
// learner's state depends on. A learner's state can only be kept across
// configurations of the same shared digest.
func SharedDigest(c *config.Config) [32]byte {
	return digestJSON(struct {
		Input    config.Input
		Features config.Features
		Labels   *config.Labels `json:",omitempty"`
	}{c.Input, c.Features, delayedLabels(c)})
}

// LearnerDigest identifies one learner's settings: its name, algorithm and
// parameters (for a Weighted-Majority over learners, its experts' names).
func LearnerDigest(l config.Learner) [32]byte { return digestJSON(l) }

func digestJSON(v any) [32]byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("pipeline: digest of the configuration: " + err.Error()) // plain structs: cannot fail
	}
	return sha256.Sum256(b)
}
