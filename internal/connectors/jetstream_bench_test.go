package connectors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsBenchCommitEvery is the commit interval of the benchmarks: a batched
// commit, as the pipeline commits at checkpoints.
const jsBenchCommitEvery = 1000

// jsBenchStream fills a new stream with n events and returns its name.
func jsBenchStream(b *testing.B, url string, n int) string {
	b.Helper()
	name := fmt.Sprintf("B%d", time.Now().UnixNano())
	natsTestStream(b, NATSConfig{URL: url}, name, name)
	jsPublish(b, url, name, 0, n)
	return name
}

// BenchmarkJetStreamSource: Fetch and a commit every 1000 records through
// JetStreamSource.
func BenchmarkJetStreamSource(b *testing.B) {
	srv := natsTestServer(b, nil)
	name := jsBenchStream(b, srv.ClientURL(), b.N)
	ctx := context.Background()
	src, err := NewJetStreamSource(ctx, NATSConfig{URL: srv.ClientURL(), Stream: name, Subject: name}, false)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r, err := src.Fetch(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if (i+1)%jsBenchCommitEvery == 0 || i == b.N-1 {
			if err := src.Commit(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkJetStreamBareConsumer: the same stream read by a bare nats.go
// jetstream consumer with the same settings (AckAll, PullMaxMessages 500,
// a confirmed ack every 1000 messages): the floor JetStreamSource adds to.
func BenchmarkJetStreamBareConsumer(b *testing.B) {
	srv := natsTestServer(b, nil)
	name := jsBenchStream(b, srv.ClientURL(), b.N)
	ctx := context.Background()
	_, js := jsTestClient(b, srv.ClientURL())
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{
		Durable: "bare", AckPolicy: jetstream.AckAllPolicy, FilterSubject: name,
		MaxAckPending: DefaultNATSMaxAckPending,
	})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(DefaultNATSFetchBatch))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if (i+1)%jsBenchCommitEvery == 0 || i == b.N-1 {
			if err := m.DoubleAck(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
