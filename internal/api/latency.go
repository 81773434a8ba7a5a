package api

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// LatencyMetric is the histogram GET /v1/latency reads from the Gatherer:
// the seconds from a record's broker timestamp to its prediction handed
// to the predictions sink (metrics.NewPredictionLatency).
const LatencyMetric = "streamlearn_prediction_latency_seconds"

// Latency is one partition's entry of GET /v1/latency: the cumulative
// histogram of its predictions' latencies since the process started, as
// /metrics has it. The dashboard takes quantiles of the difference between
// two of them (the last seconds), as Prometheus's histogram_quantile of a
// rate does.
type Latency struct {
	Partition int32 `json:"partition"`
	// Count is the predictions observed; Sum, their latencies' sum in
	// seconds.
	Count uint64  `json:"count"`
	Sum   float64 `json:"sum"`
	// Buckets are the cumulative counts at each upper bound (LE, seconds),
	// ascending; those above the last bound are Count.
	Buckets []LatencyBucket `json:"buckets"`
}

// LatencyBucket is a cumulative bucket of a Latency.
type LatencyBucket struct {
	LE    float64 `json:"le"`
	Count uint64  `json:"count"`
}

// latencies returns the partitions' latency histograms g holds, by
// partition; none when it has no LatencyMetric (no predictions sink).
func latencies(g prometheus.Gatherer) ([]Latency, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := []Latency{}
	for _, f := range families {
		if f.GetName() != LatencyMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			l := Latency{Partition: -1, Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "partition" {
					if p, err := strconv.ParseInt(lp.GetValue(), 10, 32); err == nil {
						l.Partition = int32(p)
					}
				}
			}
			for _, b := range h.GetBucket() {
				l.Buckets = append(l.Buckets, LatencyBucket{LE: b.GetUpperBound(), Count: b.GetCumulativeCount()})
			}
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b Latency) int { return int(a.Partition) - int(b.Partition) })
	return out, nil
}

// handleLatency serves GET /v1/latency: every partition's Latency, or with
// ?partition=N that partition's alone (an empty array while it has none).
func handleLatency(mux *http.ServeMux, g prometheus.Gatherer) {
	mux.HandleFunc("GET /v1/latency", func(w http.ResponseWriter, r *http.Request) {
		ls, err := latencies(g)
		if err != nil {
			fail(w, http.StatusInternalServerError, "internal", "gathering the metrics: "+err.Error())
			return
		}
		p, has, ok := partitionQuery(w, r)
		if !ok {
			return
		}
		if has {
			ls = slices.DeleteFunc(ls, func(l Latency) bool { return l.Partition != p })
		}
		writeJSON(w, ls)
	})
}
