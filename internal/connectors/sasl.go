package connectors

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
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
	return nil
}

// mechanism returns kafka-go's SASL mechanism for c, or nil for a nil c.
// SCRAM is implemented here (RFC 5802, RFC 7677) rather than with kafka-go's
// sasl/scram package, which needs a dependency this module does not have.
func (c *SASLConfig) mechanism() (sasl.Mechanism, error) {
	if c == nil {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch strings.ToLower(c.Mechanism) {
	case SASLPlain:
		return plain.Mechanism{Username: c.Username, Password: c.Password}, nil
	case SASLScramSHA256:
		return kafkaScram{name: "SCRAM-SHA-256", hash: sha256.New, user: c.Username, pass: c.Password}, nil
	default:
		return kafkaScram{name: "SCRAM-SHA-512", hash: sha512.New, user: c.Username, pass: c.Password}, nil
	}
}

// kafkaScram is a SCRAM client mechanism (RFC 5802) for kafka-go's Dialer
// and Transport. It is immutable, hence safe for concurrent use; each
// connection gets its own kafkaScramSession.
type kafkaScram struct {
	name       string
	hash       func() hash.Hash
	user, pass string
}

var _ sasl.Mechanism = kafkaScram{}

func (m kafkaScram) Name() string { return m.name }

func (m kafkaScram) Start(context.Context) (sasl.StateMachine, []byte, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, nil, err
	}
	nonce := base64.RawStdEncoding.EncodeToString(raw[:])
	// saslname escaping of RFC 5802 section 5.1; usernames are not
	// SASLprep-normalised, which is exact for ASCII names.
	user := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(m.user)
	bare := "n=" + user + ",r=" + nonce
	return &kafkaScramSession{m: m, nonce: nonce, clientFirstBare: bare}, []byte("n,," + bare), nil
}

// kafkaScramSession is one SCRAM exchange: server-first, then server-final.
type kafkaScramSession struct {
	m               kafkaScram
	nonce           string
	clientFirstBare string
	serverSignature []byte // set after the client-final message
}

func (s *kafkaScramSession) Next(_ context.Context, challenge []byte) (bool, []byte, error) {
	if s.serverSignature == nil {
		resp, err := s.clientFinal(string(challenge))
		return false, resp, err
	}
	// server-final-message: v=<signature> or e=<error>.
	msg := string(challenge)
	if e, ok := strings.CutPrefix(msg, "e="); ok {
		return false, nil, fmt.Errorf("sasl %s: server error: %s", s.m.name, e)
	}
	v, ok := strings.CutPrefix(msg, "v=")
	if !ok {
		return false, nil, fmt.Errorf("sasl %s: malformed server-final message", s.m.name)
	}
	sig, err := base64.StdEncoding.DecodeString(v)
	if err != nil || !hmac.Equal(sig, s.serverSignature) {
		return false, nil, fmt.Errorf("sasl %s: server signature does not verify", s.m.name)
	}
	return true, nil, nil
}

func (s *kafkaScramSession) clientFinal(serverFirst string) ([]byte, error) {
	var nonce, salt64, iters string
	for f := range strings.SplitSeq(serverFirst, ",") {
		switch {
		case strings.HasPrefix(f, "r="):
			nonce = f[2:]
		case strings.HasPrefix(f, "s="):
			salt64 = f[2:]
		case strings.HasPrefix(f, "i="):
			iters = f[2:]
		case strings.HasPrefix(f, "e="):
			return nil, fmt.Errorf("sasl %s: server error: %s", s.m.name, f[2:])
		}
	}
	if !strings.HasPrefix(nonce, s.nonce) || len(nonce) == len(s.nonce) {
		return nil, fmt.Errorf("sasl %s: server nonce does not extend the client nonce", s.m.name)
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil || len(salt) == 0 {
		return nil, fmt.Errorf("sasl %s: malformed salt", s.m.name)
	}
	n, err := strconv.Atoi(iters)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("sasl %s: malformed iteration count %q", s.m.name, iters)
	}
	h := s.m.hash
	salted, err := pbkdf2.Key(h, s.m.pass, salt, n, h().Size())
	if err != nil {
		return nil, fmt.Errorf("sasl %s: %w", s.m.name, err)
	}
	clientKey := kafkaHMAC(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	withoutProof := "c=biws,r=" + nonce // biws = base64("n,,"): no channel binding
	authMessage := s.clientFirstBare + "," + serverFirst + "," + withoutProof
	proof := kafkaHMAC(h, stored.Sum(nil), authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	s.serverSignature = kafkaHMAC(h, kafkaHMAC(h, salted, "Server Key"), authMessage)
	var b bytes.Buffer
	b.WriteString(withoutProof)
	b.WriteString(",p=")
	b.WriteString(base64.StdEncoding.EncodeToString(proof))
	return b.Bytes(), nil
}

func kafkaHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
