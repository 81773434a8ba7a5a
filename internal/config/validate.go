package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/learners"
	"github.com/streamlearn/streamlearn/internal/online"
)

func errAt(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

func oneOf(key, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	named := slices.DeleteFunc(slices.Clone(allowed), func(a string) bool { return a == "" })
	msg := fmt.Sprintf("%q is not one of %s", v, strings.Join(named, ", "))
	if len(named) < len(allowed) {
		msg += " (or absent)"
	}
	return errAt(key, "%s", msg)
}

// settingAt turns a settings.Error of the block at prefix ("source",
// "sinks.predictions") into an Error at its full key.
func settingAt(prefix string, err error) error {
	if se, ok := err.(*settings.Error); ok {
		return errAt(prefix+"."+se.Key, "%s", se.Msg)
	}
	return err
}

// validate checks c, returning every problem (Errors) or the one, or nil.
func (c *Config) validate() error {
	p := newProblems()
	c.check(p)
	return p.err("")
}

// check checks c section by section, adding every problem to p; a
// check that depends on a key found wrong (the keys of a sink of an
// unknown kind) is left out.
func (c *Config) check(p *problems) {
	for _, check := range []func(*problems){c.validateInput, c.validateFeatures, c.validateLearners, c.validateAnswer, c.validateSource,
		c.validateSinks, c.validateModels, c.validateCheckpoint} {
		check(p)
	}
}

// validateInput checks input, labels and input.classes.
func (c *Config) validateInput(p *problems) {
	p.add(oneOf("input.format", c.Input.Format, "", "jsonl", "libsvm", "csv", "tsv"))
	if c.Input.MaxBytes < 0 {
		p.add(errAt("input.max_bytes", "must be positive"))
	}
	if c.Input.MaxBytes > MaxMaxBytes {
		p.add(errAt("input.max_bytes", "%d is above %d (64 MiB): a record of that size is held in memory whole, by every reader", c.Input.MaxBytes, MaxMaxBytes))
	}
	if v := c.Input.MaxAbsValue; !(v >= 1 && v <= event.MaxMaxAbs) {
		p.add(errAt("input.max_abs_value", "%g is outside [1, 1e100]", v))
	}
	c.Labels.validate(c, p)
	for _, pos := range c.Input.Positive {
		if slices.Contains(c.Input.Negative, pos) {
			p.add(errAt("input.positive", "%q is also listed as negative", pos))
			break
		}
	}
	c.validateClasses(p)
}

// validateFeatures checks features.
func (c *Config) validateFeatures(p *problems) {
	if c.Features.Bits < 1 || c.Features.Bits > MaxBits {
		msg := fmt.Sprintf("%d is outside 1..%d", c.Features.Bits, MaxBits)
		if c.Features.Bits <= online.MaxBits {
			msg += fmt.Sprintf(": 2^%d slots take %d MiB per weight vector, and a model's checkpoint must fit in 1 GiB",
				c.Features.Bits, 8<<c.Features.Bits>>20)
		}
		p.add(errAt("features.bits", "%s", msg))
	}
	p.add(oneOf("features.scale", c.Features.Scale, "none", "standard", "l2"))
	if n := c.Features.Text.NGrams; n < 1 || n > 8 {
		p.add(errAt("features.text.ngrams", "%d is outside 1..8", n))
	}
	if c.Features.Dense < 0 {
		p.add(errAt("features.dense", "must not be negative"))
	}
}

// validateLearners checks that there are learners, each with its own name,
// and each learner's keys.
func (c *Config) validateLearners(p *problems) {
	if len(c.Learners) == 0 {
		p.add(errAt("learners", "configure at least one learner"))
		return
	}
	seen := map[string]int{}
	for i, l := range c.Learners {
		key := fmt.Sprintf("learners[%d]", i)
		if j, dup := seen[l.Name]; dup {
			p.add(errAt(key+".name", "%q is also the name of learners[%d]", l.Name, j))
		} else if l.Name == "" {
			p.add(errAt(key+".name", "every learner needs a name"))
		} else {
			seen[l.Name] = i
		}
		p.add(l.validate(key, seen))
	}
}

// validateSource checks source: its kind, the keys of an embedded server,
// start, the connection and the client knobs.
func (c *Config) validateSource(p *problems) {
	s := &c.Source
	if err := oneOf("source.kind", s.Kind, "", "kafka", "nats", "jetstream", "file", "embedded"); err != nil {
		// The rest are checked against the kind.
		p.add(err)
		return
	}
	s.validateRequired(p)
	if s.Kind == "embedded" {
		s.validateEmbedded(p)
	} else if s.Port != 0 {
		p.add(errAt("source.port", "an embedded server's key; source.kind is %q", s.Kind))
	}
	if err := ValidStart(s.Kind, s.Start); err != nil {
		p.add(errAt("source.start", "%s", err))
	}
	if err := s.Conn.Validate(); err != nil {
		p.add(settingAt("source", err))
	}
	s.validateTuning(p)
	p.add(c.validateAckBatch())
}

// validateRequired reports each key without a default that the source's
// kind needs: a Kafka source's brokers and topic, a file source's path.
// run would stop on them at start; check says so first, with their line.
func (s *Source) validateRequired(p *problems) {
	needKeys(p, "source", s.Kind,
		need{"kafka", "brokers", len(s.Brokers) > 0, "a Kafka source needs brokers (host:port, such as [127.0.0.1:9092])"},
		need{"kafka", "topic", s.Topic != "", "a Kafka source needs a topic"},
		need{"file", "path", s.Path != "", "a file source needs a path"})
}

// need is a key without a default that a kind of source or sink needs.
type need struct {
	kind, key string
	set       bool
	msg       string
}

// needKeys reports each key of needs, of the block at prefix of kind kind,
// that is not set.
func needKeys(p *problems, prefix, kind string, needs ...need) {
	for _, n := range needs {
		if n.kind == kind && !n.set {
			p.add(errAt(prefix+"."+n.key, "%s", n.msg))
		}
	}
}

// validateEmbedded refuses the keys of a source of kind embedded that
// connect elsewhere, and a port out of range.
func (s *Source) validateEmbedded(p *problems) {
	if s.URL != "" || len(s.Brokers) > 0 {
		p.add(errAt("source.url", "an embedded server runs in this process: give port (and store_dir), not url or brokers"))
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"tls", s.TLS != nil}, {"sasl", s.SASL != nil}, {"user", s.User != ""}, {"password", s.Password != ""},
		{"token", s.Token != ""}, {"nkey_seed_file", s.NKeySeedFile != ""}, {"creds_file", s.CredsFile != ""},
		{"topic", s.Topic != ""}, {"group", s.Group != ""}, {"path", s.Path != ""}} {
		if k.set {
			p.add(errAt("source."+k.key, "not a key of an embedded server (its keys: port, store_dir, subject, stream, durable, start, connect_timeout)"))
		}
	}
	if port := s.Port; port < -1 || port > 65535 {
		p.add(errAt("source.port", "%d is outside -1..65535 (0: 4222; -1: a free port)", port))
	}
}

