package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// The dashboard is static: index.html, app.js and app.css, embedded in
// the binary so that it works offline. app.js polls /v1/report and
// /v1/history and draws the page with DOM and SVG calls only.
//
//go:embed dashboard
var dashboardFiles embed.FS

// ContentSecurityPolicy is sent with the dashboard's files: they load
// only the binary's own script, style sheet, icon and JSON, run no inline
// script or style, and cannot be framed, post forms or load plugins.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// dashboardAssets maps URL paths to the embedded files and their types.
var dashboardAssets = []struct{ path, file, contentType string }{
	{"/{$}", "dashboard/index.html", "text/html; charset=utf-8"},
	{"/dashboard/app.js", "dashboard/app.js", "text/javascript; charset=utf-8"},
	{"/dashboard/app.css", "dashboard/app.css", "text/css; charset=utf-8"},
	{"/dashboard/icon.svg", "dashboard/icon.svg", "image/svg+xml"},
}

// handleDashboard registers the dashboard's files and GET /v1/history.
func handleDashboard(mux *http.ServeMux, snapshot func() *serving.Snapshot) {
	for _, a := range dashboardAssets {
		body, err := dashboardFiles.ReadFile(a.file)
		if err != nil {
			panic("api: embedded " + a.file + ": " + err.Error()) // the go:embed line and the table disagree
		}
		mux.Handle("GET "+a.path, staticHandler(body, a.contentType))
	}
	mux.HandleFunc("GET /v1/history", func(w http.ResponseWriter, r *http.Request) {
		part, has, ok := partitionQuery(w, r)
		if !ok {
			return
		}
		all := historyOf(snapshot())
		if !has {
			serveJSON(w, r, all)
			return
		}
		for _, c := range all {
			if c.Partition == part {
				serveJSON(w, r, c)
				return
			}
		}
		fail(w, http.StatusNotFound, "no_model", "no model for partition "+strconv.FormatInt(int64(part), 10))
	})
}

// staticHandler serves one embedded file with its type, the security
// headers and an ETag, so that a reload revalidates instead of
// downloading it again.
func staticHandler(body []byte, contentType string) http.Handler {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		securityHeaders(h)
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// serveJSON writes v as JSON with an ETag of its bytes: a dashboard
// polling an idle service gets 304 Not Modified, not the curves again.
// A client that accepts gzip gets bodies of gzipMin bytes or more
// compressed (the curves of /v1/history shrink about tenfold), under an
// ETag of their own.
func serveJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(w, http.StatusInternalServerError, "internal", "encoding the response: "+err.Error())
		return
	}
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	etag := hex.EncodeToString(sum[:12])
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	if len(b) < gzipMin || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("ETag", `"`+etag+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		return
	}
	etag = `"` + etag + `-gzip"`
	h.Set("ETag", etag)
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Encoding", "gzip")
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	_, _ = gz.Write(b)
	_ = gz.Close()
}

// gzipMin is the smallest JSON body serveJSON compresses: below about a
// kilobyte gzip saves less than it costs.
const gzipMin = 1024

// acceptsGzip reports whether an Accept-Encoding header value lists gzip
// with a non-zero quality (RFC 9110 section 12.5.3).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(strings.TrimSpace(params), " ", ""), "q=")
		if !ok {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}

