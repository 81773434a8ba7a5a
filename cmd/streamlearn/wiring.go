package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
)

// saslPasswordEnv holds the Kafka SASL password when the configuration
// gives neither password nor password_file.
const saslPasswordEnv = "STREAMLEARN_SASL_PASSWORD"

// kafkaConfig returns the connector settings of a Kafka connection c to
// topic (and group, for a source). A SASL block with neither password nor
// password_file takes the password from $STREAMLEARN_SASL_PASSWORD,
// leaving c as it is.
func kafkaConfig(c config.Conn, topic, group string) connectors.KafkaConfig {
	k := connectors.KafkaConfig{Brokers: c.Brokers, Topic: topic, Group: group, TLS: c.TLS, SASL: c.SASL, DialTimeout: c.ConnectTimeout}
	if k.SASL != nil && k.SASL.Password == "" && k.SASL.PasswordFile == "" {
		sasl := *k.SASL // the configuration's stays as it is
		sasl.Password = os.Getenv(saslPasswordEnv)
		k.SASL = &sasl
	}
	return k
}

// natsConfig returns the connector settings of a NATS connection c to
// subject (and stream and durable, for JetStream).
func natsConfig(c config.Conn, subject, stream, durable string) connectors.NATSConfig {
	return connectors.NATSConfig{URL: c.URL, Subject: subject, Stream: stream, Durable: durable,
		TLS: c.TLS, NATSAuth: c.NATSAuth, ConnectTimeout: c.ConnectTimeout}
}

// natsConn returns the NATS connection settings of c (URL and
// authentication), for other connections to the source's server such as a
// checkpoint bucket.
func natsConn(c config.Conn) connectors.NATSConfig {
	return natsConfig(c, "", "", "")
}

// sourceOptions say how a source opened by openSource ends and where it
// logs.
type sourceOptions struct {
	// UntilEnd makes the source end with connectors.ErrEndOfInput at the
	// end it had when opened (for a Kafka group: see
	// connectors.NewKafkaSource).
	UntilEnd bool
	// AllowEmpty lets a Kafka source opened with UntilEnd end without an
	// error when its group assigns it no partition.
	AllowEmpty bool
	// Logger receives the source's warnings; nil discards them.
	Logger *slog.Logger
	// MaxBytes bounds the memory a file source gives one line
	// (input.max_bytes; see connectors.FileSource).
	MaxBytes int
	// Format is input.format: a file source skips the lines of no record
	// that replay skips in it.
	Format string
}

// sourceName returns the name (connectors.Source.Name) of the source
// openSource opens of s, when it can be told before the source is opened
// (a JetStream source's: its stream and durable), else "".
func sourceName(s config.Source) string {
	if s.Kind == "jetstream" {
		return connectors.JetStreamName(natsConfig(s.Conn, s.Subject, s.Stream, s.Durable))
	}
	return ""
}

// openSource opens the configured source.
func openSource(ctx context.Context, s config.Source, o sourceOptions) (connectors.Source, error) {
	switch s.Kind {
	case "kafka":
		k := kafkaConfig(s.Conn, s.Topic, s.Group)
		k.KafkaGroup, k.KafkaFetch = s.KafkaGroup, s.KafkaFetch
		k.AllowEmpty, k.Logger = o.AllowEmpty, o.Logger
		k.StartOffset = s.Start
		return connectors.NewKafkaSource(ctx, k, o.UntilEnd)
	case "nats":
		if err := config.ValidStart(s.Kind, s.Start); err != nil {
			return nil, fmt.Errorf("start %w", err)
		}
		return connectors.NewNATSSource(ctx, natsConfig(s.Conn, s.Subject, "", ""), o.UntilEnd)
	case "jetstream":
		n := natsConfig(s.Conn, s.Subject, s.Stream, s.Durable)
		n.Start, n.Logger = s.Start, o.Logger
		n.JetStreamFetch = s.JetStreamFetch
		return connectors.NewJetStreamSource(ctx, n, o.UntilEnd)
	case "file":
		if err := config.ValidStart(s.Kind, s.Start); err != nil {
			return nil, fmt.Errorf("start %w", err)
		}
		src, err := connectors.NewFileSource(s.Path)
		if err != nil {
			return nil, err
		}
		src.MaxBytes = o.MaxBytes
		src.Follow = !o.UntilEnd // a service keeps going at the end; --until-end stops
		format := event.Format(o.Format)
		src.NoRecord = func(line []byte) bool { return event.NoRecord(format, line) }
		return src, nil
	case "":
		return nil, fmt.Errorf("source.kind: missing (kafka, nats, jetstream, file or embedded)")
	}
	return nil, fmt.Errorf("source.kind: unknown kind %q", s.Kind)
}

