package api

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamlearn/streamlearn/internal/metrics"
	"github.com/streamlearn/streamlearn/internal/service"
)

// histogramQuantile is Prometheus's histogram_quantile of one histogram:
// linear within the bucket the rank falls in, from 0 in the first; the
// highest bound when the rank is above it. The dashboard computes the same.
func histogramQuantile(q float64, l Latency) float64 {
	if l.Count == 0 {
		return math.NaN()
	}
	rank := q * float64(l.Count)
	lo, below := 0.0, 0.0
	for _, b := range l.Buckets {
		if float64(b.Count) >= rank {
			n := float64(b.Count) - below
			if n == 0 {
				return b.LE
			}
			return lo + (b.LE-lo)*(rank-below)/n
		}
		lo, below = b.LE, float64(b.Count)
	}
	return l.Buckets[len(l.Buckets)-1].LE
}

// GET /v1/latency is /metrics's streamlearn_prediction_latency_seconds as
// JSON, per partition: counts, sum and cumulative buckets; ?partition=N
// filters; without the histogram (no predictions sink) it is an empty
// array.
func TestLatencyEndpoint(t *testing.T) {
	cfg, _ := demo(t, 1)
	lat := metrics.NewPredictionLatency()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(lat)
	h := New(Options{Snapshot: func() *service.Snapshot { return nil }, Gatherer: reg, Config: cfg})
	ts := httptest.NewServer(h)
	defer ts.Close()
	read := func(url string) []Latency {
		t.Helper()
		code, hdr, body := get(t, "GET", ts.URL+url)
		var out []Latency
		if code != 200 || hdr.Get("Content-Type") != "application/json" || json.Unmarshal(body, &out) != nil {
			t.Fatalf("%s: %d %s %s", url, code, hdr.Get("Content-Type"), body)
		}
		return out
	}
	if got := read("/v1/latency"); len(got) != 0 {
		t.Fatalf("no prediction yet: %+v", got)
	}
	// Partition 2: 90 predictions at 0.3 ms, 10 at 20 ms; partition 0: one at 3 s.
	for range 90 {
		lat.Partition(2).Observe(0.0003)
	}
	for range 10 {
		lat.Partition(2).Observe(0.02)
	}
	lat.Partition(0).Observe(3)
	got := read("/v1/latency")
	if len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 2 {
		t.Fatalf("partitions: %+v", got)
	}
	p2 := got[1]
	if p2.Count != 100 || math.Abs(p2.Sum-(90*0.0003+10*0.02)) > 1e-9 || len(p2.Buckets) != len(metrics.LatencyBuckets) {
		t.Fatalf("partition 2: %+v", p2)
	}
	for i, b := range p2.Buckets {
		want := uint64(0)
		switch {
		case b.LE >= 0.02:
			want = 100
		case b.LE >= 0.0003:
			want = 90
		}
		if b.LE != metrics.LatencyBuckets[i] || b.Count != want {
			t.Errorf("partition 2 bucket %d: %+v, want le %v count %d", i, b, metrics.LatencyBuckets[i], want)
		}
	}
	// The median is in (0.25 ms, 0.5 ms]; the p99 in (10 ms, 25 ms].
	if p50, p99 := histogramQuantile(0.5, p2), histogramQuantile(0.99, p2); !(p50 > 0.00025 && p50 <= 0.0005) || !(p99 > 0.01 && p99 <= 0.025) {
		t.Errorf("partition 2: p50 %v, p99 %v", p50, p99)
	}
	if only := read("/v1/latency?partition=2"); !reflect.DeepEqual(only, []Latency{p2}) {
		t.Errorf("?partition=2: %+v", only)
	}
	if none := read("/v1/latency?partition=7"); len(none) != 0 {
		t.Errorf("?partition=7: %+v", none)
	}
	if code, _, _ := get(t, "GET", ts.URL+"/v1/latency?partition=x"); code != 400 {
		t.Errorf("?partition=x: %d", code)
	}
}
