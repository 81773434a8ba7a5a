package connectors

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// ErrNoPartitions is wrapped by Fetch of a Kafka source opened with
// untilEnd when the settled group assigns this member no partition of the
// topic (more members than partitions, or other live members hold them
// all) and KafkaConfig.AllowEmpty is false. The error names the group,
// the partitions and the members that hold them.
var ErrNoPartitions = errors.New("no partition of the topic is assigned to this member")

// ErrGroupUnsettled is wrapped by Fetch of a Kafka source opened with
// untilEnd when this member has read its own partitions to the end but the
// group did not settle within three settle windows (see NewKafkaSource):
// members kept joining and leaving, so the rest of the topic was never
// either assigned to this member or shown to be held by a live one. The
// error names the partitions and their holders.
var ErrGroupUnsettled = errors.New("the group did not settle")

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
	// MinBytes is the least a fetch request asks the broker to wait for.
	//
	// Default: 1
	MinBytes int `yaml:"min_bytes"`
	// MaxBytes is the most a fetch request returns per partition.
	//
	// Default: 1048576 (1 MiB)
	MaxBytes int `yaml:"max_bytes"`
	// MaxWait is how long a fetch waits for MinBytes before returning what
	// it has; on an idle topic, it is also how late a source notices a
	// rebalance or a close.
	//
	// Default: 1s
	MaxWait time.Duration `yaml:"max_wait"`
	// QueueCapacity bounds the records a source holds ahead of Fetch, both
	// per partition and in total: a slow learner slows fetching.
	//
	// Default: 1000
	QueueCapacity int `yaml:"queue_capacity"`
	// HeartbeatInterval is how often a source tells the group coordinator it
	// is alive; it is also how soon it notices a rebalance.
	//
	// Default: 1s
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it declares a member dead and rebalances: how long the
	// partitions of a process that died without leaving the group (kill
	// -9, a lost machine) wait for another member. It must lie within the
	// brokers' group.min/max.session.timeout.ms (Kafka's default minimum
	// is 6s).
	//
	// Default: 10s
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// RebalanceTimeout is how long the coordinator waits for the members to
	// rejoin once a rebalance begins; a member that does not (it died
	// without leaving, or in the middle of joining) is then removed. A
	// live source rejoins within a heartbeat interval.
	//
	// Default: 5s
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// JoinGroupBackoff is the pause before rejoining after a failed join.
	//
	// Default: 5s
	JoinGroupBackoff time.Duration `yaml:"join_group_backoff"`
	// Timeout bounds each request to the group coordinator, commits
	// included.
	//
	// Default: 5s
	Timeout time.Duration `yaml:"timeout"`

	// BatchTimeout is how long a sink waits to fill a batch before sending
	// it. Flush waits for the batches pending, so for it too: a commit of
	// the service waits up to BatchTimeout for the outputs before it.
	//
	// Default: 10ms
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// BatchSize is the most messages a sink sends in one produce request
	// per partition.
	//
	// Default: 1000
	BatchSize int `yaml:"batch_size"`
	// RequiredAcks is what a sink's produce requests wait for: all (every
	// in-sync replica), one (the leader) or none.
	//
	// Default: all
	RequiredAcks string `yaml:"required_acks"`
	// Compression is a sink's codec: none, gzip, snappy, lz4 or zstd.
	//
	// Default: none
	Compression string `yaml:"compression"`
	// MaxPending bounds the messages a sink has published but not yet had
	// acknowledged; Publish blocks beyond it.
	//
	// Default: 10000
	MaxPending int `yaml:"max_pending"`
	// CreateTopic makes a sink's Check create its topic when it does not
	// exist, with TopicPartitions partitions, TopicReplication replicas
	// and TopicRetention (each 0: the broker's default).
	CreateTopic      bool          `yaml:"-"`
	TopicPartitions  int           `yaml:"-"`
	TopicReplication int           `yaml:"-"`
	TopicRetention   time.Duration `yaml:"-"`

	// AllowEmpty lets a source opened with untilEnd end without an error
	// when the settled group assigns it no partition (see ErrNoPartitions).
	AllowEmpty bool `yaml:"-"`
	// Logger receives what a source waits for and why it ends with part of
	// the topic. Nil discards.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports the first problem with c, naming the key at fault. It
