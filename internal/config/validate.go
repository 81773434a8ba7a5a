package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

func errAt(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

func oneOf(key, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return errAt(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

func (c *Config) validate() error {
	if err := oneOf("input.format", c.Input.Format, "", "jsonl", "libsvm", "csv", "tsv"); err != nil {
		return err
	}
	if c.Input.MaxBytes < 0 {
		return errAt("input.max_bytes", "must be positive")
	}
	if v := c.Input.MaxAbsValue; !(v >= 1 && v <= event.MaxMaxAbs) {
		return errAt("input.max_abs_value", "%g is outside [1, 1e100]", v)
	}
	for _, p := range c.Input.Positive {
		if slices.Contains(c.Input.Negative, p) {
			return errAt("input.positive", "%q is also listed as negative", p)
		}
	}
	if c.Features.Bits < 1 || c.Features.Bits > online.MaxBits {
		return errAt("features.bits", "%d is outside 1..%d", c.Features.Bits, online.MaxBits)
	}
	if err := oneOf("features.scale", c.Features.Scale, "none", "standard", "l2"); err != nil {
		return err
	}
	if n := c.Features.Text.NGrams; n < 1 || n > 8 {
		return errAt("features.text.ngrams", "%d is outside 1..8", n)
	}
	if c.Features.Dense < 0 {
		return errAt("features.dense", "must not be negative")
	}
	if len(c.Learners) == 0 {
		return errAt("learners", "configure at least one learner")
	}
	seen := map[string]int{}
	for i, l := range c.Learners {
		key := fmt.Sprintf("learners[%d]", i)
		if l.Name == "" {
			return errAt(key+".name", "every learner needs a name")
		}
		if j, dup := seen[l.Name]; dup {
			return errAt(key+".name", "%q is also the name of learners[%d]", l.Name, j)
		}
		seen[l.Name] = i
		if err := l.validate(key, seen); err != nil {
			return err
		}
	}
	if err := oneOf("source.kind", c.Source.Kind, "", "kafka", "nats", "jetstream", "file"); err != nil {
		return err
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"source.session_timeout", c.Source.SessionTimeout},
		{"source.rebalance_timeout", c.Source.RebalanceTimeout},
		{"source.heartbeat_interval", c.Source.HeartbeatInterval},
		{"source.request_timeout", c.Source.RequestTimeout},
		{"source.join_group_backoff", c.Source.JoinGroupBackoff},
	} {
		switch {
		case d.v != 0 && c.Source.Kind != "kafka":
			return errAt(d.key, "tunes a Kafka consumer group; source.kind is %q", c.Source.Kind)
		case d.v < 0:
			return errAt(d.key, "must not be negative")
		}
	}
	for name, s := range map[string]*Sink{"predictions": c.Sinks.Predictions, "reports": c.Sinks.Reports, "dead_letters": c.Sinks.DeadLetters} {
		if s == nil {
			continue
		}
		key := "sinks." + name
		if err := oneOf(key+".kind", s.Kind, "kafka", "nats", "jetstream", "file"); err != nil {
			return err
		}
		if s.Kind == "file" && s.Path == "" {
			return errAt(key+".path", "a file sink needs a path")
		}
		if s.Every < 0 || s.Interval < 0 {
			return errAt(key+".every", "must not be negative")
		}
	}
	if c.Checkpoint.Dir != "" && c.Checkpoint.Bucket != "" {
		return errAt("checkpoint.bucket", "set dir or bucket, not both")
	}
	if c.Checkpoint.Bucket != "" && c.Checkpoint.URL == "" && c.Source.Kind != "nats" && c.Source.Kind != "jetstream" {
		return errAt("checkpoint.url", "a bucket needs a NATS server: set url (the source is not NATS)")
	}
	if c.Checkpoint.Every < 0 {
		return errAt("checkpoint.every", "must not be negative")
	}
	return nil
}

// validate checks one learner; seen holds the names of the learners
// configured before it (Weighted-Majority's experts must come first, which
// rules out cycles and fixes the order in which learners predict).
func (l *Learner) validate(key string, seen map[string]int) error {
	switch l.Algorithm {
	case "perceptron":
		return keyed(key, "perceptron", l.Perceptron().Validate())
	case "ogd":
		return keyed(key, "ogd", l.OGD().Validate())
	case "consistent", "halving", "soa":
		if l.Class == nil {
			return errAt(key+".class", "%s needs a hypothesis class", l.Algorithm)
		}
		if err := l.Class.Validate(); err != nil {
			return errAt(key+".class", "%v", err)
		}
	case "weighted-majority":
		switch {
		case l.Class != nil && len(l.Experts) > 0:
			return errAt(key+".experts", "give either class or experts, not both")
		case l.Class != nil:
			if err := l.Class.Validate(); err != nil {
				return errAt(key+".class", "%v", err)
			}
		case len(l.Experts) > 0:
			dup := map[string]bool{}
			for j, e := range l.Experts {
				if _, ok := seen[e]; !ok || e == l.Name {
					return errAt(fmt.Sprintf("%s.experts[%d]", key, j), "%q is not a learner configured before this one", e)
				}
				if dup[e] {
					return errAt(fmt.Sprintf("%s.experts[%d]", key, j), "%q is listed twice", e)
				}
				dup[e] = true
			}
		default:
			return errAt(key, "weighted-majority needs a class or a list of experts")
		}
		if l.Horizon < 0 {
			return errAt(key+".horizon", "must not be negative (0 means unknown: doubling trick)")
		}
		if l.Eta < 0 {
			return errAt(key+".eta", "must not be negative (0 means the theorem's rate)")
		}
	case "":
		return errAt(key+".algorithm", "missing (one of %s)", strings.Join(Algorithms, ", "))
	default:
		return errAt(key+".algorithm", "%q is not one of %s", l.Algorithm, strings.Join(Algorithms, ", "))
	}
	return nil
}

// keyed turns a learner package's "alg: key: message" error into an error
// at the key of learner key.
func keyed(key, alg string, err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), alg+": ")
	if k, m, ok := strings.Cut(msg, ": "); ok && !strings.Contains(k, " ") {
		return errAt(key+"."+k, "%s", m)
	}
	return errAt(key, "%s", msg)
}

// checkLearnerKeys rejects keys that the learner's algorithm does not use:
// `class` on a perceptron is a mistake, not something to ignore.
func checkLearnerKeys(file string, doc *yaml.Node) error {
	var learners *yaml.Node
	if doc.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if doc.Content[i].Value == "learners" {
				learners = doc.Content[i+1]
			}
		}
	}
	if learners == nil || learners.Kind != yaml.SequenceNode {
		return nil
	}
	for i, n := range learners.Content {
		if n.Kind != yaml.MappingNode {
			continue
		}
		alg := ""
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "algorithm" {
				alg = n.Content[j+1].Value
			}
		}
		allowed, ok := keysOf[alg]
		if !ok {
			continue // validate reports the algorithm itself
		}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k := n.Content[j]
			if k.Value == "name" || k.Value == "algorithm" || slices.Contains(allowed, k.Value) {
				continue
			}
			return &Error{File: file, Line: k.Line, Key: fmt.Sprintf("learners[%d].%s", i, k.Value),
				Msg: fmt.Sprintf("not used by algorithm %s (its keys: %s)", alg, strings.Join(allowed, ", "))}
		}
	}
	return nil
}
