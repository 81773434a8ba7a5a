package connectors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// Defaults of NATSConfig. Each one is what a zero field means.
const (
	// DefaultNATSURL is the NATS default client port on loopback, where
	// `streamlearn run` with no config starts its embedded server.
	DefaultNATSURL = "nats://127.0.0.1:4222"
	// DefaultNATSSubject is the subject events are read from.
	DefaultNATSSubject = "events"
	// DefaultJetStreamStream and DefaultJetStreamDurable name the stream
	// and the durable pull consumer of a JetStream source.
	DefaultJetStreamStream  = "EVENTS"
	DefaultJetStreamDurable = "streamlearn"
	// DefaultNATSFetchBatch is nats.go's own jetstream.DefaultMaxMessages:
	// how many messages the client buffers ahead of Fetch.
	DefaultNATSFetchBatch = settings.DefaultFetchBatch
	// DefaultNATSFetchWait is the expiry of one pull request; a JetStream
	// source also re-checks its consumer after this long without a message.
	DefaultNATSFetchWait = settings.DefaultFetchWait
	// DefaultNATSAckBatch acknowledges every Commit: callers batch commits.
	DefaultNATSAckBatch = settings.DefaultAckBatch
	// DefaultNATSMaxAckPending bounds the messages delivered but not yet
	// committed. It must exceed the caller's commit interval (the
	// checkpoint interval, 10000 events in the example config) plus
	// FetchBatch, or the server stops delivering before the caller commits.
	DefaultNATSMaxAckPending = settings.DefaultMaxAckPending
	// DefaultNATSAckWait is how long the server waits for an ack before it
	// redelivers; a JetStream source skips such redeliveries of records it
	// already returned, so a short AckWait costs bandwidth, not correctness.
	DefaultNATSAckWait = 2 * time.Minute
	// DefaultNATSPendingMsgs and DefaultNATSPendingBytes bound what a core
	// NATS subscription buffers (nats.go's own defaults).
	DefaultNATSPendingMsgs  = nats.DefaultSubPendingMsgsLimit
	DefaultNATSPendingBytes = nats.DefaultSubPendingBytesLimit
	// DefaultNATSPublishWindow bounds the JetStream publishes awaiting their
	// acknowledgement.
	DefaultNATSPublishWindow = settings.DefaultPublishWindow
	// DefaultNATSName is the client name the server shows in its monitoring.
	DefaultNATSName = "streamlearn"
)

// natsCloseWait bounds how long Close waits for a final ack, a flush and
// the connection's closed callback.
const natsCloseWait = 5 * time.Second

// NATSConfig configures NATS core and JetStream sources and sinks: the
// `source:` block with kind nats or jetstream, and nats/jetstream sinks.
// The zero value works against DefaultNATSURL.
type NATSConfig struct {
	// URL is the server, or a comma-separated list of servers of one
	// cluster (nats://, tls://, ws://, wss://). Default DefaultNATSURL.
	// User and password in the URL work too; they are never printed.
	URL string `yaml:"url"`
	// Subject is what a source reads: a core subscription's subject or a
	// JetStream consumer's filter subject; wildcards are allowed. Default
	// "events".
	Subject string `yaml:"subject"`
	// Stream is the JetStream stream. Default "EVENTS".
	Stream string `yaml:"stream"`
	// Durable names the JetStream durable pull consumer, which keeps the
	// position across restarts. One process uses a durable at a time
	// (acks are cumulative). Default "streamlearn".
	Durable string `yaml:"durable"`
	// Start is where a JetStream durable that does not exist yet begins
	// (see ParseStart and Start): earliest (every message the stream
	// holds), latest (after its last message), offset:N (at stream
	// sequence N) or time:RFC3339. An existing durable resumes from its
	// position. A core NATS subscription receives what is published from
	// then on: earliest and latest only. Default earliest.
	Start string `yaml:"start"`
	// Logger receives what a source does on its own (a start that does
	// not apply, a start moved into the stream); nil discards it.
	Logger *slog.Logger `yaml:"-"`
	// Name is the client name shown by the server. Default "streamlearn".
	Name string `yaml:"name"`

	// TLS enables TLS; nil means plaintext unless the URL says tls://.
	TLS *TLSConfig `yaml:"tls"`
	// NATSAuth authenticates: at most one of user and password, a token,
	// an nkey seed file or a credentials file.
	settings.NATSAuth `yaml:",inline"`
	// ConnectTimeout bounds connecting to a server. Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`

	// JetStreamFetch tunes a JetStream source (FetchBatch, FetchWait,
	// AckBatch, MaxAckPending).
	settings.JetStreamFetch `yaml:",inline"`
	// AckWait is the server's redelivery timeout. Default 2m.
	AckWait time.Duration `yaml:"ack_wait"`
	// PendingMsgs and PendingBytes bound a core subscription's buffer;
	// beyond them messages are dropped and counted (core NATS is
	// at-most-once). Defaults 512Ki messages and 64 MiB (nats.go's).
	PendingMsgs  int `yaml:"pending_msgs"`
	PendingBytes int `yaml:"pending_bytes"`
	// JetStreamPublish tunes a JetStream sink (PublishWindow).
	settings.JetStreamPublish `yaml:",inline"`
}