// does not check that Topic is set: NewKafkaSource and NewKafkaSink do.
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
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"dial_timeout", c.DialTimeout}, {"max_wait", c.MaxWait},
		{"heartbeat_interval", c.HeartbeatInterval}, {"session_timeout", c.SessionTimeout},
		{"rebalance_timeout", c.RebalanceTimeout}, {"join_group_backoff", c.JoinGroupBackoff},
		{"timeout", c.Timeout}, {"batch_timeout", c.BatchTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("kafka: %s: negative duration %v", d.key, d.v)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{
		{"min_bytes", c.MinBytes}, {"max_bytes", c.MaxBytes}, {"queue_capacity", c.QueueCapacity},
		{"batch_size", c.BatchSize}, {"max_pending", c.MaxPending},
	} {
		if n.v < 0 {
			return fmt.Errorf("kafka: %s: negative value %d", n.key, n.v)
		}
	}
	if _, err := requiredAcks(c.RequiredAcks); err != nil {
		return err
	}
	if _, err := compression(c.Compression); err != nil {
		return err
	}
	if maxBytes := cmp.Or(c.MaxBytes, 1<<20); c.MinBytes > maxBytes {
		return fmt.Errorf("kafka: min_bytes %d exceeds max_bytes %d", c.MinBytes, maxBytes)
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
	orDefault(&c.Timeout, 5*time.Second)
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
	t, err := c.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	m, err := c.SASL.mechanism()
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

// KafkaSource reads one topic as a member of a consumer group. It is not
// safe for concurrent use (see Source), except Assignments and Close, which
// may be called from any goroutine.
//
// It drives kafka-go's ConsumerGroup generations itself, with one
// single-partition kafka.Reader per assigned partition, instead of using a
// group kafka.Reader: a group Reader neither says which partitions it owns
// nor refuses a commit for a partition a rebalance gave away (its commit
// would overwrite the new owner's offset), and after a rebalance it rereads
// from the committed offset records it has already delivered. Here:
//
//   - offsets are committed only by Commit, synchronously, with the
//     generation that currently owns the partition;
//   - a partition that stays with this process across a rebalance resumes
//     after the last record Fetch returned, not at the committed offset,
//     so no record reaches the caller twice;
//   - records fetched ahead for a generation that ended are dropped.
//
// Memory is bounded by QueueCapacity records per assigned partition (each
// kafka-go reader's queue) plus QueueCapacity records in the shared queue.
type KafkaSource struct {
	cfg      KafkaConfig
	untilEnd bool
	name     string
	dialer   *kafka.Dialer
	group    *kafka.ConsumerGroup
	// first and end are the partitions' log start and end offsets when the
	// source was opened (end = the high watermark: one past the last record).
	first, end map[int]int64
	// start is StartOffset; starts are where the partitions without a
	// committed offset begin, resolved when the source was opened (a
	// partition added since begins at its first record); startWarned:
	// a start that did not apply was logged as a warning once.
	start       Start
	starts      map[int]int64
	startWarned bool
	origin      string // Position.Origin

	msgs   chan kafkaMsg
	errc   chan error // fatal errors for Fetch; capacity 1
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
	done   chan struct{} // closed by Close

	mu        sync.Mutex
	gen       *kafkaGen     // the live generation, nil between generations
	wake      chan struct{} // closed and replaced whenever gen changes
	next      map[int]int64 // per partition: offset of the next record to deliver
	committed map[int]int64 // per partition: last offset committed by the group, as known here
	lastGen   *kafkaGen     // the last generation this member took part in
	epochs    uint64        // epochs handed out

	// With untilEnd: since when this member has had nothing left to read
	// while the group was not settled (zero while it reads), and whether
	// it asked the group to rebalance since the last generation began.
	waitSince time.Time
	probing   bool
	probes    *atomic.Uint64 // rebalances asked for: the member metadata's user data
}

var (
	_ Assigned       = (*KafkaSource)(nil)
	_ MultiCommitter = (*KafkaSource)(nil)
	_ Positioned     = (*KafkaSource)(nil)
	_ Rereader       = (*KafkaSource)(nil)
)

var _ Source = (*KafkaSource)(nil)

// kafkaGen is one generation of the group as this member saw it.
type kafkaGen struct {
	g     *kafka.Generation
	owned []int          // sorted partition ids
	epoch map[int]uint64 // per owned partition: its epoch (Record.Epoch)
	// probed: the group formed this generation in a rebalance this member
	// asked for after it had read its share, so every other member in it
	// rejoined since, alive. probe, closed, ends the generation to ask.
	probed bool
	probe  chan struct{}
	asked  bool // probe is closed
}

func (g *kafkaGen) owns(p int) bool {
	_, ok := slices.BinarySearch(g.owned, p)
	return ok
}

// probeBalancer is one of kafka-go's group balancers whose member metadata
// carries the number of rebalances this source asked for. A member that
// rejoins with changed metadata makes the coordinator rebalance even when
// it is not the group's leader (a leader's rejoin always does); the
// assignment ignores the number, so members of earlier builds, which send
// none, assign alike.
//
// It also sorts the partitions before assigning them: kafka-go's balancers
// take them in the order of the broker's metadata response, which brokers
// need not keep (kfake does not), so that a rebalance among the same
// members could swap partitions between them. Sorted, the same members
// get the same partitions, and asking for a rebalance moves none.
type probeBalancer struct {
	kafka.GroupBalancer
	probes *atomic.Uint64
}

func (b probeBalancer) UserData() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, b.probes.Load()), nil
}

func (b probeBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	partitions = slices.Clone(partitions)
	slices.SortFunc(partitions, func(x, y kafka.Partition) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.ID, y.ID))
	})
	return b.GroupBalancer.AssignGroups(members, partitions)
}

// kafkaMsg is a fetched message tagged with the generation that fetched it.
type kafkaMsg struct {
	gen *kafkaGen
	m   kafka.Message
	lag int64 // the partition's high watermark at the fetch minus m.Offset+1
}

