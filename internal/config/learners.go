package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/learners"
)

// Learner is one entry of `learners`: a name, an algorithm of the
// registry (package learners), and the algorithm's own keys, decoded into
// its parameter struct. A key the algorithm does not take is an error.
type Learner struct {
	Name      string `yaml:"name"`
	Algorithm string `yaml:"algorithm"`
	// Calibrate fits, on the stream, the probability of the positive
	// label given the learner's score (Platt scaling), for a learner
	// without a probability of its own: its predictions then carry one.
	Calibrate bool `yaml:"calibrate"`
	// Params holds the algorithm's keys: what learners.Lookup(Algorithm)'s
	// Params makes (a *online.PerceptronConfig for perceptron, ...); nil
	// when the algorithm is unknown, which validation reports.
	Params any `yaml:"-"`

	// decodeErr is what UnmarshalYAML could not decode (a value of the
	// wrong type), which Parse reports: the learner stays in the list,
	// at its index, with a zero in place of each such value.
	decodeErr error
}

// UnmarshalYAML decodes name and algorithm, then the algorithm's keys into
// its parameter struct. (Parse has checked every key against the
// registry before.)
func (l *Learner) UnmarshalYAML(n *yaml.Node) error {
	var head struct {
		Name      string `yaml:"name"`
		Algorithm string `yaml:"algorithm"`
		Calibrate bool   `yaml:"calibrate"`
	}
	err := n.Decode(&head)
	l.Name, l.Algorithm, l.Calibrate, l.Params, l.decodeErr = head.Name, head.Algorithm, head.Calibrate, nil, nil
	if a, ok := learners.Lookup(head.Algorithm); ok {
		p := a.Params()
		err = errors.Join(err, n.Decode(p))
		l.Params = p
	}
	var te *yaml.TypeError
	if err != nil && !errors.As(err, &te) {
		return err
	}
	l.decodeErr = err
	return nil
}

// MarshalJSON writes the learner as one flat object of its name,
// algorithm and every parameter field by its Go name — the shape learner
// settings had before the registry, for every field any algorithm had
// then, so that the configuration fingerprint a checkpoint carries
// (service.Fingerprint) is the same for the same settings. A parameter
// field of a later algorithm is added by name.
func (l Learner) MarshalJSON() ([]byte, error) {
	flat := struct {
		Name      string
		Algorithm string
		Bias      bool
		Average   bool
		Margin    float64
		Loss      string
		Eta       float64
		Schedule  string
		Radius    float64
		BiasEta   float64
		Class     *experts.ClassSpec
		Experts   []string
		Horizon   int
		Seed      uint64
	}{Name: l.Name, Algorithm: l.Algorithm}
	if l.Params == nil {
		return l.withCalibrate(json.Marshal(flat))
	}
	// The parameter struct's fields by name into flat; any field flat
	// lacks is appended after flat's.
	pj, err := json.Marshal(l.Params)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(pj, &flat); err != nil {
		return nil, err
	}
	out, err := json.Marshal(flat)
	if err != nil {
		return nil, err
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(pj, &extra); err != nil {
		return nil, err
	}
	known := reflect.TypeOf(flat)
	var names []string
	for k := range extra {
		if _, ok := known.FieldByName(k); !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		out = out[:len(out)-1] // the closing brace
		out = fmt.Appendf(out, ",%q:%s}", k, extra[k])
	}
	return l.withCalibrate(out, nil)
}

// withCalibrate appends Calibrate to the object b when it is set: a
// learner without it has the digest it had before the key existed.
func (l Learner) withCalibrate(b []byte, err error) ([]byte, error) {
	if err != nil || !l.Calibrate {
		return b, err
	}
	return append(b[:len(b)-1], `,"Calibrate":true}`...), nil
}
