// Package testbroker holds the brokers and settings the tests of the
// packages above connectors share: an in-process Kafka cluster (franz-go's
// kfake) and the Kafka settings that make a join, a rebalance or an idle
// fetch take milliseconds; an embedded NATS server and a JetStream client.
// (The kfake directory below is a broker process for the end-to-end
// tests.) Package connectors' own tests cannot import it, as it imports
// connectors.
package testbroker

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// Kafka starts an in-process one-broker Kafka cluster with topics of
// partitions each, stopped when tb ends, and returns its addresses. Group
// session timeouts down to 100ms are allowed.
func Kafka(tb testing.TB, partitions int32, topics ...string) []string {
	tb.Helper()
	return KafkaCluster(tb, partitions, topics...).ListenAddrs()
}

// KafkaCluster is Kafka, returning the cluster: a test can then act as its
// operator would (delete records, move leaders).
func KafkaCluster(tb testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	tb.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(partitions, topics...),
	)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// KafkaConfig returns the settings of a test's Kafka source or sink: every
// wait lowered (kafka-go's defaults make each test wait seconds), the
// other settings the connector's defaults.
func KafkaConfig(brokers []string, topic, group string) connectors.KafkaConfig {
	return connectors.KafkaConfig{
		Brokers:    brokers,
		Topic:      topic,
		Group:      group,
		KafkaFetch: settings.KafkaFetch{MaxWait: 50 * time.Millisecond},
		KafkaGroup: settings.KafkaGroup{HeartbeatInterval: 50 * time.Millisecond, SessionTimeout: 2 * time.Second,
			RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 50 * time.Millisecond, RequestTimeout: 2 * time.Second},
		DialTimeout:  2 * time.Second,
		KafkaProduce: settings.KafkaProduce{BatchTimeout: 2 * time.Millisecond},
	}
}

// NATS starts an embedded NATS server with JetStream
// (connectors.StartEmbedded) on a free loopback port, its files in a
// temporary directory, with stream capturing subjects (no stream when
// stream is empty), shut down when tb ends, and returns its URL.
func NATS(tb testing.TB, stream string, subjects ...string) string {
	tb.Helper()
	e, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Port: -1, StoreDir: tb.TempDir(), Stream: stream, Subjects: subjects})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Shutdown)
	return e.ClientURL()
}

// JetStream connects a JetStream client to the NATS server at url; the
// connection closes when tb ends.
func JetStream(tb testing.TB, url string) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}
