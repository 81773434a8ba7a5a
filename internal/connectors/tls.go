package connectors

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// TLSConfig is the `tls:` block of a source or sink (settings.TLS). A nil
// *TLSConfig means plaintext; an empty one means TLS with the system
// roots.
type TLSConfig = settings.TLS

// buildTLS returns the crypto/tls configuration of c, or nil for a nil c.
func buildTLS(c *TLSConfig) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	t := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // opt-in, documented as for tests
	}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("tls: ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca: %s holds no PEM certificate", c.CA)
		}
		t.RootCAs = pool
	}
	switch {
	case c.Cert != "" && c.Key != "":
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: cert: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	case c.Cert != "" || c.Key != "":
		return nil, errors.New("tls: cert and key go together")
	}
	return t, nil
}