// validateSinks checks each configured sink.
func (c *Config) validateSinks(p *problems) {
	for name, s := range map[string]*Sink{"predictions": c.Sinks.Predictions, "reports": c.Sinks.Reports, "dead_letters": c.Sinks.DeadLetters} {
		if s == nil {
			continue
		}
		key := "sinks." + name
		if err := oneOf(key+".kind", s.Kind, "kafka", "nats", "jetstream", "file"); err != nil {
			// Its keys are its kind's.
			p.add(err)
			continue
		}
		s.validateTuning(key, p)
		s.validateRequired(key, p)
		if s.Every < 0 {
			p.add(errAt(key+".every", "must not be negative"))
		}
		if s.Interval < 0 {
			p.add(errAt(key+".interval", "must not be negative"))
		}
	}
}

// validateRequired reports each key without a default that the sink at
// key needs: a file sink's path, a Kafka sink's topic, a NATS sink's
// subject, a JetStream sink's stream and subject.
func (s *Sink) validateRequired(key string, p *problems) {
	needKeys(p, key, s.Kind,
		need{"file", "path", s.Path != "", "a file sink needs a path"},
		need{"kafka", "topic", s.Topic != "", "a Kafka sink needs a topic"},
		need{"nats", "subject", s.Subject != "", "a NATS sink needs a subject"},
		need{"jetstream", "stream", s.Stream != "", "a JetStream sink needs a stream"},
		need{"jetstream", "subject", s.Subject != "", "a JetStream sink needs a subject"})
}