// sameTransport reports whether a sink of kind k can reuse the connection
// settings of a source of kind src.
func sameTransport(k, src string) bool {
	nats := func(s string) bool { return s == "nats" || s == "jetstream" }
	return k == src || nats(k) && nats(src)
}

// openSink opens a configured sink. A sink that gives no connection
// settings uses the source's when they speak the same transport. logger
// (nil: none) hears of a JetStream stream the sink created.
func openSink(s *config.Sink, src config.Source, logger *slog.Logger) (connectors.Sink, error) {
	if s == nil {
		return nil, nil
	}
	conn := s.Conn
	if conn.IsZero() && sameTransport(s.Kind, src.Kind) {
		conn = src.Conn
	}
	switch s.Kind {
	case "kafka":
		k := kafkaConfig(conn, s.Topic, "")
		k.KafkaProduce, k.KafkaTopic = s.KafkaProduce, s.KafkaTopic
		return connectors.NewKafkaSink(k, s.Topic)
	case "nats":
		return connectors.NewNATSSink(natsConfig(conn, s.Subject, "", ""), s.Subject)
	case "jetstream":
		n := natsConfig(conn, s.Subject, s.Stream, "")
		n.JetStreamPublish, n.Logger = s.JetStreamPublish, logger
		return connectors.NewJetStreamSink(n, s.Stream, s.Subject)
	case "file":
		return connectors.NewFileSink(s.Path), nil
	}
	return nil, fmt.Errorf("sink kind %q: want kafka, nats, jetstream or file", s.Kind)
}

// embeddedSource returns the jetstream source that reads the embedded
// server of s (kind embedded) at url: its stream, subject and durable, or
// their defaults.
func embeddedSource(s config.Source, url string) config.Source {
	s.Kind, s.URL = "jetstream", url
	s.Stream = cmp.Or(s.Stream, connectors.EmbeddedStream)
	s.Subject = cmp.Or(s.Subject, connectors.EmbeddedSubject)
	s.Durable = cmp.Or(s.Durable, "streamlearn")
	s.Port, s.StoreDir = 0, ""
	return s
}

// embeddedURL returns the address the embedded server of s listens on, for
// another process (publish, record), when its port is fixed.
func embeddedURL(s config.Source) (string, error) {
	port := cmp.Or(s.Port, 4222)
	if port < 0 {
		return "", fmt.Errorf("the embedded server of this config listens on a port picked at start (port: -1): give its URL")
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", port), nil
}

// startEmbedded starts the embedded NATS JetStream server of a source of
// kind embedded, with its stream, and returns it with the jetstream source
// that reads it.
func startEmbedded(s config.Source) (*connectors.Embedded, config.Source, error) {
	js := embeddedSource(s, "")
	e, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Host: "127.0.0.1", Port: cmp.Or(s.Port, 4222),
		StoreDir: s.StoreDir, Stream: js.Stream, Subjects: []string{js.Subject}})
	if err != nil {
		return nil, s, fmt.Errorf("embedded NATS server: %w", err)
	}
	js.URL = e.ClientURL()
	return e, js, nil
}

// dialObjectStore connects with nc (its URL, TLS and authentication; see
// connectors.DialJetStream) and opens the checkpoint store in bucket as
// checkpoint.OpenObjectStore does; the store's Close closes the
// connection.
func dialObjectStore(ctx context.Context, nc connectors.NATSConfig, bucket string, cfg checkpoint.ObjectStoreConfig) (*checkpoint.ObjectStore, error) {
	js, closeConn, err := connectors.DialJetStream(nc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", bucket, err)
	}
	cfg.OnClose = closeConn
	s, err := checkpoint.OpenObjectStore(ctx, js, bucket, cfg)
	if err != nil {
		_ = closeConn()
		return nil, err
	}
	return s, nil
}
