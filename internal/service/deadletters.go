package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// DeadLetters publishes dead letters to a sink, one JSON object per bad
// record: {"source", "offset", "reason", "error", "raw"} where raw holds
// the original bytes as a string, or "raw_base64" holds them when they are
// not valid UTF-8.
type DeadLetters struct {
	Sink connectors.Sink
}

var _ pipeline.DeadLetters = (*DeadLetters)(nil)

type deadLetterJSON struct {
	Source    string `json:"source"`
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
	Error     string `json:"error"`
	Raw       string `json:"raw,omitempty"`
	RawBase64 string `json:"raw_base64,omitempty"`
}

// DeadLetter publishes one dead letter.
func (s *DeadLetters) DeadLetter(d pipeline.DeadLetter) error {
	return s.publish(context.Background(), d)
}

// publish publishes one dead letter; ctx bounds a sink that blocks.
func (s *DeadLetters) publish(ctx context.Context, d pipeline.DeadLetter) error {
	j := deadLetterJSON{Source: d.Source, Offset: d.Offset, Reason: string(d.Reason), Error: d.Err}
	if utf8.Valid(d.Raw) {
		j.Raw = string(d.Raw)
	} else {
		j.RawBase64 = base64.StdEncoding.EncodeToString(d.Raw)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return s.Sink.Publish(ctx, nil, b)
}
