// Package connectors holds streamlearn's sources and sinks: file replay,
// Kafka (segmentio/kafka-go) and NATS core and JetStream (nats.go).
//
// Their settings are the blocks of package settings, taken as the
// configuration holds them (KafkaConfig and NATSConfig embed them), with
// the knobs only code sets beside. The package imports the broker
// clients and settings only: no part of the learning core, no
// configuration package, no YAML.
package connectors
