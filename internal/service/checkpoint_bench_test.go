package service

import (
	"context"
	"testing"

	"github.com/streamlearn/streamlearn/internal/checkpoint"
)

// BenchmarkCheckpoint measures one checkpoint of a model of config.yaml's
// seven learners over 2^18 slots (two linear learners, 2 MiB of weights
// each): encode, digest for the report, write, fsync, rename, fsync of the
// directory. A service takes one per partition every Options.CommitEvery
// records and every CommitInterval.
func BenchmarkCheckpoint(b *testing.B) {
	c := loadExampleConfig(b)
	for _, what := range []string{"encode+report", "save"} {
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
			b.ReportAllocs()
			for b.Loop() {
				if what == "save" {
					c, err := w.take()
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Save(context.Background(), c); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if _, err := w.m.p.MarshalBinary(); err != nil {
					b.Fatal(err)
				}
				if _, err := w.report(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
