package connectors

import (
	"fmt"
	"os"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// SASL mechanisms accepted in SASLConfig.Mechanism.
const (
	SASLPlain       = settings.SASLPlain
	SASLScramSHA256 = settings.SASLScramSHA256
	SASLScramSHA512 = settings.SASLScramSHA512
)

// SASLConfig is the `sasl:` block of a Kafka source or sink (settings.SASL,
// whose Validate checks it). A nil *SASLConfig means no authentication.
type SASLConfig = settings.SASL

// saslPassword returns c's password, read from PasswordFile when it is
// set.
func saslPassword(c *SASLConfig) (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("sasl: password_file: %w", err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

// saslMechanism returns kafka-go's SASL mechanism for c, or nil for a nil
// c.
// SCRAM is kafka-go's sasl/scram (RFC 5802, RFC 7677, usernames and
// passwords SASLprep-normalised).
func saslMechanism(c *SASLConfig) (sasl.Mechanism, error) {
	if c == nil {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	pw, err := saslPassword(c)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(c.Mechanism) {
	case SASLPlain:
		return plain.Mechanism{Username: c.Username, Password: pw}, nil
	case SASLScramSHA256:
		return scram.Mechanism(scram.SHA256, c.Username, pw)
	default:
		return scram.Mechanism(scram.SHA512, c.Username, pw)
	}
}
