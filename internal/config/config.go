// Package config loads streamlearn's YAML configuration: start from
// defaults, decode strictly (an unknown key is an error naming the key and
// its line), validate, and report every error of the file at once, each
// with the file name (Errors).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// Config is the whole file. The zero value is not valid: use Default or
// Load, which fill every default.
type Config struct {
	Input      Input      `yaml:"input"`
	Features   Features   `yaml:"features"`
	Learners   []Learner  `yaml:"learners"`
	Labels     Labels     `yaml:"labels"`
	Source     Source     `yaml:"source"`
	Sinks      Sinks      `yaml:"sinks"`
	HTTP       HTTP       `yaml:"http"`
	Checkpoint Checkpoint `yaml:"checkpoint"`
	Models     Models     `yaml:"models"`
	// Answer names the learner whose prediction is the filter's verdict
	// (see AnswerIndex): the `answer` of every prediction message and
	// every /v1/predict answer, and the learner whose mistakes and bound
	// a report names as the filter's. Empty: the first learner.
	Answer string `yaml:"answer"`
}

// Defaults.
const (
	DefaultBits = 18
	// MaxMaxBytes bounds input.max_bytes: a record is held whole.
	MaxMaxBytes = 64 << 20
	// MaxBits bounds features.bits: 2^24 slots are 128 MiB per weight
	// vector (an averaged Perceptron has two), so that a model's
	// checkpoint, written dense at worst, fits in checkpoint.MaxSize.
	MaxBits            = 24
	DefaultMaxBytes    = 1 << 20
	DefaultMaxAbsValue = event.DefaultMaxAbs
)

// Default returns the configuration used when no file is given: a
// Perceptron and plain AdaGrad (normalized: false), both with a bias, over
// 2^18 hashed slots, reading JSONL events. Plain AdaGrad is within a point
// of the most accurate learner on every real data set but Elec2, whose
// drift the Perceptron follows best; it is at or above Vowpal Wabbit's
// default accuracy on the four sets compared, costs a round of OGD, and
// has a regret bound the tracker checks, which the normalized variant has
// not (README, "Every learner at its defaults").
func Default() *Config {
	c := &Config{
		Source: Source{Kind: "embedded"},
		Learners: []Learner{
			{Name: "perceptron", Algorithm: "perceptron", Params: &online.PerceptronConfig{Bias: true}},
			{Name: "adagrad", Algorithm: "adagrad", Params: &online.AdaGradConfig{Bias: true, Normalized: new(false)}},
		},
	}
	c.fill()
	return c
}

// DefaultModelsMaxBytes is models.max_bytes when unset: the memory of
// the models per key of one partition, resident models and keys' index
// within half of it (Models.MaxBytes).
const DefaultModelsMaxBytes = 512 << 20

// fill sets defaults on zero values.
func (c *Config) fill() {
	if c.Models.By == "key" && c.Models.MaxBytes == 0 {
		c.Models.MaxBytes = DefaultModelsMaxBytes
	}
	if c.Features.Bits == 0 {
		c.Features.Bits = DefaultBits
	}
	if c.Features.Scale == "" {
		c.Features.Scale = "none"
	}
	if c.Features.Text.NGrams == 0 {
		c.Features.Text.NGrams = 1
	}
	if c.Input.MaxBytes == 0 {
		c.Input.MaxBytes = DefaultMaxBytes
	}
	if c.Input.MaxAbsValue == 0 {
		c.Input.MaxAbsValue = DefaultMaxAbsValue
	}
	if c.Labels.Delayed {
		if c.Labels.Wait == 0 {
			c.Labels.Wait = DefaultLabelWait
		}
		if c.Labels.MaxPending == 0 {
			c.Labels.MaxPending = DefaultLabelMaxPending
		}
	}
}

// Error is a configuration error: the file, the line (0 when unknown), the
// key path and what is wrong.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxFileBytes bounds the size of a configuration file: a configuration
// has a few hundred YAML nodes and a few kilobytes, and even one of
// MaxExpandedNodes nodes with comments fits. Load reads no more of a
// larger file than this, and Parse refuses it before parsing, which would
// take seconds and hundreds of megabytes.
const MaxFileBytes = 4 << 20