// NewKafkaSource joins cfg.Group on cfg.Topic and starts fetching. It first
// lists the topic's partitions with their start and end offsets, so a bad
// broker address, TLS or SASL setting or a missing topic fails here, with an
// error naming the cause.
//
// With untilEnd, Fetch returns ErrEndOfInput once the source has delivered,
// on every partition a settled group assigns to it, every record below the
// end offset that partition had when NewKafkaSource ran. Partitions that
// were empty then (or whose committed offset is already at the end) count as
// done at once, and records produced later are never delivered.
//
// A group is settled when this member owns every partition of the topic, or
// when its generation has lasted a settle window — the larger of
// SessionTimeout and RebalanceTimeout, plus HeartbeatInterval and a second —
// with no rebalance. A member that died without leaving the group (kill -9
// of a process, a process killed while it joined) still holds partitions
// in the generations the coordinator forms until its session or rebalance
// timeout removes it; the rebalance that follows hands its partitions to the
// live members. So a member that has read its own share waits, logging once
// what it waits for, until either a rebalance gives it more partitions or
// the window proves the holders of the rest alive. Then it ends: with its
// own share (live members hold the rest, and end with theirs), or, when it
// owns no partition, with an error wrapping ErrNoPartitions unless
// AllowEmpty is set. A group that does not settle within three windows
// ends Fetch with an error wrapping ErrGroupUnsettled. A run that ends
// without error has therefore read, in its group, everything it owns, and
// nothing is pending on a dead member. Members of one group are assumed to
// share the timeouts.
//
// ctx bounds the opening requests only; Close stops the source.
func NewKafkaSource(ctx context.Context, cfg KafkaConfig, untilEnd bool) (*KafkaSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		return nil, errors.New("kafka: topic is required for a source")
	}
	cfg = cfg.withDefaults()
	name := "kafka:" + cfg.Topic
	d, err := cfg.dialer()
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	// Reaching the brokers may take up to the dial timeout: say so, rather
	// than wait in silence.
	slow := time.AfterFunc(2*time.Second, func() {
		cfg.Logger.Warn("still connecting to the Kafka brokers", "source", name, "brokers", strings.Join(cfg.Brokers, ","), "dial_timeout", cfg.DialTimeout)
	})
	defer slow.Stop()
	if err := kafkaProbe(ctx, &cfg, d); err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	cluster, first, end, err := kafkaListOffsets(ctx, &cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	start, err := ParseStart(cfg.StartOffset)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: start: %w", name, err)
	}
	starts, err := kafkaStarts(ctx, &cfg, start, first, end)
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: start %s: %w", name, start, err)
	}
	probes := new(atomic.Uint64)
	logger := cfg.Logger
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		// kafka-go retries what fails in joining the group; say what.
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			logger.Warn("kafka consumer group: "+fmt.Sprintf(format, args...), "source", name)
		}),
		// And what it does: joins, generations, assignments (debug).
		Logger: kafka.LoggerFunc(func(format string, args ...any) {
			if logger.Enabled(context.Background(), slog.LevelDebug) {
				logger.Debug("kafka consumer group: "+fmt.Sprintf(format, args...), "source", name)
			}
		}),
		GroupBalancers: []kafka.GroupBalancer{
			probeBalancer{kafka.RangeGroupBalancer{}, probes},
			probeBalancer{kafka.RoundRobinGroupBalancer{}, probes},
		},
		ID:                cfg.Group,
		Brokers:           cfg.Brokers,
		Dialer:            d,
		Topics:            []string{cfg.Topic},
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		JoinGroupBackoff:  cfg.JoinGroupBackoff,
		Timeout:           cfg.Timeout,
		// A partition without a committed offset: startGeneration starts
		// it at starts.
		StartOffset: kafka.FirstOffset,
	})
	if err != nil {
		return nil, fmt.Errorf("kafka source %s: %w", name, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &KafkaSource{
		cfg:       cfg,
		untilEnd:  untilEnd,
		name:      name,
		dialer:    d,
		group:     group,
		first:     first,
		end:       end,
		start:     start,
		starts:    starts,
		origin:    "kafka cluster " + cluster + " topic " + cfg.Topic,
		msgs:      make(chan kafkaMsg, cfg.QueueCapacity),
		errc:      make(chan error, 1),
		cancel:    cancel,
		done:      make(chan struct{}),
		wake:      make(chan struct{}),
		next:      make(map[int]int64),
		committed: make(map[int]int64),
		probes:    probes,
	}
	s.wg.Go(func() { s.run(runCtx) })
	return s, nil
}

// kafkaStarts resolves st to an offset per partition, given the
// partitions' log start and end offsets: an offset outside the log moves
// to its nearest end.
func kafkaStarts(ctx context.Context, cfg *KafkaConfig, st Start, first, end map[int]int64) (map[int]int64, error) {
	starts := make(map[int]int64, len(end))
	var reqs []kafka.OffsetRequest
	for p := range end {
		switch st.Kind {
		case StartEarliest:
			starts[p] = first[p]
		case StartLatest:
			starts[p] = end[p]
		case StartOffset:
			starts[p] = min(max(st.Offset, first[p]), end[p])
		case StartTime:
			// Kafka stamps records in milliseconds: the first one at or
			// after st.Time is at or after the next whole millisecond.
			ms := st.Time.UnixMilli()
			if st.Time.After(time.UnixMilli(ms)) {
				ms++
			}
			starts[p] = first[p] // before 1970: every record (a timestamp ≤ 0 is no time to the broker)
			if ms > 0 {
				reqs = append(reqs, kafka.OffsetRequest{Partition: p, Timestamp: ms})
			}
		}
	}
	if len(reqs) == 0 {
		return starts, nil
	}
	t, err := cfg.transport()
	if err != nil {
		return nil, err
	}
	defer t.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: t, Timeout: cfg.DialTimeout}
	res, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{cfg.Topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets by time: %w", err)
	}
	for _, po := range res.Topics[cfg.Topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("list offsets by time: partition %d: %w", po.Partition, po.Error)
		}
		// The first record stamped at or after the time; none (the
		// broker answers offset -1): the partition's end.
		starts[po.Partition] = end[po.Partition]
		for off := range po.Offsets {
			if off >= 0 {
				starts[po.Partition] = min(max(off, first[po.Partition]), end[po.Partition])
			}
		}
	}
	return starts, nil
}

