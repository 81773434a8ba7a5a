// Package settings declares, once, what a streamlearn connection is told:
// where a source starts (Start, ParseStart) and the Kafka and NATS
// connection and tuning settings, as plain structs whose yaml tags are the
// configuration file's keys. The configuration (package config) embeds
// them and the connectors take them as they are.
//
// It imports the standard library only: no broker client and no YAML
// decoder, so that both the configuration and the connectors can depend
// on it without depending on each other.
package settings
