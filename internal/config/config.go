// Package config loads streamlearn's YAML configuration: start from
// defaults, decode strictly (an unknown key is an error naming the key and
// its line), validate, and wrap every error with the file name.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/learners"
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
}

// Models says what a model is of, and where new models start.
type Models struct {
	// By is what each model learns from: "partition" (the default) gives
	// every partition of the source one model; "key" gives every event
	// key within a partition a model of its own (an event's key is its
	// `key` field), the replay of that key's events alone, as a spam
	// filter per user or per tenant. Keys stay on their partition on
	// every broker, so each key's events come in order.
	By string `yaml:"by"`
	// Max, with By "key", bounds the models in memory per partition
	// (default DefaultModelsMax): past it the least recently used is
	// evicted as its exact encoding, and decoded on its key's next event.
	Max int `yaml:"max"`
	// Idle, with By "key", evicts a model not used for that long, as Max
	// does; 0 (the default) keeps models until Max pushes them out.
	Idle time.Duration `yaml:"idle"`
	// Global, with By "key", adds a global model per partition, which
	// learns every event, beside the models per key: each learner's
	// prediction for a key is its key's model's or the global model's,
	// whichever has made fewer mistakes on the key so far (the global
	// one on a tie: a new key gets the global filter).
	Global bool `yaml:"global"`
	// SpillDir, with By "key", is the directory of the file evicted
	// models are written to (removed at once, so gone with the process:
	// the checkpoints hold the models durably); default the system's
	// temporary directory.
	SpillDir string `yaml:"spill_dir"`

	// WarmStart is a model file (`streamlearn export`, `replay --save`)
	// every new model starts from instead of an empty one, in `run` and
	// `replay` alike: the model of a partition without a checkpoint (or
	// reset, or rebuilt from its first record) goes on from the file's
	// weights, counts and tracker. A model restored from its checkpoint
	// is the checkpoint's. The file must be of this model configuration.
	WarmStart string `yaml:"warm_start"`
}

// Labels says whether labels may come after their events (the spam-filter
// loop): with Delayed, an event with an id, features and no label is
// predicted on arrival and waits for its label, a record with an id, a
// label and no features. Time is counted in records of the partition.
type Labels struct {
	Delayed bool `yaml:"delayed"`
	// Wait is how many records of its partition an event waits for its
	// label at most; default 100000.
	Wait int64 `yaml:"wait"`
	// MaxPending bounds the events waiting, per partition: past it the
	// oldest expires first. Default 1000000.
	MaxPending int `yaml:"max_pending"`
	// DefaultLabel, when set, is the label an expired event is learned
	// with ("no complaint means ham"); unset, expired events are dropped.
	// A label text as in events: 1, 0, -1, true, false, or a configured
	// input.positive or input.negative value.
	DefaultLabel *string `yaml:"default_label"`
}

// Defaults and limits of Labels.
const (
	DefaultLabelWait       = 100000
	DefaultLabelMaxPending = 1000000
	MaxLabelMaxPending     = 1 << 26 // about 67M events: more would not fit the memory of one process
)

// Input says how records are decoded.
type Input struct {
	// Format is jsonl, libsvm, csv or tsv; empty infers it from each file's
	// name and first line (replay) or means jsonl (streams).
	Format string `yaml:"format"`
	// LabelColumn is the CSV column holding the label; default "label" when
	// the header has it, else the last column.
	LabelColumn string `yaml:"label_column"`
	// Positive and Negative are label values meaning +1 and -1, on top of
	// the built-in 1/+1/true and 0/-1/false.
	Positive []string `yaml:"positive"`
	Negative []string `yaml:"negative"`
	// Classes, when set, makes the labels classes (multiclass): a label
	// is one of these names, exactly. Every learner then predicts a
	// class: the multiclass algorithms by themselves, the others one
	// versus the rest (a model per class, the class of the highest
	// score).
	Classes []string `yaml:"classes" json:",omitempty"` // omitted when empty: the digests of configurations without classes stay as they were
	// MaxBytes is the largest record accepted; default 1 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// MaxAbsValue is the largest magnitude of a feature value accepted;
	// records with a larger one are dead-lettered as "range". Default
	// 2^53−1 (event.DefaultMaxAbs, which says why); at least 1 and at
	// most 1e100 (event.MaxMaxAbs, which keeps every learner finite).
	MaxAbsValue float64 `yaml:"max_abs_value"`
}

