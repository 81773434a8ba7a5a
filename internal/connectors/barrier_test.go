package connectors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/kafka-go"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// A barrier's wait returns once every message published before the
// barrier is with the broker (read back from it), while another goroutine
// publishes on: on Kafka (three partitions, whose batches complete in any
// order), JetStream, core NATS (a subscriber's count) and a file.
func TestSinkBarrier(t *testing.T) {
	const before, after = 300, 3000
	brokers := kafkaTestCluster(t, 1, 3, []string{"barrier"})
	srv := natsTestServer(t, nil)
	natsTestStream(t, NATSConfig{URL: srv.ClientURL()}, "BAR", "bar")
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var coreMu sync.Mutex
	core := 0
	if _, err := nc.Subscribe("core", func(*nats.Msg) { coreMu.Lock(); core++; coreMu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "out.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name   string
		open   func() (BarrierSink, error)
		stored func() (int, error) // messages the broker holds
	}{
		{"kafka", func() (BarrierSink, error) {
			cfg := kafkaTestConfig(brokers, "", "")
			cfg.BatchTimeout = 5 * time.Millisecond
			return NewKafkaSink(cfg, "barrier")
		}, func() (int, error) {
			n := 0
			for p := range 3 {
				c, err := kafka.DialLeader(ctx, "tcp", brokers[0], "barrier", p)
				if err != nil {
					return 0, err
				}
				last, err := c.ReadLastOffset()
				c.Close()
				if err != nil {
					return 0, err
				}
				n += int(last)
			}
			return n, nil
		}},
		{"jetstream", func() (BarrierSink, error) {
			return NewJetStreamSink(NATSConfig{URL: srv.ClientURL(), JetStreamPublish: settings.JetStreamPublish{PublishWindow: 64}}, "BAR", "bar")
		}, func() (int, error) {
			js, err := jetstream.New(nc)
			if err != nil {
				return 0, err
			}
			st, err := js.Stream(ctx, "BAR")
			if err != nil {
				return 0, err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return 0, err
			}
			return int(info.State.Msgs), nil
		}},
		{"nats", func() (BarrierSink, error) {
			return NewNATSSink(NATSConfig{URL: srv.ClientURL()}, "core")
		}, func() (int, error) {
			// The server has them once it answered the ping; its
			// delivery to the subscriber follows.
			time.Sleep(50 * time.Millisecond)
			coreMu.Lock()
			defer coreMu.Unlock()
			return core, nil
		}},
		{"file", func() (BarrierSink, error) { return NewFileSink(file), nil }, func() (int, error) {
			b, err := os.ReadFile(file)
			return bytes.Count(b, []byte("\n")), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, err := tc.open()
			if err != nil {
				t.Fatal(err)
			}
			publish := func(i int) error {
				return sink.Publish(ctx, fmt.Appendf(nil, "k%d", i%11), fmt.Appendf(nil, `{"i":%d}`, i))
			}
			for i := range before {
				if err := publish(i); err != nil {
					t.Fatal(err)
				}
			}
			wait := sink.Barrier()
			published := make(chan error, 1)
			go func() {
				for i := before; i < before+after; i++ {
					if err := publish(i); err != nil {
						published <- err
						return
					}
				}
				published <- nil
			}()
			if err := wait(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := tc.stored(); err != nil || n < before {
				t.Fatalf("after the wait, the broker holds %d messages (%v); want the %d published before the barrier", n, err, before)
			}
			if err := <-published; err != nil {
				t.Fatal(err)
			}
			if err := sink.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := tc.stored(); err != nil || n != before+after {
				t.Fatalf("after Flush, the broker holds %d messages (%v); want %d", n, err, before+after)
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A barrier's wait reports the failures of the messages before it, and
// only those: a later message's failure, collected already, is left to the
// wait it belongs to (whose commit it must stop), and a failure is
// reported once.
func TestBarrierFailuresAttributed(t *testing.T) {
	srv := natsTestServer(t, nil)
	natsTestStream(t, NATSConfig{URL: srv.ClientURL()}, "PRED", "predictions")
	// A subject no stream captures: every publish fails. A window of one:
	// the second publish collects the first's failure.
	sink, err := NewJetStreamSink(NATSConfig{URL: srv.ClientURL(), JetStreamPublish: settings.JetStreamPublish{PublishWindow: 1}}, "PRED", "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waitA := sink.Barrier() // before any message
	if err := sink.Publish(ctx, nil, []byte(`{"m":1}`)); err != nil {
		t.Fatal(err)
	}
	waitB := sink.Barrier() // after the first
	if err := sink.Publish(ctx, nil, []byte(`{"m":2}`)); err != nil {
		t.Fatal(err)
	}
	waitC := sink.Barrier() // after both
	if err := waitA(ctx); err != nil {
		t.Fatalf("the wait before any message reports %v", err)
	}
	if err := waitB(ctx); err == nil || strings.Contains(err.Error(), "more failures") {
		t.Fatalf("the wait after the first message: %v, want its one failure", err)
	}
	if err := waitC(ctx); err == nil || strings.Contains(err.Error(), "more failures") {
		t.Fatalf("the wait after the second message: %v, want its one failure", err)
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatalf("a failure reported twice: %v", err)
	}

	var f failures
	f.add(5, errors.New("five"))
	f.add(3, errors.New("three"))
	f.add(9, errors.New("nine"))
	if err := f.before(3); err != nil {
		t.Fatalf("before 3: %v", err)
	}
	if err := f.before(6); err == nil || err.Error() != "five (and 1 more failures)" {
		t.Fatalf("before 6: %v", err)
	}
	if err := f.before(6); err != nil {
		t.Fatalf("before 6 again: %v", err)
	}
	if err := f.any(); err == nil || err.Error() != "nine" {
		t.Fatalf("any: %v", err)
	}
}

// A JetStream sink's Check says whether its stream captures its subject,
// wildcards included: a publish to a subject no stream captures fails, and
// a run checks its sinks before it consumes anything.
func TestJetStreamSinkCheck(t *testing.T) {
	srv := natsTestServer(t, nil)
	natsTestStream(t, NATSConfig{URL: srv.ClientURL()}, "PRED", "predictions.>", "single")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		subject string
		ok      bool
	}{{"predictions.a", true}, {"predictions.a.b", true}, {"single", true}, {"predictions", false}, {"elsewhere", false}} {
		sink, err := NewJetStreamSink(NATSConfig{URL: srv.ClientURL()}, "PRED", tc.subject)
		if err != nil {
			t.Fatal(err)
		}
		err = sink.Check(ctx)
		if tc.ok && err != nil || !tc.ok && (err == nil || !strings.Contains(err.Error(), `does not capture subject "`+tc.subject+`"`)) {
			t.Errorf("subject %s: Check %v, want ok %v", tc.subject, err, tc.ok)
		}
		sink.Close()
	}
}
