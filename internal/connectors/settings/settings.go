package settings

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// An Error is a setting out of its values: Key is its key within its
// block ("min_bytes"), Msg what is wrong with it. The configuration
// reports it at its full key ("source.min_bytes: …").
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string { return e.Key + ": " + e.Msg }

// FirstSet returns the key (the yaml tag's name) of the first field of
// the struct v that is not zero, or "" when every field is: which of a
// block's settings a configuration gave, to refuse them where they do not
// apply.
func FirstSet(v any) string {
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if !rv.Field(i).IsZero() {
			name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
			return name
		}
	}
	return ""
}

func errAt(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// notNegative returns an Error at the first key whose value is negative,
// in the order given, or nil.
func notNegative(keys []string, negative ...bool) error {
	for i, neg := range negative {
		if neg {
			return errAt(keys[i], "must not be negative")
		}
	}
	return nil
}

// oneOf returns an Error at key unless v is one of allowed.
func oneOf(key, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return errAt(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

// TLS is the `tls:` block of a connection (Kafka and NATS): the files and
// names a TLS client needs. A nil *TLS means plaintext (for NATS, unless
// the URL says tls://); an empty one means TLS with the system roots.
type TLS struct {
	// CA is a PEM file of certificate authorities to trust instead of the
	// system roots.
	CA string `yaml:"ca"`
	// Cert and Key are PEM files of a client certificate (mutual TLS).
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables verification; for tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL mechanisms accepted in SASL.Mechanism.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// SASL is the `sasl:` block of a Kafka connection. A nil *SASL means no
// authentication. Combine it with TLS: PLAIN sends the password as is.
type SASL struct {
	// Mechanism is plain, scram-sha-256 or scram-sha-512 (case does not
	// matter). Required.
	Mechanism string `yaml:"mechanism"`
	// Username and Password are the credentials. Username is required.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// PasswordFile, instead of Password, names a file holding the password
	// (a mounted secret), read when the source or sink opens; a trailing
	// newline is not part of it.
	PasswordFile string `yaml:"password_file"`
}

// Validate reports the first problem with c; a nil c is valid.
func (c *SASL) Validate() error {
	if c == nil {
		return nil
	}
	switch strings.ToLower(c.Mechanism) {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	case "":
		return errors.New("sasl: mechanism is required (plain, scram-sha-256, scram-sha-512)")
	default:
		return fmt.Errorf("sasl: mechanism %q is not one of plain, scram-sha-256, scram-sha-512", c.Mechanism)
	}
	if c.Username == "" {
		return errors.New("sasl: username is required")
	}
	if c.Password != "" && c.PasswordFile != "" {
		return errors.New("sasl: give password or password_file, not both")
	}
	return nil
}

// NATSAuth authenticates to a NATS server: at most one of user and
// password, a token, an nkey seed file or a credentials file. The zero
// value authenticates with none (or with the user and password of the
// URL).
type NATSAuth struct {
	// User and Password authenticate with a user name and password.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Token authenticates with a token.
	Token string `yaml:"token"`
	// NKeySeedFile is a file holding a user nkey seed ("SU...").
	NKeySeedFile string `yaml:"nkey_seed_file"`
	// CredsFile is a decentralized-auth credentials file (user JWT and
	// seed), as written by `nsc`.
	CredsFile string `yaml:"creds_file"`
}

// Validate reports a password without a user, or more than one method.
func (a NATSAuth) Validate() error {
	methods := 0
	if a.User != "" || a.Password != "" {
		if a.User == "" {
			return errors.New("password: set without user")
		}
		methods++
	}
	for _, s := range []string{a.Token, a.NKeySeedFile, a.CredsFile} {
		if s != "" {
			methods++
		}
	}
	if methods > 1 {
		return errors.New("user/password, token, nkey_seed_file and creds_file: set only one")
	}
	return nil
}

// DefaultConnectTimeout is Conn.ConnectTimeout when unset.
const DefaultConnectTimeout = 5 * time.Second

// MaxConnectTimeout bounds Conn.ConnectTimeout.
const MaxConnectTimeout = 10 * time.Minute

// Conn holds the connection settings shared by a source and its sinks:
// where to connect, as whom, and how long to try.
type Conn struct {
	// Brokers are Kafka bootstrap brokers (host:port).
	Brokers []string `yaml:"brokers"`
	// URL is the NATS server URL (comma-separated for a cluster).
	URL string `yaml:"url"`
	// TLS enables TLS (Kafka and NATS); nil means plaintext.
	TLS *TLS `yaml:"tls"`
	// SASL authenticates to Kafka: mechanism plain, scram-sha-256 or
	// scram-sha-512, username, password.
	SASL *SASL `yaml:"sasl"`
	// NATSAuth authenticates to NATS.
	NATSAuth `yaml:",inline"`
	// ConnectTimeout bounds connecting to a broker or server (default
	// DefaultConnectTimeout, at most MaxConnectTimeout): an unreachable
	// one fails within it, naming its address.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
}

// IsZero reports whether no connection setting is given: where to connect
// and as whom (a connect_timeout alone does not make a connection of its
// own).
func (c Conn) IsZero() bool {
	return len(c.Brokers) == 0 && c.URL == "" && c.TLS == nil && c.SASL == nil && c.NATSAuth == NATSAuth{}
}

// Validate checks connect_timeout.
func (c Conn) Validate() error {
	if t := c.ConnectTimeout; t < 0 || t > MaxConnectTimeout {
		return errAt("connect_timeout", "%v is outside 0..10m (0: the default, 5s)", t)
	}
	return nil
}

// KafkaGroup tunes a Kafka source's consumer group. The processes of one
// group should share all of it.
type KafkaGroup struct {
	// SessionTimeout is how long the coordinator waits for a silent
	// member (a crashed process: kill -9, a lost machine) before it
	// declares it dead and hands its partitions to the others. It must lie
	// within the brokers' group.min/max.session.timeout.ms (Kafka's
	// default minimum is 6s). Default 10s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// RebalanceTimeout is how long the coordinator waits for the members
	// to rejoin once a rebalance begins; a member that does not (it died,
	// even in the middle of joining) is then removed. A live source
	// rejoins within a heartbeat interval. Default 5s.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// HeartbeatInterval is how often a member says it is alive; it is
	// also how soon it notices a rebalance. Default 1s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// RequestTimeout bounds each request to the group coordinator, commits
	// included (a join waits at most it plus RebalanceTimeout). Default
	// 5s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// JoinGroupBackoff is the pause before a member tries again after a
	// join failed. Default 5s.
	JoinGroupBackoff time.Duration `yaml:"join_group_backoff"`
}

// Validate reports the first negative duration.
func (g KafkaGroup) Validate() error {
	return notNegative([]string{"session_timeout", "rebalance_timeout", "heartbeat_interval", "request_timeout", "join_group_backoff"},
		g.SessionTimeout < 0, g.RebalanceTimeout < 0, g.HeartbeatInterval < 0, g.RequestTimeout < 0, g.JoinGroupBackoff < 0)
}

// DefaultKafkaMaxBytes is KafkaFetch.MaxBytes when unset.
const DefaultKafkaMaxBytes = 1 << 20

// KafkaFetch tunes a Kafka source's fetches: a fetch returns once it has
// MinBytes or MaxWait passed, and at most MaxBytes per partition.
type KafkaFetch struct {
	// MaxWait is how long a fetch waits for MinBytes before returning what
	// it has; on an idle topic, it is also how late a source notices a
	// rebalance or a close. Default 1s: a fetch returns as soon as a
	// record is there, so MaxWait only bounds an idle one.
	MaxWait time.Duration `yaml:"max_wait"`
	// MinBytes is the least a fetch request asks the broker to wait for.
	// Default 1.
	MinBytes int `yaml:"min_bytes"`
	// MaxBytes is the most a fetch request returns per partition. Default
	// DefaultKafkaMaxBytes (1 MiB).
	MaxBytes int `yaml:"max_bytes"`
}

// Validate reports the first negative value, or a MinBytes above MaxBytes
// (or its default).
func (f KafkaFetch) Validate() error {
	if err := notNegative([]string{"max_wait", "min_bytes", "max_bytes"}, f.MaxWait < 0, f.MinBytes < 0, f.MaxBytes < 0); err != nil {
		return err
	}
	if maxBytes := cmp.Or(f.MaxBytes, DefaultKafkaMaxBytes); f.MinBytes > maxBytes {
		return errAt("min_bytes", "%d exceeds max_bytes %d", f.MinBytes, maxBytes)
	}
	return nil
}

// Defaults of JetStreamFetch.
const (
	DefaultFetchBatch    = 500
	DefaultFetchWait     = 5 * time.Second
	DefaultAckBatch      = 1
	DefaultMaxAckPending = 1 << 16
)

// JetStreamFetch tunes a JetStream source.
type JetStreamFetch struct {
	// FetchBatch is how many messages the client buffers ahead of Fetch
	// (jetstream.PullMaxMessages). Default DefaultFetchBatch.
	FetchBatch int `yaml:"fetch_batch"`
	// FetchWait is the expiry of one pull request, at least 1s. An idle
	// source re-checks its consumer this often (until-end, stalled acks);
	// a record is delivered as soon as it is there. Default
	// DefaultFetchWait.
	FetchWait time.Duration `yaml:"fetch_wait"`
	// AckBatch makes a source acknowledge only every AckBatch-th Commit;
	// the latest commit not yet acknowledged is acknowledged by Close.
	// Unacknowledged records are redelivered after a crash. Default 1:
	// every Commit is acknowledged, and confirmed by the server, before it
	// returns.
	AckBatch int `yaml:"ack_batch"`
	// MaxAckPending bounds the messages the server delivers before it
	// sees a commit. It must exceed FetchBatch+AckBatch plus the caller's
	// commit interval. Default DefaultMaxAckPending.
	MaxAckPending int `yaml:"max_ack_pending"`
}

// Validate reports the first negative value, or a FetchWait set below 1s.
func (j JetStreamFetch) Validate() error {
	if err := notNegative([]string{"fetch_batch", "fetch_wait", "ack_batch", "max_ack_pending"},
		j.FetchBatch < 0, j.FetchWait < 0, j.AckBatch < 0, j.MaxAckPending < 0); err != nil {
		return err
	}
	if j.FetchWait != 0 && j.FetchWait < time.Second {
		return errAt("fetch_wait", "%v: at least 1s (a pull request's expiry; a record is delivered as soon as it is there)", j.FetchWait)
	}
	return nil
}

// KafkaProduce tunes a Kafka sink.
type KafkaProduce struct {
	// BatchTimeout is how long a sink waits to fill a batch before sending
	// it: a batch is sent when it holds BatchSize messages or has waited
	// BatchTimeout. Flush waits for the batches pending, so a commit of
	// the service waits up to BatchTimeout for the outputs before it.
	// Default 10ms.
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// BatchSize is the most messages a sink sends in one produce request
	// per partition. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// RequiredAcks is what a produce request waits for: all (the default:
	// a commit waits for every in-sync replica to have the outputs before
	// it), one (the leader only: a leader lost before replicating loses
	// outputs a commit covered) or none (no acknowledgement: outputs can
	// be lost).
	RequiredAcks string `yaml:"required_acks"`
	// Compression is the sink's codec: none (the default), gzip, snappy,
	// lz4 or zstd.
	Compression string `yaml:"compression"`
}

// Validate reports the first negative value, or an unknown RequiredAcks
// or Compression.
func (p KafkaProduce) Validate() error {
	if err := notNegative([]string{"batch_timeout", "batch_size"}, p.BatchTimeout < 0, p.BatchSize < 0); err != nil {
		return err
	}
	if p.RequiredAcks != "" {
		if err := oneOf("required_acks", p.RequiredAcks, "all", "one", "none"); err != nil {
			return err
		}
	}
	if p.Compression != "" {
		return oneOf("compression", p.Compression, "none", "gzip", "snappy", "lz4", "zstd")
	}
	return nil
}

// KafkaTopic is the topic a Kafka sink creates when it does not exist.
type KafkaTopic struct {
	// Create makes the sink's Check create its topic when it does not
	// exist (it checks the topic either way), with Partitions partitions,
	// Replication replicas and Retention (each 0: the broker's default).
	Create      bool          `yaml:"create"`
	Partitions  int           `yaml:"partitions"`
	Replication int           `yaml:"replication"`
	Retention   time.Duration `yaml:"retention"`
}

// Validate reports a value out of range (replication 1 to 32767,
// retention at least 1ms), or one set without Create.
func (t KafkaTopic) Validate() error {
	for _, k := range []struct {
		key string
		bad bool
	}{
		{"partitions", t.Partitions < 0},
		{"replication", t.Replication < 0 || t.Replication > 32767},
		{"retention", t.Retention < 0 || t.Retention > 0 && t.Retention < time.Millisecond},
	} {
		if k.bad {
			return errAt(k.key, "out of range (replication 1 to 32767; retention at least 1ms)")
		}
	}
	if !t.Create {
		for _, k := range []struct {
			key string
			set bool
		}{{"partitions", t.Partitions != 0}, {"replication", t.Replication != 0}, {"retention", t.Retention != 0}} {
			if k.set {
				return errAt(k.key, "applies to the topic create: true makes; set create: true, or drop it")
			}
		}
	}
	return nil
}

// DefaultPublishWindow is JetStreamPublish.PublishWindow when unset.
const DefaultPublishWindow = 1024

// JetStreamPublish tunes a JetStream sink.
type JetStreamPublish struct {
	// PublishWindow bounds the publishes awaiting the server's
	// acknowledgement; Publish blocks when it is full. Default
	// DefaultPublishWindow.
	PublishWindow int `yaml:"publish_window"`
	// CreateStream makes the sink create its stream, capturing its
	// subject, when no stream of that name exists (file storage, limits
	// retention: the stream `publish --create-stream` makes); an existing
	// stream is left as it is. Unset is false, except that a run sets it
	// for a sink on its embedded server, which no one else can reach to
	// create the stream before the run fails.
	CreateStream *bool `yaml:"create_stream"`
}

// Validate reports a negative PublishWindow.
func (j JetStreamPublish) Validate() error {
	return notNegative([]string{"publish_window"}, j.PublishWindow < 0)
}
