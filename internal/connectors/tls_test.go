package connectors

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI writes into dir a CA (ca.pem) and a certificate it signed for
// 127.0.0.1 and localhost, for servers and clients (server.pem), with its
// key (server-key.pem), and returns the three files.
func testPKI(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "streamlearn test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		return writeTestFile(t, dir, name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", srvKeyDER)
}

// TestTLSConfigBuild: a CA that verifies, and the errors of bad files.
func TestTLSConfigBuild(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := testPKI(t, dir)
	tc, err := buildTLS(&TLSConfig{CA: caFile, Cert: certFile, Key: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("Build: %+v", tc)
	}
	if _, err := tc.Certificates[0].Leaf.Verify(x509.VerifyOptions{Roots: tc.RootCAs}); err != nil && tc.Certificates[0].Leaf != nil {
		t.Fatalf("server certificate does not verify against the CA: %v", err)
	}
	for _, bad := range []struct {
		c    TLSConfig
		want string
	}{
		{TLSConfig{CA: filepath.Join(dir, "missing.pem")}, "tls: ca"},
		{TLSConfig{CA: keyFile}, "holds no PEM certificate"},
		{TLSConfig{Cert: certFile}, "cert and key go together"},
		{TLSConfig{Cert: caFile, Key: keyFile}, "tls: cert"},
	} {
		if _, err := buildTLS(&bad.c); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Build(%+v) = %v, want an error with %q", bad.c, err, bad.want)
		}
	}
}
