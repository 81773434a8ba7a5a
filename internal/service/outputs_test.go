package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// What a consumer of a Kafka sink needs: a prediction (and a dead letter)
// keeps its record's key — the event's "key", else the producer's Kafka
// key — so that it lands on the partition its event's key would, and
// carries the record's identity in the header streamlearn-id, the
// identity the payload has too; a dead letter names the record as
// source/partition/offset and has its key.
func TestKafkaOutputsKeepKeyAndIdentity(t *testing.T) {
	const n = 60
	brokers := kafkaCluster(t, 3, "events", "predictions", "dead")
	cfg := kafkaTestConfig(brokers, "events", "outputs")
	sink, err := connectors.NewKafkaSink(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	values, keys := make([][]byte, n), make([][]byte, n)
	for i := range n {
		keys[i] = fmt.Appendf(nil, "producer-%d", i%7)
		switch {
		case i%20 == 9:
			values[i] = fmt.Appendf(nil, `{"id":"e%d","key":"event-%d","features":{"v":1e999}}`, i, i%5) // a bad record, its key read first
		case i%3 == 0:
			values[i] = fmt.Appendf(nil, `{"id":"e%d","key":"event-%d","features":{"v":%.2f},"label":%d}`, i, i%5, float64(i%10)/10, i%2)
		default:
			values[i] = fmt.Appendf(nil, `{"id":"e%d","features":{"v":%.2f},"label":%d}`, i, float64(i%10)/10, i%2)
		}
	}
	publishAll(t, sink, values, keys)
	preds, err := connectors.NewKafkaSink(cfg, "predictions")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := connectors.NewKafkaSink(cfg, "dead")
	if err != nil {
		t.Fatal(err)
	}
	src, err := connectors.NewKafkaSource(context.Background(), cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s := newService(t, Options{Config: parseConfig(t, testYAML), Source: src, Predictions: preds, DeadLetters: dead})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	preds.Close()
	dead.Close()

	// Which input each output comes from: by id.
	keyOf := map[string]string{}
	for i, v := range values {
		var e struct{ ID, Key string }
		_ = json.Unmarshal(v, &e) // the bad records are valid JSON too
		keyOf[e.ID] = e.Key
		if e.Key == "" {
			keyOf[e.ID] = string(keys[i])
		}
	}
	read := func(topic string, want int) []kafka.Message {
		t.Helper()
		var out []kafka.Message
		for p := range 3 {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MaxWait: 50 * time.Millisecond})
			conn, err := kafka.DialLeader(context.Background(), "tcp", brokers[0], topic, p)
			if err != nil {
				t.Fatal(err)
			}
			last, err := conn.ReadLastOffset()
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for range last {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, m)
			}
			cancel()
			r.Close()
		}
		if len(out) != want {
			t.Fatalf("%s: %d messages, want %d", topic, len(out), want)
		}
		return out
	}
	check := func(topic, kind string, want int) {
		for _, m := range read(topic, want) {
			var o struct {
				ID        string `json:"id"`
				Source    string `json:"source"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
				Raw       string `json:"raw"`
				Error     string `json:"error"`
			}
			if err := json.Unmarshal(m.Value, &o); err != nil {
				t.Fatal(err)
			}
			if o.ID == "" { // a dead letter: its id is in its record
				var e struct{ ID string }
				_ = json.Unmarshal([]byte(o.Raw), &e)
				o.ID = e.ID
				if where := fmt.Sprintf("%s/%d/%d: ", o.Source, o.Partition, o.Offset); !strings.Contains(o.Error, where) {
					t.Errorf("dead letter of %s: error %q does not name %q", o.ID, o.Error, where)
				}
			}
			if got, want := string(m.Key), keyOf[o.ID]; got != want || want == "" {
				t.Errorf("%s of %s: key %q, want its record's %q", kind, o.ID, got, want)
			}
			id := OutputID(src.Name(), o.Partition, o.Offset, kind)
			if len(m.Headers) != 1 || m.Headers[0].Key != connectors.IDHeader || string(m.Headers[0].Value) != id {
				t.Errorf("%s of %s: headers %v, want %s: %s", kind, o.ID, m.Headers, connectors.IDHeader, id)
			}
		}
	}
	check("predictions", "prediction", n-3)
	check("dead", "dead-letter", 3)
}

// A report's consumer_lag is exactly the records of its partition left
// after the last one its model processed: every report of a stream
// published before the run says so, the ones a record triggers
// (reports.every) included. (They said one more: the record's lag was
// taken after its report.)
func TestConsumerLagExact(t *testing.T) {
	const n, every = 2000, 250
	values := genEvents(n, 31, 0, 0, 0) // every record a labeled event
	brokers := kafkaCluster(t, 1, "lag")
	kcfg := kafkaTestConfig(brokers, "lag", "lag")
	ksink, err := connectors.NewKafkaSink(kcfg, "")
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, ksink, values, nil)
	natsURL := testbroker.NATS(t, "LAG", "lag")
	jsink, err := connectors.NewJetStreamSink(connectors.NATSConfig{URL: natsURL}, "LAG", "lag")
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, jsink, values, nil)
	jsrc, err := connectors.NewJetStreamSource(context.Background(), connectors.NATSConfig{URL: natsURL, Stream: "LAG", Subject: "lag", Durable: "lag"}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer jsrc.Close()
	for _, tc := range []struct {
		name string
		src  connectors.Source
	}{{"kafka", openKafka(t, kcfg)}, {"jetstream", jsrc}} {
		t.Run(tc.name, func(t *testing.T) {
			reports := &memSink{}
			s := newService(t, Options{Config: parseConfig(t, testYAML), Source: tc.src, Reports: reports, ReportEvery: every})
			if err := s.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			msgs := reports.messages()
			if len(msgs) < n/every {
				t.Fatalf("%d reports, want at least %d", len(msgs), n/every)
			}
			for i, m := range msgs {
				var r Report
				if err := json.Unmarshal(m, &r); err != nil {
					t.Fatal(err)
				}
				left := int64(n) - int64(r.Events)
				if r.ConsumerLag == nil {
					t.Errorf("report %d, after %d events: no consumer_lag, want the %d records left", i, r.Events, left)
				} else if *r.ConsumerLag != left {
					t.Errorf("report %d, after %d events: consumer_lag %d, want the %d records left", i, r.Events, *r.ConsumerLag, left)
				}
			}
		})
	}
}
