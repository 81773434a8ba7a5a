package serving

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// ServeIdle is how long serving stays active after a prediction request.
const ServeIdle = time.Minute

// ErrNoModel is returned by Predictor when there is no model to serve:
// the service has not learned from the partition (or from anything yet).
var ErrNoModel = errors.New("no model yet")

// A Predictor is the copy of one partition's model that answers
// predictions. It is safe for concurrent use.
type Predictor struct {
	// Partition is the source partition of the model.
	Partition int32
	// Events is how many records the model had processed when copied.
	Events uint64
	// Time is when it was copied.
	Time time.Time
	// SHA256 is the SHA-256 of the model's state (pipeline.Pipeline's
	// MarshalBinary, a checkpoint's State): equal digests are equal
	// models, in this process or another one serving the same
	// checkpoint.
	SHA256 [32]byte
	// Key, with models per key, is the key of the model when HasKey;
	// HasKey is false for a new key's model and with one model per
	// partition.
	Key    string
	HasKey bool

	mu sync.Mutex
	p  *pipeline.Pipeline // nil for a partition's models per key
	// keyed is a partition's models per key, and totals their report;
	// nil with one model.
	keyed  *keyedServing
	totals *pipeline.Report
	// global, with a global model beside the models per key, is its
	// copy: learner i's prediction is the global model's when
	// fromGlobal[i] (the key's choice, pipeline.Mixed).
	global     *Predictor
	fromGlobal []bool
	mix        []pipeline.MixReport // the key's choices, for its report
}

// GlobalSHA256 returns the digest of the global model whose predictions
// are mixed with the key's model's; ok is false without one.
func (pr *Predictor) GlobalSHA256() (sum [32]byte, ok bool) {
	if pr.global == nil {
		return sum, false
	}
	return pr.global.SHA256, true
}

// Prediction is one learner's prediction of an event.
type Prediction struct {
	Learner string
	online.Prediction
	// Class is the label as the configuration names it.
	Class string
	// Probability is the probability of the positive label, nil when the
	// learner has none (pipeline.Pipeline.Probability).
	Probability *float64
	// From, with a global model beside the models per key, is whose
	// prediction was served for the key: "own" (the key's model's) or
	// "global"; empty without a global model.
	From string
}

// Answer returns the index of the learner whose prediction is the
// filter's verdict (config.Config.AnswerIndex): Predict's predictions
// at that index, from the first the call appended.
func (pr *Predictor) Answer() int {
	if pr.p == nil {
		return 0
	}
	return pr.p.Answer()
}

// Predict appends to dst every learner's prediction of ev, without
// learning, and returns it; reason is non-empty (and nothing appended)
// when ev lies outside the domain of a configured hypothesis class.
func (pr *Predictor) Predict(dst []Prediction, ev *event.Event) ([]Prediction, event.Reason) {
	start := len(dst)
	pr.mu.Lock()
	dst, reason := pr.predict(dst, ev)
	pr.mu.Unlock()
	if reason != "" || pr.global == nil {
		return dst, reason
	}
	// The key's choice, learner by learner (the global copy has a lock
	// of its own: it serves every key).
	var g []Prediction
	if g, reason = pr.global.Predict(nil, ev); reason != "" {
		return dst[:start], reason
	}
	for i := range dst[start:] {
		from := "own"
		if i < len(pr.fromGlobal) && pr.fromGlobal[i] {
			dst[start+i], from = g[i], "global"
		}
		dst[start+i].From = from
	}
	return dst, ""
}

// predict appends pr's own model's predictions of ev; pr.mu is held.
func (pr *Predictor) predict(dst []Prediction, ev *event.Event) ([]Prediction, event.Reason) {
	preds, reason := pr.p.Predict(ev)
	if reason != "" {
		return dst, reason
	}
	for i, p := range preds {
		out := Prediction{Learner: pr.p.Name(i), Prediction: p, Class: pr.p.LabelName(p.Label)}
		if prob, ok := pr.p.Probability(i, p); ok && !math.IsNaN(prob) {
			out.Probability = &prob
		}
		dst = append(dst, out)
	}
	return dst, ""
}

// Report returns the report of pr's model, or the totals of its models
// per key.
func (pr *Predictor) Report() (pipeline.Report, error) {
	if pr.totals != nil {
		return *pr.totals, nil
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r, err := pr.p.Report()
	r.Mix = pr.mix
	return r, err
}

// Copies is the set of Predictors published at one moment, one per
// partition: by a service's snapshot, or by a Replica's load. It is
// immutable once published and safe for concurrent use.
type Copies struct {
	byPartition map[int32]*Predictor
	order       []int32 // ascending
	keyed       bool    // models per key
}

// NewCopies returns an empty set for up to n partitions' copies; keyed
// says the copies are of models per key (models.by: key).
func NewCopies(n int, keyed bool) *Copies {
	return &Copies{byPartition: make(map[int32]*Predictor, n), order: make([]int32, 0, n), keyed: keyed}
}

// Add makes pr the copy of partition. The partitions must be added in
// ascending order, each once, before the set is published.
func (c *Copies) Add(partition int32, pr *Predictor) {
	c.order = append(c.order, partition)
	c.byPartition[partition] = pr
}

// Of returns the copy of partition; false when there is none.
func (c *Copies) Of(partition int32) (*Predictor, bool) {
	pr, ok := c.byPartition[partition]
	return pr, ok
}

// Pick returns the Predictor of partition, or, when only is true, of the
// only model there is. With models per key, it is the model of key in
// partition, or, when only, in the partition that has it; the model of a
// new key (empty, or the warm start) when none has. The errors are
// ErrNoModel (wrapped) when there is no model to serve, and one naming
// the partitions when only is true and there are several.
func (c *Copies) Pick(partition int32, only bool, key []byte) (*Predictor, error) {
	if only && c.keyed {
		if len(c.order) == 0 {
			return nil, ErrNoModel
		}
		for _, part := range c.order {
			if pr := c.byPartition[part]; pr.has(key) {
				return pr.forKey(key)
			}
		}
		return c.byPartition[c.order[0]].forKey(key) // a new key's model
	}
	if only {
		switch len(c.order) {
		case 0:
			return nil, ErrNoModel
		case 1:
			return c.byPartition[c.order[0]], nil
		default:
			parts := make([]string, len(c.order))
			for i, p := range c.order {
				parts[i] = strconv.Itoa(int(p))
			}
			return nil, fmt.Errorf("%d models (partitions %s): choose one with ?partition=N", len(c.order), strings.Join(parts, ", "))
		}
	}
	if pr, ok := c.byPartition[partition]; ok {
		return pr.forKey(key)
	}
	return nil, fmt.Errorf("%w for partition %d", ErrNoModel, partition)
}

// NewPredictor returns a copy of p, partition's model, for serving; p
// stays the caller's.
func NewPredictor(partition int32, p *pipeline.Pipeline) (*Predictor, error) {
	q, sum, err := p.CloneDigest()
	if err != nil {
		return nil, err
	}
	return &Predictor{Partition: partition, Events: q.Seen(), SHA256: sum, p: q}, nil
}
