package connectors

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// KafkaConfig configures a Kafka source or sink: the `source:` or `sinks.*`
// block with kind kafka. The zero value of every optional field means its
// documented default.
type KafkaConfig struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string `yaml:"brokers"`
	// Topic is the topic a source reads; a sink writes the topic passed to
	// NewKafkaSink, or this one when that is empty.
	Topic string `yaml:"topic"`
	// Group is the consumer group of a source. Processes with the same group
	// split the topic's partitions between them.
	//
	// Default: "streamlearn"
	Group string `yaml:"group"`
	// ClientID names the connections in the brokers' logs and quotas.
	//
	// Default: "streamlearn"
	ClientID string `yaml:"client_id"`
	// StartOffset is where a source starts on a partition for which the
	// group has no committed offset: earliest, latest, offset:N or
	// time:RFC3339 (see ParseStart and Start). An offset outside the
	// partition's log is moved to its nearest end.
	//
	// Default: earliest
	StartOffset string `yaml:"start_offset"`
	// TLS enables TLS; nil means plaintext.
	TLS *TLSConfig `yaml:"tls"`
	// SASL enables SASL authentication; nil means none.
	SASL *SASLConfig `yaml:"sasl"`

	// DialTimeout bounds connecting (TCP, TLS and SASL) to a broker, and
	// the first metadata request.
	//
	// Default: DefaultConnectTimeout
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// KafkaFetch tunes a source's fetches (MaxWait, MinBytes, MaxBytes);
	// on an idle topic, MaxWait is also how late a source notices a
	// rebalance or a close.
	settings.KafkaFetch `yaml:",inline"`
	// QueueCapacity bounds the records a source holds ahead of Fetch, both
	// per partition and in total: a slow learner slows fetching.
	//
	// Default: 1000
	QueueCapacity int `yaml:"queue_capacity"`
	// KafkaGroup tunes a source's consumer group (SessionTimeout,
	// RebalanceTimeout, HeartbeatInterval, RequestTimeout,
	// JoinGroupBackoff).
	settings.KafkaGroup `yaml:",inline"`

	// KafkaProduce tunes a sink (BatchTimeout, BatchSize, RequiredAcks,
	// Compression). Flush waits for the batches pending, so for
	// BatchTimeout too.
	settings.KafkaProduce `yaml:",inline"`
	// MaxPending bounds the messages a sink has published but not yet had
	// acknowledged; Publish blocks beyond it.
	//
	// Default: 10000
	MaxPending int `yaml:"max_pending"`
	// KafkaTopic is the topic a sink's Check creates when it does not
	// exist and Create is set.
	settings.KafkaTopic `yaml:"-"`

	// AllowEmpty lets a source opened with untilEnd end without an error
	// when the settled group assigns it no partition (see ErrNoPartitions).
	AllowEmpty bool `yaml:"-"`
	// Logger receives what a source waits for and why it ends with part of
	// the topic. Nil discards.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports the first problem with c, naming the key at fault. It
// does not check that Topic is set: NewKafkaSource and NewKafkaSink do.
// The settings blocks (KafkaFetch, KafkaGroup, KafkaProduce) are checked
// by their own Validate, as the configuration checks them; their errors
// are *settings.Error.
func (c *KafkaConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: brokers: at least one broker address is required")
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("kafka: brokers: %q is not host:port", b)
		}
	}
	if _, err := ParseStart(c.StartOffset); err != nil {
		return fmt.Errorf("kafka: start: %w", err)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("kafka: dial_timeout: negative duration %v", c.DialTimeout)
	}
	for _, n := range []struct {
		key string
		v   int
	}{
		{"queue_capacity", c.QueueCapacity}, {"max_pending", c.MaxPending},
	} {
		if n.v < 0 {
			return fmt.Errorf("kafka: %s: negative value %d", n.key, n.v)
		}
	}
	for _, err := range []error{c.KafkaFetch.Validate(), c.KafkaGroup.Validate(), c.KafkaProduce.Validate()} {
		if err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
	}
	if c.HeartbeatInterval != 0 && c.SessionTimeout != 0 && c.HeartbeatInterval >= c.SessionTimeout {
		return fmt.Errorf("kafka: heartbeat_interval %v must be below session_timeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	if err := c.SASL.Validate(); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// requiredAcks returns kafka-go's RequiredAcks of name ("" is all).
func requiredAcks(name string) (kafka.RequiredAcks, error) {
	switch name {
	case "", "all":
		return kafka.RequireAll, nil
	case "one":
		return kafka.RequireOne, nil
	case "none":
		return kafka.RequireNone, nil
	}
	return 0, fmt.Errorf("kafka: required_acks: %q is not all, one or none", name)
}

// compression returns kafka-go's Compression of name ("" is none).
func compression(name string) (kafka.Compression, error) {
	switch name {
	case "", "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("kafka: compression: %q is not none, gzip, snappy, lz4 or zstd", name)
}

// withDefaults returns c with every zero optional field set to its default.
func (c KafkaConfig) withDefaults() KafkaConfig {
	orDefault(&c.Group, "streamlearn")
	orDefault(&c.ClientID, "streamlearn")
	orDefault(&c.StartOffset, "earliest")
	orDefault(&c.DialTimeout, DefaultConnectTimeout)
	orDefault(&c.MaxWait, time.Second)
	orDefault(&c.HeartbeatInterval, time.Second)
	orDefault(&c.SessionTimeout, 10*time.Second)
	orDefault(&c.RebalanceTimeout, 5*time.Second)
	orDefault(&c.JoinGroupBackoff, 5*time.Second)
	orDefault(&c.RequestTimeout, 5*time.Second)
	orDefault(&c.BatchTimeout, 10*time.Millisecond)
	orDefault(&c.MinBytes, 1)
	orDefault(&c.MaxBytes, 1<<20)
	orDefault(&c.QueueCapacity, 1000)
	orDefault(&c.BatchSize, 1000)
	orDefault(&c.MaxPending, 10000)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// settleTimeout bounds how long a source opened with untilEnd that has read
// its share waits, between generations, for the group to settle: three
// times what a rebalance takes at most when a member died without leaving
// (the coordinator removes it within the larger of the session and
// rebalance timeouts, and the others notice at their next heartbeat).
func (c *KafkaConfig) settleTimeout() time.Duration {
	return 3 * (max(c.SessionTimeout, c.RebalanceTimeout) + c.HeartbeatInterval + time.Second)
}

// dialer returns the kafka-go dialer with c's TLS and SASL settings.
func (c *KafkaConfig) dialer() (*kafka.Dialer, error) {
	t, err := buildTLS(c.TLS)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	m, err := saslMechanism(c.SASL)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &kafka.Dialer{
		ClientID:      c.ClientID,
		Timeout:       c.DialTimeout,
		DualStack:     true,
		TLS:           t,
		SASLMechanism: m,
	}, nil
}

// transport returns the kafka-go transport (used by kafka.Client and
// kafka.Writer) with c's TLS and SASL settings. Its owner calls
// CloseIdleConnections when done.
func (c *KafkaConfig) transport() (*kafka.Transport, error) {
	d, err := c.dialer()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{
		ClientID:    c.ClientID,
		DialTimeout: c.DialTimeout,
		TLS:         d.TLS,
		SASL:        d.SASLMechanism,
	}, nil
}
