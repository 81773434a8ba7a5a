package connectors

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms accepted in SASLConfig.Mechanism.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// SASLConfig is the `sasl:` block of a Kafka source or sink. A nil
// *SASLConfig means no authentication. Combine it with TLS: PLAIN sends the
// password as is.
type SASLConfig struct {
	// Mechanism is plain, scram-sha-256 or scram-sha-512 (case does not
	// matter). Required.
	Mechanism string `yaml:"mechanism"`
	// Username and Password are the credentials. Username is required.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// PasswordFile, instead of Password, names a file holding the password
	// (a mounted secret), read when the source or sink opens; a trailing
	// newline is not part of it.
	PasswordFile string `yaml:"password_file"`
}

// Validate reports the first problem with c; a nil c is valid.
func (c *SASLConfig) Validate() error {
	if c == nil {
		return nil
	}
	switch strings.ToLower(c.Mechanism) {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	case "":
		return errors.New("sasl: mechanism is required (plain, scram-sha-256, scram-sha-512)")
	default:
		return fmt.Errorf("sasl: mechanism %q is not one of plain, scram-sha-256, scram-sha-512", c.Mechanism)
	}
	if c.Username == "" {
		return errors.New("sasl: username is required")
	}
	if c.Password != "" && c.PasswordFile != "" {
		return errors.New("sasl: give password or password_file, not both")
	}
	return nil
}

// password returns the password, read from PasswordFile when it is set.
func (c *SASLConfig) password() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("sasl: password_file: %w", err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

// mechanism returns kafka-go's SASL mechanism for c, or nil for a nil c.
// SCRAM is kafka-go's sasl/scram (RFC 5802, RFC 7677, usernames and
// passwords SASLprep-normalised).
func (c *SASLConfig) mechanism() (sasl.Mechanism, error) {
	if c == nil {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	pw, err := c.password()
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
