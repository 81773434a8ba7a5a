package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/service"
)

const testToken = "c0ffee-Tok_3n.~+/=="

// setupToken is setup with Options.Token.
func setupToken(t *testing.T, cfg *config.Config, src connectors.Source, token string) (*service.Service, *httptest.Server) {
	t.Helper()
	hist := metrics.NewEventDuration()
	svc, err := service.New(service.Options{Config: cfg, Source: src, EventDuration: hist, SnapshotInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(svc.Snapshot), hist)
	ts := httptest.NewServer(New(Options{Snapshot: svc.Snapshot, Gatherer: reg, Config: cfg, Predictor: svc.Predictor, Token: token}))
	t.Cleanup(ts.Close)
	return svc, ts
}

// do sends a request with the Authorization header auth (none when empty).
func do(t *testing.T, method, url, auth string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, b := send(t, req)
	return resp.StatusCode, resp.Header, b
}

// With a token, every endpoint that carries data answers 401 (with a
// Bearer challenge and a one-line reason) unless the request has the
// token, compared exactly: a token off by its last byte, a prefix, an
// extension or another scheme is refused. The probes and the dashboard's
// static files stay open.
func TestBearerToken(t *testing.T) {
	cfg, lines := demo(t, 200)
	svc, ts := setupToken(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, testToken)
	runUntil(t, svc, 200)
	event := withoutLabel(t, lines[0])

	last := []byte(testToken)
	last[len(last)-1] ^= 1
	for _, c := range []struct{ name, auth, challenge string }{
		{"no header", "", `Bearer realm="streamlearn"`},
		{"wrong token", "Bearer nope", `Bearer realm="streamlearn", error="invalid_token"`},
		{"last byte differs", "Bearer " + string(last), `Bearer realm="streamlearn", error="invalid_token"`},
		{"a prefix", "Bearer " + testToken[:len(testToken)-1], `Bearer realm="streamlearn", error="invalid_token"`},
		{"an extension", "Bearer " + testToken + "x", `Bearer realm="streamlearn", error="invalid_token"`},
		{"empty token", "Bearer ", `Bearer realm="streamlearn"`},
		{"basic", "Basic " + testToken, `Bearer realm="streamlearn"`},
		{"no scheme", testToken, `Bearer realm="streamlearn"`},
	} {
		for _, ep := range []struct{ method, path string }{
			{"GET", "/v1/report"}, {"GET", "/v1/history"}, {"GET", "/v1/learners"}, {"GET", "/metrics"},
			{"POST", "/v1/predict"}, {"GET", "/v1/nope"}, {"GET", "//v1/report"}, {"GET", "/healthz/../v1/report"},
		} {
			code, hdr, body := do(t, ep.method, ts.URL+ep.path, c.auth, event)
			var e ErrorBody
			if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != c.challenge || hdr.Get("Content-Type") != "application/json" ||
				json.Unmarshal(body, &e) != nil || e.Error.Code != "unauthorized" || e.Error.Message == "" {
				t.Errorf("%s: %s %s: %d, WWW-Authenticate %q, %q; want 401, %q, an error of code unauthorized", c.name, ep.method, ep.path,
					code, hdr.Get("WWW-Authenticate"), body, c.challenge)
			}
		}
	}
	for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken, "BEARER  " + testToken} {
		for _, ep := range []struct {
			method, path string
			code         int
		}{
			{"GET", "/v1/report", 200}, {"GET", "/v1/history", 200}, {"GET", "/v1/learners", 200}, {"GET", "/metrics", 200},
			{"POST", "/v1/predict", 200}, {"GET", "/v1/nope", 404}, {"POST", "/v1/report", 405},
		} {
			if code, _, body := do(t, ep.method, ts.URL+ep.path, auth, event); code != ep.code {
				t.Errorf("%q: %s %s: %d %q, want %d", auth, ep.method, ep.path, code, body, ep.code)
			}
		}
	}
	// Open without the token: the probes (Kubernetes cannot send one) and
	// the dashboard's constant files (a browser cannot either).
	for _, path := range []string{"/healthz", "/readyz", "/", "/dashboard/app.js", "/dashboard/app.css", "/dashboard/icon.svg"} {
		if code, _, body := do(t, "GET", ts.URL+path, "", nil); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %q, want 200", path, code, body)
		}
	}
}

// Prometheus scrapes with a bearer token (scrape_config authorization:
// {credentials_file: ...} sends "Authorization: Bearer <token>"); the
// exposition is the same as without a token.
func TestScrapeWithToken(t *testing.T) {
	cfg, lines := demo(t, 100)
	svc, ts := setupToken(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, testToken)
	runUntil(t, svc, 100)
	req, err := http.NewRequest("GET", ts.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept", "text/plain;version=0.0.4") // what Prometheus accepts among others
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ev := mfs["streamlearn_events_total"]
	if ev == nil {
		t.Fatalf("no streamlearn_events_total in\n%s", body)
	}
	var n float64
	for _, m := range ev.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	if n != 100 {
		t.Errorf("streamlearn_events_total sums to %v, want 100", n)
	}
}

func TestCheckToken(t *testing.T) {
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{"", false}, {"==", false}, {"a b", false}, {"tok\n", false}, {"tök", false}, {"a=b", false}, {`a"b`, false},
		{"a", true}, {testToken, true}, {"0123456789abcdef0123456789abcdef", true}, {"dGVzdA==", true},
	} {
		if err := CheckToken(tc.token); (err == nil) != tc.ok {
			t.Errorf("CheckToken(%q) = %v, want ok %v", tc.token, err, tc.ok)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New with an invalid token did not panic")
		}
	}()
	cfg, _ := demo(t, 0)
	New(Options{Snapshot: func() *service.Snapshot { return nil }, Gatherer: prometheus.NewRegistry(), Config: cfg, Token: "a b"})
}

