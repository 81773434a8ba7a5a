package connectors

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// natsWriteFile writes b to a new file in dir and returns its path.
func natsWriteFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// natsUserSeed returns a new user nkey and its seed.
func natsUserSeed(t *testing.T) (nkeys.KeyPair, string, []byte) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	return kp, pub, seed
}

// natsCreds builds an operator, an account and a user signed by it, and
// returns the server configuration for it (operator JWT file, accounts
// preloaded into a memory resolver) and the user's creds file; wrongCreds
// is a user signed by an account the server does not know.
func natsCreds(t *testing.T, dir string) (conf natsConf, creds, wrongCreds string) {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	opFile := natsWriteFile(t, dir, "operator.jwt", []byte(ojwt))
	account := func(jetStream bool) (nkeys.KeyPair, string, string) {
		akp, _ := nkeys.CreateAccount()
		apub, _ := akp.PublicKey()
		ac := jwt.NewAccountClaims(apub)
		if jetStream {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		return akp, apub, ajwt
	}
	user := func(akp nkeys.KeyPair, name string) string {
		_, upub, seed := natsUserSeed(t)
		uc := jwt.NewUserClaims(upub)
		ujwt, err := uc.Encode(akp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(ujwt, seed)
		if err != nil {
			t.Fatal(err)
		}
		return natsWriteFile(t, dir, name, b)
	}
	akp, apub, ajwt := account(true)
	_, sapub, sajwt := account(false) // the system account has no JetStream
	other, _, _ := account(true)      // not registered with the server
	conf = natsConf{
		fmt.Sprintf("operator: %q", opFile),
		fmt.Sprintf("system_account: %q", sapub),
		"resolver: MEMORY",
		fmt.Sprintf("resolver_preload: { %s: %q, %s: %q }", apub, ajwt, sapub, sajwt),
	}
	return conf, user(akp, "user.creds"), user(other, "other.creds")
}

// natsTLSFiles writes a CA and a server certificate for 127.0.0.1 with
// its key and returns the server's TLS configuration (timeout 2s) and the
// CA file.
func natsTLSFiles(t *testing.T, dir string) (natsConf, string) {
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
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "streamlearn test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := natsWriteFile(t, dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	certFile := natsWriteFile(t, dir, "server.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}))
	keyFile := natsWriteFile(t, dir, "server-key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return natsConf{fmt.Sprintf("tls { cert_file: %q, key_file: %q, timeout: 2 }", certFile, keyFile)}, caFile
}

// TestNATSAuth: the right credentials connect (and JetStream works with
// them), wrong ones fail with an error that says why.
func TestNATSAuth(t *testing.T) {
	dir := t.TempDir()
	_, nkeyPub, nkeySeed := natsUserSeed(t)
	_, _, wrongSeed := natsUserSeed(t)
	nkeyFile := natsWriteFile(t, dir, "user.nk", nkeySeed)
	wrongNkeyFile := natsWriteFile(t, dir, "wrong.nk", wrongSeed)
	credsConf, creds, wrongCreds := natsCreds(t, dir)
	tlsConf, caFile := natsTLSFiles(t, dir)
	nkeyConf := natsConf{fmt.Sprintf("authorization { users: [ { nkey: %q } ] }", nkeyPub)}

	for _, tc := range []struct {
		name      string
		server    natsConf
		good, bad NATSConfig
		badErr    string // substring of the bad config's error
	}{
		{
			name:   "user/password",
			server: natsConf{`authorization { user: "learner", password: "s3cret" }`},
			good:   NATSConfig{User: "learner", Password: "s3cret"},
			bad:    NATSConfig{User: "learner", Password: "nope"},
			badErr: "authorization violation",
		},
		{
			name:   "token",
			server: natsConf{`authorization { token: "t0ken" }`},
			good:   NATSConfig{Token: "t0ken"},
			bad:    NATSConfig{Token: "other"},
			badErr: "authorization violation",
		},
		{
			name:   "nkey",
			server: nkeyConf,
			good:   NATSConfig{NKeySeedFile: nkeyFile},
			bad:    NATSConfig{NKeySeedFile: wrongNkeyFile},
			badErr: "authorization violation",
		},
		{
			name:   "nkey file missing",
			server: nkeyConf,
			good:   NATSConfig{NKeySeedFile: nkeyFile},
			bad:    NATSConfig{NKeySeedFile: filepath.Join(dir, "missing.nk")},
			badErr: "nkey_seed_file",
		},
		{
			name:   "creds",
			server: credsConf,
			good:   NATSConfig{CredsFile: creds},
			bad:    NATSConfig{CredsFile: wrongCreds},
			badErr: "authorization violation",
		},
		{
			name:   "tls",
			server: tlsConf,
			good:   NATSConfig{TLS: &TLSConfig{CA: caFile}},
			bad:    NATSConfig{TLS: &TLSConfig{}}, // system roots do not know the test CA
			badErr: "certificate",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natsTestServer(t, tc.server)
			url := srv.ClientURL()
			tc.good.URL, tc.bad.URL = url, url
			ctx := context.Background()

			// Good: a stream, a JetStream sink and source, a core source.
			src, err := NewNATSSource(ctx, tc.good, false)
			if err != nil {
				t.Fatalf("core source: %v", err)
			}
			defer src.Close()
			sink, err := NewNATSSink(tc.good, "events")
			if err != nil {
				t.Fatalf("core sink: %v", err)
			}
			if err := sink.Publish(ctx, nil, natsEvent(0)); err != nil {
				t.Fatal(err)
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
			natsFetchN(t, src, 1, 0)

			jsAuthStream(t, tc.good)
			jsink, err := NewJetStreamSink(tc.good, "EVENTS", "events")
			if err != nil {
				t.Fatalf("jetstream sink: %v", err)
			}
			if err := jsink.Publish(ctx, nil, natsEvent(0)); err != nil {
				t.Fatal(err)
			}
			if err := jsink.Close(); err != nil {
				t.Fatal(err)
			}
			jsrc, err := NewJetStreamSource(ctx, tc.good, true)
			if err != nil {
				t.Fatalf("jetstream source: %v", err)
			}
			natsFetchN(t, jsrc, 1, 0)
			natsWantEnd(t, jsrc)
			jsrc.Close()

			// Bad: a clear error from every constructor.
			_, err = NewNATSSource(ctx, tc.bad, false)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.badErr) {
				t.Fatalf("core source with wrong credentials: %v, want %q", err, tc.badErr)
			}
			if !strings.Contains(err.Error(), "nats source: ") {
				t.Errorf("error does not name the source: %v", err)
			}
			if _, err := NewJetStreamSource(ctx, tc.bad, false); err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.badErr) {
				t.Fatalf("jetstream source with wrong credentials: %v", err)
			}
			if _, err := NewJetStreamSink(tc.bad, "EVENTS", "events"); err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.badErr) {
				t.Fatalf("jetstream sink with wrong credentials: %v", err)
			}
			if _, err := NewNATSSink(tc.bad, "events"); err == nil {
				t.Fatal("core sink with wrong credentials connected")
			}
		})
	}
}

// jsAuthStream creates stream EVENTS on subject events with cfg's
// credentials.
func jsAuthStream(t *testing.T, cfg NATSConfig) {
	t.Helper()
	nc, err := natsConnect(cfg.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := jsCreateStream(ctx, nc.Conn, "EVENTS", "events"); err != nil {
		t.Fatal(err)
	}
}