// kafkaProbe connects to the brokers, all at once, until one answers, so
// that a bad address, TLS or SASL setting fails with an error that says
// which, and unreachable brokers cost one dial timeout together, not one
// each. Brokers answer a failed SASL authentication by closing the
// connection (kfake) or by an error code and then closing it (Kafka),
// which a later request would only report as an unexpected EOF.
func kafkaProbe(ctx context.Context, cfg *KafkaConfig, d *kafka.Dialer) error {
	// kafka-go's dial heeds its context up to the TLS handshake only (its
	// connection sets its own read deadlines): a broker that accepts and
	// never answers the SASL handshake would hold the probe for ever. So
	// the probe's connections are closed when its context ends.
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	d = new(*d)
	d.DialFunc = func(dctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(dctx, network, address)
		if err == nil {
			context.AfterFunc(ctx, func() { c.Close() })
		}
		return c, err
	}
	type result struct {
		err  error
		auth bool // the broker refused the SASL authentication
	}
	results := make(chan result, len(cfg.Brokers))
	for _, b := range cfg.Brokers {
		go func() {
			probe := *d
			var m *kafkaSASLProbe
			if d.SASLMechanism != nil {
				m = &kafkaSASLProbe{Mechanism: d.SASLMechanism}
				probe.SASLMechanism = m
			}
			c, err := probe.DialContext(ctx, "tcp", b)
			switch {
			case err == nil:
				results <- result{err: c.Close()}
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				results <- result{err: fmt.Errorf("broker %s: no answer within %v (connect_timeout): is a Kafka broker listening there, with the TLS and SASL settings given? %w", b, cfg.DialTimeout, err)}
			case m != nil && m.started.Load():
				results <- result{fmt.Errorf("broker %s: SASL %s as %q: %w", b, d.SASLMechanism.Name(), cfg.SASL.Username, err), true}
			default:
				results <- result{err: fmt.Errorf("broker %s: %w", b, err)}
			}
		}()
	}
	// The first broker that answers ends the probe (the others' dials are
	// cancelled); a failed authentication is the error to report, since
	// every broker of a cluster would refuse it alike; else all of them.
	var all []error
	for range cfg.Brokers {
		switch r := <-results; {
		case r.err == nil:
			return nil
		case r.auth:
			return r.err
		default:
			all = append(all, r.err)
		}
	}
	if len(all) == 1 {
		return all[0]
	}
	return &kafkaProbeErrors{all}
}

// kafkaProbeErrors are every broker's failure, on one line.
type kafkaProbeErrors struct{ errs []error }

func (e *kafkaProbeErrors) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e *kafkaProbeErrors) Unwrap() []error { return e.errs }

// kafkaSASLProbe records whether a SASL exchange began.
type kafkaSASLProbe struct {
	sasl.Mechanism
	started atomic.Bool
}

func (m *kafkaSASLProbe) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	m.started.Store(true)
	return m.Mechanism.Start(ctx)
}

// kafkaListOffsets returns the cluster's id and the log start and end
// offsets of every partition of cfg.Topic.
func kafkaListOffsets(ctx context.Context, cfg *KafkaConfig) (cluster string, first, end map[int]int64, err error) {
	t, err := cfg.transport()
	if err != nil {
		return "", nil, nil, err
	}
	defer t.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: t, Timeout: cfg.DialTimeout}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{cfg.Topic}})
	if err != nil {
		if (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)) && ctx.Err() == nil {
			return "", nil, nil, fmt.Errorf("brokers %s: no answer to a metadata request within %v (connect_timeout): is a Kafka broker listening there? %w",
				strings.Join(cfg.Brokers, ","), cfg.DialTimeout, err)
		}
		return "", nil, nil, fmt.Errorf("brokers %s: metadata: %w", strings.Join(cfg.Brokers, ","), err)
	}
	if len(md.Topics) != 1 {
		return "", nil, nil, fmt.Errorf("metadata: topic %q not in the response", cfg.Topic)
	}
	if err := md.Topics[0].Error; err != nil {
		return "", nil, nil, fmt.Errorf("topic %q: %w", cfg.Topic, err)
	}
	reqs := make([]kafka.OffsetRequest, 0, 2*len(md.Topics[0].Partitions))
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
	}
	res, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{cfg.Topic: reqs}})
	if err != nil {
		return "", nil, nil, fmt.Errorf("list offsets: %w", err)
	}
	first, end = make(map[int]int64), make(map[int]int64)
	for _, po := range res.Topics[cfg.Topic] {
		if po.Error != nil {
			return "", nil, nil, fmt.Errorf("list offsets: partition %d: %w", po.Partition, po.Error)
		}
		first[po.Partition], end[po.Partition] = po.FirstOffset, po.LastOffset
	}
	if len(end) != len(md.Topics[0].Partitions) {
		return "", nil, nil, fmt.Errorf("list offsets: %d partitions answered of %d", len(end), len(md.Topics[0].Partitions))
	}
	return md.ClusterID, first, end, nil
}

// Name returns "kafka:<topic>".
func (s *KafkaSource) Name() string { return s.name }

// Traits reports ProducerKeyed: a record's Key is its Kafka message key.
func (s *KafkaSource) Traits() Traits { return Traits{ProducerKeyed: true} }

