package connectors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

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