// withDefaults returns c with every zero field set to its default.
func (c NATSConfig) withDefaults() NATSConfig {
	orDefault(&c.URL, DefaultNATSURL)
	orDefault(&c.Subject, DefaultNATSSubject)
	orDefault(&c.Stream, DefaultJetStreamStream)
	orDefault(&c.Durable, DefaultJetStreamDurable)
	orDefault(&c.Name, DefaultNATSName)
	orDefault(&c.Start, "earliest")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	orDefault(&c.FetchBatch, DefaultNATSFetchBatch)
	orDefault(&c.FetchWait, DefaultNATSFetchWait)
	orDefault(&c.AckBatch, DefaultNATSAckBatch)
	orDefault(&c.MaxAckPending, DefaultNATSMaxAckPending)
	orDefault(&c.AckWait, DefaultNATSAckWait)
	orDefault(&c.PendingMsgs, DefaultNATSPendingMsgs)
	orDefault(&c.PendingBytes, DefaultNATSPendingBytes)
	orDefault(&c.PublishWindow, DefaultNATSPublishWindow)
	return c
}

// Validate reports the first invalid field, naming its YAML key. Zero
// fields are valid: they mean the default.
func (c NATSConfig) Validate() error {
	c = c.withDefaults()
	for u := range strings.SplitSeq(c.URL, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			return fmt.Errorf("url: %w", err)
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("url: %q: scheme must be nats, tls, ws or wss", p.Redacted())
		}
		if p.Host == "" {
			return fmt.Errorf("url: %q has no host", p.Redacted())
		}
	}
	if strings.ContainsAny(c.Subject, " \t\r\n") {
		return fmt.Errorf("subject: %q holds white space", c.Subject)
	}
	if strings.ContainsAny(c.Stream, " \t\r\n.*>/\\") {
		return fmt.Errorf("stream: %q: a stream name has no white space, '.', '*', '>' or path separators", c.Stream)
	}
	if strings.ContainsAny(c.Durable, " \t\r\n.*>/\\") {
		return fmt.Errorf("durable: %q: a consumer name has no white space, '.', '*', '>' or path separators", c.Durable)
	}
	for _, err := range []error{c.NATSAuth.Validate(), c.JetStreamFetch.Validate(), c.JetStreamPublish.Validate()} {
		if err != nil {
			return err
		}
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"pending_msgs", c.PendingMsgs}, {"pending_bytes", c.PendingBytes}} {
		if f.v < 0 {
			return fmt.Errorf("%s: %d is negative", f.key, f.v)
		}
	}
	if c.AckWait < time.Second {
		return fmt.Errorf("ack_wait: %v is below 1s", c.AckWait)
	}
	if c.MaxAckPending <= c.FetchBatch+c.AckBatch {
		return fmt.Errorf("max_ack_pending: %d must exceed fetch_batch+ack_batch (%d) plus the commit interval",
			c.MaxAckPending, c.FetchBatch+c.AckBatch)
	}
	return nil
}

