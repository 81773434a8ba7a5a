package metrics

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
	"github.com/streamlearn/streamlearn/internal/service"
)

// Outcomes of streamlearn_events_total.
const (
	OutcomeLearned   = "learned"
	OutcomePredicted = "predicted"
	OutcomeInvalid   = "invalid"
)

var (
	eventsDesc = prometheus.NewDesc("streamlearn_events_total",
		"Records consumed, by outcome: learned (labeled), predicted (unlabeled, served only) or invalid (dead-lettered).",
		[]string{"source", "outcome"}, nil)
	invalidDesc = prometheus.NewDesc("streamlearn_invalid_events_total",
		"Invalid records, by reason.",
		[]string{"reason"}, nil)
	roundsDesc = prometheus.NewDesc("streamlearn_rounds_total",
		"Labeled rounds the learner was scored on, against a label the stream gave (not a default label).",
		[]string{"learner", "partition"}, nil)
	mistakesDesc = prometheus.NewDesc("streamlearn_mistakes_total",
		"Rounds whose prediction differed from the label the stream gave.",
		[]string{"learner", "partition"}, nil)
	lossDesc = prometheus.NewDesc("streamlearn_loss_total",
		"Cumulative loss on labels the stream gave: mistakes for deterministic classifiers, the surrogate loss for ogd, the expected loss for weighted-majority.",
		[]string{"learner", "partition"}, nil)
	defaultRoundsDesc = prometheus.NewDesc("streamlearn_default_label_rounds_total",
		"With labels.default_label: rounds scored against the default label (expired events learned with it), apart from streamlearn_rounds_total.",
		[]string{"learner", "partition"}, nil)
	defaultMistakesDesc = prometheus.NewDesc("streamlearn_default_label_mistakes_total",
		"With labels.default_label: rounds whose prediction differed from the default label they were scored against.",
		[]string{"learner", "partition"}, nil)
	defaultLossDesc = prometheus.NewDesc("streamlearn_default_label_loss_total",
		"With labels.default_label: cumulative loss on the rounds scored against the default label.",
		[]string{"learner", "partition"}, nil)
	boundDesc = prometheus.NewDesc("streamlearn_bound",
		"The learner's theorem at the current round: the most mistakes (kind mistakes) or regret (kind regret) it allows.",
		[]string{"learner", "partition", "kind"}, nil)
	regretDesc = prometheus.NewDesc("streamlearn_regret",
		"Cumulative loss minus the comparator's loss.",
		[]string{"learner", "partition"}, nil)
	regretBoundDesc = prometheus.NewDesc("streamlearn_regret_bound",
		"The regret the learner's theorem allows at the current round.",
		[]string{"learner", "partition"}, nil)
	boundStatusDesc = prometheus.NewDesc("streamlearn_bound_status",
		"1 for the bound's current status, 0 for the others: holds (proved for this stream and within it), violated (exceeded though proved), premise_false (the theorem's premise failed on this stream), assumed (within it, proved if the user's margin is true).",
		[]string{"learner", "partition", "status"}, nil)
	violationsDesc = prometheus.NewDesc("streamlearn_bound_violations_total",
		"Times the learner's bound stopped holding, plus rounds whose version space became empty.",
		[]string{"learner", "partition"}, nil)
	lagDesc = prometheus.NewDesc("streamlearn_consumer_lag",
		"Records of the partition the broker held beyond the last one processed, when it was fetched.",
		[]string{"source", "partition"}, nil)
	labelsDesc = prometheus.NewDesc("streamlearn_labels_total",
		"With delayed labels: events joined by their label or expired, and labels rejected as unknown, late or duplicate.",
		[]string{"outcome", "partition"}, nil)
	pendingDesc = prometheus.NewDesc("streamlearn_pending_events",
		"With delayed labels: events waiting for their label.",
		[]string{"partition"}, nil)
	labelDelayDesc = prometheus.NewDesc("streamlearn_label_delay_events",
		"With delayed labels: how many records of the partition came between an event and its label, over joined labels.",
		[]string{"partition"}, nil)
	keysDesc = prometheus.NewDesc("streamlearn_keys",
		"With models per key: the keys of the partition that have a model, by state: resident (in memory) or spilled (encoded, decoded on the key's next event).",
		[]string{"partition", "state"}, nil)
	evictionsDesc = prometheus.NewDesc("streamlearn_key_evictions_total",
		"With models per key: models of the partition evicted from memory (models.max, models.idle).",
		[]string{"partition"}, nil)
	keyEventsDesc = prometheus.NewDesc("streamlearn_key_events_total",
		"With models per key: records of each of the partition's keys of the most records (service.TopKeys of them: the label's cardinality is bounded).",
		[]string{"partition", "key"}, nil)
	keyMistakesDesc = prometheus.NewDesc("streamlearn_key_mistakes_total",
		"With models per key: mistakes of the learner's model of each of the partition's keys of the most records.",
		[]string{"learner", "partition", "key"}, nil)
	checkpointAgeDesc = prometheus.NewDesc("streamlearn_checkpoint_age_seconds",
		"Seconds since the model state last matched the positions committed to the source; 0 while everything processed is committed.",
		nil, nil)
)

