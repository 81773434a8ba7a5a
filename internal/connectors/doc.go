// Package connectors holds streamlearn's sources and sinks: file replay,
// Kafka (segmentio/kafka-go) and NATS core and JetStream (nats.go).
package connectors