// A client that sends its request headers slower than ReadHeaderTimeout
// allows is disconnected, however steadily it drips; one that sends them
// in time is answered. (NewServer's limits are fields of the returned
// server: the test lowers the timeout to keep itself fast.)
func TestSlowHeadersDisconnected(t *testing.T) {
	srv := NewServer("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, "ok")
	}))
	if srv.ReadHeaderTimeout != ReadHeaderTimeout {
		t.Fatalf("ReadHeaderTimeout %v, want %v", srv.ReadHeaderTimeout, ReadHeaderTimeout)
	}
	const timeout = 300 * time.Millisecond
	srv.ReadHeaderTimeout = timeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// In time: answered.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a prompt client: %v %v", resp, err)
	}

	// Dripping a header byte every 20ms: cut off after the timeout.
	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := slow.Read(buf); err != nil {
				closed <- time.Since(start)
				return
			}
		}
	}()
	header := "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000)
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		select {
		case d := <-closed:
			// Not before the timeout; after it, however loaded the
			// machine (a client whose drip kept it connected would still
			// be at the 10s deadline, 33 timeouts later).
			if d < timeout-50*time.Millisecond {
				t.Errorf("disconnected after %v, want after the %v timeout", d, timeout)
			}
			return
		case <-deadline:
			t.Fatal("a client dripping its headers is still connected after 10s")
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := slow.Write([]byte{header[i%len(header)]}); err != nil {
			d := time.Since(start)
			if d < timeout-50*time.Millisecond {
				t.Fatalf("write failed after %v: %v", d, err)
			}
			return // the server closed the connection
		}
	}
}

// Every request body is capped at MaxPredictBody, whatever the endpoint:
// an endless body to POST /v1/predict gets 413 without the server reading
// it all, and a handler behind New that reads its body to the end gets an
// *http.MaxBytesError.
func TestBodiesLimited(t *testing.T) {
	cfg, lines := demo(t, 10)
	svc, ts := setupToken(t, cfg, &sliceSource{lines: lines, partitions: 1, block: true}, "")
	runUntil(t, svc, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	endless := &countingReader{}
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/predict", endless)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("endless body: %d %q, want 413", resp.StatusCode, body)
		}
	} else if ctx.Err() != nil {
		t.Fatalf("endless body: no answer: %v", err)
	} // else: the server closed the connection while the client was sending, also a refusal
	if n := endless.n.Load(); n > 4*MaxPredictBody {
		t.Errorf("the client sent %d bytes before the answer; the limit is %d", n, MaxPredictBody)
	}

	var readErr error
	h := limitBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.Copy(io.Discard, r.Body)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("PUT", "/anything", io.LimitReader(&countingReader{}, MaxPredictBody+1)))
	var mbe *http.MaxBytesError
	if !errors.As(readErr, &mbe) {
		t.Errorf("a body of %d bytes read to the end: %v, want *http.MaxBytesError", MaxPredictBody+1, readErr)
	}
}

// countingReader is an endless body of spaces that counts what was read
// (atomically: the client's transport may still be sending after the
// answer).
type countingReader struct{ n atomic.Int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	r.n.Add(int64(len(p)))
	return len(p), nil
}

// The dashboard works with a token: opened as /#token=TOKEN it shows the
// report's numbers (the page sends the token with its requests for data);
// opened without, it shows why it has none.
func TestDashboardWithToken(t *testing.T) {
	t.Parallel() // a headless Chromium of its own, mostly waited for
	bin := chromium(t)
	cfg, lines := demo(t, 200)
	svc, ts := setupToken(t, cfg, &sliceSource{lines: lines, partitions: 1}, testToken)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dom := headless(t, bin, ts.URL+"/#token="+testToken, time.Second, "--dump-dom")
	if !bytes.Contains(dom, []byte(`data-ready="true"`)) {
		t.Fatalf("with the token the page never rendered:\n%s", dom)
	}
	if f := domFields(dom)["0/pct/rounds"]; f.value != "200" {
		t.Errorf("rounds of pct: %+v, want 200", f)
	}
	dom = headless(t, bin, ts.URL+"/", time.Second, "--dump-dom")
	if bytes.Contains(dom, []byte(`data-ready="true"`)) || !bytes.Contains(dom, []byte("needs a token")) {
		t.Errorf("without the token the page rendered, or does not say why it cannot:\n%s", dom)
	}
}
