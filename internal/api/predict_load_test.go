package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/service"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// POST /v1/predict holds at most MaxPredictRequests bodies and decodes and
// predicts at most predictWorkers requests at once; a request that waits
// predictWait for either slot is answered 503 with Retry-After, and the
// slots are free again once the requests holding them are answered.
func TestPredictSlots(t *testing.T) {
	old := predictWait
	predictWait = 200 * time.Millisecond
	t.Cleanup(func() { predictWait = old })
	cfg, lines := demo(t, 1)
	lines = withoutLabels(t, lines)

	var in atomic.Int32
	release := make(chan struct{})
	predictor := func(context.Context, int32, bool, []byte) (*serving.Predictor, error) {
		in.Add(1)
		<-release
		return nil, serving.ErrNoModel
	}
	requests, workers := make(chan struct{}, MaxPredictRequests), make(chan struct{}, predictWorkers())
	ts := httptest.NewServer(predictHandler(Options{Config: cfg, Predictor: predictor}, requests, workers))
	t.Cleanup(ts.Close)
	type answer struct {
		code        int
		body, retry string
	}
	ask := func(body io.Reader) <-chan answer {
		c := make(chan answer, 1)
		go func() {
			resp, err := http.Post(ts.URL, "application/json", body)
			if err != nil {
				c <- answer{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			c <- answer{resp.StatusCode, string(b), resp.Header.Get("Retry-After")}
		}()
		return c
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wantBusy := func(a answer, what string) {
		t.Helper()
		if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, what) || a.retry != "1" {
			t.Errorf("got %d %q (Retry-After %q), want 503 %q with Retry-After 1", a.code, a.body, a.retry, what)
		}
	}

	// Every worker busy: the next request holds a body but waits for a
	// worker, in vain.
	var predicting []<-chan answer
	for range predictWorkers() {
		predicting = append(predicting, ask(bytes.NewReader(lines[0])))
	}
	waitFor("the workers to be taken", func() bool { return int(in.Load()) == predictWorkers() })
	wantBusy(<-ask(bytes.NewReader(lines[0])), "requests predicting")

	// Every request slot held by bodies still arriving: the next request
	// waits for a slot, in vain, and never reaches Predictor.
	var pipes []*io.PipeWriter
	var reading []<-chan answer
	for range MaxPredictRequests - predictWorkers() {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		reading = append(reading, ask(pr))
		if _, err := pw.Write(lines[0][:10]); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("the request slots to be taken", func() bool { return len(requests) == MaxPredictRequests })
	wantBusy(<-ask(bytes.NewReader(lines[0])), "requests in flight")

	// Answered, the requests give their slots back.
	close(release)
	for _, c := range predicting {
		if a := <-c; a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "no model") {
			t.Errorf("got %d %q, want 503 no model", a.code, a.body)
		}
	}
	for i, pw := range pipes {
		if _, err := pw.Write(lines[0][10:]); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if a := <-reading[i]; a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "no model") {
			t.Errorf("got %d %q, want 503 no model", a.code, a.body)
		}
	}
	if len(requests) != 0 || len(workers) != 0 {
		t.Errorf("%d request and %d worker slots held after every answer", len(requests), len(workers))
	}
	if got, want := int(in.Load()), MaxPredictRequests; got != want {
		t.Errorf("Predictor called %d times, want %d", got, want)
	}
}

// loopSource serves records cycling over lines on partition 0, without
// end, and counts them.
type loopSource struct {
	lines [][]byte
	n     atomic.Int64
}

func (s *loopSource) Fetch(ctx context.Context) (connectors.Record, error) {
	if err := ctx.Err(); err != nil {
		return connectors.Record{}, err
	}
	i := s.n.Add(1) - 1
	return connectors.Record{Value: s.lines[i%int64(len(s.lines))], Offset: i}, nil
}

func (s *loopSource) Commit(context.Context, connectors.Record) error { return nil }
func (s *loopSource) Name() string                                    { return "mem:loop" }
func (s *loopSource) Close() error                                    { return nil }

// BenchmarkLearnUnderPredictLoad measures how fast the service learns
// (config.yaml's seven learners on testdata/demo.jsonl, given over and
// over) while clients=N clients post predictions of one event each, back
// to back, to its HTTP API: each iteration times 500,000 events learned
// once the first prediction was answered (serving is active: every
// snapshot also copies the model for the predictions). ratio/ runs without
// and with 50 clients in turn and reports loaded/unloaded events/s, which
// must stay at or above 0.70:
//
//	go test -run '^$' -bench LearnUnderPredictLoad -count 3 ./internal/api/
func BenchmarkLearnUnderPredictLoad(b *testing.B) {
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	lines := demoLines(b, 5000)
	asks := withoutLabels(b, lines)
	const events = 500_000
	run := func(b *testing.B, clients int) (took time.Duration, answered int64) {
		b.Helper()
		src := &loopSource{lines: lines}
		svc, err := service.New(service.Options{Config: cfg, Source: src})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(New(Options{Snapshot: svc.Snapshot, Gatherer: prometheus.NewRegistry(),
			Config: cfg, Predictor: svc.Predictor}))
		defer ts.Close()
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- svc.Run(ctx) }()
		var wg sync.WaitGroup
		var ok atomic.Int64
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := ts.Client()
				for i := c; ctx.Err() == nil; i += clients {
					req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/predict", bytes.NewReader(asks[i%len(asks)]))
					resp, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							b.Error(err)
						}
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				}
			}()
		}
		for clients > 0 && ok.Load() == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		from, start, ok0 := src.n.Load(), time.Now(), ok.Load()
		for src.n.Load() < from+events {
			time.Sleep(100 * time.Microsecond)
		}
		took, answered = time.Since(start), ok.Load()-ok0
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
		return took, answered
	}
	for _, clients := range []int{0, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var took time.Duration
			var answered int64
			for b.Loop() {
				d, a := run(b, clients)
				took, answered = took+d, answered+a
			}
			b.ReportMetric(float64(events*b.N)/took.Seconds(), "events/s")
			b.ReportMetric(float64(answered)/took.Seconds(), "predictions/s")
		})
	}
	b.Run("ratio", func(b *testing.B) {
		var idle, loaded time.Duration
		for b.Loop() {
			d, _ := run(b, 0)
			idle += d
			d, _ = run(b, 50)
			loaded += d
		}
		b.ReportMetric(idle.Seconds()/loaded.Seconds(), "loaded/unloaded")
	})
}
