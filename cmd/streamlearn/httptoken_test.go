package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The token comes from --http-token-file, else $STREAMLEARN_HTTP_TOKEN,
// else http.token_file, trimmed; a setting that yields no valid token is
// an error naming it, never a service without authentication.
func TestHTTPToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "  s3cret-token\n")
	other := file("other", "other-token")
	empty := file("empty", "")
	blank := file("blank", " \n\t\n")
	spaced := file("spaced", "two words\n")
	huge := file("huge", strings.Repeat("a", maxTokenFile+1))
	noEnv := func(string) (string, bool) { return "", false }
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == tokenEnv }
	}
	for _, tc := range []struct {
		name          string
		flag, cfgFile string
		env           func(string) (string, bool)
		want, err     string
	}{
		{"none", "", "", noEnv, "", ""},
		{"config file", "", good, noEnv, "s3cret-token", ""},
		{"env beats config", "", good, env(" env-token "), "env-token", ""},
		{"flag beats env and config", other, good, env("env-token"), "other-token", ""},
		{"empty file", empty, "", noEnv, "", "--http-token-file: " + empty + ": the token is empty"},
		{"blank config file", "", blank, noEnv, "", "http.token_file: " + blank + ": the token is empty"},
		{"empty env", "", good, env(""), "", tokenEnv + ": the token is empty"},
		{"missing file", "", filepath.Join(dir, "nope"), noEnv, "", "http.token_file: open "},
		{"not a token", spaced, "", noEnv, "", "--http-token-file: " + spaced + ": the token has a character"},
		{"huge file", "", huge, noEnv, "", "is longer than 4096 bytes"},
	} {
		got, err := httpToken(tc.flag, tc.cfgFile, tc.env)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || got != ""):
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.err)
		}
	}
}

// `streamlearn run --http-token-file` serves the API to requests with the
// token only (the probes and the dashboard's page excepted), and refuses
// to start with an empty token file.
func TestRunWithToken(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("run-token-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "run", "--nats-port", "-1", "--http", "127.0.0.1:0", "--http-token-file", empty)
	if code != 1 || !strings.Contains(errOut, "--http-token-file: "+empty+": the token is empty") {
		t.Errorf("empty token file: exit %d, %q", code, errOut)
	}

	r := startRun(t, "run", "--nats-port", "-1", "--http", "127.0.0.1:0", "--http-token-file", tokFile,
		"--preload", "../../testdata/demo.jsonl")
	base := r.base
	if !strings.Contains(r.stderr.String(), "bearer token required") {
		t.Errorf("the announcement does not say a token is required:\n%s", r.stderr.String())
	}
	get := func(path, auth string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, auth string
		code       int
	}{
		{"/v1/report", "", 401}, {"/metrics", "", 401}, {"/v1/report", "Bearer run-token-4", 401},
		{"/v1/report", "Bearer run-token-42", 200}, {"/metrics", "Bearer run-token-42", 200},
		{"/healthz", "", 200}, {"/", "", 200},
	} {
		if got := get(c.path, c.auth); got != c.code {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.auth, got, c.code)
		}
	}
	r.stop()
}

// Without a token, an API on an address other hosts can reach is announced
// with a warning at every start; on loopback it is not.
func TestRunWarnsOpenHTTP(t *testing.T) {
	t.Setenv(tokenEnv, "") // restored after the test
	os.Unsetenv(tokenEnv)
	for _, c := range []struct {
		addr string
		warn bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		r := startRun(t, "run", "--nats-port", "-1", "--http", c.addr, "--allow-empty")
		r.stop()
		if got := strings.Contains(r.stderr.String(), "warning: the HTTP API on"); got != c.warn {
			t.Errorf("--http %s without a token: warning %v, want %v:\n%s", c.addr, got, c.warn, r.stderr.String())
		}
	}
}