// redactedURL is c.URL with passwords masked, for errors.
func (c NATSConfig) redactedURL() string {
	parts := strings.Split(c.URL, ",")
	for i, u := range parts {
		if p, err := url.Parse(strings.TrimSpace(u)); err == nil {
			parts[i] = p.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// natsConn is a connection and the channel its closed callback closes, so
// that Close can wait for the connection's callback goroutine.
type natsConn struct {
	*nats.Conn
	closed chan struct{}
}

// natsConnect connects with c's authentication and TLS. c has its
// defaults. The connection reconnects forever; the first connect fails
// fast with an error naming the server.
func natsConnect(c NATSConfig) (*natsConn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	closed := make(chan struct{})
	var once sync.Once
	timeout := c.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	// nats.go tries the servers of the URL in turn, each for its Timeout:
	// each gets its share, so that connecting takes at most timeout.
	if n := strings.Count(c.URL, ",") + 1; n > 1 {
		timeout /= time.Duration(n)
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ClosedHandler(func(*nats.Conn) { once.Do(func() { close(closed) }) }),
		// Slow consumers are counted by the subscription (Dropped); the
		// default handler would only print.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
	if c.TLS != nil {
		t, err := buildTLS(c.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(t))
	}
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey_seed_file: %w", err)
		}
		opts = append(opts, o)
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.redactedURL(), err)
	}
	return &natsConn{Conn: nc, closed: closed}, nil
}

// close flushes what was published, closes the connection and waits
// (bounded) for its closed callback.
func (nc *natsConn) close() error {
	var err error
	if nc.IsConnected() {
		err = nc.FlushTimeout(natsCloseWait)
	}
	nc.Close()
	select {
	case <-nc.closed:
	case <-time.After(natsCloseWait):
	}
	return err
}

// natsFlush is FlushWithContext, which needs a deadline: without one,
// natsCloseWait bounds the wait.
func natsFlush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, natsCloseWait)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}

// natsLastToken returns the last token of a subject: a record's key.
func natsLastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// ErrNATSUntilEnd is returned by NewNATSSource for untilEnd: a core NATS
// subject keeps no messages, so it has no end to stop at.
var ErrNATSUntilEnd = errors.New("nats source: --until-end needs a stream with an end; core NATS keeps none: use source.kind jetstream")

// NATSSource reads a core NATS subscription: at-most-once. Messages
// published while no subscription exists are never seen, and messages
// beyond the bounded pending buffer (PendingMsgs, PendingBytes) are
// dropped by the client and counted (Dropped), never buffered without
// limit. Record.Offset is the arrival count (1 for the first message
// received), Key the subject's last token, and Commit a no-op. It is not
// safe for concurrent use, except Dropped and Pending.
type NATSSource struct {
	nc   *natsConn
	sub  *nats.Subscription
	name string
	n    int64
	key  []byte

	mu      sync.Mutex
	dropped int64
	closed  bool
}

var _ Source = (*NATSSource)(nil)

// NewNATSSource subscribes to cfg.Subject. The subscription is registered
// on the server when it returns. untilEnd is not supported: it returns
// ErrNATSUntilEnd.
func NewNATSSource(ctx context.Context, cfg NATSConfig, untilEnd bool) (*NATSSource, error) {
	if untilEnd {
		return nil, ErrNATSUntilEnd
	}
	cfg = cfg.withDefaults()
	nc, err := natsConnect(cfg)
	if err != nil {
		return nil, fmt.Errorf("nats source: %w", err)
	}
	s := &NATSSource{nc: nc, name: "nats:" + cfg.Subject}
	fail := func(op string, err error) (*NATSSource, error) {
		_ = nc.close()
		return nil, fmt.Errorf("nats source %s: %s: %w", cfg.Subject, op, err)
	}
	if s.sub, err = nc.SubscribeSync(cfg.Subject); err != nil {
		return fail("subscribe", err)
	}
	if err := s.sub.SetPendingLimits(cfg.PendingMsgs, cfg.PendingBytes); err != nil {
		return fail("pending limits", err)
	}
	if err := natsFlush(ctx, nc.Conn); err != nil {
		return fail("subscribe", err)
	}
	return s, nil
}

