package service

import (
	"context"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
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
			w := s.workers[0]
			var spare *pipeline.Frozen // as a service does: the last checkpoint's memory
			b.ReportAllocs()
			for b.Loop() {
				t, err := w.take(spare)
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
