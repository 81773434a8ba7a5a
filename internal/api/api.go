package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// Options configure the handler. Snapshot, Gatherer and Config are
// required.
type Options struct {
	// Snapshot returns the service's latest snapshot (service.Service's
	// or a serving.Replica's Snapshot); it is called from the server's
	// goroutines. A nil snapshot reads as not started.
	Snapshot func() *serving.Snapshot
	// Gatherer is the registry /metrics serves, typically one holding
	// metrics.NewCollector and metrics.NewEventDuration.
	Gatherer prometheus.Gatherer
	// Config is the running configuration; /v1/learners lists its learners.
	Config *config.Config
	// Predictor returns the model copy that answers POST /v1/predict
	// (service.Service's or a serving.Replica's Predictor). Optional:
	// without it the endpoint answers 501.
	Predictor func(ctx context.Context, partition int32, only bool, key []byte) (*serving.Predictor, error)
	// WantDigests, when not nil, is called by GET /v1/report before it
	// reads the snapshot: a service computes the learners' state digests
	// of its snapshots only while they are read (service.Service's
	// WantDigests).
	WantDigests func(ctx context.Context)
	// Token, when not empty, is the bearer token every request needs
	// ("Authorization: Bearer <token>"), but for the probes and the
	// dashboard's static files (see publicPaths); it must pass
	// CheckToken. Empty: no authentication (the default address is
	// loopback).
	Token string
}

// Learner is one entry of GET /v1/learners.
type Learner struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
}

// New returns the handler of the endpoints in the package comment. It is
// safe for concurrent use. It panics when an option is missing or the
// token fails CheckToken, a programmer error.
func New(opt Options) http.Handler {
	if opt.Snapshot == nil || opt.Gatherer == nil || opt.Config == nil {
		panic("api: New needs Snapshot, Gatherer and Config")
	}
	if opt.Token != "" {
		if err := CheckToken(opt.Token); err != nil {
			panic("api: Options.Token: " + err.Error())
		}
	}
	learners := make([]Learner, len(opt.Config.Learners))
	for i, l := range opt.Config.Learners {
		learners[i] = Learner{Name: l.Name, Algorithm: l.Algorithm}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(opt.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if snap := opt.Snapshot(); snap == nil || !snap.Started {
			text(w, http.StatusServiceUnavailable, "not ready: the service has not started consuming its source (serve: no model loaded yet)")
			return
		}
		text(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /v1/report", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("key") {
			keyReport(w, r, opt)
			return
		}
		if opt.WantDigests != nil {
			// The reports' state digests are computed while someone
			// reads them: the first request after an idle spell waits
			// for a snapshot that has them.
			ctx, cancel := context.WithTimeout(r.Context(), predictWait)
			opt.WantDigests(ctx)
			cancel()
		}
		var reports []serving.Report
		if snap := opt.Snapshot(); snap != nil {
			reports = snap.Reports
		}
		if reports == nil {
			reports = []serving.Report{}
		}
		p, has, ok := partitionQuery(w, r)
		if !ok {
			return
		}
		if !has {
			writeJSON(w, reports)
			return
		}
		for _, rep := range reports {
			if rep.Partition == p {
				writeJSON(w, rep)
				return
			}
		}
		fail(w, http.StatusNotFound, "no_model", "no model for partition "+strconv.FormatInt(int64(p), 10))
	})
	mux.HandleFunc("GET /v1/learners", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, learners)
	})
	if opt.Predictor != nil {
		mux.Handle("POST /v1/predict", predictHandler(opt, make(chan struct{}, MaxPredictRequests), make(chan struct{}, predictWorkers())))
	} else {
		mux.HandleFunc("POST /v1/predict", func(w http.ResponseWriter, _ *http.Request) {
			fail(w, http.StatusNotImplemented, "not_implemented", "predictions are not served by this handler")
		})
	}
	handleDashboard(mux, opt.Snapshot) // GET /, /dashboard/*, /v1/history
	handleLatency(mux, opt.Gatherer)
	h := limitBodies(methodNotAllowed(mux))
	if opt.Token != "" {
		h = requireToken(opt.Token, h)
	}
	return h
}

// text writes a one-line plain-text response.
func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(w, http.StatusInternalServerError, "internal", "encoding the response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// Server limits, so that a slow or idle client cannot hold a connection:
// a scrape or a report is small and fast, and Prometheus' default scrape
// timeout is 10s.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
)

// NewServer returns a server for h on addr with the limits above. The
// caller runs ListenAndServe (or Serve) and Shutdown; it may change the
// limits, plain fields of the server, before serving (tests shorten them).
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// methodNotAllowed answers a request to a /v1/ path that no route takes
// as every other /v1/ error, with an ErrorBody: 405 (code
// method_not_allowed) and the Allow header the mux sets for a path asked
// with a method it does not take, 404 (code not_found) for a path that is
// no endpoint. Other paths keep the mux's own answers.
func methodNotAllowed(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			mux.ServeHTTP(w, r)
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" { // a route of its method
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&apiStatus{ResponseWriter: w, r: r}, r) // 404 or 405
	})
}

// apiStatus turns the mux's plain-text 405 and 404 into ErrorBodies; it
// wraps only the requests no pattern matches.
type apiStatus struct {
	http.ResponseWriter
	r       *http.Request
	written bool // the ErrorBody went out: the mux's text is dropped
}

func (w *apiStatus) WriteHeader(code int) {
	var apiCode, msg string
	switch code {
	case http.StatusMethodNotAllowed:
		apiCode, msg = "method_not_allowed", fmt.Sprintf("%s %s: method not allowed; allowed: %s", w.r.Method, w.r.URL.Path, w.Header().Get("Allow"))
	case http.StatusNotFound:
		apiCode, msg = "not_found", fmt.Sprintf("%s %s: no such endpoint", w.r.Method, w.r.URL.Path)
	default:
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.written = true
	w.Header().Del("Content-Length")
	fail(w.ResponseWriter, code, apiCode, msg)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *apiStatus) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *apiStatus) Write(b []byte) (int, error) {
	if w.written {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}