// Features says how events become vectors.
type Features struct {
	// Bits sets the hashed space to 2^Bits slots; default 18.
	Bits uint `yaml:"bits"`
	// Scale is none (default), standard (running mean and variance,
	// updated before use) or l2.
	Scale string `yaml:"scale"`
	Text  Text   `yaml:"text"`
	// Dense, when > 0, is the required length of the dense `x` array.
	Dense int `yaml:"dense"`
}

// Text configures tokenization of the `text` field.
type Text struct {
	// NGrams: 1 (default) hashes words, n also every run of up to n words.
	NGrams int `yaml:"ngrams"`
}

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
	if err := n.Decode(&head); err != nil {
		return err
	}
	l.Name, l.Algorithm, l.Calibrate, l.Params = head.Name, head.Algorithm, head.Calibrate, nil
	if a, ok := learners.Lookup(head.Algorithm); ok {
		p := a.Params()
		if err := n.Decode(p); err != nil {
			return err
		}
		l.Params = p
	}
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

// Conn holds the connection settings shared by a source and its sinks
// (settings.Conn declares them). A sink of the source's transport that
// leaves them empty uses the source's.
type Conn = settings.Conn

// TLS is the `tls:` block of a connection (settings.TLS).
type TLS = settings.TLS

// SASL is the `sasl:` block of a Kafka connection (settings.SASL).
type SASL = settings.SASL

// Source is the live service's one source.
type Source struct {
	Kind string `yaml:"kind"` // kafka | nats | jetstream | file | embedded
	Conn `yaml:",inline"`
	// Port and StoreDir (kind embedded): `run` starts a NATS JetStream
	// server in its own process on 127.0.0.1:Port (default 4222; -1 picks
	// a free one), keeping its files in StoreDir (default a temporary
	// directory removed at exit), creates Stream (default EVENTS) on
	// Subject (default events) and reads it as a jetstream source with
	// Durable. A config can so be tried before a broker exists.
	Port     int    `yaml:"port"`
	StoreDir string `yaml:"store_dir"`
	// Topic and Group: Kafka topic and consumer group (default streamlearn).
	Topic string `yaml:"topic"`
	Group string `yaml:"group"`
	// Subject: NATS subject; Stream and Durable: JetStream stream and
	// durable consumer (default streamlearn).
	Subject string `yaml:"subject"`
	Stream  string `yaml:"stream"`
	Durable string `yaml:"durable"`
	// Path: a JSONL file (kind file).
	Path string `yaml:"path"`
	// Start is where a Kafka or JetStream source begins a partition its
	// consumer has no position for yet (a group without a committed
	// offset, a durable that does not exist): earliest (the default),
	// latest, offset:N or time:RFC3339. Once a position is committed the
	// consumer resumes from it, whatever Start says.
	Start string `yaml:"start"`
	// The Kafka consumer group's timing and a Kafka source's fetches
	// (kind kafka), and a JetStream source's fetches and acknowledgements
	// (kinds jetstream and embedded): their fields' documents say what
	// each key does and its default.
	settings.KafkaGroup     `yaml:",inline"`
	settings.KafkaFetch     `yaml:",inline"`
	settings.JetStreamFetch `yaml:",inline"`
	// CommitEvery and CommitInterval: without checkpoints, positions are
	// committed to the source every CommitEvery records or every
	// CommitInterval, whichever comes first (defaults 1000 and 1s); with
	// checkpoints, checkpoint.every decides (a commit follows each
	// checkpoint).
	CommitEvery    int           `yaml:"commit_every"`
	CommitInterval time.Duration `yaml:"commit_interval"`
}

