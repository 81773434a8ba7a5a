package service

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

func marshalReport(r Report) ([]byte, error) { return json.Marshal(r) }

// appendPrediction appends the prediction message of one event:
//
//	{"id":"m-1","source":"kafka:events","partition":0,"offset":17,"round":17,"labeled":true,
//	 "answer":{"learner":"adagrad","class":"spam","score":0.42,"probability":0.71},
//	 "predictions":[{"learner":"pct","class":"spam","score":1.5,"probability":null}, ...]}
//
// source, partition and offset name the record it comes from (its
// identity); round is the number of events the model has seen, this one
// included; answer is the filter's verdict: the prediction of the
// learner the configuration's answer names (the first learner without
// one), the same object as its entry in predictions, which has every
// learner's in the configuration's order. class is the label as the
// configuration names it (pipeline.Pipeline.LabelName: "spam", "ham";
// the one label convention of a prediction); score is null when it is
// not finite (input.max_abs_value keeps scores finite; null is the guard
// behind it); probability is the probability of the positive label
// (pipeline.Pipeline.Probability), null when the learner has none. With
// a global model beside the models per key, each prediction is the one
// served for the key, and "from" says whose it is: "own" (the key's
// model) or "global". Built by hand: the hot path allocates nothing.
func appendPrediction(b []byte, ev *event.Event, source string, rec connectors.Record, p predictionSource, preds []online.Prediction) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, ev.ID)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, source)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(rec.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, rec.Offset, 10)
	b = append(b, `,"round":`...)
	b = strconv.AppendUint(b, p.Seen(), 10)
	b = append(b, `,"labeled":`...)
	b = strconv.AppendBool(b, ev.Labeled)
	b = append(b, `,"answer":`...)
	// The answer's entry in predictions is the same object: encoded
	// once, copied.
	a, from := p.Answer(), len(b)
	b = appendPredicted(b, p, a, preds[a])
	to := len(b)
	b = append(b, `,"predictions":[`...)
	for i, pr := range preds {
		if i > 0 {
			b = append(b, ',')
		}
		if i == a {
			b = append(b, b[from:to]...)
			continue
		}
		b = appendPredicted(b, p, i, pr)
	}
	return append(b, "]}"...)
}

// appendPredicted appends learner i's prediction pr as an object of
// appendPrediction's message.
func appendPredicted(b []byte, p predictionSource, i int, pr online.Prediction) []byte {
	b = append(b, `{"learner":`...)
	b = appendJSONString(b, p.Name(i))
	b = append(b, `,"class":`...)
	b = appendJSONString(b, p.LabelName(pr.Label))
	b = append(b, `,"score":`...)
	b = appendNumber(b, pr.Score)
	b = append(b, `,"probability":`...)
	if prob, ok := p.ServedProbability(i); ok {
		b = appendNumber(b, prob)
	} else {
		b = append(b, "null"...)
	}
	if from := p.From(i); from != "" {
		b = append(b, `,"from":`...)
		b = appendJSONString(b, from)
	}
	return append(b, '}')
}

// predictionSource is what a prediction message names: a pipeline, or,
// with a global model beside the models per key, the mix of a key's model
// and the global one (pipeline.Mixed).
type predictionSource interface {
	Seen() uint64
	Name(i int) string
	LabelName(y int8) string
	ServedProbability(i int) (float64, bool)
	// Answer is the index of the learner that answers for the filter.
	Answer() int
	// From is whose prediction learner i's is: "own", "global", or ""
	// without a global model.
	From(i int) string
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string (s is valid UTF-8: the
// decoder checked it).
func appendJSONString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendNumber appends v as strconv.AppendFloat(b, v, 'g', -1, 64) does,
// or null when it is not finite: JSON has no Inf or NaN. A whole number
// below 10^6 in magnitude, which 'g' writes as an integer (the scores of
// the learners over a class are counts), is written as one without the
// search for the shortest digits; -0, which 'g' writes with its sign, is
// not.
func appendNumber(b []byte, v float64) []byte {
	if i := int64(v); float64(i) == v && i > -1e6 && i < 1e6 && (i != 0 || !math.Signbit(v)) {
		return strconv.AppendInt(b, i, 10)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