// Fetch returns the next message. A drop since the previous Fetch is
// counted, not returned as an error.
func (s *NATSSource) Fetch(ctx context.Context) (Record, error) {
	for {
		m, err := s.sub.NextMsgWithContext(ctx)
		if err != nil {
			if errors.Is(err, nats.ErrSlowConsumer) {
				s.Dropped()
				continue
			}
			if cerr := ctx.Err(); cerr != nil {
				return Record{}, cerr
			}
			return Record{}, fmt.Errorf("nats source %s: fetch: %w", s.name, err)
		}
		s.n++
		s.key = append(s.key[:0], natsLastToken(m.Subject)...)
		lag, _, err := s.sub.Pending()
		if err != nil {
			lag = -1
		}
		return Record{Value: m.Data, Key: s.key, Offset: s.n, Lag: int64(lag)}, nil
	}
}

// Commit does nothing: core NATS has no acknowledgements.
func (s *NATSSource) Commit(context.Context, Record) error { return nil }

// Name returns "nats:<subject>".
func (s *NATSSource) Name() string { return s.name }

// Traits reports Volatile: a core NATS record's offset is its arrival
// count in this subscription, which a restart begins again, so it does not
// identify the record across restarts (see service's checkpoints).
func (s *NATSSource) Traits() Traits { return Traits{Volatile: true} }

var _ traiter = (*NATSSource)(nil)

// Dropped returns how many messages the client dropped because the
// subscription's pending buffer was full (slow consumer). It is safe for
// concurrent use.
func (s *NATSSource) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		if n, err := s.sub.Dropped(); err == nil {
			s.dropped = int64(n)
		}
	}
	return s.dropped
}

// Pending returns how many messages wait in the subscription's buffer:
// the source's lag. It is safe for concurrent use.
func (s *NATSSource) Pending() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	n, _, _ := s.sub.Pending()
	return int64(n)
}

// Close unsubscribes and closes the connection.
func (s *NATSSource) Close() error {
	s.Dropped()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	_ = s.sub.Unsubscribe()
	return s.nc.close()
}

// NATSSink publishes to a core NATS subject: at-most-once, as core NATS
// is. Keys are not sent (core NATS messages have none; put what routes a
// message in the subject). Publish is meant for one goroutine; Flush and
// Barrier's wait may be called from any.
type NATSSink struct {
	nc      *natsConn
	subject string
	closed  bool
}

var (
	_ Sink        = (*NATSSink)(nil)
	_ BarrierSink = (*NATSSink)(nil)
)

// NewNATSSink connects with cfg (cfg.Subject is not used) and publishes to
// subject.
func NewNATSSink(cfg NATSConfig, subject string) (*NATSSink, error) {
	if subject == "" || strings.ContainsAny(subject, " \t\r\n*>") {
		return nil, fmt.Errorf("nats sink: subject %q: need a subject without white space or wildcards", subject)
	}
	nc, err := natsConnect(cfg.withDefaults())
	if err != nil {
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	return &NATSSink{nc: nc, subject: subject}, nil
}

// Publish sends value; the client buffers it (bounded by nats.go's
// reconnect buffer while disconnected).
func (s *NATSSink) Publish(_ context.Context, _, value []byte) error {
	if err := s.nc.Publish(s.subject, value); err != nil {
		return fmt.Errorf("nats sink %s: publish: %w", s.subject, err)
	}
	return nil
}

// Flush waits until the server has received everything published so far.
// Without a deadline on ctx it waits at most 5s.
func (s *NATSSink) Flush(ctx context.Context) error {
	if err := natsFlush(ctx, s.nc.Conn); err != nil {
		return fmt.Errorf("nats sink %s: flush: %w", s.subject, err)
	}
	return nil
}

// Barrier returns Flush (BarrierSink): the server's answer to a ping
// covers everything published before it, and publishing goes on meanwhile.
func (s *NATSSink) Barrier() func(context.Context) error { return s.Flush }

// Close flushes and closes the connection.
func (s *NATSSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.nc.close(); err != nil {
		return fmt.Errorf("nats sink %s: close: %w", s.subject, err)
	}
	return nil
}