// NewCollector returns a collector of the metrics in the package comment.
// At each scrape it calls snapshot once and reads only what that returns;
// snapshot must be safe to call from any goroutine (service.Service's
// Snapshot is) and may return nil, which exports nothing.
func NewCollector(snapshot func() *service.Snapshot) prometheus.Collector {
	return &collector{snapshot: snapshot, now: time.Now}
}

type collector struct {
	snapshot func() *service.Snapshot
	now      func() time.Time // the scrape's clock, replaced in tests
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{eventsDesc, invalidDesc, roundsDesc, mistakesDesc, lossDesc,
		defaultRoundsDesc, defaultMistakesDesc, defaultLossDesc,
		boundDesc, boundStatusDesc, regretDesc, regretBoundDesc, violationsDesc, lagDesc, labelsDesc, pendingDesc, labelDelayDesc,
		keysDesc, evictionsDesc, keyEventsDesc, keyMistakesDesc, checkpointAgeDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.snapshot()
	if snap == nil {
		return
	}
	var learned, predicted, invalid uint64
	byReason := map[string]uint64{}
	for _, r := range reasons() {
		byReason[r] = 0
	}
	for _, r := range snap.Reports {
		learned += r.Labeled
		predicted += r.Predicted
		invalid += r.Invalid
		for reason, n := range r.InvalidByReason {
			byReason[reason] += n
		}
		part := strconv.FormatInt(int64(r.Partition), 10)
		if l := r.Labels; l != nil {
			for _, o := range []struct {
				outcome string
				n       uint64
			}{{"joined", l.Joined}, {"expired", l.Expired}, {"unknown", l.Unknown}, {"late", l.Late}, {"duplicate", l.Duplicate}} {
				ch <- prometheus.MustNewConstMetric(labelsDesc, prometheus.CounterValue, float64(o.n), o.outcome, part)
			}
			ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(l.Pending), part)
			buckets := make(map[float64]uint64, len(pipeline.LabelDelayBuckets))
			var cum uint64
			for i, ub := range pipeline.LabelDelayBuckets {
				cum += l.DelayCounts[i]
				buckets[ub] = cum
			}
			ch <- prometheus.MustNewConstHistogram(labelDelayDesc, l.Joined, float64(l.DelaySum), buckets, part)
		}
		if r.ConsumerLag != nil {
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(*r.ConsumerLag), snap.Source, part)
		}
		if k := r.Keys; k != nil {
			ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(k.Resident), part, "resident")
			ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(k.Keys-k.Resident), part, "spilled")
			ch <- prometheus.MustNewConstMetric(evictionsDesc, prometheus.CounterValue, float64(k.Evicted), part)
			for _, t := range r.TopKeys {
				ch <- prometheus.MustNewConstMetric(keyEventsDesc, prometheus.CounterValue, float64(t.Events), part, t.Key)
				for i, m := range t.Mistakes {
					if i < len(r.Learners) {
						ch <- prometheus.MustNewConstMetric(keyMistakesDesc, prometheus.CounterValue, float64(m), r.Learners[i].Name, part, t.Key)
					}
				}
			}
		}
		for _, l := range r.Learners {
			ch <- prometheus.MustNewConstMetric(roundsDesc, prometheus.CounterValue, float64(l.Rounds), l.Name, part)
			ch <- prometheus.MustNewConstMetric(mistakesDesc, prometheus.CounterValue, float64(l.Mistakes), l.Name, part)
			ch <- prometheus.MustNewConstMetric(lossDesc, prometheus.CounterValue, l.Loss, l.Name, part)
			if d := l.DefaultLabeled; d != nil {
				ch <- prometheus.MustNewConstMetric(defaultRoundsDesc, prometheus.CounterValue, float64(d.Rounds), l.Name, part)
				ch <- prometheus.MustNewConstMetric(defaultMistakesDesc, prometheus.CounterValue, float64(d.Mistakes), l.Name, part)
				ch <- prometheus.MustNewConstMetric(defaultLossDesc, prometheus.CounterValue, d.Loss, l.Name, part)
			}
			if r.Keys != nil {
				continue // the totals of models per key: bounds are each model's
			}
			ch <- prometheus.MustNewConstMetric(violationsDesc, prometheus.CounterValue, float64(l.BoundViolations), l.Name, part)
			if b := l.Bound; b != nil {
				ch <- prometheus.MustNewConstMetric(boundDesc, prometheus.GaugeValue, b.Value, l.Name, part, string(b.Kind))
				for _, s := range boundStatuses {
					v := 0.0
					if s == b.Status {
						v = 1
					}
					ch <- prometheus.MustNewConstMetric(boundStatusDesc, prometheus.GaugeValue, v, l.Name, part, string(s))
				}
			}
			if g := l.Regret; g != nil {
				ch <- prometheus.MustNewConstMetric(regretDesc, prometheus.GaugeValue, g.Value, l.Name, part)
				if g.Bound != nil {
					ch <- prometheus.MustNewConstMetric(regretBoundDesc, prometheus.GaugeValue, *g.Bound, l.Name, part)
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(learned), snap.Source, OutcomeLearned)
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(predicted), snap.Source, OutcomePredicted)
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(invalid), snap.Source, OutcomeInvalid)
	for reason, n := range byReason {
		ch <- prometheus.MustNewConstMetric(invalidDesc, prometheus.CounterValue, float64(n), reason)
	}
	var age float64
	if !snap.Durable.IsZero() {
		age = max(c.now().Sub(snap.Durable).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(checkpointAgeDesc, prometheus.GaugeValue, age)
}

// boundStatuses are the values of streamlearn_bound_status's status, each
// exported for every bound (0 but for the current one), so that a query
// or an alert sees a series before it becomes 1.
var boundStatuses = []regret.BoundStatus{regret.StatusHolds, regret.StatusViolated, regret.StatusPremiseFalse, regret.StatusAssumed}

// reasons returns every invalid-event reason, pre-registered at 0 so that
// rate() and alerts see a series before the first bad record.
func reasons() []string {
	var out []string
	for _, r := range event.Reasons() {
		out = append(out, string(r))
	}
	out = append(out, string(pipeline.ReasonDomain))
	return slices.Compact(out)
}

// DurationBuckets are the bucket upper bounds of
// streamlearn_event_duration_seconds, in seconds: 1µs to 100ms at 1-2.5-5
// steps. A record takes a fraction of a µs to a few µs on the benchmarks of
// README ("Speed"), and up to milliseconds with a broker sink in the path;
// anything above 100ms is a stall, counted in +Inf.
var DurationBuckets = []float64{
	1e-6, 2.5e-6, 5e-6,
	1e-5, 2.5e-5, 5e-5,
	1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3,
	1e-2, 2.5e-2, 5e-2,
	0.1,
}

// NewEventDuration returns the streamlearn_event_duration_seconds
// histogram, for service.Options.EventDuration and for registering next
// to the collector. Its Observe allocates nothing and is safe for
// concurrent use.
func NewEventDuration() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "streamlearn_event_duration_seconds",
		Help:    "Seconds to process one record: decode, predict, update, track and publish its prediction or dead letter.",
		Buckets: DurationBuckets,
	})
}

