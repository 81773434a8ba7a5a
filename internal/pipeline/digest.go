package pipeline

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strconv"

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
	return sharedDigest(c, domainOf(c, experts.ClassSpec.DomainTerms))
}

// sharedDigest is the digest of c's input, features and delayed labels
// and of domain; a nil domain leaves it out.
func sharedDigest(c *config.Config, domain []string) [32]byte {
	return digestJSON(struct {
		Input    config.Input
		Features config.Features
		Labels   *config.Labels `json:",omitempty"`
		Domain   []string       `json:",omitempty"`
	}{c.Input, c.Features, delayedLabels(c), domain})
}

// compatSharedDigests are SharedDigest as earlier builds of state format
// 3 took it: the first without the domain, the next with a grid's terms
// and the features unquoted (oldDomainTerms). For states of the same
// learners they are as good as SharedDigest (the domain is theirs), and
// such states restore (sameShape); not in part.
func compatSharedDigests(c *config.Config) [][32]byte {
	return [][32]byte{sharedDigest(c, nil), sharedDigest(c, domainOf(c, oldDomainTerms))}
}

// oldDomainTerms are the domain terms of the second builds of state
// format 3: "real F" for the grid kinds, the features unquoted.
func oldDomainTerms(s experts.ClassSpec) []string {
	var t []string
	switch s.Kind {
	case experts.KindThresholds, experts.KindIntervals:
		t = []string{"real " + s.Feature}
	case experts.KindStumps:
		for _, f := range s.Features {
			t = append(t, "real "+f)
		}
	case experts.KindConjunctions:
		for _, f := range s.Features {
			t = append(t, "boolean "+f)
		}
	case experts.KindTable:
		vs := slices.Clone(s.Domain)
		slices.Sort(vs)
		b := []byte("table " + s.Feature)
		for _, v := range vs {
			b = append(b, ' ')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		t = []string{string(b)}
	}
	slices.Sort(t)
	return slices.Compact(t)
}

// Domain describes the events c's learners accept: the union of the
// domain terms (experts.ClassSpec.DomainTerms) of its learners over a
// hypothesis class, sorted; nil when no learner restricts them.
func Domain(c *config.Config) []string { return domainOf(c, experts.ClassSpec.DomainTerms) }

// domainOf returns the sorted union of the terms of the classes of c's
// learners over a hypothesis class; nil when none has terms.
func domainOf(c *config.Config, terms func(experts.ClassSpec) []string) []string {
	var all []string
	for _, l := range c.Learners {
		if h, ok := l.Params.(interface{ HypothesisClass() *experts.ClassSpec }); ok && h.HypothesisClass() != nil {
			all = append(all, terms(*h.HypothesisClass())...)
		}
	}
	slices.Sort(all)
	return slices.Compact(all)
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