// validateModels checks models.
func (c *Config) validateModels(p *problems) {
	m := c.Models
	if err := oneOf("models.by", m.By, "", "partition", "key"); err != nil {
		p.add(err)
		return
	}
	if m.By != "key" {
		for _, k := range []struct {
			key, msg string
			set      bool
		}{
			{"models.max", "bounds the models per key", m.Max != 0},
			{"models.max_bytes", "bounds the memory of the models per key", m.MaxBytes != 0},
			{"models.idle", "evicts models per key", m.Idle != 0},
			{"models.global", "a global model beside the models per key", m.Global},
			{"models.spill_dir", "holds evicted models per key", m.SpillDir != ""},
		} {
			if k.set {
				p.add(errAt(k.key, "%s: set models.by: key", k.msg))
			}
		}
		return
	}
	if m.Global && c.Labels.Delayed {
		p.add(errAt("models.global", "not with delayed labels (labels.delayed) yet: the choice between a key's model and the global one is scored as each label comes"))
	}
	if m.Max < 0 {
		p.add(errAt("models.max", "must not be negative"))
	}
	if m.MaxBytes < 0 {
		p.add(errAt("models.max_bytes", "must not be negative"))
	}
	if m.Idle < 0 {
		p.add(errAt("models.idle", "must not be negative"))
	}
}

// validateCheckpoint checks checkpoint, and the source's commits it
// replaces.
func (c *Config) validateCheckpoint(p *problems) {
	if c.Checkpoint.Dir != "" || c.Checkpoint.Bucket != "" {
		if c.Source.CommitEvery != 0 {
			p.add(errAt("source.commit_every", "with checkpoints a commit follows each checkpoint: set checkpoint.every instead"))
		}
		if c.Source.CommitInterval != 0 {
			p.add(errAt("source.commit_interval", "with checkpoints a commit follows each checkpoint: set checkpoint.every instead"))
		}
	}
	if c.Checkpoint.Dir != "" && c.Checkpoint.Bucket != "" {
		p.add(errAt("checkpoint.bucket", "set dir or bucket, not both"))
	}
	if c.Checkpoint.Bucket != "" && c.Checkpoint.URL == "" && c.Source.Kind != "nats" && c.Source.Kind != "jetstream" && c.Source.Kind != "embedded" {
		p.add(errAt("checkpoint.url", "a bucket needs a NATS server: set url (the source is not NATS)"))
	}
	if c.Checkpoint.Every < 0 {
		p.add(errAt("checkpoint.every", "must not be negative"))
	}
	if c.Checkpoint.OwnWait < 0 {
		p.add(errAt("checkpoint.own_wait", "must not be negative"))
	}
	if l := c.Checkpoint.Lease; l != 0 {
		switch {
		case c.Checkpoint.Bucket == "":
			p.add(errAt("checkpoint.lease", "a lease is how a bucket's partitions are owned: set it with bucket (a directory is owned by a lock, released when its process dies)"))
		case l < MinLease || l > MaxLease:
			p.add(errAt("checkpoint.lease", "%v is not between %v and %v", l, MinLease, MaxLease))
		}
	}
	if m := c.Checkpoint.OnMismatch; m != "" {
		p.add(oneOf("checkpoint.on_mismatch", m, "fail", "reset", "accept", "rebuild"))
	}
}

// validator is a block of settings.
type validator interface{ Validate() error }

// onlyFor refuses, at prefix.key, the first setting of block (a settings
// struct) given when kind is not one of kinds; format says so, given the
// kind.
func onlyFor(prefix, kind string, block validator, format string, kinds ...string) error {
	if slices.Contains(kinds, kind) {
		return nil
	}
	if k := settings.FirstSet(block); k != "" {
		return errAt(prefix+"."+k, format, kind)
	}
	return nil
}

// validateTuning checks the source's client knobs: each block only for
// the kinds it tunes, then the values.
func (s *Source) validateTuning(p *problems) {
	kafka, js := []string{"kafka"}, []string{"jetstream", "embedded"}
	for _, b := range []struct {
		block  validator
		format string
		kinds  []string
	}{
		{s.KafkaGroup, "tunes a Kafka consumer group; source.kind is %q", kafka},
		{s.KafkaFetch, "tunes a kafka client; the kind is %q", kafka},
		{s.JetStreamFetch, "tunes a jetstream or embedded client; the kind is %q", js},
	} {
		if err := onlyFor("source", s.Kind, b.block, b.format, b.kinds...); err != nil {
			p.add(err)
			continue
		}
		p.add(settingAt("source", b.block.Validate()))
	}
	if s.CommitEvery < 0 {
		p.add(errAt("source.commit_every", "must not be negative"))
	}
	if s.CommitInterval < 0 {
		p.add(errAt("source.commit_interval", "must not be negative"))
	}
}