// LatencyBuckets are the bucket upper bounds of
// streamlearn_prediction_latency_seconds, in seconds: 100µs to 10s at
// 1-2.5-5 steps. A prediction follows its record by a fraction of a
// millisecond on NATS and by about the source's fetch wait and the
// sink's batch timeout on Kafka (docs/performance.md); beyond 10s a
// consumer is far behind, which streamlearn_consumer_lag shows.
var LatencyBuckets = []float64{
	1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3,
	1e-2, 2.5e-2, 5e-2,
	0.1, 0.25, 0.5,
	1, 2.5, 5,
	10,
}

// PredictionLatency is the streamlearn_prediction_latency_seconds
// histogram, per partition: the seconds from a record's broker timestamp
// (Kafka's record time, JetStream's message time) to its prediction
// handed to the predictions sink, for service.Options.Latency and for
// registering next to the collector.
type PredictionLatency struct {
	*prometheus.HistogramVec
}

// NewPredictionLatency returns an empty PredictionLatency.
func NewPredictionLatency() PredictionLatency {
	return PredictionLatency{prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "streamlearn_prediction_latency_seconds",
		Help:    "Seconds from a record's broker timestamp to its prediction handed to the predictions sink, per partition.",
		Buckets: LatencyBuckets,
	}, []string{"partition"})}
}

// Partition returns the histogram of partition p: its Observe allocates
// nothing and is safe for concurrent use.
func (l PredictionLatency) Partition(p int32) service.Observer {
	return l.WithLabelValues(strconv.FormatInt(int64(p), 10))
}