// Sink is one output.
type Sink struct {
	Kind    string `yaml:"kind"` // kafka | nats | jetstream | file
	Conn    `yaml:",inline"`
	Topic   string `yaml:"topic"`
	Subject string `yaml:"subject"`
	Stream  string `yaml:"stream"`
	Path    string `yaml:"path"`
	// Every publishes a report every Every labeled events (reports only).
	Every int `yaml:"every"`
	// Interval publishes a report every Interval as well (reports only).
	Interval time.Duration `yaml:"interval"`
	// A Kafka sink's produce requests and the topic it creates (kind
	// kafka), and a JetStream sink's publishes (kind jetstream): their
	// fields' documents say what each key does and its default.
	settings.KafkaProduce     `yaml:",inline"`
	settings.KafkaTopic       `yaml:",inline"`
	settings.JetStreamPublish `yaml:",inline"`
}

// Sinks are the optional outputs.
type Sinks struct {
	Predictions *Sink `yaml:"predictions"`
	Reports     *Sink `yaml:"reports"`
	DeadLetters *Sink `yaml:"dead_letters"`
}

// HTTP is the API and metrics listener.
type HTTP struct {
	Addr string `yaml:"addr"`
	// TokenFile is a file holding a bearer token (surrounding white space
	// is trimmed); when set, every endpoint but the probes and the
	// dashboard's static files requires "Authorization: Bearer <token>"
	// (see package api). `streamlearn run` reads it at start; the
	// environment variable STREAMLEARN_HTTP_TOKEN and the flag
	// --http-token-file override it.
	TokenFile string `yaml:"token_file"`
}

// Checkpoint says where and how often state is saved.
type Checkpoint struct {
	// Dir keeps checkpoints in a local directory, one file per partition.
	Dir string `yaml:"dir"`
	// Bucket keeps them in a NATS JetStream Object Store bucket instead
	// (created when missing), reached with the source's NATS connection
	// settings, or at URL when the source is not NATS.
	Bucket string `yaml:"bucket"`
	URL    string `yaml:"url"`
	// Every: a checkpoint (and the commit it allows) every Every records
	// of a partition at most; default 100000, and every 5 seconds.
	Every int `yaml:"every"`
	// OnMismatch is what `run` does with a partition whose checkpoint does
	// not hold what the broker says was committed (none, one behind the
	// commit, one of another partition or stream): "fail" (the default)
	// stops with an error naming the partition; "reset" moves the
	// checkpoint aside and starts the model afresh from the committed
	// position, as `run --reset` does; "accept" restores the checkpoint
	// as it is, as `run --accept` does; "rebuild" learns the partition
	// again from the broker's log up to the committed position, as `run
	// --rebuild` does. Each logs what it drops, skips or relearns.
	OnMismatch string `yaml:"on_mismatch"`
	// OwnWait is how long `run` waits to own a partition's checkpoints
	// while another process owns them (a checkpoint directory is owned by
	// one process per partition) before it stops with an error naming
	// that process; default 30s.
	OwnWait time.Duration `yaml:"own_wait"`
	// Lease is the lifetime of a process's ownership of a partition's
	// checkpoints in a bucket: renewed every fifth of it, it is what a
	// process killed holds its partitions for after its last renewal.
	// Between 1s and 10s; default 10s.
	Lease time.Duration `yaml:"lease"`
}

// The bounds of checkpoint.lease: the checkpoint package's MinLease and
// MaxLease, which it checks again.
const (
	MinLease = time.Second
	MaxLease = 10 * time.Second
)

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

// DefaultModelsMax is models.max when unset: the models per key one
// partition keeps in memory.
const DefaultModelsMax = 10000

