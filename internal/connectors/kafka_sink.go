package connectors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// KafkaSink publishes to one Kafka topic with kafka-go's asynchronous
// Writer: every message must be acknowledged by all in-sync replicas
// (acks=all), messages are batched per partition for at most BatchTimeout,
// keyed messages go to the partition the Java client would pick (murmur2),
// and at most MaxPending messages are unacknowledged at any time (Publish
// blocks beyond). Publish is meant for one goroutine; Flush, Barrier's
// wait and Close may be called from any goroutine.
type KafkaSink struct {
	name      string
	topic     string
	cfg       KafkaConfig // the topic's creation settings, for Check
	w         *kafka.Writer
	transport *kafka.Transport
	sem       chan struct{} // one token per unacknowledged message

	// Messages are numbered in publish order (their WriterData); low is
	// the number of the first one not acknowledged or failed yet, and
	// done holds those after it that are (batches of different partitions
	// complete in any order).
	mu       sync.Mutex
	next     uint64
	low      uint64
	done     map[uint64]struct{}
	advanced chan struct{} // closed when low moves; nil while nobody waits
	failed   failures      // delivery failures not yet reported, by message number
	closed   bool
}

var (
	_ IDSink      = (*KafkaSink)(nil)
	_ BarrierSink = (*KafkaSink)(nil)
	_ Checker     = (*KafkaSink)(nil)
)

// NewKafkaSink returns a sink writing to topic (cfg.Topic when topic is
// empty). It does not connect until Check or the first Publish; the topic
// must exist, or Check creates it (Create). A broker's
// auto.create.topics.enable is not relied on: Check asks without it.
func NewKafkaSink(cfg KafkaConfig, topic string) (*KafkaSink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if topic == "" {
		topic = cfg.Topic
	}
	if topic == "" {
		return nil, errors.New("kafka: topic is required for a sink")
	}
	cfg = cfg.withDefaults()
	acks, err := requiredAcks(cfg.RequiredAcks)
	if err != nil {
		return nil, err
	}
	codec, err := compression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	t, err := cfg.transport()
	if err != nil {
		return nil, err
	}
	s := &KafkaSink{
		name:      "kafka:" + topic,
		topic:     topic,
		cfg:       cfg,
		transport: t,
		sem:       make(chan struct{}, cfg.MaxPending),
		done:      map[uint64]struct{}{},
	}
	s.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: acks,
		Compression:  codec,
		BatchTimeout: cfg.BatchTimeout,
		BatchSize:    cfg.BatchSize,
		Async:        true,
		Completion:   s.completed,
		Transport:    t,
	}
	return s, nil
}

// Check asks the brokers for the sink's topic: an error that names it when
// the brokers cannot be reached or the topic does not exist — unless
// Create is set, and then the topic is created (Partitions,
// Replication, Retention). A run checks its sinks before it
// opens its source, so that outputs with nowhere to go stop it before it
// consumes anything. An answer the brokers mark as passing (a partition
// without a leader yet, as while another client creates the topic, or a
// controller moving) is asked again, at growing intervals, until ctx is
// done.
func (s *KafkaSink) Check(ctx context.Context) error {
	tr := s.transport
	for wait := checkRetryMin; ; wait = min(2*wait, checkRetryMax) {
		err := s.check(ctx, &kafka.Client{Addr: s.w.Addr, Transport: tr, Timeout: max(s.cfg.DialTimeout, 10*time.Second)})
		if tr != s.transport {
			tr.CloseIdleConnections()
		}
		var ke kafka.Error
		if err == nil || !errors.As(err, &ke) || !ke.Temporary() {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		// A transport answers metadata from what it fetched first (for
		// kafka-go's MetadataTTL): a new one asks the brokers again.
		if tr, err = s.cfg.transport(); err != nil {
			return err
		}
	}
}

// The waits between two checks of a Kafka sink whose brokers answered a
// passing error.
const (
	checkRetryMin = 50 * time.Millisecond
	checkRetryMax = time.Second
)

func (s *KafkaSink) check(ctx context.Context, c *kafka.Client) error {
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.topic}})
	if err != nil {
		return fmt.Errorf("kafka sink %s: asking brokers %v for topic %q: %w", s.name, s.cfg.Brokers, s.topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != s.topic {
			continue
		}
		switch {
		case t.Error == nil && len(t.Partitions) > 0:
			return nil
		case t.Error != nil && !errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			return fmt.Errorf("kafka sink %s: topic %q: %w", s.name, s.topic, t.Error)
		}
	}
	if !s.cfg.Create {
		return fmt.Errorf("kafka sink %s: topic %q does not exist on brokers %v: create it (kafka-topics.sh --create --topic %s), or set create: true on the sink, with partitions and retention",
			s.name, s.topic, s.cfg.Brokers, s.topic)
	}
	tc := kafka.TopicConfig{Topic: s.topic, NumPartitions: -1, ReplicationFactor: -1}
	if s.cfg.Partitions > 0 {
		tc.NumPartitions = s.cfg.Partitions
	}
	if s.cfg.Replication > 0 {
		tc.ReplicationFactor = s.cfg.Replication
	}
	if s.cfg.Retention > 0 {
		tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(s.cfg.Retention.Milliseconds(), 10)}}
	}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = resp.Errors[s.topic]
	}
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("kafka sink %s: creating topic %q: %w", s.name, s.topic, err)
	}
	return nil
}