// Position returns the group's committed offset of partition (less one)
// as the generation that assigned the partition to this member said it,
// or as this member committed it since.
func (s *KafkaSource) Position(partition int32) (Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.end[int(partition)]; !ok {
		return Position{}, false
	}
	pos := Position{Committed: -1, First: s.first[int(partition)], Start: -1, Origin: s.origin, Consumer: "kafka group " + s.cfg.Group}
	if c, ok := s.committed[int(partition)]; ok {
		pos.Committed = c - 1
	} else if st, ok := s.starts[int(partition)]; ok && s.start.Kind != StartEarliest {
		// Only while nothing is committed: the group keeps no record of
		// where a partition began.
		pos.Start = st
	}
	return pos, true
}

// Reread reads partition from offset from (from < 0: offset 0) through
// offset through with a reader of its own, outside the group: the group's
// committed offsets and this source's fetching are untouched. It asks the
// broker for the partition's log start offset first, and returns a
// *NotRetainedError when the log no longer starts at or before from, or
// when the offsets it reads skip one: records removed while it read
// (retention), by compaction, or transaction markers, which it cannot
// tell apart. Compacted and transactional topics cannot be reread.
func (s *KafkaSource) Reread(ctx context.Context, partition int32, from, through int64, fn func(*Record) error) error {
	from = max(from, 0)
	if through < from {
		return nil
	}
	_, first, _, err := kafkaListOffsets(ctx, &s.cfg)
	if err != nil {
		return fmt.Errorf("kafka source %s: reread of partition %d: %w", s.name, partition, err)
	}
	f, ok := first[int(partition)]
	if !ok {
		return fmt.Errorf("kafka source %s: reread: topic %s has no partition %d", s.name, s.cfg.Topic, partition)
	}
	if f > from {
		return &NotRetainedError{Partition: partition, From: from, First: f}
	}
	r := s.partitionReader(int(partition))
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		return fmt.Errorf("kafka source %s: reread of partition %d: %w", s.name, partition, err)
	}
	next := from
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return fmt.Errorf("kafka source %s: reread of partition %d at offset %d: %w", s.name, partition, r.Offset(), err)
		}
		if m.Offset != next {
			// Offsets of a partition are contiguous but for removed
			// records (retention passing the reader, which kafka-go
			// follows to the log start; compaction) and transaction
			// markers. Neither can be told apart from the other here:
			// the model the commit stands for may have learned records
			// that are gone.
			return &NotRetainedError{Partition: partition, From: from, First: -1, Gap: m.Offset - 1}
		}
		next = m.Offset + 1
		if m.Offset > through {
			return nil
		}
		rec := Record{Value: m.Value, Key: m.Key, Partition: partition, Offset: m.Offset, Time: m.Time,
			Lag: max(m.HighWaterMark-m.Offset-1, 0)}
		if err := fn(&rec); err != nil {
			return err
		}
		if m.Offset >= through || m.Offset+1 >= m.HighWaterMark {
			return nil
		}
	}
}

// Assignments returns the partitions the group currently assigns to this
// source, sorted, or nil between generations (while a rebalance is under
// way, before the first join, after Close).
func (s *KafkaSource) Assignments() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil {
		return nil
	}
	out := make([]int32, len(s.gen.owned))
	for i, p := range s.gen.owned {
		out[i] = int32(p)
	}
	return out
}

// Fetch returns the next record of a partition this source owns. Records of
// one partition come in offset order; partitions interleave. Fetch never
// commits. Errors: ErrEndOfInput, or errors wrapping ErrNoPartitions or
// ErrGroupUnsettled (see NewKafkaSource), ctx.Err(), and errors no retry
// will cure (authentication, authorization), which name the source.
// Transient broker errors are retried inside.
func (s *KafkaSource) Fetch(ctx context.Context) (Record, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		wake := s.wake
		var waitUntil time.Time // non-zero: waiting for the group to settle
		if s.untilEnd {
			st, until := s.untilEndLocked()
			switch st {
			case endWait:
				waitUntil = until
			case endProbe:
				gen := s.gen
				gen.asked = true
				s.probes.Add(1)
				s.probing = true
				close(gen.probe)
				s.mu.Unlock()
				s.logProbe(ctx, gen)
				continue
			case endReading:
			default:
				gen := s.gen
				s.mu.Unlock()
				return Record{}, s.ending(ctx, st, gen)
			}
		}
		s.mu.Unlock()
		// The stop signals come before queued records; each is checked
		// alone (a non-blocking receive takes no lock), and a select over
		// all of them only when no record is queued: a five-way select
		// per record locks five channels.
		select {
		case <-ctx.Done():
			return Record{}, ctx.Err()
		default:
		}
		select {
		case <-s.done:
			return Record{}, s.errClosed()
		default:
		}
		select {
		case err := <-s.errc:
			return Record{}, err
		default:
		}
		var settle <-chan time.Time
		if !waitUntil.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(waitUntil))
			} else {
				timer.Reset(time.Until(waitUntil))
			}
			settle = timer.C
		}
		var km kafkaMsg
		select {
		case km = <-s.msgs:
		default:
			select {
			case km = <-s.msgs:
			case err := <-s.errc:
				return Record{}, err
			case <-wake:
				continue
			case <-settle:
				continue
			case <-s.done:
				return Record{}, s.errClosed()
			case <-ctx.Done():
				return Record{}, ctx.Err()
			}
		}
		m := &km.m
		s.mu.Lock()
		if km.gen != s.gen || m.Offset < s.next[m.Partition] {
			s.mu.Unlock() // fetched for a generation that ended
			continue
		}
		s.next[m.Partition] = m.Offset + 1
		s.mu.Unlock()
		return Record{
			Value:     m.Value,
			Key:       m.Key,
			Partition: int32(m.Partition),
			Offset:    m.Offset,
			Time:      m.Time,
			Lag:       km.lag,
			Epoch:     km.gen.epoch[m.Partition],
			ack:       km.gen,
		}, nil
	}
}

