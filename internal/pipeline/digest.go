package pipeline

import (
	"crypto/sha256"
	"encoding/json"
	"slices"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/experts"
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
// configurations of the same shared digest. Besides the input, features
// and delayed labels, they include the domain of the learners over a
// hypothesis class (Domain): an event outside it is rejected before any
// learner sees it, so adding, dropping or changing such a learner can
// change the events every other learner learns from.
func SharedDigest(c *config.Config) [32]byte {
	return digestJSON(struct {
		Input    config.Input
		Features config.Features
		Labels   *config.Labels `json:",omitempty"`
		Domain   []string       `json:",omitempty"`
	}{c.Input, c.Features, delayedLabels(c), Domain(c)})
}

// legacySharedDigest is SharedDigest as the first builds of state format
// 3 took it, without the domain. For states of the same learners it is as
// good (the domain is theirs), and such states restore (sameShape).
func legacySharedDigest(c *config.Config) [32]byte {
	return digestJSON(struct {
		Input    config.Input
		Features config.Features
		Labels   *config.Labels `json:",omitempty"`
	}{c.Input, c.Features, delayedLabels(c)})
}

// Domain describes the events c's learners accept: the union of the
// domain terms (experts.ClassSpec.DomainTerms) of its learners over a
// hypothesis class, sorted; nil when no learner restricts them.
func Domain(c *config.Config) []string {
	var terms []string
	for _, l := range c.Learners {
		if h, ok := l.Params.(interface{ HypothesisClass() *experts.ClassSpec }); ok && h.HypothesisClass() != nil {
			terms = append(terms, h.HypothesisClass().DomainTerms()...)
		}
	}
	slices.Sort(terms)
	return slices.Compact(terms)
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