// Load reads, decodes and validates the file; its errors are Parse's.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates data; name is used in errors. A file with
// one error returns it as an *Error; with several, Errors: every one,
// sorted by line, but those an earlier one explains.
func Parse(name string, data []byte) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("larger than %d bytes (%d MiB; a configuration has a few kilobytes): refused", MaxFileBytes, MaxFileBytes>>20)}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, errEOF) || err.Error() == "EOF" {
			return nil, &Error{File: name, Msg: "empty file"}
		}
		return nil, yamlError(name, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if n := nodes(doc); n > MaxExpandedNodes {
		// Big without aliases (a long list of small items): the walks
		// and the decoding below are linear, but no configuration is
		// that big.
		return nil, &Error{File: name, Msg: fmt.Sprintf("has more than %d YAML nodes (a configuration has a few hundred): refused", MaxExpandedNodes)}
	}
	if n := expandedSize(doc, map[*yaml.Node]int{}); n > MaxExpandedNodes {
		// An alias bomb (anchors of aliases of aliases): every walk of
		// the tree below, and the decoding, would follow each alias.
		return nil, &Error{File: name, Msg: fmt.Sprintf("its aliases expand to more than %d YAML nodes (a configuration has a few hundred): refused", MaxExpandedNodes)}
	}
	if a := selfAlias(doc, map[*yaml.Node]bool{}); a != nil {
		// yaml's decoder refuses it too, but the key checks walk first.
		return nil, &Error{File: name, Line: a.Line, Msg: fmt.Sprintf("anchor %q contains itself", a.Value)}
	}
	p := newProblems()
	p.doc = doc
	checkKeys(p, doc, reflect.TypeFor[Config](), "")
	checkLearnerKeys(p, doc)
	c := new(Config)
	p.decodeErrors(name, doc.Decode(c))
	for _, l := range c.Learners {
		p.decodeErrors(name, l.decodeErr)
	}
	if n := valueAt(doc, "models.max_bytes"); n != nil && c.Models.By == "key" && c.Models.MaxBytes == 0 && n.Tag != "!!null" {
		// 0 is not "no bound", which there is not: the resident models
		// per key are always bounded in bytes.
		p.add(&Error{Line: n.Line, Key: "models.max_bytes", Msg: fmt.Sprintf("0 is no bound: leave the key out for the default, %d (%d MiB), or give the bytes of models per key a partition keeps resident (there is no unbounded setting)", DefaultModelsMaxBytes, DefaultModelsMaxBytes>>20)})
	}
	c.fill()
	c.check(p)
	if err := p.err(name); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeErrors adds the errors of decoding doc (p.doc) into the
// configuration, each type error on its own line, naming the key whose
// value is on that line. The decoder goes on past each, leaving a zero in
// its place; a later error at its key, or on its line when its key is not
// known, is left out.
func (p *problems) decodeErrors(name string, err error) {
	if err == nil {
		return
	}
	var msgs []string
	var walk func(err error)
	walk = func(err error) {
		switch e := err.(type) {
		case *yaml.TypeError:
			msgs = append(msgs, e.Errors...)
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		default:
			msgs = append(msgs, err.Error())
		}
	}
	walk(err)
	for _, msg := range msgs {
		e := yamlError(name, errors.New(msg)).(*Error)
		e.File = ""
		if e.Line > 0 {
			// The value yaml quotes (`many`) tells keys of one line apart.
			var value string
			if _, rest, ok := strings.Cut(e.Msg, "`"); ok {
				value, _, _ = strings.Cut(rest, "`")
			}
			e.Key = keyAtLine(p.doc, e.Line, value, "")
		}
		if e.Key != "" || !slices.ContainsFunc(p.list, func(r *Error) bool { return r.Line == e.Line && e.Line > 0 }) {
			// A value of the wrong shape (a list for a string) that
			// checkKeys named is not reported twice: its key is
			// explained (add), or, not known, its line has an error.
			p.add(e)
		}
		if e.Key == "" {
			// Which key it is is not known: none on its line is
			// trusted.
			p.typeLines[e.Line] = true
		}
	}
}

// valueAt returns the value node of the key at path ("models.max_bytes"),
// or nil when the document has none.
func valueAt(doc *yaml.Node, path string) *yaml.Node {
	n := doc
	for _, part := range strings.Split(path, ".") {
		if n = resolve(n); n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		pairs := mappingPairs(n)
		for j := 0; j+1 < len(pairs); j += 2 {
			if pairs[j].Value == part {
				next = pairs[j+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return resolve(n)
}