func (s *KafkaSource) errClosed() error {
	return fmt.Errorf("kafka source %s: fetch: %w", s.name, errKafkaClosed)
}

var errKafkaClosed = errors.New("source is closed")

// Where a source opened with untilEnd stands (untilEndLocked).
const (
	endReading   = iota // records of owned partitions are still to come
	endProbe            // own share read, others hold the rest: ask for a rebalance
	endWait             // waiting for the rebalance asked for
	endDone             // the end: ErrEndOfInput
	endEmpty            // settled, and this member owns no partition
	endUnsettled        // waited too long for the group to settle
)

// untilEndLocked says where a source opened with untilEnd stands and, for
// endWait, until when it waits at most.
func (s *KafkaSource) untilEndLocked() (state int, until time.Time) {
	if s.gen != nil && !s.shareReadLocked() {
		s.waitSince = time.Time{}
		return endReading, time.Time{}
	}
	if s.gen == nil && s.waitSince.IsZero() {
		return endReading, time.Time{} // a rebalance while reading
	}
	now := time.Now()
	if s.waitSince.IsZero() {
		s.waitSince = now
	}
	if s.gen != nil {
		switch {
		case len(s.gen.owned) == len(s.end):
			return endDone, time.Time{} // the whole topic
		case s.gen.asked:
			// The generation ends: wait for the next one.
		case !s.gen.probed:
			return endProbe, time.Time{}
		case len(s.gen.owned) == 0 && !s.cfg.AllowEmpty:
			return endEmpty, time.Time{}
		default:
			return endDone, time.Time{}
		}
	}
	giveUp := s.waitSince.Add(s.cfg.settleTimeout())
	if !now.Before(giveUp) {
		return endUnsettled, time.Time{}
	}
	return endWait, giveUp
}

// shareReadLocked reports whether every partition of the live generation
// is delivered up to its end at open.
func (s *KafkaSource) shareReadLocked() bool {
	for _, p := range s.gen.owned {
		if s.next[p] < s.end[p] {
			return false
		}
	}
	return true
}

// ending returns what Fetch returns when a source opened with untilEnd ends in
// state st during generation gen (nil between generations).
func (s *KafkaSource) ending(ctx context.Context, st int, gen *kafkaGen) error {
	var owned []int
	if gen != nil {
		owned = gen.owned
	}
	if st == endDone {
		if !s.waitSince.IsZero() && len(owned) == len(s.end) {
			s.cfg.Logger.Warn(fmt.Sprintf("group %s settled: this member owns every partition", s.cfg.Group),
				"source", s.name, "owned", partitionList(owned), "waited", time.Since(s.waitSince).Round(time.Millisecond))
		}
		if len(owned) < len(s.end) {
			s.cfg.Logger.Warn("ending with part of the topic: the rest is held by members that rejoined the group after this one read its share",
				"source", s.name, "group", s.cfg.Group, "owned", partitionList(owned),
				"held_by_others", s.holders(ctx, gen))
		}
		return ErrEndOfInput
	}
	if st == endEmpty {
		return fmt.Errorf("kafka source %s: group %s: %w: partitions %s are held by %s",
			s.name, s.cfg.Group, ErrNoPartitions, partitionList(s.others(owned)), s.holders(ctx, gen))
	}
	return fmt.Errorf("kafka source %s: group %s: %w within %v: this member read partitions %s to their end; partitions %s are held by %s",
		s.name, s.cfg.Group, ErrGroupUnsettled, s.cfg.settleTimeout(), partitionList(owned),
		partitionList(s.others(owned)), s.holders(ctx, gen))
}

// logProbe logs that this member, having read its share of generation gen,
// asked the group to rebalance.
func (s *KafkaSource) logProbe(ctx context.Context, gen *kafkaGen) {
	s.cfg.Logger.Warn(fmt.Sprintf("waiting for partitions %s of group %s, held by other members: asking the group to rebalance, which removes members that died without leaving",
		partitionList(s.others(gen.owned)), s.cfg.Group),
		"source", s.name, "owned_and_read", partitionList(gen.owned), "held_by", s.holders(ctx, gen),
		"gives_up_in", s.cfg.settleTimeout())
}

// others returns the topic's partitions not in owned, sorted.
func (s *KafkaSource) others(owned []int) []int {
	var out []int
	for p := range s.end {
		if !slices.Contains(owned, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// holders describes, for errors and logs, the other members of the group
// and the partitions of the topic each holds, as the coordinator reports
// them now: "2 members: streamlearn-8c1f… (host /127.0.0.1) partitions 0,1;
// …".
func (s *KafkaSource) holders(ctx context.Context, gen *kafkaGen) string {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	t, err := s.cfg.transport()
	if err != nil {
		return "unknown members (" + err.Error() + ")"
	}
	defer t.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Transport: t, Timeout: s.cfg.Timeout}
	resp, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{s.cfg.Group}})
	if err == nil && len(resp.Groups) == 1 {
		err = resp.Groups[0].Error
	}
	if err != nil || len(resp.Groups) != 1 {
		return fmt.Sprintf("unknown members (describing group %s: %v)", s.cfg.Group, err)
	}
	var self string
	if gen != nil {
		self = gen.g.MemberID
	}
	var b strings.Builder
	n := 0
	for _, m := range resp.Groups[0].Members {
		if m.MemberID == self {
			continue
		}
		var parts []int
		for _, tp := range m.MemberAssignments.Topics {
			if tp.Topic == s.cfg.Topic {
				parts = append(parts, tp.Partitions...)
			}
		}
		slices.Sort(parts)
		if n > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (host %s) partitions %s", m.MemberID, m.ClientHost, partitionList(parts))
		n++
	}
	switch n {
	case 0:
		return "no other member (group " + resp.Groups[0].GroupState + ")"
	case 1:
		return "1 member: " + b.String()
	}
	return strconv.Itoa(n) + " members: " + b.String()
}