// fill sets defaults on zero values.
func (c *Config) fill() {
	if c.Models.By == "key" && c.Models.Max == 0 {
		c.Models.Max = DefaultModelsMax
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

// Load reads, decodes and validates the file.
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

// Parse decodes and validates data; name is used in errors.
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
	if err := checkKeys(name, doc, reflect.TypeFor[Config](), ""); err != nil {
		return nil, err
	}
	if err := checkLearnerKeys(name, doc); err != nil {
		return nil, err
	}
	c := new(Config)
	if err := doc.Decode(c); err != nil {
		// A type error: name the key whose value is on its line.
		e := yamlError(name, err)
		if ye, ok := e.(*Error); ok && ye.Line > 0 {
			// The value yaml quotes (`many`) tells keys of one line apart.
			var value string
			if _, rest, ok := strings.Cut(ye.Msg, "`"); ok {
				value, _, _ = strings.Cut(rest, "`")
			}
			ye.Key = keyAtLine(doc, ye.Line, value, "")
		}
		return nil, e
	}
	c.fill()
	if err := c.validate(); err != nil {
		var ve *Error
		if errors.As(err, &ve) {
			ve.File = name
			if ve.Line == 0 {
				ve.Line = lineOf(doc, ve.Key)
			}
		}
		return nil, err
	}
	return c, nil
}

var errEOF = errors.New("EOF")

// yamlError rewrites yaml.v3's "yaml: line N: msg" and "yaml: unmarshal
// errors:\n  line N: msg" into one line "file:N: msg".
func yamlError(name string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.TrimSpace(msg)
	if first, _, ok := strings.Cut(msg, "\n"); ok {
		msg = first
	}
	e := &Error{File: name, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, m, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				e.Line, e.Msg = n, m
			}
		}
	}
	return e
}

// keyAtLine returns the path of the key whose scalar value starts on line
// ("features.bits", "learners[0].eta") and is value, or "" when there is
// none, or more than one.
func keyAtLine(n *yaml.Node, line int, value, path string) string {
	var found []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Line == line && v.Kind == yaml.ScalarNode && v.Value == value {
					found = append(found, join(path, k.Value))
				}
				walk(v, join(path, k.Value))
			}
		case yaml.SequenceNode:
			for i, e := range n.Content {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(n, path)
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// MaxExpandedNodes bounds the nodes of a configuration, as written and
// with its aliases expanded (each alias counted as the nodes of its
// anchor): past it Parse refuses the file at once, as Kubernetes refuses
// YAML that expands past its limits, rather than walk and decode a tree
// exponential in the number of anchors. Its error says which of the two
// it is: the file's own nodes, or its aliases.
const MaxExpandedNodes = 100_000

// nodes returns the nodes of n as written, an alias counting one, or a
// number past MaxExpandedNodes when there are more.
func nodes(n *yaml.Node) int {
	total := 1
	for _, c := range n.Content {
		total += nodes(c)
		if total > MaxExpandedNodes {
			break
		}
	}
	return total
}

// expandedSize returns the nodes of n with its aliases expanded, in time
// linear in the nodes of the file: sizes holds each node's once known (-1
// while it is being counted, so that an anchor containing itself, which
// selfAlias reports, is not followed again). It stops counting past
// MaxExpandedNodes.
func expandedSize(n *yaml.Node, sizes map[*yaml.Node]int) int {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1
		}
		n = n.Alias
	}
	if s, ok := sizes[n]; ok {
		return max(s, 0)
	}
	sizes[n] = -1
	total := 1
	for _, c := range n.Content {
		total += expandedSize(c, sizes)
		if total > MaxExpandedNodes {
			break
		}
	}
	sizes[n] = total
	return total
}

// selfAlias returns an alias inside the node it refers to (`&w {weak: *w}`),
// or nil; active holds the nodes being walked.
func selfAlias(n *yaml.Node, active map[*yaml.Node]bool) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		if active[n.Alias] {
			return n
		}
		n = n.Alias
	}
	active[n] = true
	defer delete(active, n)
	for _, c := range n.Content {
		if a := selfAlias(c, active); a != nil {
			return a
		}
	}
	return nil
}