// etagMatch reports whether an If-None-Match header value matches etag
// (weak comparison, RFC 9110 section 13.1.2). The gzip path checks it
// itself rather than through http.ServeContent, which wants the body
// first: a polling dashboard's 304 would compress the curves every time.
func etagMatch(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// partitionQuery reads ?partition=N. has is false without it; ok is false
// when it is malformed, and the 400 response is written.
func partitionQuery(w http.ResponseWriter, r *http.Request) (part int32, has, ok bool) {
	q := r.URL.Query()
	if !q.Has("partition") {
		return 0, false, true
	}
	p, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if err != nil {
		fail(w, http.StatusBadRequest, "bad_partition", "partition: want an integer, got "+strconv.Quote(q.Get("partition")))
		return 0, true, false
	}
	return int32(p), true, true
}

// History is one model's entry of GET /v1/history: the sampled curves of
// each of its learners, from the same snapshot as /v1/report's numbers.
// It changes only when the model learns, so that an idle service answers
// a poll with 304 Not Modified.
type History struct {
	Source    string   `json:"source"`
	Partition int32    `json:"partition"`
	Learners  []Curves `json:"learners"`
}

// Curves are one learner's curves over rounds (labeled events), sampled
// evenly over the whole run (regret.History) and ending with the
// learner's state at the snapshot, so the last element of Mistakes is the
// report's mistakes (the snapshot's curves, when copied before its
// reports, get the report's numbers as their last point). They are columns: element k of each slice is the
// k-th sample. A bound is 0 where the learner's theorem gives none, and
// Regret is 0 without a comparator (regret.Point).
type Curves struct {
	Name         string    `json:"name"`
	Algorithm    string    `json:"algorithm"`
	Round        []uint64  `json:"round"`
	Mistakes     []uint64  `json:"mistakes"`
	Loss         []float64 `json:"loss"`
	Regret       []float64 `json:"regret"`
	MistakeBound []float64 `json:"mistake_bound"`
	RegretBound  []float64 `json:"regret_bound"`
}

// historyOf returns the curves of every model of snap, in the order of
// its reports. Models have empty curves when the service keeps none
// (service.Options.HistoryPoints < 0).
func historyOf(snap *serving.Snapshot) []History {
	if snap == nil {
		return []History{}
	}
	out := make([]History, len(snap.Reports))
	for i, rep := range snap.Reports {
		var series [][]regret.Point
		if i < len(snap.Curves) {
			series = snap.Curves[i]
		}
		h := History{Source: rep.Source, Partition: rep.Partition, Learners: make([]Curves, len(rep.Learners))}
		for j, l := range rep.Learners {
			var pts []regret.Point
			if j < len(series) {
				pts = series[j]
			}
			var now *regret.Point
			if rounds, _, _ := l.Learned(); len(pts) > 0 && pts[len(pts)-1].Round < rounds {
				// The snapshot's curves were copied a little earlier.
				p := current(l)
				now = &p
			}
			h.Learners[j] = columns(l.Name, l.Algorithm, pts, now)
		}
		out[i] = h
	}
	return out
}

// current is the point of a learner's curves at its report (what
// regret.Tracker.History appends as the last point): of every round
// learned, default-labeled ones included, as the curves are.
func current(l regret.LearnerReport) regret.Point {
	rounds, mistakes, loss := l.Learned()
	p := regret.Point{Round: rounds, Mistakes: mistakes, Loss: loss}
	if r := l.Regret; r != nil {
		p.Regret = r.Value
		if r.Bound != nil {
			p.RegretBound = *r.Bound
		}
	}
	if b := l.Bound; b != nil {
		switch b.Kind {
		case online.MistakeBound:
			p.MistakeBound = b.Value
		case online.RegretBound:
			p.RegretBound = b.Value
		}
	}
	return p
}

// columns returns the curves of pts, then last when it is not nil.
func columns(name, algorithm string, pts []regret.Point, last *regret.Point) Curves {
	if last != nil {
		pts = append(pts[:len(pts):len(pts)], *last) // a new array: pts is the snapshot's
	}
	n := len(pts)
	c := Curves{Name: name, Algorithm: algorithm,
		Round: make([]uint64, n), Mistakes: make([]uint64, n), Loss: make([]float64, n),
		Regret: make([]float64, n), MistakeBound: make([]float64, n), RegretBound: make([]float64, n)}
	for k, p := range pts {
		c.Round[k], c.Mistakes[k], c.Loss[k] = p.Round, p.Mistakes, p.Loss
		c.Regret[k], c.MistakeBound[k], c.RegretBound[k] = p.Regret, p.MistakeBound, p.RegretBound
	}
	return c
}
