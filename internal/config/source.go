package config

import (
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

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
