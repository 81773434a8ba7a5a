package connectors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The zero-config setup of `streamlearn run`: an embedded server on
// DefaultNATSURL with stream EmbeddedStream capturing EmbeddedSubject,
// where `streamlearn publish` (or any NATS client) sends events.
const (
	EmbeddedStream  = DefaultJetStreamStream
	EmbeddedSubject = DefaultNATSSubject
)

// embeddedReady bounds the wait for the server to accept connections.
const embeddedReady = 10 * time.Second

// EmbeddedConfig configures an in-process NATS server with JetStream.
type EmbeddedConfig struct {
	// Host is the listen address. Default "127.0.0.1" (loopback only).
	Host string
	// Port is the client port; -1 picks a free one. Default 4222.
	Port int
	// StoreDir holds the JetStream files. Default: a new temporary
	// directory that Shutdown removes.
	StoreDir string
	// Stream, when set, is created (or updated) at start, capturing
	// Subjects (default: EmbeddedSubject).
	Stream   string
	Subjects []string
}

// DefaultEmbeddedConfig is what `streamlearn run` starts with no config:
// 127.0.0.1:4222, stream EVENTS on subject events, files under storeDir.
func DefaultEmbeddedConfig(storeDir string) EmbeddedConfig {
	return EmbeddedConfig{Host: "127.0.0.1", Port: 4222, StoreDir: storeDir,
		Stream: EmbeddedStream, Subjects: []string{EmbeddedSubject}}
}

// Embedded is a NATS server with JetStream running in this process.
type Embedded struct {
	srv *server.Server
	tmp string
}

// StartEmbedded starts the server, waits until it accepts connections and
// creates cfg.Stream when set.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	e := &Embedded{}
	if cfg.StoreDir == "" {
		dir, err := os.MkdirTemp("", "streamlearn-nats-")
		if err != nil {
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
		cfg.StoreDir, e.tmp = dir, dir
	}
	opts := &server.Options{
		ServerName: "streamlearn",
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
	}
	srv, err := jsStartServer(opts)
	if err != nil {
		if e.tmp != "" {
			_ = os.RemoveAll(e.tmp)
		}
		return nil, fmt.Errorf("embedded nats on %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	e.srv = srv
	if cfg.Stream != "" {
		subjects := cfg.Subjects
		if len(subjects) == 0 {
			subjects = []string{EmbeddedSubject}
		}
		ctx, cancel := context.WithTimeout(context.Background(), embeddedReady)
		defer cancel()
		if err := e.CreateStream(ctx, cfg.Stream, subjects...); err != nil {
			e.Shutdown()
			return nil, err
		}
	}
	return e, nil
}

// jsStartServer runs a server with opts (no signal handlers, no logging)
// and waits until it accepts connections.
func jsStartServer(opts *server.Options) (*server.Server, error) {
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(embeddedReady) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("not ready for connections (port in use?)")
	}
	return srv, nil
}

// ClientURL returns the URL clients connect to, e.g. nats://127.0.0.1:4222.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// CreateStream creates stream name capturing subjects (file storage,
// limits retention), or updates it to capture them. It is idempotent.
func (e *Embedded) CreateStream(ctx context.Context, name string, subjects ...string) error {
	nc, err := nats.Connect(e.ClientURL(), nats.InProcessServer(e.srv))
	if err != nil {
		return fmt.Errorf("embedded nats: stream %s: %w", name, err)
	}
	defer nc.Close()
	if err := jsCreateStream(ctx, nc, name, subjects...); err != nil {
		return fmt.Errorf("embedded nats: stream %s: %w", name, err)
	}
	return nil
}

// jsCreateStream creates or updates a file-stored stream with limits
// retention.
func jsCreateStream(ctx context.Context, nc *nats.Conn, name string, subjects ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     name,
		Subjects: subjects,
		Storage:  jetstream.FileStorage,
	})
	return err
}

// Shutdown stops the server, waits until it has stopped and removes the
// temporary store directory, if it made one.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
}

// EnsureStream creates the JetStream stream name on cfg's server,
// capturing subjects (file storage, limits retention), unless a stream of
// that name exists: an existing stream is left as it is, and created
// reports false. It is what `publish --create-stream` does, so that a
// user without the nats command can start a stream.
func EnsureStream(ctx context.Context, cfg NATSConfig, name string, subjects ...string) (created bool, err error) {
	nc, err := natsConnect(cfg)
	if err != nil {
		return false, err
	}
	defer nc.close()
	js, err := jetstream.New(nc.Conn)
	if err != nil {
		return false, err
	}
	if st, err := js.Stream(ctx, name); err == nil {
		// It exists: it must capture the subjects, or publishing to them
		// would fail with no word of why.
		for _, subj := range subjects {
			if !slices.ContainsFunc(st.CachedInfo().Config.Subjects, func(f string) bool { return subjectMatches(f, subj) }) {
				return false, fmt.Errorf("stream %q exists and does not capture subject %q (it captures %s)", name, subj, strings.Join(st.CachedInfo().Config.Subjects, ", "))
			}
		}
		return false, nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("stream %q: %w", name, err)
	}
	if err := createStream(ctx, js, name, subjects...); err != nil {
		return false, err
	}
	return true, nil
}

// createStream creates the stream name capturing subjects, file-stored
// with limits retention: the stream of `publish --create-stream`, and of
// a JetStream sink with create_stream. A stream of that name made by
// another client meanwhile is not an error.
func createStream(ctx context.Context, js jetstream.JetStream, name string, subjects ...string) error {
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("creating stream %q for %s: %w", name, strings.Join(subjects, ", "), err)
	}
	return nil
}

// RemoveIfNew returns a function that deletes the JetStream durable
// consumer durable of stream when it does not exist now: a reader that
// makes a durable for one pass (`record`) removes it when done, and never
// removes one that was there before it. Errors of the removal are
// returned by the function; with no server or stream, it does nothing.
func RemoveIfNew(ctx context.Context, cfg NATSConfig, stream, durable string) (remove func(context.Context) error, err error) {
	nothing := func(context.Context) error { return nil }
	nc, err := natsConnect(cfg)
	if err != nil {
		return nil, err
	}
	defer nc.close()
	js, err := jetstream.New(nc.Conn)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nothing, nil // the source reports a missing stream itself
	}
	if _, err := s.Consumer(ctx, durable); err == nil {
		return nothing, nil
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("stream %q: durable %q: %w", stream, durable, err)
	}
	return func(ctx context.Context) error {
		nc, err := natsConnect(cfg)
		if err != nil {
			return err
		}
		defer nc.close()
		js, err := jetstream.New(nc.Conn)
		if err != nil {
			return err
		}
		if err := js.DeleteConsumer(ctx, stream, durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("removing durable %q of stream %q: %w", durable, stream, err)
		}
		return nil
	}, nil
}

// subjectMatches reports whether the NATS subject filter (with * and >
// wildcards) matches subject.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, t := range f {
		switch {
		case t == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case t != "*" && t != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
