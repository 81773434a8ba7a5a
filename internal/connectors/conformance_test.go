package connectors_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/sourcetest"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// TestSourceConformance runs the source conformance suite against the
// file source, a Kafka group (kfake, in-process) and a JetStream durable
// consumer (the NATS server embedded). Core NATS keeps no positions and
// has no end: it has none of the suite's properties to check.
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, "file", sourcetest.Harness{
		New: func(t *testing.T, values [][]byte) func(*testing.T, bool) connectors.Source {
			path := filepath.Join(t.TempDir(), "stream.jsonl")
			if err := os.WriteFile(path, append(bytes.Join(values, []byte("\n")), '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T, _ bool) connectors.Source {
				s, err := connectors.NewFileSource(path)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
	})

	var streams atomic.Int64
	sourcetest.Run(t, "kafka", sourcetest.Harness{
		Resumes: true,
		Follows: true,
		New: func(t *testing.T, values [][]byte) func(*testing.T, bool) connectors.Source {
			topic := fmt.Sprintf("conf-%d", streams.Add(1))
			cfg := testbroker.KafkaConfig(testbroker.Kafka(t, 1, topic), topic, "conformance")
			sink, err := connectors.NewKafkaSink(cfg, topic)
			publishAll(t, sink, err, values)
			return func(t *testing.T, untilEnd bool) connectors.Source {
				s, err := connectors.NewKafkaSource(context.Background(), cfg, untilEnd)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		},
	})

	sourcetest.Run(t, "jetstream", sourcetest.Harness{
		Resumes: true,
		Follows: true,
		New: func(t *testing.T, values [][]byte) func(*testing.T, bool) connectors.Source {
			e, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Port: -1, StoreDir: t.TempDir(), Stream: "CONF", Subjects: []string{"conf"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Shutdown)
			cfg := connectors.NATSConfig{URL: e.ClientURL(), Subject: "conf", Stream: "CONF", Durable: "conformance"}
			sink, err := connectors.NewJetStreamSink(cfg, "CONF", "conf")
			publishAll(t, sink, err, values)
			return func(t *testing.T, untilEnd bool) connectors.Source {
				s, err := connectors.NewJetStreamSource(context.Background(), cfg, untilEnd)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		},
	})
}

// publishAll publishes values through sink (err: its constructor's) and
// closes it, which waits for every acknowledgement.
func publishAll(t *testing.T, sink connectors.Sink, err error, values [][]byte) {
	t.Helper()
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
