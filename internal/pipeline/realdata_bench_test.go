package pipeline

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
)

// BenchmarkRealData makes the README's table of learners on real data:
// for each data set, each learner at its defaults (with a bias where it
// takes one) alone in a pipeline, its progressive accuracy (acc%: predict,
// then learn, in file order) and events/s: the pipeline's Process over the
// events decoded beforehand (the tracker included, decoding and reading
// not, nor building the pipeline), a fresh pipeline each pass. w8a is shuffled with seed 1, as in
// TestAdaGradAgainstVW. The kernel Perceptron runs with a budget of 256
// support vectors: without one a round grows with the mistakes. AdaBoost.OL
// runs at its defaults: ten AdaGrad weak learners with a bias.
//
//	go test -run '^$' -bench RealData ./internal/pipeline/
func BenchmarkRealData(b *testing.B) {
	dir := dataDir(b)
	sets := []dataSet{
		a9aSet, ijcnn1Set, reutersSet, w8aSet, smsSet,
		{"elec2", "elec2/elec.csv", "input: {label_column: class}\n", false},
		{"river-phishing", "river_phishing/phishing.csv.gz", "input: {label_column: is_phishing}\n", false},
		{"uci-phishing", "uci_phishing_websites/phishing_websites.csv.gz", "input: {label_column: Result}\n", false},
	}
	learners := []struct{ name, yaml string }{
		{"majority", "{name: l, algorithm: majority}"},
		{"perceptron", "{name: l, algorithm: perceptron, bias: true}"},
		{"ogd", "{name: l, algorithm: ogd, bias: true}"},
		{"adagrad", "{name: l, algorithm: adagrad, bias: true}"},
		{"adagrad-plain", "{name: l, algorithm: adagrad, normalized: false, bias: true}"},
		{"pegasos", "{name: l, algorithm: pegasos, bias: true}"},
		{"kernel-perceptron-256", "{name: l, algorithm: kernel-perceptron, max_support: 256}"},
		{"adaboost-ol", "{name: l, algorithm: adaboost-ol}"},
	}
	for _, set := range sets {
		path := set.path(b, dir)
		for _, l := range learners {
			b.Run(set.name+"/"+l.name, func(b *testing.B) {
				c := mustConfig(b, set.input+"learners:\n  - "+l.yaml+"\n")
				events := decodeAll(b, c, path)
				var acc float64
				for b.Loop() {
					b.StopTimer()
					p := mustNew(b, c)
					b.StartTimer()
					for i := range events {
						p.Process(&events[i])
					}
					b.StopTimer()
					rep := mustReport(b, p)
					acc = 100 * rep.Learners[0].Accuracy
					b.StartTimer()
				}
				b.ReportMetric(acc, "acc%")
				b.ReportMetric(float64(len(events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// decodeAll decodes every event of the file at path, each with vectors of
// its own.
func decodeAll(tb testing.TB, c *config.Config, path string) []event.Event {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	r, err := event.NewReader(f, filepath.Base(path), EventConfig(c))
	if err != nil {
		tb.Fatal(err)
	}
	var out []event.Event
	for {
		var ev event.Event
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		ev.X.Idx, ev.X.Val = slices.Clone(ev.X.Idx), slices.Clone(ev.X.Val)
		ev.ID, ev.Key = slices.Clone(ev.ID), slices.Clone(ev.Key)
		out = append(out, ev)
	}
}