// IDHeader is the header a Kafka sink's message carries its identity in
// (PublishID): the record it comes from, "source/partition/offset/kind" as
// in "kafka:events/3/1041/prediction". Kafka stores a repeat as another
// message; a consumer drops the repeats a crash makes by this identity.
const IDHeader = "streamlearn-id"

// Publish queues key and value (copied: the caller may reuse them) for the
// topic. It blocks while MaxPending messages are unacknowledged. A delivery
// failure is reported by the next Flush, Barrier wait or Close that covers it.
func (s *KafkaSink) Publish(ctx context.Context, key, value []byte) error {
	return s.PublishID(ctx, "", key, value)
}

// PublishID is Publish with the message's identity in its IDHeader header
// (none when id is empty).
func (s *KafkaSink) PublishID(ctx context.Context, id string, key, value []byte) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("kafka sink %s: publish: %w", s.name, ctx.Err())
	}
	// Key, value and id in one allocation.
	k, v := len(key), len(key)+len(value)
	buf := make([]byte, v+len(id))
	copy(buf, key)
	copy(buf[k:], value)
	copy(buf[v:], id)
	m := kafka.Message{Value: buf[k:v:v]}
	if k > 0 {
		m.Key = buf[:k:k]
	}
	if id != "" {
		m.Headers = []kafka.Header{{Key: IDHeader, Value: buf[v:]}}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.sem
		return fmt.Errorf("kafka sink %s: publish: sink is closed", s.name)
	}
	m.WriterData = s.next
	s.next++
	s.mu.Unlock()
	if err := s.w.WriteMessages(ctx, m); err != nil {
		s.completed([]kafka.Message{m}, nil)
		return fmt.Errorf("kafka sink %s: publish: %w", s.name, err)
	}
	return nil
}

// completed is the Writer's Completion callback: msgs were acknowledged,
// or failed with err after the Writer's retries.
func (s *KafkaSink) completed(msgs []kafka.Message, err error) {
	s.mu.Lock()
	if err != nil && len(msgs) > 0 {
		first, _ := msgs[0].WriterData.(uint64)
		for i := range msgs {
			if n, ok := msgs[i].WriterData.(uint64); ok && n < first {
				first = n
			}
		}
		s.failed.add(first, fmt.Errorf("kafka sink %s: %d messages to partition %d: %w", s.name, len(msgs), kafkaPartitionOf(msgs), err))
	}
	low := s.low
	for i := range msgs {
		if n, ok := msgs[i].WriterData.(uint64); ok {
			s.done[n] = struct{}{}
		}
	}
	for {
		if _, ok := s.done[s.low]; !ok {
			break
		}
		delete(s.done, s.low)
		s.low++
	}
	if s.low != low && s.advanced != nil {
		close(s.advanced)
		s.advanced = nil
	}
	s.mu.Unlock()
	for range msgs {
		<-s.sem
	}
}

func kafkaPartitionOf(msgs []kafka.Message) int {
	if len(msgs) == 0 {
		return -1
	}
	return msgs[0].Partition
}

// Flush waits until every message published so far is acknowledged or has
// failed, and returns (and forgets) their failures not reported yet.
func (s *KafkaSink) Flush(ctx context.Context) error { return s.Barrier()(ctx) }

// Barrier returns a function that waits until every message published
// before the call is acknowledged or has failed, while later ones are
// published, and returns (and forgets) the failures among them not
// reported yet: not those of later messages, which are the next wait's
// (BarrierSink).
func (s *KafkaSink) Barrier() func(context.Context) error {
	s.mu.Lock()
	target := s.next
	s.mu.Unlock()
	return func(ctx context.Context) error {
		for {
			s.mu.Lock()
			if s.low >= target {
				err := s.failed.before(target)
				s.mu.Unlock()
				return err
			}
			if s.advanced == nil {
				s.advanced = make(chan struct{})
			}
			advanced := s.advanced
			s.mu.Unlock()
			select {
			case <-advanced:
			case <-ctx.Done():
				return fmt.Errorf("kafka sink %s: flush: %w", s.name, ctx.Err())
			}
		}
	}
}

// Close sends what is pending, waits for its acknowledgement, releases the
// connections and returns the first delivery failure not yet reported.
func (s *KafkaSink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	werr := s.w.Close()
	s.transport.CloseIdleConnections()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failed.any(); err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("kafka sink %s: close: %w", s.name, werr)
	}
	return nil
}
