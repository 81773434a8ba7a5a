package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/service"
)

// stampedSource serves n labeled events over 2 partitions, each stamped
// by the broker age ago, then ends.
type stampedSource struct {
	n, i int
	age  time.Duration
}

func (s *stampedSource) Fetch(ctx context.Context) (connectors.Record, error) {
	if s.i == s.n {
		return connectors.Record{}, connectors.ErrEndOfInput
	}
	i := s.i
	s.i++
	rec := connectors.Record{Value: []byte(`{"features":{"v":0.5},"label":1}`), Partition: int32(i % 2), Offset: int64(i / 2), Time: time.Now().Add(-s.age), Lag: -1}
	if i == 7 {
		rec.Time = time.Time{} // no timestamp: not observed
	}
	return rec, nil
}
func (s *stampedSource) Commit(context.Context, connectors.Record) error { return nil }
func (s *stampedSource) Name() string                                    { return "mem:stamped" }
func (s *stampedSource) Close() error                                    { return nil }

type discard struct{}

func (discard) Publish(context.Context, []byte, []byte) error { return nil }
func (discard) Flush(context.Context) error                   { return nil }
func (discard) Close() error                                  { return nil }

// streamlearn_prediction_latency_seconds observes, per partition, every
// prediction of a record with a broker timestamp — its age when handed to
// the sink, at least how old the record was — and lints.
func TestPredictionLatency(t *testing.T) {
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source = config.Source{Kind: "file"}
	lat := NewPredictionLatency()
	s, err := service.New(service.Options{Config: cfg, Source: &stampedSource{n: 100, age: 30 * time.Millisecond},
		Predictions: discard{}, Latency: lat})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(lat)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || len(mfs[0].GetMetric()) != 2 {
		t.Fatalf("want one family of two partitions, got %v", mfs)
	}
	for _, m := range mfs[0].GetMetric() {
		h := m.GetHistogram()
		want := uint64(50)
		if m.GetLabel()[0].GetValue() == "1" {
			want = 49 // record 7 had no timestamp
		}
		if h.GetSampleCount() != want || h.GetSampleSum() < 0.03*float64(want) {
			t.Errorf("partition %s: %d observations summing to %vs, want %d of at least 30ms", m.GetLabel()[0].GetValue(), h.GetSampleCount(), h.GetSampleSum(), want)
		}
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() < 0.03 && b.GetCumulativeCount() != 0 {
				t.Errorf("partition %s: %d observations at most %vs, younger than the records", m.GetLabel()[0].GetValue(), b.GetCumulativeCount(), b.GetUpperBound())
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// A partition's latency histogram observes without allocating: it runs
// once per prediction.
func TestPredictionLatencyAllocs(t *testing.T) {
	o := NewPredictionLatency().Partition(3)
	if a := testing.AllocsPerRun(1000, func() { o.Observe(2e-3) }); a != 0 {
		t.Errorf("%v allocations per Observe, want 0", a)
	}
}
