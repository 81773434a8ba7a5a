package config

import (
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

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
	// DiscardDeadLetters is `dead_letters: off`: bad records are counted
	// by reason and written nowhere, in run and replay alike, which say
	// so once at start. DeadLetters is then nil.
	DiscardDeadLetters bool `yaml:"-"`
}

// DeadLettersOff is the value of sinks.dead_letters that discards dead
// letters (DiscardDeadLetters).
const DeadLettersOff = "off"

// UnmarshalYAML decodes the sinks, dead_letters: off as
// DiscardDeadLetters.
func (s *Sinks) UnmarshalYAML(n *yaml.Node) error {
	type plain Sinks
	var v plain
	if m := resolve(n); m.Kind == yaml.MappingNode {
		pairs := mappingPairs(m)
		for j := 0; j+1 < len(pairs); j += 2 {
			if k, d := pairs[j], resolve(pairs[j+1]); k.Value == "dead_letters" && d.Kind == yaml.ScalarNode && d.Value == DeadLettersOff {
				// The rest decodes without it.
				rest := *m
				rest.Content = slices.DeleteFunc(slices.Clone(pairs), func(x *yaml.Node) bool { return x == k || x == pairs[j+1] })
				n, v.DiscardDeadLetters = &rest, true
			}
		}
	}
	// A value of the wrong type (a scalar for a sink) leaves its sink
	// nil, and the others decoded: Parse reports the error and checks
	// them.
	err := n.Decode(&v)
	*s = Sinks(v)
	return err
}

// resolve returns the node an alias refers to, or n.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		return n.Alias
	}
	return n
}

// sinkKeys are the keys of each kind of sink: an unknown key of a sink of
// a known kind is matched against its kind's keys alone.
var sinkKeys = map[string][]string{
	"file":      {"every", "interval", "kind", "path"},
	"nats":      {"connect_timeout", "creds_file", "every", "interval", "kind", "nkey_seed_file", "password", "subject", "tls", "token", "url", "user"},
	"jetstream": {"connect_timeout", "create_stream", "creds_file", "every", "interval", "kind", "nkey_seed_file", "password", "publish_window", "stream", "subject", "tls", "token", "url", "user"},
	"kafka": {"batch_size", "batch_timeout", "brokers", "compression", "connect_timeout", "create", "every", "interval", "kind", "partitions",
		"replication", "required_acks", "retention", "sasl", "tls", "topic"},
}