// mappingPairs returns the key and value nodes of a mapping, with YAML
// merge keys (`<<: *base`, `<<: [*a, *b]`) expanded: merged pairs first,
// the mapping's own after, so that a key given twice counts as the last.
func mappingPairs(n *yaml.Node) []*yaml.Node {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var merged, own []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag != "!!merge" {
			own = append(own, k, v)
			continue
		}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if v.Kind == yaml.SequenceNode {
			for _, e := range v.Content {
				merged = append(merged, mappingPairs(e)...)
			}
		} else {
			merged = append(merged, mappingPairs(v)...)
		}
	}
	return append(merged, own...)
}

// checkKeys walks the YAML tree against the Go type and reports the first
// key that no field takes.
func checkKeys(file string, n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[time.Duration]() {
			return nil
		}
		if t == reflect.TypeFor[Learner]() {
			return nil // its keys are its algorithm's: checkLearnerKeys
		}
		if t == reflect.TypeFor[learners.Spec]() {
			if n.Kind != yaml.MappingNode {
				return &Error{File: file, Line: n.Line, Key: path, Msg: "want a mapping of keys (algorithm and its keys)"}
			}
			return checkAlgorithmKeys(file, n, path)
		}
		if n.Kind != yaml.MappingNode {
			return &Error{File: file, Line: n.Line, Key: path, Msg: "want a mapping of keys"}
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				slices.Sort(known)
				return &Error{File: file, Line: k.Line, Key: join(path, k.Value),
					Msg: fmt.Sprintf("unknown key (known keys here: %s)", strings.Join(known, ", "))}
			}
			if err := checkKeys(file, v, ft, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return kindError(file, n, t, path)
		}
		for i, e := range n.Content {
			if err := checkKeys(file, e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			return kindError(file, n, t, path)
		}
		// A scalar of the wrong type (`bits: many`) is the decoder's to
		// report; Parse names its key.
	}
	return nil
}

// kindError reports a value of the wrong shape at path (a mapping or a
// list where a single value goes, or the other way round), which the
// decoder would report without its key: "want a list of strings, got a
// mapping".
func kindError(file string, n *yaml.Node, t reflect.Type, path string) error {
	got := "a single value " + strconv.Quote(n.Value)
	switch n.Kind {
	case yaml.MappingNode:
		got = "a mapping"
	case yaml.SequenceNode:
		got = "a list"
	}
	want, _ := describe(t)
	return &Error{File: file, Line: n.Line, Key: path, Msg: fmt.Sprintf("want %s, got %s", want, got)}
}

// describe names what a value of type t is written as, one and many:
// "a list of strings", "lists of strings".
func describe(t reflect.Type) (one, many string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration (as 5s)", "durations"
	case t.Kind() == reflect.String:
		return "a string", "strings"
	case t.Kind() == reflect.Bool:
		return "true or false", "booleans"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "a whole number", "whole numbers"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number", "numbers"
	case t.Kind() == reflect.Slice:
		_, elems := describe(t.Elem())
		return "a list of " + elems, "lists of " + elems
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "a mapping of keys", "mappings of keys"
	}
	return "a value", "values"
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for k, v := range yamlFields(f.Type) {
				m[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOf finds the line of the key at path ("learners[1].class.points")
// in the document, or of its nearest existing ancestor.
func lineOf(doc *yaml.Node, path string) int {
	line := 0
	n := doc
	for _, part := range splitPath(path) {
		switch {
		case part.index >= 0:
			if n.Kind != yaml.SequenceNode || part.index >= len(n.Content) {
				return line
			}
			n = n.Content[part.index]
			line = n.Line
		default:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part.key {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		}
	}
	return line
}

type pathPart struct {
	key   string
	index int
}

func splitPath(path string) []pathPart {
	var parts []pathPart
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			continue
		}
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			parts = append(parts, pathPart{key: key, index: -1})
		}
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			if n, err := strconv.Atoi(num); err == nil {
				parts = append(parts, pathPart{index: n})
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return parts
}
