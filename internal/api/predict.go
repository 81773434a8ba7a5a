package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/serving"
)

// Limits of POST /v1/predict.
const (
	// MaxPredictBody bounds a request body: 8 MiB.
	MaxPredictBody = 8 << 20
	// MaxPredictEvents bounds the events of one request.
	MaxPredictEvents = 10000
	// PredictWait bounds how long a request waits for the first copy of
	// the models after an idle spell (service.Service's Predictor), and how long it
	// waits for a slot (below) before it is answered 503.
	PredictWait = 5 * time.Second
	// MaxPredictRequests bounds the requests of POST /v1/predict that
	// read or hold a body at once, so that their bodies take at most
	// MaxPredictRequests × MaxPredictBody (64 MiB) whatever the clients
	// send; more wait for a slot.
	MaxPredictRequests = 8
)

// predictWait is PredictWait; tests shorten it.
var predictWait = PredictWait

// predictWorkers is how many requests decode and predict at once: half the
// CPUs the Go runtime uses (at least one), so that however many clients ask
// for predictions, learning keeps the other half (see
// BenchmarkLearnUnderPredictLoad).
func predictWorkers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// acquire takes a slot of sem, waiting predictWait at most (each wait has
// its own), or until ctx is done.
func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(predictWait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// busy answers 503 to a request that waited PredictWait for a slot.
func busy(w http.ResponseWriter, what string) {
	w.Header().Set("Retry-After", "1")
	fail(w, http.StatusServiceUnavailable, "busy", fmt.Sprintf("busy: %s for %v; retry later", what, predictWait))
}

// PredictResponse is the answer for one event of POST /v1/predict.
type PredictResponse struct {
	// ID is the event's id, empty when it has none.
	ID string `json:"id"`
	// Partition is the partition whose model answered; ModelEvents how
	// many records that model had processed when the serving copy was
	// made, at ModelTime.
	Partition   int32     `json:"partition"`
	ModelEvents uint64    `json:"model_events"`
	ModelTime   time.Time `json:"model_time"`
	// ModelSHA256 is the SHA-256 of the model's state: two answers of
	// equal digests come from the same model, whichever process served
	// them (the learning service, or `serve` from its checkpoint).
	ModelSHA256 string `json:"model_sha256"`
	// Key, with models per key, is the key whose model answered; absent
	// when a new key's model (empty, or the warm start) did.
	Key *string `json:"key,omitempty"`
	// GlobalSHA256, with a global model beside the models per key
	// (models.global), is the digest of the global model: each learner's
	// answer is the key's model's or the global model's, whichever has
	// made fewer mistakes on the key.
	GlobalSHA256 string `json:"global_sha256,omitempty"`
	// Answer is the filter's verdict: the prediction of the learner the
	// configuration's answer names (the first learner without one), the
	// same as its entry in Predictions.
	Answer PredictedLabel `json:"answer"`
	// Predictions has one entry per learner, in the configuration's order.
	Predictions []PredictedLabel `json:"predictions"`
}

// PredictedLabel is one learner's prediction: the label as the
// configuration names it (Class: input.positive and input.negative's
// first, else "1" and "0"; with input.classes, the class's name), the
// one label convention of an answer and of a prediction message; the
// score (null when not finite) and the probability of the positive label
// (null when the learner has none: see learners[].calibrate). From, with
// a global model beside the models per key, says whose prediction was
// served for the key: "own" (the key's model) or "global".
type PredictedLabel struct {
	Learner     string   `json:"learner"`
	Class       string   `json:"class"`
	Score       *float64 `json:"score"`
	Probability *float64 `json:"probability"`
	From        string   `json:"from,omitempty"`
}

// predictHandler serves POST /v1/predict: the body is one JSON event (the
// wire format of docs/configuration.md, without a label) or a JSON array of them; the answer is one
// PredictResponse or an array of them, in order. Nothing is learned: an
// event with a label is refused (400, field "label"), as is a label
// event; labels go on the stream. ?partition=N chooses the model when there are
// several. With models per key (models.by: key), each event is answered
// by its key's model — the key is ?key= when given, else the event's own
// `key` — in the partition that has it (or ?partition=N's). Errors are 4xx/5xx with a one-line reason: 400 for a body that
// is not an event or array of events (naming the event at fault), 413
// when too large, 422 for an event outside a hypothesis class's domain,
// 503 while there is no model to serve or while the request waited
// PredictWait for a slot, with Retry-After. A request holds a slot of
// requests (MaxPredictRequests of them) from before it reads its body
// until it is answered, and one of workers (predictWorkers) while it
// decodes and predicts.
func predictHandler(opt Options, requests, workers chan struct{}) http.HandlerFunc {
	ecfg := pipeline.EventConfig(opt.Config)
	ecfg.Format = event.JSONL // a request is a JSON event, whatever the stream's records are
	decoders := sync.Pool{New: func() any {
		d, err := event.NewDecoder(ecfg)
		if err != nil {
			return err
		}
		return d
	}}
	return func(w http.ResponseWriter, r *http.Request) {
		partition, has, ok := partitionQuery(w, r)
		if !ok {
			return
		}
		only := !has // no partition named: the one model there is
		var key []byte
		if q := r.URL.Query(); q.Has("key") {
			key = []byte(q.Get("key"))
		}
		if !acquire(r.Context(), requests) {
			busy(w, fmt.Sprintf("%d requests in flight", MaxPredictRequests))
			return
		}
		defer func() { <-requests }()
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxPredictBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				fail(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body larger than %d bytes", MaxPredictBody))
				return
			}
			fail(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
			return
		}
		raws, array, err := splitEvents(body)
		if err != nil {
			fail(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		d := decoders.Get()
		dec, ok := d.(*event.Decoder)
		if !ok {
			fail(w, http.StatusInternalServerError, "internal", fmt.Sprintf("event decoder: %v", d))
			return
		}
		defer decoders.Put(dec)
		if !acquire(r.Context(), workers) {
			busy(w, fmt.Sprintf("%d requests predicting", cap(workers)))
			return
		}
		defer func() { <-workers }()
		ctx, cancel := context.WithTimeout(r.Context(), predictWait)
		defer cancel()
		out := make([]PredictResponse, 0, len(raws))
		var ev event.Event
		var preds []serving.Prediction
		for i, raw := range raws {
			if err := dec.Decode(raw, &ev); err != nil {
				badEvent(w, i, err)
				return
			}
			if ev.LabelOnly {
				writeError(w, http.StatusBadRequest, APIError{Code: "label_event", Event: &i,
					Message: "a label event (an id and a label, no features) has nothing to predict: send it on the stream"})
				return
			}
			if ev.Labeled {
				writeError(w, http.StatusBadRequest, APIError{Code: "label_in_request", Event: &i, Field: "label",
					Message: "label: /v1/predict never learns, so a label here would be ignored: leave it out to ask for a prediction, and send labeled events on the stream for the models to learn them"})
				return
			}
			k := ev.Key
			if key != nil {
				k = key
			}
			pr, ok := predictor(ctx, w, opt, partition, only, k)
			if !ok {
				return
			}
			var reason event.Reason
			preds, reason = pr.Predict(preds[:0], &ev)
			if reason != "" {
				writeError(w, http.StatusUnprocessableEntity, APIError{Code: "outside_domain", Event: &i, Reason: string(reason),
					Message: "outside the domain of a hypothesis class (" + string(reason) + ")"})
				return
			}
			resp := PredictResponse{ID: string(ev.ID), Partition: pr.Partition, ModelEvents: pr.Events, ModelTime: pr.Time,
				ModelSHA256: hex.EncodeToString(pr.SHA256[:]), Predictions: make([]PredictedLabel, len(preds))}
			if pr.HasKey {
				resp.Key = &pr.Key
			}
			if sum, ok := pr.GlobalSHA256(); ok {
				resp.GlobalSHA256 = hex.EncodeToString(sum[:])
			}
			for j, p := range preds {
				resp.Predictions[j] = PredictedLabel{Learner: p.Learner, Class: p.Class,
					Score: finite(p.Score), Probability: p.Probability, From: p.From}
			}
			resp.Answer = resp.Predictions[pr.Answer()]
			out = append(out, resp)
		}
		if array {
			writeJSON(w, out)
			return
		}
		writeJSON(w, out[0])
	}
}

// predictor returns the model that answers for key (opt.Predictor), or
// answers the error and returns !ok.
func predictor(ctx context.Context, w http.ResponseWriter, opt Options, partition int32, only bool, key []byte) (*serving.Predictor, bool) {
	pr, err := opt.Predictor(ctx, partition, only, key)
	if err != nil {
		status, code := http.StatusBadRequest, "bad_request"
		if errors.Is(err, serving.ErrNoModel) {
			status, code = http.StatusServiceUnavailable, "no_model"
			if !only {
				status = http.StatusNotFound
			}
		}
		fail(w, status, code, err.Error())
		return nil, false
	}
	return pr, true
}

// keyReport serves GET /v1/report?key=K[&partition=N]: with models per
// key, the report of key's model, from the copy that serves predictions.
func keyReport(w http.ResponseWriter, r *http.Request, opt Options) {
	if opt.Predictor == nil || !keyedConfig(opt) {
		fail(w, http.StatusBadRequest, "not_per_key", "key: the models are not per key (models.by: key)")
		return
	}
	partition, has, ok := partitionQuery(w, r)
	if !ok {
		return
	}
	only := !has
	ctx, cancel := context.WithTimeout(r.Context(), predictWait)
	defer cancel()
	key := r.URL.Query().Get("key")
	pr, ok := predictor(ctx, w, opt, partition, only, []byte(key))
	if !ok {
		return
	}
	if !pr.HasKey {
		fail(w, http.StatusNotFound, "no_model", "no model for key "+strconv.Quote(key)+": no partition has learned an event of it yet (keys are exact, case and all; GET /v1/report lists each partition's top_keys)")
		return
	}
	rep, err := pr.Report()
	if err != nil {
		fail(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeJSON(w, serving.Report{Source: opt.Snapshot().Source, Partition: pr.Partition, Key: &key, Report: rep})
}

func keyedConfig(opt Options) bool { return opt.Config != nil && opt.Config.Models.By == "key" }

// splitEvents returns the events of a body holding one JSON object or an
// array of them, and whether it was an array.
func splitEvents(body []byte) ([]json.RawMessage, bool, error) {
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) == 0:
		return nil, false, errors.New("empty body: want a JSON event or an array of events")
	case trimmed[0] == '{':
		return []json.RawMessage{trimmed}, false, nil
	case trimmed[0] != '[':
		return nil, false, errors.New("body: want a JSON event or an array of events")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(trimmed, &raws); err != nil {
		return nil, true, fmt.Errorf("body: not a JSON array of events: %v", err)
	}
	if len(raws) == 0 {
		return nil, true, errors.New("body: an empty array")
	}
	if len(raws) > MaxPredictEvents {
		return nil, true, fmt.Errorf("body: %d events, at most %d per request", len(raws), MaxPredictEvents)
	}
	return raws, true, nil
}

// clip returns s, or its first 64 bytes (cut at a UTF-8 boundary) and
// "...": a field name from a request, echoed.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 60 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// badEvent answers 400 for event i of the request, which the decoder
// refused with err: the same message for the same fault, whichever
// request and position it came in.
func badEvent(w http.ResponseWriter, i int, err error) {
	e := APIError{Code: "bad_event", Event: &i, Message: err.Error()}
	var de *event.Error
	if errors.As(err, &de) {
		e.Message, e.Field, e.Reason = de.Detail(), clip(de.Field), string(de.Reason)
	}
	writeError(w, http.StatusBadRequest, e)
}

// finite returns &v, or nil when v is not finite (JSON has no Inf or NaN).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
