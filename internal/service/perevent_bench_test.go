package service

import (
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// BenchmarkPerEvent is the worker's share of an event of the latency
// benchmark's config.yaml case: decode, predict, learn, track, and the
// prediction's JSON.
func BenchmarkPerEvent(b *testing.B) {
	c := loadExampleConfig(b)
	const n = 4096
	evs := make([][]byte, n)
	for i := range evs {
		evs[i] = appendLatencyEvent(nil, i)
	}
	for _, part := range []string{"process", "all"} {
		b.Run(part, func(b *testing.B) {
			p, dec := pipelineAndDecoder(b, c)
			var ev event.Event
			var out []byte
			var preds []online.Prediction
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := dec.Decode(evs[i%n], &ev); err != nil {
					b.Fatal(err)
				}
				preds, _ = p.Process(&ev)
				if part == "all" {
					out = appendPrediction(out[:0], &ev, "src", connectors.Record{Offset: int64(i)}, p, preds)
				}
				i++
			}
		})
	}
}