// partitionList formats partition ids as "0,1,2", or "none".
func partitionList(ps []int) string {
	if len(ps) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}

// Commit commits r.Offset+1 for r's partition with the generation that
// owns the partition now: r and every earlier record of its partition will
// not be delivered again to this group. It is synchronous (one round trip
// to the coordinator, bounded by Timeout; ctx is honoured while waiting for
// a rebalance to finish) and cumulative, so committing the last learned
// record of each partition is enough; a commit at or below the offset the
// group already has is a no-op. It returns an error wrapping
// ErrPartitionRevoked when a rebalance gave the partition to another
// member.
func (s *KafkaSource) Commit(ctx context.Context, r Record) error {
	if errs := s.CommitMany(ctx, []Record{r}); errs != nil {
		return errs[0]
	}
	return nil
}

// CommitMany commits the records, each the last of its partition to
// commit, in one offset commit request: what Commit does for one, for
// every partition of a commit round at once.
func (s *KafkaSource) CommitMany(ctx context.Context, recs []Record) []error {
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(recs))
		}
		errs[i] = err
	}
	var pending []int // indices of recs not yet committed
	for i, r := range recs {
		if _, ok := r.ack.(*kafkaGen); !ok {
			fail(i, fmt.Errorf("kafka source %s: commit: record was not fetched from a Kafka source", s.name))
			continue
		}
		pending = append(pending, i)
	}
	failAll := func(err error) {
		for _, i := range pending {
			p, off := recs[i].Partition, recs[i].Offset+1
			fail(i, fmt.Errorf("kafka source %s: commit partition %d offset %d: %w", s.name, p, off, err))
		}
	}
	for len(pending) > 0 {
		s.mu.Lock()
		gen, wake := s.gen, s.wake
		pending = slices.DeleteFunc(pending, func(i int) bool {
			c, ok := s.committed[int(recs[i].Partition)]
			return ok && recs[i].Offset+1 <= c
		})
		s.mu.Unlock()
		if len(pending) == 0 {
			break
		}
		if gen == nil { // a rebalance is under way
			select {
			case <-wake:
				continue
			case <-s.done:
				failAll(errKafkaClosed)
			case <-ctx.Done():
				failAll(ctx.Err())
			}
			break
		}
		offsets := make(map[int]int64, len(pending))
		pending = slices.DeleteFunc(pending, func(i int) bool {
			p, off := int(recs[i].Partition), recs[i].Offset+1
			if !gen.owns(p) {
				fail(i, fmt.Errorf("kafka source %s: commit partition %d offset %d: %w", s.name, p, off, ErrPartitionRevoked))
				return true
			}
			offsets[p] = max(offsets[p], off)
			return false
		})
		if len(pending) == 0 {
			break
		}
		err := gen.g.CommitOffsets(map[string]map[int]int64{s.cfg.Topic: offsets})
		if err == nil {
			s.mu.Lock()
			for p, off := range offsets {
				if off > s.committed[p] {
					s.committed[p] = off
				}
			}
			s.mu.Unlock()
			break
		}
		if !kafkaGenerationError(err) {
			failAll(err)
			break
		}
		// The generation is ending: retry with the next one, for the
		// partitions it still gives this member.
		s.mu.Lock()
		if s.gen == gen {
			wake = s.wake
			s.mu.Unlock()
			select {
			case <-wake:
				continue
			case <-s.done:
			case <-ctx.Done():
			}
			failAll(err)
			break
		}
		s.mu.Unlock()
	}
	return errs
}

// Close leaves the group (which rebalances at once, rather than after
// SessionTimeout), stops fetching and waits for every goroutine the source
// started. It does not commit. Close is idempotent.
func (s *KafkaSource) Close() error {
	var err error
	s.closed.Do(func() {
		close(s.done)
		err = s.group.Close() // ends the generation: its fetchers return
		s.cancel()
		s.wg.Wait()
		s.mu.Lock()
		s.setGenLocked(nil)
		s.mu.Unlock()
	})
	return err
}

// run follows the group's generations until the source closes.
func (s *KafkaSource) run(ctx context.Context) {
	for {
		g, err := s.group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			if kafkaFatal(err) {
				s.fail(fmt.Errorf("kafka source %s: group %s: %w", s.name, s.cfg.Group, err))
			}
			continue // kafka-go backs off before the next join
		}
		s.startGeneration(g)
	}
}

