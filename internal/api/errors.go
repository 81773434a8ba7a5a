package api

import (
	"encoding/json"
	"net/http"
)

// ErrorBody is the body of every error answer of the /v1/ endpoints, and
// of a 401 on any path (the probes answer one line of text; /metrics's own
// errors are Prometheus's):
//
//	{"error": {"code": "bad_event", "message": "field \"v\": nonfinite: 1e400 overflows float64",
//	           "event": 2, "field": "v", "reason": "nonfinite"}}
type ErrorBody struct {
	Error APIError `json:"error"`
}

// APIError says what went wrong with a request.
type APIError struct {
	// Code is stable, for programs: bad_request, bad_partition,
	// bad_event, label_event, label_in_request, outside_domain,
	// too_large, no_model,
	// not_per_key, busy, unauthorized, not_implemented,
	// method_not_allowed, not_found, internal.
	Code string `json:"code"`
	// Message is one line for people; the same for the same fault.
	Message string `json:"message"`
	// Event is the index of the event at fault in the request (0 for a
	// request of one object); absent when no event is.
	Event *int `json:"event,omitempty"`
	// Field is the part of the event at fault ("label", "features.v"),
	// when one is; Reason the class of the fault, as dead letters have
	// it ("nonfinite"), for a bad event.
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// fail answers status with an ErrorBody of code and msg.
func fail(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, APIError{Code: code, Message: msg})
}

func writeError(w http.ResponseWriter, status int, e APIError) {
	b, err := json.Marshal(ErrorBody{e})
	if err != nil { // a bug: the body is strings and an int
		text(w, http.StatusInternalServerError, "encoding an error: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