// validateAckBatch refuses a JetStream ack_batch that lets more records
// go unacknowledged than max_ack_pending: an acknowledgement goes out
// every ack_batch commits, each of up to commit_every records (with
// checkpoints, checkpoint.every), and the server stops delivering at
// max_ack_pending unacknowledged messages, which would stop the run.
func (c *Config) validateAckBatch() error {
	s := c.Source
	if s.AckBatch <= 1 {
		return nil
	}
	per, what := s.CommitEvery, "source.commit_every"
	if per == 0 {
		per = 1000
	}
	if c.Checkpoint.Dir != "" || c.Checkpoint.Bucket != "" {
		per, what = c.Checkpoint.Every, "checkpoint.every"
		if per == 0 {
			per = 100000
		}
	}
	fetch := cmp.Or(s.FetchBatch, settings.DefaultFetchBatch)
	pending := cmp.Or(s.MaxAckPending, settings.DefaultMaxAckPending)
	if s.AckBatch*per+fetch >= pending {
		return errAt("source.ack_batch", "%d commits of up to %d records (%s) and a fetch of %d leave more messages unacknowledged than max_ack_pending %d: the server would stop delivering; lower ack_batch or raise max_ack_pending",
			s.AckBatch, per, what, fetch, pending)
	}
	return nil
}

// validateTuning checks a sink's client knobs, each block only for the
// kind it tunes, then their values; key names the sink.
func (s *Sink) validateTuning(key string, p *problems) {
	for _, b := range []struct {
		block  validator
		format string
		kind   string
	}{
		{s.KafkaProduce, "tunes a kafka client; the kind is %q", "kafka"},
		{s.JetStreamPublish, "tunes a jetstream client; the kind is %q", "jetstream"},
		{s.KafkaTopic, "applies to a kafka sink's topic; the kind is %q", "kafka"},
	} {
		if err := onlyFor(key, s.Kind, b.block, b.format, b.kind); err != nil {
			p.add(err)
			continue
		}
		p.add(settingAt(key, b.block.Validate()))
	}
}

// validateClasses checks input.classes (multiclass labels) and what
// cannot go with them.
func (c *Config) validateClasses(p *problems) {
	classes := c.Input.Classes
	if len(classes) == 0 {
		for i, l := range c.Learners {
			if a, ok := learners.Lookup(l.Algorithm); ok && a.Multiclass {
				p.add(errAt(fmt.Sprintf("learners[%d].algorithm", i), "%s predicts one of several classes: list them in input.classes", l.Algorithm))
			}
		}
		return
	}
	switch {
	case len(classes) < 2 || len(classes) > event.MaxClasses:
		p.add(errAt("input.classes", "%d classes: want 2 to %d", len(classes), event.MaxClasses))
		return
	case len(c.Input.Positive) > 0 || len(c.Input.Negative) > 0:
		p.add(errAt("input.classes", "set classes, or positive and negative labels, not both"))
		return
	case c.Labels.Delayed:
		p.add(errAt("input.classes", "multiclass labels do not come later yet: labels.delayed needs two classes (positive and negative)"))
		return
	}
	for i, name := range classes {
		key := fmt.Sprintf("input.classes[%d]", i)
		switch j := slices.Index(classes, name); {
		case name == "":
			p.add(errAt(key, "an empty class name (an empty label means unlabeled)"))
		case strings.ContainsAny(name, " \t\r\n,#"):
			p.add(errAt(key, "%q: a class name has no blank, comma or # (CSV, TSV and LIBSVM records could not name it)", name))
		case j < i:
			p.add(errAt(key, "%q is also input.classes[%d]", name, j))
		}
	}
	for i, l := range c.Learners {
		key := fmt.Sprintf("learners[%d]", i)
		if l.Calibrate {
			p.add(errAt(key+".calibrate", "fits the probability of a positive label: there are classes (input.classes)"))
		}
		if wm, ok := l.Params.(*learners.WeightedMajorityParams); ok && len(wm.Experts) > 0 {
			p.add(errAt(key+".experts", "weighted-majority over learners weighs two labels' votes: with classes (input.classes), give it a hypothesis class, or drop it"))
		}
	}
}

// validate checks one learner through its algorithm's registry entry;
// seen holds the names of the learners configured before it
// (Weighted-Majority's experts must come first, which rules out cycles and
// fixes the order in which learners predict).
func (l *Learner) validate(key string, seen map[string]int) error {
	a, ok := learners.Lookup(l.Algorithm)
	switch {
	case l.Algorithm == "":
		return errAt(key+".algorithm", "missing (one of %s)", strings.Join(learners.Names(), ", "))
	case !ok:
		msg := fmt.Sprintf("%q is not one of %s", l.Algorithm, strings.Join(learners.Names(), ", "))
		if near := event.Nearest(l.Algorithm, learners.Names()); near != "" {
			msg += fmt.Sprintf(": did you mean %s?", near)
		}
		return errAt(key+".algorithm", "%s", msg)
	case a.Validate == nil:
		return nil
	}
	// seen holds this learner too; weighted-majority refuses itself as an
	// expert by name.
	prior := slices.Collect(maps.Keys(seen))
	return keyed(key, a.Validate(l.Params, learners.Env{Name: l.Name, Prior: prior}))
}

