package online_test

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// realStream decodes a file of ../shared/data into 2^18 slots, or skips.
func realStream(b *testing.B, path string, cfg event.Config) ([]online.Vector, []int8) {
	f, err := os.Open(filepath.Join("../../../shared/data", path))
	if err != nil {
		b.Skip("../shared/data absent:", err)
	}
	defer f.Close()
	r, err := event.NewReader(f, path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var xs []online.Vector
	var ys []int8
	var ev event.Event
	for {
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		var bad *event.Error
		if errors.As(err, &bad) {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		xs = append(xs, online.Vector{Idx: slices.Clone(ev.X.Idx), Val: slices.Clone(ev.X.Val)})
		ys = append(ys, ev.Label)
	}
	return packed(xs), ys
}

// textData are the real text streams of the text benchmarks: Reuters
// money-fx and SMS spam.
var textData = []struct {
	name, path string
	cfg        event.Config
}{
	{"reuters", "reuters_lasvm/reuters.trn.gz", event.Config{Format: event.LIBSVM}},
	{"sms", "sms_spam_collection/SMSSpamCollection", event.Config{Format: event.TSV, NGrams: 3, Positive: []string{"spam"}, Negative: []string{"ham"}}},
}

// BenchmarkPredictLearnText is BenchmarkPredictLearn and BenchmarkRound
// (the subbenchmarks named round/...) on real text, one
// round per document in file order, over and over: Reuters-21578
// "money-fx" (7,770 tf-idf documents, 43.7 non-zeros on average, word ids
// as decimal feature names) and the SMS spam collection (5,574 messages,
// words, bigrams and trigrams hashed by MurmurHash3, 42 non-zeros on
// average). Unlike the synthetic workload, whose 10,240 uniformly random
// slots miss the 512 KiB L2 cache on most reads, word frequencies are
// skewed as in any text stream, so the hot weights stay in cache.
func BenchmarkPredictLearnText(b *testing.B) {
	for _, data := range textData {
		xs, ys := realStream(b, data.path, data.cfg)
		var nnz int
		for _, x := range xs {
			nnz += x.Len()
		}
		for _, tc := range learners(b) {
			b.Run(data.name+"/"+tc.name, func(b *testing.B) {
				l := tc.l
				b.ReportAllocs()
				k := 0
				for b.Loop() {
					x, y := xs[k], ys[k]
					if k++; k == len(xs) {
						k = 0
					}
					p := l.Predict(x)
					_ = l.Loss(p, y)
					l.Learn(x, p, y)
				}
				b.ReportMetric(float64(nnz)/float64(len(xs)), "nnz/event")
			})
		}
		for _, tc := range learners(b) {
			l, ok := tc.l.(online.Rounder)
			if !ok {
				continue
			}
			b.Run(data.name+"/round/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				k := 0
				for b.Loop() {
					x, y := xs[k], ys[k]
					if k++; k == len(xs) {
						k = 0
					}
					l.Round(x, y)
				}
				b.ReportMetric(float64(nnz)/float64(len(xs)), "nnz/event")
			})
		}
	}
}

// BenchmarkKernelsText is BenchmarkKernels on real text at the default
// 2^18 slots: each assembly kernel (on amd64) beside its Go version, over
// the documents of Reuters money-fx and SMS spam in file order. An
// assembly kernel stays only while it is at least 10% faster here.
func BenchmarkKernelsText(b *testing.B) {
	for _, data := range textData {
		xs, _ := realStream(b, data.path, data.cfg)
		r := rand.New(rand.NewPCG(9, 9))
		w := make([]float64, 1<<18+1)
		for i := range w {
			w[i] = r.NormFloat64()
		}
		var sink float64
		for _, kc := range []struct {
			name string
			f    func(x online.Vector) float64
		}{
			{"dotNorm2", func(x online.Vector) float64 { d, n := online.DotNorm2(x.Idx, x.Val, w); return d + n }},
			{"dotNorm2/go", func(x online.Vector) float64 { d, n := online.DotNorm2Go(x.Idx, x.Val, w); return d + n }},
		} {
			b.Run(data.name+"/"+kc.name, func(b *testing.B) {
				k := 0
				for b.Loop() {
					sink += kc.f(xs[k])
					if k++; k == len(xs) {
						k = 0
					}
				}
			})
		}
		_ = sink
	}
}
