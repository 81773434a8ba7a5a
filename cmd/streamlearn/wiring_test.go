package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors/settings"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// The configuration's client knobs reach the clients: a value only the
// client refuses comes back as the client's error.
func TestTuningReachesClients(t *testing.T) {
	brokers := testbroker.Kafka(t, 1, "tuned")
	conn := config.Conn{Brokers: brokers}
	if _, err := openSink(&config.Sink{Kind: "kafka", Conn: conn, Topic: "tuned", KafkaProduce: settings.KafkaProduce{Compression: "brotli"}}, config.Source{}, nil); err == nil || !strings.Contains(err.Error(), "compression") {
		t.Errorf("a Kafka sink of codec brotli: %v", err)
	}
	if _, err := openSink(&config.Sink{Kind: "kafka", Conn: conn, Topic: "tuned", KafkaProduce: settings.KafkaProduce{RequiredAcks: "two"}}, config.Source{}, nil); err == nil || !strings.Contains(err.Error(), "required_acks") {
		t.Errorf("a Kafka sink of acks two: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := openSource(ctx, config.Source{Kind: "kafka", Conn: conn, Topic: "tuned", KafkaFetch: settings.KafkaFetch{MinBytes: 10, MaxBytes: 5}}, sourceOptions{}); err == nil || !strings.Contains(err.Error(), "min_bytes") {
		t.Errorf("a Kafka source of min_bytes 10 and max_bytes 5: %v", err)
	}
	sink, err := openSink(&config.Sink{Kind: "kafka", Conn: conn, Topic: "tuned", KafkaProduce: settings.KafkaProduce{Compression: "zstd", RequiredAcks: "one", BatchTimeout: time.Millisecond}}, config.Source{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Publish(ctx, nil, []byte(`{"features":{"v":1},"label":1}`)); err != nil {
		t.Fatalf("publish 0: %v", err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestKafkaConnSettings: connect_timeout reaches the Kafka dialer, and a
// SASL block with neither password nor password_file takes the password
// from $STREAMLEARN_SASL_PASSWORD, leaving the configuration as it was.
func TestKafkaConnSettings(t *testing.T) {
	t.Setenv(saslPasswordEnv, "from-env")
	c := config.Conn{Brokers: []string{"b:9092"}, ConnectTimeout: 1500 * time.Millisecond,
		SASL: &config.SASL{Mechanism: "plain", Username: "app"}}
	k := kafkaConfig(c, "events", "g")
	if k.DialTimeout != 1500*time.Millisecond || k.SASL == nil || k.SASL.Password != "from-env" || c.SASL.Password != "" {
		t.Errorf("dial timeout %v, sasl %+v, config's sasl %+v", k.DialTimeout, k.SASL, c.SASL)
	}
	c.SASL.PasswordFile = "/run/secrets/kafka"
	if k := kafkaConfig(c, "events", "g"); k.SASL.Password != "" {
		t.Errorf("password_file given, yet the environment's password was taken: %+v", k.SASL)
	}
	if n := natsConfig(config.Conn{URL: "nats://x:4222", ConnectTimeout: 2 * time.Second}, "s", "S", "d"); n.ConnectTimeout != 2*time.Second {
		t.Errorf("nats connect timeout %v", n.ConnectTimeout)
	}
}
