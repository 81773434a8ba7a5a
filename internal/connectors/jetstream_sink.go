package connectors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamSink publishes to a subject of a JetStream stream and collects
// the server's acknowledgements asynchronously: at most PublishWindow
// publishes are in flight, Publish blocks beyond that, and Flush waits
// for every acknowledgement (Barrier's wait for those before it, while
// later ones are published). A failed publish is returned by the next
// Flush or wait. Keys are not sent. Publish is meant for one goroutine;
// Flush, Barrier's wait and Close may be called from any.
type JetStreamSink struct {
	nc      *natsConn
	js      jetstream.JetStream
	stream  string
	subject string
	name    string

	// collecting is held by the one goroutine that waits for the oldest
	// acknowledgement (collect); mu guards the rest.
	collecting sync.Mutex
	mu         sync.Mutex
	// inflight is a ring of futures in publish order; published and
	// acked count the publishes and the acknowledgements collected.
	inflight  []jetstream.PubAckFuture
	head, n   int
	published uint64
	acked     uint64
	failed    failures // failures collected and not reported yet, by message number
	closed    bool
}

var (
	_ IDSink      = (*JetStreamSink)(nil)
	_ BarrierSink = (*JetStreamSink)(nil)
)

// jsPublishTimeout bounds the wait for one publish acknowledgement.
const jsPublishTimeout = 30 * time.Second

// NewJetStreamSink connects with cfg (cfg.Stream and cfg.Subject are not
// used) and publishes to subject, which stream must capture. A stream that
// does not exist is an error naming the commands that create it, unless
// cfg.CreateStream is set: then the sink creates it, capturing subject,
// and says so once at INFO on cfg.Logger (when not nil).
func NewJetStreamSink(cfg NATSConfig, stream, subject string) (*JetStreamSink, error) {
	name := "jetstream sink " + stream + "/" + subject
	if stream == "" || subject == "" || strings.ContainsAny(subject, " \t\r\n*>") {
		return nil, fmt.Errorf("%s: need a stream and a subject without white space or wildcards", name)
	}
	cfg = cfg.withDefaults()
	nc, err := natsConnect(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &JetStreamSink{nc: nc, stream: stream, subject: subject, name: name,
		inflight: make([]jetstream.PubAckFuture, cfg.PublishWindow)}
	fail := func(err error) (*JetStreamSink, error) {
		_ = nc.close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.js, err = jetstream.New(nc.Conn,
		jetstream.WithPublishAsyncMaxPending(cfg.PublishWindow+1),
		jetstream.WithPublishAsyncTimeout(jsPublishTimeout))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsCloseWait)
	defer cancel()
	if _, err := s.js.Stream(ctx, stream); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) && cfg.CreateStream != nil && *cfg.CreateStream {
			if err := createStream(ctx, s.js, stream, subject); err != nil {
				return fail(err)
			}
			if cfg.Logger != nil {
				cfg.Logger.Info("created JetStream stream", "sink", name, "stream", stream, "subjects", subject)
			}
			return s, nil
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fail(fmt.Errorf("stream %q not found: create it with `streamlearn publish --create-stream --url %s --stream %s --subject %s FILE` or `nats stream add %s --subjects %s` (a run's sink creates it with create_stream: true)",
				stream, cfg.redactedURL(), stream, subject, stream, subject))
		}
		return fail(err)
	}
	return s, nil
}

// Check asks the server whether the sink's stream captures its subject: a
// publish to a subject no stream captures fails (NewJetStreamSink checked
// that the stream exists). A run checks its sinks before it opens its
// source.
func (s *JetStreamSink) Check(ctx context.Context) error {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	subjects := info.Config.Subjects
	if len(subjects) == 0 {
		return nil // a mirror or a stream of sources: the server says at the first publish
	}
	for _, f := range subjects {
		if subjectMatches(f, s.subject) {
			return nil
		}
	}
	return fmt.Errorf("%s: stream %q does not capture subject %q (its subjects: %s): publish to one of them, or add it with `nats stream edit %s --subjects %s`",
		s.name, s.stream, s.subject, strings.Join(subjects, ", "), s.stream, strings.Join(append(slices.Clone(subjects), s.subject), ","))
}

// Publish sends a copy of value (the client keeps it for retries until
// the server acknowledges it).
func (s *JetStreamSink) Publish(ctx context.Context, _, value []byte) error {
	return s.PublishID(ctx, "", nil, value)
}

// PublishID is Publish with the message's identity, sent as Nats-Msg-Id
// (none when id is empty): the stream drops a message whose id it stored
// within its duplicate window.
func (s *JetStreamSink) PublishID(ctx context.Context, id string, _, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.n == len(s.inflight) && !s.closed {
		s.mu.Unlock()
		err := s.collect(ctx)
		s.mu.Lock()
		if err != nil {
			return err
		}
	}
	if s.closed {
		return fmt.Errorf("%s: publish: closed", s.name)
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	f, err := s.js.PublishAsync(s.subject, bytes.Clone(value), opts...)
	if err != nil {
		return fmt.Errorf("%s: publish: %w", s.name, err)
	}
	s.inflight[(s.head+s.n)%len(s.inflight)] = f
	s.n++
	s.published++
	return nil
}

// collect waits for the oldest acknowledgement, if any, and keeps its
// failure for the Flush or wait that covers it; it returns ctx's error
// only.
func (s *JetStreamSink) collect(ctx context.Context) error {
	s.collecting.Lock()
	defer s.collecting.Unlock()
	s.mu.Lock()
	if s.n == 0 {
		s.mu.Unlock()
		return nil
	}
	f := s.inflight[s.head]
	s.mu.Unlock()
	var err error
	select {
	case ack := <-f.Ok():
		if ack.Stream != s.stream {
			err = fmt.Errorf("%s: published into stream %q, not %q", s.name, ack.Stream, s.stream)
		}
	case perr := <-f.Err():
		err = fmt.Errorf("%s: publish: %w", s.name, perr)
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for an ack: %w", s.name, ctx.Err())
	}
	s.mu.Lock()
	s.inflight[s.head] = nil
	s.head = (s.head + 1) % len(s.inflight)
	s.n--
	if err != nil {
		s.failed.add(s.acked, err)
	}
	s.acked++
	s.mu.Unlock()
	return nil
}

// Flush waits for the acknowledgement of everything published so far and
// returns (and forgets) their failures not reported yet.
func (s *JetStreamSink) Flush(ctx context.Context) error { return s.Barrier()(ctx) }

// Barrier returns a function that waits for the acknowledgement of
// everything published before the call, while later messages are
// published, and returns (and forgets) the failures among them not
// reported yet: not those of later messages, which are the next wait's
// (BarrierSink).
func (s *JetStreamSink) Barrier() func(context.Context) error {
	s.mu.Lock()
	target := s.published
	s.mu.Unlock()
	return func(ctx context.Context) error {
		for {
			s.mu.Lock()
			if s.acked >= target {
				err := s.failed.before(target)
				s.mu.Unlock()
				return err
			}
			s.mu.Unlock()
			if err := s.collect(ctx); err != nil {
				return err
			}
		}
	}
}

// Close flushes (waiting at most 30s) and closes the connection.
func (s *JetStreamSink) Close() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsPublishTimeout)
	defer cancel()
	err := s.Flush(ctx)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return errors.Join(err, s.nc.close())
}
