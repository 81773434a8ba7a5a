package connectors

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

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
	opFile := writeTestFile(t, dir, "operator.jwt", []byte(ojwt))
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
		return writeTestFile(t, dir, name, b)
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

// TestNATSAuth: the right credentials connect (and JetStream works with
// them), wrong ones fail with an error that says why.
func TestNATSAuth(t *testing.T) {
	dir := t.TempDir()
	_, nkeyPub, nkeySeed := natsUserSeed(t)
	_, _, wrongSeed := natsUserSeed(t)
	nkeyFile := writeTestFile(t, dir, "user.nk", nkeySeed)
	wrongNkeyFile := writeTestFile(t, dir, "wrong.nk", wrongSeed)
	credsConf, creds, wrongCreds := natsCreds(t, dir)
	caFile, certFile, keyFile := testPKI(t, dir)
	tlsConf := natsConf{fmt.Sprintf("tls { cert_file: %q, key_file: %q, timeout: 2 }", certFile, keyFile)}
	nkeyConf := natsConf{fmt.Sprintf("authorization { users: [ { nkey: %q } ] }", nkeyPub)}

	for _, tc := range []struct {
		name      string
		server    natsConf
		good, bad NATSConfig
		badErr    string // substring of the bad config's error
	}{
		{"user/password", natsConf{`authorization { user: "learner", password: "s3cret" }`}, NATSConfig{NATSAuth: settings.NATSAuth{User: "learner", Password: "s3cret"}}, NATSConfig{NATSAuth: settings.NATSAuth{User: "learner", Password: "nope"}}, "authorization violation"},
		{"token", natsConf{`authorization { token: "t0ken" }`}, NATSConfig{NATSAuth: settings.NATSAuth{Token: "t0ken"}}, NATSConfig{NATSAuth: settings.NATSAuth{Token: "other"}}, "authorization violation"},
		{"nkey", nkeyConf, NATSConfig{NATSAuth: settings.NATSAuth{NKeySeedFile: nkeyFile}}, NATSConfig{NATSAuth: settings.NATSAuth{NKeySeedFile: wrongNkeyFile}}, "authorization violation"},
		{"nkey file missing", nkeyConf, NATSConfig{NATSAuth: settings.NATSAuth{NKeySeedFile: nkeyFile}}, NATSConfig{NATSAuth: settings.NATSAuth{NKeySeedFile: filepath.Join(dir, "missing.nk")}}, "nkey_seed_file"},
		{"creds", credsConf, NATSConfig{NATSAuth: settings.NATSAuth{CredsFile: creds}}, NATSConfig{NATSAuth: settings.NATSAuth{CredsFile: wrongCreds}}, "authorization violation"},
		{"tls", tlsConf, NATSConfig{TLS: &TLSConfig{CA: caFile}}, NATSConfig{TLS: &TLSConfig{}}, "certificate"}, // system roots do not know the test CA
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
			sinkWrite(t, sink, 1)
			natsFetchN(t, src, 1, 0)

			natsTestStream(t, tc.good, "EVENTS", "events")
			jsink, err := NewJetStreamSink(tc.good, "EVENTS", "events")
			if err != nil {
				t.Fatalf("jetstream sink: %v", err)
			}
			sinkWrite(t, jsink, 1)
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
