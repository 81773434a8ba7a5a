package connectors

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// natsTestStream creates stream name capturing subjects, with a client of
// its own connected as cfg says.
func natsTestStream(t testing.TB, cfg NATSConfig, name string, subjects ...string) {
	t.Helper()
	nc, err := natsConnect(cfg.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := jsCreateStream(ctx, nc.Conn, name, subjects...); err != nil {
		t.Fatal(err)
	}
}

// jsTestServer runs a server (natsTestServer) with stream EVENTS on
// subject events holding events 0..n-1, and returns its URL.
func jsTestServer(t testing.TB, n int) string {
	t.Helper()
	url := natsTestServer(t, nil).ClientURL()
	natsTestStream(t, NATSConfig{URL: url}, "EVENTS", "events")
	jsPublish(t, url, "events", 0, n)
	return url
}

// jsPublish publishes events from..to-1 into JetStream, waiting for acks.
func jsPublish(t testing.TB, url, subject string, from, to int) {
	t.Helper()
	nc, js := jsTestClient(t, url)
	defer nc.Close()
	for i := from; i < to; i++ {
		if _, err := js.PublishAsync(subject, testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publish: no acks")
	}
}

// natsFetchN fetches n records and checks they are events want, want+1, ...
// It returns the last record.
func natsFetchN(t *testing.T, src Source, n, want int) Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r Record
	for i := range n {
		var err error
		if r, err = src.Fetch(ctx); err != nil {
			t.Fatalf("fetch %d of %d: %v", i+1, n, err)
		}
		if got, exp := string(r.Value), string(testEvent(want+i)); got != exp {
			t.Fatalf("record %d: got %s, want %s", i+1, got, exp)
		}
	}
	return r
}

// natsWantEnd checks that the next Fetch returns ErrEndOfInput.
func natsWantEnd(t *testing.T, src Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := src.Fetch(ctx)
	if !errors.Is(err, ErrEndOfInput) {
		t.Fatalf("fetch: got %q (offset %d), %v; want ErrEndOfInput", r.Value, r.Offset, err)
	}
}

func TestNATSConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  NATSConfig
		want string // substring of the error; "" for valid
	}{
		{"zero", NATSConfig{}, ""},
		{"cluster", NATSConfig{URL: "nats://a:4222, tls://b:4222"}, ""},
		{"scheme", NATSConfig{URL: "http://a:4222"}, "url:"},
		{"no host", NATSConfig{URL: "nats://"}, "no host"},
		{"password redacted", NATSConfig{URL: "http://u:secret@a"}, "xxxxx"},
		{"stream", NATSConfig{Stream: "EV.ENTS"}, "stream:"},
		{"durable", NATSConfig{Durable: "a b"}, "durable:"},
		{"subject", NATSConfig{Subject: "a b"}, "subject:"},
		{"password alone", NATSConfig{NATSAuth: settings.NATSAuth{Password: "p"}}, "password:"},
		{"two methods", NATSConfig{NATSAuth: settings.NATSAuth{User: "u", Token: "t"}}, "only one"},
		{"negative", NATSConfig{JetStreamFetch: settings.JetStreamFetch{FetchBatch: -1}}, "fetch_batch:"},
		{"fetch wait", NATSConfig{JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Millisecond}}, "fetch_wait:"},
		{"ack wait", NATSConfig{AckWait: time.Millisecond}, "ack_wait:"},
		{"max ack pending", NATSConfig{JetStreamFetch: settings.JetStreamFetch{FetchBatch: 100, AckBatch: 10, MaxAckPending: 110}}, "max_ack_pending:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			case tc.want != "" && strings.Contains(err.Error(), "secret"):
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

// TestNATSSourceRecords: a core NATS source names its subject, gives each
// record its subject's last token as key and, as its lag, what waits in
// the client's buffer (at most the records after it), and drops nothing
// of 2000 messages it keeps up with. (Order, offsets and cancellation are
// the conformance suite's.)
func TestNATSSourceRecords(t *testing.T) {
	srv := natsTestServer(t, nil)
	ctx := context.Background()
	src, err := NewNATSSource(ctx, NATSConfig{URL: srv.ClientURL(), Subject: "events.*"}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Name() != "nats:events.*" {
		t.Errorf("name %q", src.Name())
	}
	sink, err := NewNATSSink(NATSConfig{URL: srv.ClientURL()}, "events.tenant-7")
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	sinkWrite(t, sink, n)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range n {
		r, err := src.Fetch(cctx)
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if string(r.Key) != "tenant-7" {
			t.Fatalf("record %d: key %q", i, r.Key)
		}
		if r.Lag < 0 || r.Lag > int64(n-1-i) || (i == n-1 && r.Lag != 0) {
			t.Fatalf("record %d: lag %d, want 0..%d", i, r.Lag, n-1-i)
		}
		if err := src.Commit(cctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if d := src.Dropped(); d != 0 {
		t.Errorf("dropped %d", d)
	}
}

func TestNATSSourceUntilEndUnsupported(t *testing.T) {
	_, err := NewNATSSource(context.Background(), NATSConfig{}, true)
	if !errors.Is(err, ErrNATSUntilEnd) {
		t.Fatalf("got %v, want ErrNATSUntilEnd", err)
	}
}

// A slow consumer drops beyond its pending limit and counts the drops:
// nothing buffers without limit.
func TestNATSSourceSlowConsumerDrops(t *testing.T) {
	srv := natsTestServer(t, nil)
	ctx := context.Background()
	src, err := NewNATSSource(ctx, NATSConfig{URL: srv.ClientURL(), PendingMsgs: 10}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := NewNATSSink(NATSConfig{URL: srv.ClientURL()}, "events")
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := range n {
		_ = sink.Publish(ctx, nil, testEvent(i))
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for src.Dropped()+src.Pending() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p := src.Pending(); p > 10 {
		t.Errorf("pending %d beyond the limit 10", p)
	}
	got := 0
	for {
		c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		r, err := src.Fetch(c)
		cancel()
		if err != nil {
			break
		}
		got++
		if r.Offset != int64(got) {
			t.Fatalf("offset %d, want arrival count %d", r.Offset, got)
		}
	}
	if d := src.Dropped(); d == 0 || int(d)+got != n {
		t.Fatalf("dropped %d + received %d, want > 0 drops and %d in all", d, got, n)
	}
}

// TestJetStreamUntilEnd: a source opened to stop at the end names its
// stream and durable, gives each record its subject's last token as key,
// and once at its end reports as its lag the 50 messages published after
// it opened. (Order, offsets, times and the end itself are the
// conformance suite's.)
func TestJetStreamUntilEnd(t *testing.T) {
	srv := natsTestServer(t, nil)
	natsTestStream(t, NATSConfig{URL: srv.ClientURL()}, "EVENTS", "events.>")
	const n = 700
	jsPublish(t, srv.ClientURL(), "events.a", 0, n)
	cfg := NATSConfig{URL: srv.ClientURL(), Subject: "events.>", JetStreamFetch: settings.JetStreamFetch{FetchBatch: 64}}
	src, err := NewJetStreamSource(context.Background(), cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Name() != "jetstream:EVENTS/streamlearn" {
		t.Errorf("name %q", src.Name())
	}
	jsPublish(t, srv.ClientURL(), "events.b", n, n+50)
	for i := range n {
		r, err := src.Fetch(context.Background())
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if string(r.Key) != "a" {
			t.Fatalf("record %d: key %q", i, r.Key)
		}
	}
	natsWantEnd(t, src)
	if lag := src.Lag(); lag != 50 {
		t.Errorf("lag %d, want the 50 published after open", lag)
	}
}

// Each record carries the consumer's pending count at its delivery: with
// nothing published meanwhile, the messages after it.
func TestJetStreamLag(t *testing.T) {
	const n = 300
	src, err := NewJetStreamSource(context.Background(), NATSConfig{URL: jsTestServer(t, n), JetStreamFetch: settings.JetStreamFetch{FetchBatch: 64}}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range n {
		r, err := src.Fetch(context.Background())
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if want := int64(n - 1 - i); r.Lag != want {
			t.Fatalf("record %d: lag %d, want %d", i, r.Lag, want)
		}
	}
}

// With AckBatch, commits are acknowledged every AckBatch calls. (The rest
// on Close: the conformance suite's batched consumer resumes after its
// last commit.)
func TestJetStreamAckBatch(t *testing.T) {
	url := jsTestServer(t, 60)
	ctx := context.Background()
	src, err := NewJetStreamSource(ctx, NATSConfig{URL: url, JetStreamFetch: settings.JetStreamFetch{AckBatch: 10}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 25 {
		r := natsFetchN(t, src, 1, i)
		if err := src.Commit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	info, err := src.cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 20 {
		t.Errorf("ack floor %d before Close, want 20 (two batches of 10)", info.AckFloor.Stream)
	}
}

// A redelivery after AckWait of a record already returned is skipped:
// offsets stay strictly increasing.
func TestJetStreamSkipsAckWaitRedelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for AckWait")
	}
	url := jsTestServer(t, 5)
	cfg := NATSConfig{URL: url, AckWait: time.Second, JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}
	ctx := context.Background()
	src, err := NewJetStreamSource(ctx, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	natsFetchN(t, src, 5, 0)
	time.Sleep(1500 * time.Millisecond) // past AckWait: the server redelivers 1..5
	jsPublish(t, url, "events", 5, 6)
	r := natsFetchN(t, src, 1, 5)
	if r.Offset != 6 || src.Redelivered() == 0 {
		t.Fatalf("offset %d redelivered %d, want 6 and > 0", r.Offset, src.Redelivered())
	}
}

func TestJetStreamSourceNoStream(t *testing.T) {
	srv := natsTestServer(t, nil)
	_, err := NewJetStreamSource(context.Background(), NATSConfig{URL: srv.ClientURL(), Stream: "NOPE"}, false)
	if err == nil || !strings.Contains(err.Error(), `stream "NOPE" not found`) {
		t.Fatalf("got %v", err)
	}
}

func TestJetStreamSinkRoundTrip(t *testing.T) {
	srv := natsTestServer(t, nil)
	natsTestStream(t, NATSConfig{URL: srv.ClientURL()}, "PRED", "predictions")
	cfg := NATSConfig{URL: srv.ClientURL(), JetStreamPublish: settings.JetStreamPublish{PublishWindow: 16}}
	sink, err := NewJetStreamSink(cfg, "PRED", "predictions")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 500
	buf := make([]byte, 0, 64)
	for i := range n {
		buf = append(buf[:0], testEvent(i)...)
		if err := sink.Publish(ctx, nil, buf); err != nil { // buf is reused: the sink must copy
			t.Fatal(err)
		}
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Stream, cfg.Subject, cfg.Durable = "PRED", "predictions", "reader"
	src, err := NewJetStreamSource(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	natsFetchN(t, src, n, 0)
	natsWantEnd(t, src)
}

func TestJetStreamSinkErrors(t *testing.T) {
	srv := natsTestServer(t, nil)
	natsTestStream(t, NATSConfig{URL: srv.ClientURL()}, "PRED", "predictions")
	cfg := NATSConfig{URL: srv.ClientURL()}
	if _, err := NewJetStreamSink(cfg, "NOPE", "predictions"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing stream: %v", err)
	}
	// A subject no stream captures: the publish fails and Flush says so.
	sink, err := NewJetStreamSink(cfg, "PRED", "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = sink.Publish(ctx, nil, []byte(`{}`))
	if err := sink.Flush(ctx); err == nil || !strings.Contains(err.Error(), "publish") {
		t.Fatalf("flush: %v, want a publish error", err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestEmbedded(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{Port: -1, Stream: EmbeddedStream})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !strings.HasPrefix(e.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("url %q", e.ClientURL())
	}
	if err := e.CreateStream(ctx, EmbeddedStream, EmbeddedSubject); err != nil {
		t.Fatalf("create again: %v", err)
	}
	sink, err := NewJetStreamSink(NATSConfig{URL: e.ClientURL()}, EmbeddedStream, EmbeddedSubject)
	if err != nil {
		t.Fatal(err)
	}
	sinkWrite(t, sink, 20)
	src, err := NewJetStreamSource(ctx, NATSConfig{URL: e.ClientURL()}, true)
	if err != nil {
		t.Fatal(err)
	}
	natsFetchN(t, src, 20, 0)
	natsWantEnd(t, src)
	src.Close()
	e.Shutdown()
	if _, err := NewNATSSource(ctx, NATSConfig{URL: e.ClientURL()}, false); err == nil {
		t.Fatal("connected to a shut down server")
	}
}

// Close leaves no goroutine behind: sources, sinks and their connections.
func TestNATSJetStreamCloseLeavesNoGoroutine(t *testing.T) {
	url := jsTestServer(t, 100)
	ctx := context.Background()
	cfg := NATSConfig{URL: url}
	exercise := func() {
		js, err := NewJetStreamSource(ctx, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		r := natsFetchN(t, js, 50, 0)
		if err := js.Commit(ctx, r); err != nil {
			t.Fatal(err)
		}
		core, err := NewNATSSource(ctx, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		sink, err := NewNATSSink(cfg, "events")
		if err != nil {
			t.Fatal(err)
		}
		jsink, err := NewJetStreamSink(cfg, "EVENTS", "events")
		if err != nil {
			t.Fatal(err)
		}
		_ = sink.Publish(ctx, nil, testEvent(0))
		_ = jsink.Publish(ctx, nil, testEvent(1))
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := core.Fetch(c); err != nil {
			t.Fatal(err)
		}
		for _, c := range []interface{ Close() error }{js, core, sink, jsink} {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// The next run starts over: the durable is reset to seq 1 below
		// (or deleted, on servers before 2.14).
	}
	// The first run creates the durable consumer, whose server-side
	// goroutines stay; count from the second.
	exercise()
	before := goroutinesSettle(t, -1)
	nc, jsc := jsTestClient(t, url)
	st, err := jsc.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if jsServerAtLeast(nc.ConnectedServerVersion(), 2, 14) {
		_, err = st.ResetConsumerToSequence(ctx, DefaultJetStreamDurable, 1)
	} else {
		// Servers before 2.14 (Debian's 2.9) have no consumer reset: the
		// durable starts over from seq 1 when the next run creates it.
		err = st.DeleteConsumer(ctx, DefaultJetStreamDurable)
	}
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	goroutinesSettle(t, before)
	exercise()
	goroutinesSettle(t, before)
}

// TestJetStreamAckMeta: jsAckMeta reads the stream sequence, the pending
// count and the time from an ack reply subject of every form. A source
// reads what follows the prefix it learnt, and falls back to jsAckMeta on
// another prefix: the same results, whatever came before (the cases run
// in order through one source).
func TestJetStreamAckMeta(t *testing.T) {
	var src JetStreamSource
	for _, tc := range []struct {
		reply            string
		seq, pending, ts uint64
		ok               bool
	}{
		{"$JS.ACK.EVENTS.dur.1.42.7.1700000000000000001.3", 42, 3, 1700000000000000001, true},
		{"$JS.ACK._.hash.EVENTS.dur.2.43.8.1700000000000000002.0.rnd", 43, 0, 1700000000000000002, true},
		{"$JS.ACK.dom.hash.EVENTS.dur.2.44.8.5.9", 44, 9, 5, true},
		{"$JS.ACK.EVENTS.dur.1.x.7.1.3", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1.42", 0, 0, 0, false},
		{"_INBOX.abc", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1.42.7.1700000000000000001.3", 42, 3, 1700000000000000001, true},
		{"$JS.ACK.EVENTS.dur.12.43.8.1700000000000000002.2", 43, 2, 1700000000000000002, true},
		{"$JS.ACK.EVENTS.dur.1.44.9.1700000000000000003.1.x", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1.44.9.17000000000000000x3.1", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1.44.9..1", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1.44.9.5", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.other.1.45.1.6.0", 45, 0, 6, true},
		{"$JS.ACK._.hash.EVENTS.dur.2.46.8.1700000000000000002.0.rnd", 46, 0, 1700000000000000002, true},
		{"$JS.ACK._.hash.EVENTS.dur.2.47.8.7.5", 47, 5, 7, true},
		{"$JS.ACK._.hash.EVENTS.dur.2.48.8.7.5.", 48, 5, 7, true},
		{"$JS.ACK._.hash.EVENTS.dur.2.49.8.7.5x", 0, 0, 0, false},
		{"$JS.ACK.EVENTS.dur.1.50.7.8.3", 50, 3, 8, true},
		{"_INBOX.abc", 0, 0, 0, false},
	} {
		seq, pending, ts, _, _, ok := jsAckMeta(tc.reply)
		if ok != tc.ok || ok && (seq != tc.seq || pending != tc.pending || uint64(ts) != tc.ts) {
			t.Errorf("%s: got %d %d %d %v", tc.reply, seq, pending, ts, ok)
		}
		seq, pending, ts, ok = src.ackMeta(tc.reply)
		if ok != tc.ok || ok && (seq != tc.seq || pending != tc.pending || uint64(ts) != tc.ts) {
			t.Errorf("source: %s: got %d %d %d %v", tc.reply, seq, pending, ts, ok)
		}
	}
}

// TestJetStreamSinkCreatesStream: with create_stream a sink whose stream
// does not exist creates it, file-stored and capturing its subject, says
// so once at INFO, and publishes into it; a second sink finds it and says
// nothing. Without create_stream the stream is still an error
// (TestJetStreamSinkErrors).
func TestJetStreamSinkCreatesStream(t *testing.T) {
	srv := natsTestServer(t, nil)
	var logs bytes.Buffer
	yes := true
	cfg := NATSConfig{URL: srv.ClientURL(), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		JetStreamPublish: settings.JetStreamPublish{CreateStream: &yes}}
	for range 2 {
		sink, err := NewJetStreamSink(cfg, "PRED", "predictions")
		if err != nil {
			t.Fatal(err)
		}
		sinkWrite(t, sink, 10)
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "level=INFO msg=\"created JetStream stream\""); n != 1 || !strings.Contains(logs.String(), "stream=PRED subjects=predictions") {
		t.Errorf("logged %d creations, want 1: %q", n, logs.String())
	}
	_, js := jsTestClient(t, srv.ClientURL())
	st, err := js.Stream(t.Context(), "PRED")
	if err != nil {
		t.Fatal(err)
	}
	info := st.CachedInfo()
	if got := info.Config; !slices.Equal(got.Subjects, []string{"predictions"}) || got.Storage != jetstream.FileStorage || got.Retention != jetstream.LimitsPolicy || info.State.Msgs != 20 {
		t.Errorf("created stream: subjects %v, storage %v, retention %v, %d messages; want [predictions], file, limits, 20",
			got.Subjects, got.Storage, got.Retention, info.State.Msgs)
	}
}
