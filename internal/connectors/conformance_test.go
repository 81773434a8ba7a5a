package connectors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/connectors/sourcetest"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// TestSourceConformance runs the source conformance suite against the
// file source and a Kafka group (kfake, in-process).
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, "file", sourcetest.Harness{
		FirstOffset: 1,
		New: func(t *testing.T, values [][]byte) sourcetest.Stream {
			path := sourcetest.LinesFile(t, "stream.jsonl", values)
			return sourcetest.Stream{Open: opener(func(context.Context, bool) (connectors.Source, error) {
				return connectors.NewFileSource(path)
			})}
		},
	})

	var topics atomic.Int64
	sourcetest.Run(t, "kafka", sourcetest.Harness{
		Times:   true,
		Resumes: true,
		Follows: true,
		New: func(t *testing.T, values [][]byte) sourcetest.Stream {
			topic := fmt.Sprintf("conf-%d", topics.Add(1))
			cfg := testbroker.KafkaConfig(testbroker.Kafka(t, 1, topic), topic, "conformance")
			st := sourcetest.Stream{
				Open: opener(func(ctx context.Context, untilEnd bool) (connectors.Source, error) {
					return connectors.NewKafkaSource(ctx, cfg, untilEnd)
				}),
				Publish: publisher(func() (connectors.Sink, error) { return connectors.NewKafkaSink(cfg, topic) }),
			}
			st.Publish(t, values)
			return st
		},
	})
}

// TestNATSJetStreamConformance runs the source conformance suite against
// JetStream durable consumers — acknowledging every commit, and every
// 7th, with pulls of 16 messages — and a core NATS subscription (its
// order, positions and following), on the server the NATS tests run
// against (natsTestServer).
func TestNATSJetStreamConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  connectors.NATSConfig
	}{
		{"jetstream", connectors.NATSConfig{}},
		{"jetstream-batched", connectors.NATSConfig{JetStreamFetch: settings.JetStreamFetch{FetchBatch: 16, AckBatch: 7}}},
	} {
		sourcetest.Run(t, tc.name, sourcetest.Harness{
			FirstOffset: 1,
			Times:       true,
			Resumes:     true,
			Follows:     true,
			New: func(t *testing.T, values [][]byte) sourcetest.Stream {
				cfg := tc.cfg
				cfg.URL, cfg.Durable = connectors.JetStreamTestServer(t), "conformance"
				st := sourcetest.Stream{
					Open: opener(func(ctx context.Context, untilEnd bool) (connectors.Source, error) {
						return connectors.NewJetStreamSource(ctx, cfg, untilEnd)
					}),
					Publish: publisher(func() (connectors.Sink, error) { return connectors.NewJetStreamSink(cfg, "EVENTS", "events") }),
				}
				st.Publish(t, values)
				return st
			},
		})
	}

	sourcetest.Run(t, "nats", sourcetest.Harness{
		FirstOffset: 1,
		Live:        true,
		New: func(t *testing.T, _ [][]byte) sourcetest.Stream {
			cfg := connectors.NATSConfig{URL: connectors.JetStreamTestServer(t)}
			return sourcetest.Stream{
				Open: opener(func(ctx context.Context, untilEnd bool) (connectors.Source, error) {
					return connectors.NewNATSSource(ctx, cfg, untilEnd)
				}),
				Publish: publisher(func() (connectors.Sink, error) { return connectors.NewNATSSink(cfg, "events") }),
			}
		},
	})
}

// opener returns a Stream.Open that opens a source with newSource, closed
// when the test ends.
func opener(newSource func(ctx context.Context, untilEnd bool) (connectors.Source, error)) func(*testing.T, bool) connectors.Source {
	return func(t *testing.T, untilEnd bool) connectors.Source {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := newSource(ctx, untilEnd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// publisher returns a Stream.Publish that publishes through a sink made
// by newSink and closes it, which waits for every acknowledgement.
func publisher(newSink func() (connectors.Sink, error)) func(*testing.T, [][]byte) {
	return func(t *testing.T, values [][]byte) {
		t.Helper()
		sink, err := newSink()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, v := range values {
			if err := sink.Publish(ctx, nil, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
