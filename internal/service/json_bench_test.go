package service

import (
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// BenchmarkAppendPrediction measures the prediction message of one event
// of testYAML's seven learners (the answer and every learner's entry):
//
//	go test -run '^$' -bench AppendPrediction ./internal/service
func BenchmarkAppendPrediction(b *testing.B) {
	p, err := pipeline.New(parseConfig(b, testYAML))
	if err != nil {
		b.Fatal(err)
	}
	ev := event.Event{ID: []byte("m-1042"), Labeled: true}
	preds := make([]online.Prediction, len(p.Names()))
	for i := range preds {
		preds[i] = online.Prediction{Label: online.Positive, Score: 0.25 * float64(i+1)}
	}
	rec := connectors.Record{Partition: 3, Offset: 1041}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendPrediction(buf[:0], &ev, "kafka:events", rec, p, preds)
	}
	b.ReportMetric(float64(len(buf)), "bytes/msg")
}
