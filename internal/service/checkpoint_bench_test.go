package service

import (
	"context"
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// BenchmarkCheckpoint measures one checkpoint of a model of config.yaml's
// seven learners over 2^18 slots (two linear learners, 2 MiB of weights
// each): "take" is the worker's part, between two records (the state
// frozen: a copy of the weights; the report without digests), "complete"
// adds the saver's encoding, digests and report, and "save" the write,
// fsync, rename and fsync of the directory. A service takes one per
// partition every Options.CommitEvery records and every CommitInterval.
func BenchmarkCheckpoint(b *testing.B) {
	c := loadExampleConfig(b)
	for _, what := range []string{"take", "complete", "save"} {
		b.Run(what, func(b *testing.B) {
			store, err := checkpoint.OpenDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			s := newService(b, Options{Config: c, Source: newMemSource(genEvents(2000, 1, 0, 0, 0), 1), Checkpoints: store})
			if err := s.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			w := s.models.workers[0]
			var spare *pipeline.Frozen // as a service does: the last checkpoint's memory
			b.ReportAllocs()
			for b.Loop() {
				t, err := w.take(spare, nil)
				if err != nil {
					b.Fatal(err)
				}
				spare = t.frozen
				if what == "take" {
					continue
				}
				c, err := t.complete()
				if err != nil {
					b.Fatal(err)
				}
				if what == "save" {
					if err := store.Save(context.Background(), c); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCheckpointKeyed measures the worker's part of a checkpoint of
// models per key, 2,000 keys of which 500 resident (the others spilled)
// and a global model, with 20 records learned between two checkpoints:
// "take" freezes them (the models that learned encoded, the others'
// encodings kept, the global model copied), "marshal" is the encoding of
// every model that the worker did before.
func BenchmarkCheckpointKeyed(b *testing.B) {
	c, err := config.Parse("k.yaml", []byte(`features: {bits: 12}
learners:
  - {name: pct, algorithm: perceptron, bias: true}
  - {name: ogd, algorithm: ogd, bias: true}
models: {by: key, max: 500, global: true}
`))
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	lines := keyedLines(20000, keys)
	for _, what := range []string{"take", "marshal"} {
		b.Run(what, func(b *testing.B) {
			store, err := checkpoint.OpenDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			s := newService(b, Options{Config: c, Source: newMemSource(lines, 1), Checkpoints: store})
			if err := s.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			w := s.models.workers[0]
			dec, err := event.NewDecoder(pipeline.EventConfig(c))
			if err != nil {
				b.Fatal(err)
			}
			var ev event.Event
			var spare *pipeline.Frozen
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				for range 20 {
					if err := dec.Decode(lines[i%len(lines)], &ev); err != nil {
						b.Fatal(err)
					}
					if _, _, _, err := w.m.k.Process(&ev); err != nil {
						b.Fatal(err)
					}
					i += 97
				}
				b.StartTimer()
				if what == "marshal" {
					if _, err := w.m.k.MarshalBinary(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				t, err := w.take(spare, nil)
				if err != nil {
					b.Fatal(err)
				}
				spare = t.spare()
			}
		})
	}
}