// keyed turns an algorithm's "key: message" error into an error at that
// key of learner key (or at the learner when the message names no key).
func keyed(key string, err error) error {
	if err == nil {
		return nil
	}
	// Keys nest: adaboost-ol's "weak: loss: ..." is at key.weak.loss, and
	// "class: class.points: ..." at key.class.points.
	msg, last := err.Error(), ""
	for {
		k, m, ok := strings.Cut(msg, ": ")
		if !ok || strings.ContainsAny(k, " \"") {
			return errAt(key, "%s", msg)
		}
		if rest, ok := strings.CutPrefix(k, last+"."); ok && last != "" {
			k = rest
		}
		key, msg, last = key+"."+k, m, k
	}
}

// checkLearnerKeys adds to p the keys that a learner's algorithm does not
// use: `class` on a perceptron is a mistake, not something to ignore.
func checkLearnerKeys(p *problems, doc *yaml.Node) {
	var list *yaml.Node
	if doc.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if doc.Content[i].Value == "learners" {
				list = doc.Content[i+1]
			}
		}
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		return
	}
	for i, n := range list.Content {
		checkAlgorithmKeys(p, n, fmt.Sprintf("learners[%d]", i), "name", "calibrate")
	}
}

// checkAlgorithmKeys checks the keys of a mapping that names an algorithm
// of the registry (a learner, or a learner inside another's keys, such as
// adaboost-ol's weak): each must be one of the algorithm's, or algorithm
// itself, or one of also. It adds every other key to p.
func checkAlgorithmKeys(p *problems, n *yaml.Node, path string, also ...string) {
	pairs := mappingPairs(n)
	alg := ""
	for j := 0; j+1 < len(pairs); j += 2 {
		if pairs[j].Value == "algorithm" {
			alg = pairs[j+1].Value
		}
	}
	a, ok := learners.Lookup(alg)
	if !ok {
		return // validate reports the algorithm itself, and no key of it
	}
	keys, types := a.Keys()
	for j := 0; j+1 < len(pairs); j += 2 {
		k, v := pairs[j], pairs[j+1]
		if k.Value == "algorithm" || slices.Contains(also, k.Value) {
			continue
		}
		t, ok := types[k.Value]
		if !ok {
			its := "none"
			if len(keys) > 0 {
				its = strings.Join(keys, ", ")
			}
			p.add(&Error{Line: k.Line, Key: path + "." + k.Value,
				Msg: fmt.Sprintf("not used by algorithm %s (its keys: %s)", alg, its)})
			continue
		}
		checkKeys(p, v, t, path+"."+k.Value)
	}
}

func (l *Labels) validate(c *Config, p *problems) {
	if !l.Delayed {
		if l.Wait != 0 || l.MaxPending != 0 || l.DefaultLabel != nil {
			p.add(errAt("labels", "wait, max_pending and default_label need delayed: true"))
		}
		return
	}
	if l.Wait < 1 {
		p.add(errAt("labels.wait", "%d: want at least 1 record", l.Wait))
	}
	if l.MaxPending < 1 || l.MaxPending > MaxLabelMaxPending {
		p.add(errAt("labels.max_pending", "%d is outside 1..%d", l.MaxPending, MaxLabelMaxPending))
	}
	if l.DefaultLabel != nil {
		ec := event.Config{Positive: c.Input.Positive, Negative: c.Input.Negative}
		if _, err := ec.ParseLabel(*l.DefaultLabel); err != nil {
			p.add(errAt("labels.default_label", "%v", err))
		}
	}
}

// ValidStart checks start, a source's start position (source.start, the
// --start flag of run and record), against the source's kind: every form
// for Kafka and JetStream; earliest and latest for core NATS, whose
// subscription receives what is published from then on whatever it says;
// earliest only for a file, read from its first record.
func ValidStart(kind, start string) error {
	st, err := settings.ParseStart(start)
	switch {
	case err != nil:
		return err
	case kind == "file" && st.Kind != settings.StartEarliest:
		return fmt.Errorf("%s: a file source reads from its first record (start is for Kafka and JetStream sources)", start)
	case kind == "nats" && st.Kind != settings.StartEarliest && st.Kind != settings.StartLatest:
		return fmt.Errorf("%s: a core NATS subscription receives what is published from now on (offset and time are for Kafka and JetStream sources)", start)
	}
	return nil
}