// startGeneration installs g and starts one fetcher per assigned partition.
// kafka-go returns a generation only after every function started in the
// previous one has returned, so no fetcher of an older generation runs.
func (s *KafkaSource) startGeneration(g *kafka.Generation) {
	assigned := g.Assignments[s.cfg.Topic]
	kg := &kafkaGen{g: g, owned: make([]int, 0, len(assigned)), epoch: make(map[int]uint64, len(assigned)), probe: make(chan struct{})}
	starts := make(map[int]int64, len(assigned))
	s.mu.Lock()
	kg.probed, s.probing = s.probing, false
	prev := s.lastGen
	s.lastGen = kg
	for _, a := range assigned {
		p, start := a.ID, a.Offset
		kg.owned = append(kg.owned, p)
		// A partition continues only when this member owned it in the
		// generation just before; otherwise another member may have had
		// it: a new epoch, read from the group's committed offset.
		continues := prev != nil && g.ID == prev.g.ID+1 && prev.owns(p)
		if continues {
			kg.epoch[p] = prev.epoch[p]
		} else {
			s.epochs++
			kg.epoch[p] = s.epochs
			delete(s.next, p)
		}
		switch start {
		case kafka.FirstOffset: // the group committed nothing for p
			start = s.first[p]
			if st, ok := s.starts[p]; ok {
				start = st
			}
			if s.start.Kind == StartOffset && start != s.start.Offset && !continues {
				s.cfg.Logger.Warn("the start offset is outside the partition's log: starting at its nearest end",
					"source", s.name, "partition", p, "start", s.start.Offset, "log_start", s.first[p], "log_end", s.end[p], "offset", start)
			}
		case kafka.LastOffset:
			start = s.end[p]
		default:
			s.committed[p] = start
			if s.start.Kind != StartEarliest && !continues {
				level := slog.LevelInfo
				if !s.startWarned { // once a process: a start kept in the config applies to new partitions
					level, s.startWarned = slog.LevelWarn, true
				}
				s.cfg.Logger.Log(context.Background(), level, "partition resumes from its group's committed offset: the start applies to a partition without one",
					"source", s.name, "partition", p, "offset", start, "start", s.start)
			}
		}
		// A partition this process delivered further than the group's
		// committed offset resumes after what it delivered.
		if n, ok := s.next[p]; ok && n > start {
			start = n
		}
		s.next[p] = start
		starts[p] = start
	}
	slices.Sort(kg.owned)
	s.setGenLocked(kg)
	s.mu.Unlock()

	s.kafkaStart(g, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-kg.probe: // returning ends the generation: kafka-go rejoins
		}
		s.mu.Lock()
		if s.gen == kg {
			s.setGenLocked(nil)
		}
		s.mu.Unlock()
	})
	for _, p := range kg.owned {
		start := starts[p]
		end, ok := s.end[p]
		if s.untilEnd && (!ok || start >= end) {
			continue // nothing to read up to the end at open
		}
		s.kafkaStart(g, func(ctx context.Context) { s.fetchPartition(ctx, kg, p, start, end) })
	}
}

// kafkaStart runs fn within generation g and counts it in s.wg, so that
// Close waits for it even when g had already ended (kafka-go then runs fn
// without tracking it).
func (s *KafkaSource) kafkaStart(g *kafka.Generation, fn func(ctx context.Context)) {
	s.wg.Add(1)
	g.Start(func(ctx context.Context) {
		defer s.wg.Done()
		fn(ctx)
	})
}

// setGenLocked replaces the live generation and wakes Fetch and Commit.
func (s *KafkaSource) setGenLocked(kg *kafkaGen) {
	s.gen = kg
	close(s.wake)
	s.wake = make(chan struct{})
}

// fail hands err to the next Fetch, keeping the first one.
func (s *KafkaSource) fail(err error) {
	select {
	case s.errc <- err:
	default:
	}
}

// fetchPartition reads partition p from offset start until the generation
// ends (ctx), and with untilEnd only up to end. It must not return before
// ctx is done: in kafka-go, a function of a generation that returns ends the
// generation.
func (s *KafkaSource) fetchPartition(ctx context.Context, kg *kafkaGen, p int, start, end int64) {
	if ctx.Err() != nil {
		return
	}
	r := s.partitionReader(p)
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		s.fail(fmt.Errorf("kafka source %s: partition %d: %w", s.name, p, err))
		<-ctx.Done()
		return
	}
	backoff := 100 * time.Millisecond
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if kafkaFatal(err) {
				s.fail(fmt.Errorf("kafka source %s: partition %d: %w", s.name, p, err))
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		// Lag is the reader's: the high watermark of the fetch response
		// that carried m, minus the offset after m.
		select {
		case s.msgs <- kafkaMsg{gen: kg, m: m, lag: max(r.Lag(), 0)}:
		case <-ctx.Done():
			return
		}
		if s.untilEnd && m.Offset+1 >= end {
			r.Close() // release the connection now; stay in the generation
			<-ctx.Done()
			return
		}
	}
}

// partitionReader returns a kafka-go reader of partition p alone, outside
// the group, with the source's fetch settings.
func (s *KafkaSource) partitionReader(p int) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:         s.cfg.Brokers,
		Topic:           s.cfg.Topic,
		Partition:       p,
		Dialer:          s.dialer,
		QueueCapacity:   s.cfg.QueueCapacity,
		MinBytes:        s.cfg.MinBytes,
		MaxBytes:        s.cfg.MaxBytes,
		MaxWait:         s.cfg.MaxWait,
		ReadLagInterval: -1,
	})
}

// kafkaFatal reports whether err is one that retrying will not cure.
func kafkaFatal(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState,
		kafka.GroupAuthorizationFailed, kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
		kafka.InvalidGroupId, kafka.InconsistentGroupProtocol, kafka.GroupMaxSizeReached:
		return true
	}
	return false
}

// kafkaGenerationError reports whether err says the generation a commit was
// sent with is over (or its connection is), so that the commit belongs to
// the next generation.
func kafkaGenerationError(err error) bool {
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.RebalanceInProgress, kafka.IllegalGeneration, kafka.UnknownMemberId,
			kafka.NotCoordinatorForGroup, kafka.GroupCoordinatorNotAvailable, kafka.GroupLoadInProgress:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, kafka.ErrGenerationEnded)
}
