package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// a9aBytes returns the a9a training file, or a9a-like synthetic lines
// (14 binary features among 123, ascending) when ../shared is absent.
func a9aBytes(b *testing.B) []byte {
	if data, err := os.ReadFile(filepath.Join("../../../shared/data/a9a/a9a")); err == nil {
		return data
	}
	r := rand.New(rand.NewPCG(9, 9))
	var buf bytes.Buffer
	for range 32561 {
		label := "-1"
		if r.IntN(4) == 0 {
			label = "+1"
		}
		buf.WriteString(label)
		idx := 1
		for range 14 {
			idx += 1 + r.IntN(8)
			fmt.Fprintf(&buf, " %d:1", idx)
		}
		buf.WriteString(" \n")
	}
	return buf.Bytes()
}

// jsonlEvents returns n JSONL events with ten named features, the typical
// shape of DESIGN.md's event.
func jsonlEvents(n int) []byte {
	r := rand.New(rand.NewPCG(10, 10))
	var buf bytes.Buffer
	for i := range n {
		fmt.Fprintf(&buf, `{"id":"m-%d","key":"tenant-%d","ts":"2026-11-22T10:00:00Z","label":%d,"features":{"len":%d,"has_url":%d,"sender=bulk.example":1,"caps":%.3f,"digits":%d,"exclaim":%d,"hour":%d,"reply":%d,"lang=en":1,"score":%.4f}}`+"\n",
			i, r.IntN(10), r.IntN(2), r.IntN(200), r.IntN(2), r.Float64(), r.IntN(20), r.IntN(5), r.IntN(24), r.IntN(2), r.Float64())
	}
	return buf.Bytes()
}

const benchConfig = `
learners:
  - {name: pct, algorithm: perceptron, bias: true}
`

// BenchmarkReplay measures the whole replay path per record: decode,
// predict, update and track, with a Perceptron. Compare with BenchmarkBare.
func BenchmarkReplay(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
	}{{"libsvm-a9a", a9aBytes(b)}, {"jsonl-10-features", jsonlEvents(20000)}} {
		b.Run(tc.name, func(b *testing.B) {
			c := mustConfig(b, benchConfig)
			lines := bytes.Count(tc.data, []byte("\n"))
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for b.Loop() {
				p, err := New(c)
				if err != nil {
					b.Fatal(err)
				}
				r, err := event.NewReader(bytes.NewReader(tc.data), tc.name, EventConfig(c))
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Replay(context.Background(), r, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/record")
			b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkBare is the floor BenchmarkReplay is held to: the same reader
// and a bare Perceptron loop (Round, the fastest way to play a round),
// with no pipeline, scaler or tracker.
func BenchmarkBare(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
	}{{"libsvm-a9a", a9aBytes(b)}, {"jsonl-10-features", jsonlEvents(20000)}} {
		b.Run(tc.name, func(b *testing.B) {
			lines := bytes.Count(tc.data, []byte("\n"))
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for b.Loop() {
				pct, err := online.NewPerceptron(18, online.PerceptronConfig{Bias: true})
				if err != nil {
					b.Fatal(err)
				}
				r, err := event.NewReader(bytes.NewReader(tc.data), tc.name, event.Config{})
				if err != nil {
					b.Fatal(err)
				}
				var ev event.Event
				for {
					err := r.Next(&ev)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					pct.Round(ev.X, ev.Label)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/record")
			b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkReport is the once-a-second report (digests included) of a
// pipeline with the state test's twelve learners at the default 2^18
// slots: "unchanged" when no event came since the last report, "learned"
// when one did (every learner's model is encoded and hashed again).
func BenchmarkReport(b *testing.B) {
	c := mustConfig(b, strings.Replace(stateConfig, "bits: 10", "bits: 18", 1))
	p := mustNew(b, c)
	s := saltedDemo(b, 200)
	feed(b, p, c, s.data)
	evs := decodeLines(b, c, s.data)
	var ev event.Event
	for _, e := range evs {
		if e.Labeled {
			ev = e
			break
		}
	}
	for _, learn := range []bool{false, true} {
		name := "unchanged"
		if learn {
			name = "learned"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if learn {
					p.Process(&ev)
				}
				if _, err := p.Report(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSparseScaled: Process of a sparse pipeline (a model per key's
// form) with standard scaling, a Perceptron and AdaGrad, over 1,000
// labeled events of 40 features among 4,096 slots, in turn: what mapping
// and scaling an event cost beside learning it.
//
//	go test -run '^$' -bench SparseScaled -benchmem ./internal/pipeline
func BenchmarkSparseScaled(b *testing.B) {
	c := mustConfig(b, "features: {bits: 18, scale: standard}\nlearners:\n  - {name: pct, algorithm: perceptron, bias: true}\n  - {name: ada, algorithm: adagrad, bias: true}\n")
	p, err := NewBuilder(c).Sparse().New()
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	evs := make([]event.Event, 1000)
	for i := range evs {
		idx := rng.Perm(1 << 12)[:40]
		slices.Sort(idx) // canonical: increasing slots
		x := online.Vector{}
		for _, s := range idx {
			x.Idx, x.Val = append(x.Idx, uint32(s)), append(x.Val, rng.Float64())
		}
		evs[i] = event.Event{X: x, Labeled: true, Label: int8(2*rng.IntN(2) - 1)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Process(&evs[i%len(evs)])
		i++
	}
}
