package connectors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/sinktest"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// The JetStream sink checks that its stream captures its subject (its
// Check is pinned here, as its file is the transport's).
var _ connectors.Checker = (*connectors.JetStreamSink)(nil)

// TestSinkConformance runs the sink conformance suite against the file
// sink, a Kafka sink (kfake, in-process), and NATS core and JetStream
// sinks (an embedded nats-server), each read back from its destination.
func TestSinkConformance(t *testing.T) {
	sinktest.Run(t, "file", sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			return sinktest.Destination{Sink: connectors.NewFileSink(path), Stored: func(t *testing.T) []sinktest.Message {
				return fileStored(t, path)
			}}
		},
	})

	var topics atomic.Int64
	sinktest.Run(t, "kafka", sinktest.Harness{
		Keys: true,
		New: func(t *testing.T) sinktest.Destination {
			topic := fmt.Sprintf("sinkconf-%d", topics.Add(1))
			brokers := testbroker.Kafka(t, 1, topic)
			sink, err := connectors.NewKafkaSink(testbroker.KafkaConfig(brokers, topic, ""), topic)
			if err != nil {
				t.Fatal(err)
			}
			return sinktest.Destination{Sink: sink, Stored: func(t *testing.T) []sinktest.Message {
				return kafkaStored(t, brokers[0], topic)
			}}
		},
	})

	sinktest.Run(t, "nats", sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			url := testbroker.NATS(t, "")
			stored := natsSubscribe(t, url, "out")
			sink, err := connectors.NewNATSSink(connectors.NATSConfig{URL: url}, "out")
			if err != nil {
				t.Fatal(err)
			}
			return sinktest.Destination{Sink: sink, Stored: stored}
		},
	})

	sinktest.Run(t, "jetstream", sinktest.Harness{
		Dedups: true,
		New: func(t *testing.T) sinktest.Destination {
			url := testbroker.NATS(t, "OUT", "out")
			sink, err := connectors.NewJetStreamSink(connectors.NATSConfig{URL: url}, "OUT", "out")
			if err != nil {
				t.Fatal(err)
			}
			js := testbroker.JetStream(t, url)
			return sinktest.Destination{Sink: sink, Stored: func(t *testing.T) []sinktest.Message {
				return jetStreamStored(t, js, "OUT")
			}}
		},
	})
}

// fileStored returns the lines of the file at path: a message is in the
// file once its newline is (a line being written, read before its end,
// is not yet).
func fileStored(t *testing.T, path string) []sinktest.Message {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var msgs []sinktest.Message
	for len(b) > 0 {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			break
		}
		msgs, b = append(msgs, sinktest.Message{Value: line}), rest
	}
	return msgs
}

// kafkaStored returns the messages of partition 0 of topic, with the
// identity of their connectors.IDHeader header.
func kafkaStored(t *testing.T, broker, topic string) []sinktest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := kafka.DialLeader(ctx, "tcp", broker, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	last, err := c.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var msgs []sinktest.Message
	for next := int64(0); next < last; {
		if _, err := c.Seek(next, kafka.SeekAbsolute); err != nil {
			t.Fatal(err)
		}
		batch := c.ReadBatch(1, 10<<20)
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			msg := sinktest.Message{Key: m.Key, Value: m.Value}
			for _, h := range m.Headers {
				if h.Key == connectors.IDHeader {
					msg.ID = string(h.Value)
				}
			}
			msgs, next = append(msgs, msg), m.Offset+1
		}
		if err := batch.Close(); err != nil {
			t.Fatalf("read %s from offset %d: %v", topic, next, err)
		}
	}
	return msgs
}

// natsSubscribe subscribes to subject on the server at url and returns
// the Stored of the messages it receives from then on.
func natsSubscribe(t *testing.T, url, subject string) func(*testing.T) []sinktest.Message {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		msgs []sinktest.Message
	)
	return func(t *testing.T) []sinktest.Message {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		// The server forwarded what it received before answering the
		// sink's flush; its answer to this ping comes after those
		// messages.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			n, _, err := sub.Pending()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return append([]sinktest.Message(nil), msgs...)
			}
			m, err := sub.NextMsg(time.Second)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, sinktest.Message{Value: m.Data})
		}
	}
}

// jetStreamStored returns the messages stream holds, with the identity of
// their Nats-Msg-Id header.
func jetStreamStored(t *testing.T, js jetstream.JetStream, stream string) []sinktest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []sinktest.Message
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream %s: message %d: %v", stream, seq, err)
		}
		msgs = append(msgs, sinktest.Message{Value: m.Data, ID: m.Header.Get(jetstream.MsgIDHeader)})
	}
	return msgs
}
