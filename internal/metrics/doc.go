// Package metrics exports streamlearn's numbers to Prometheus, under the
// names, types and labels of the metrics table of docs/operations.md.
//
// The collector holds no counters of its own: at every scrape it reads one
// service.Snapshot — the immutable copy of every model's report that the
// service's loop publishes — and turns it into constant metrics. So the
// learners, the tracker and the hot path know nothing of Prometheus, and
// one scrape is consistent with itself and with GET /v1/report served from
// the same snapshot. The one metric updated per event is the
// streamlearn_event_duration_seconds histogram, which the service observes
// through service.Options.EventDuration.
//
// Metrics and labels (partition is the source partition whose model is
// reported; each partition has its own model, see package service):
//
//	streamlearn_events_total{source,outcome}        counter  learned, predicted, invalid; summed over partitions
//	streamlearn_invalid_events_total{reason}        counter  every event.Reason and "domain", present at 0
//	streamlearn_rounds_total{learner,partition}     counter  scored against labels the stream gave
//	streamlearn_mistakes_total{learner,partition}   counter  on those rounds
//	streamlearn_loss_total{learner,partition}       counter  the report's cumulative loss on those rounds
//	streamlearn_default_label_rounds_total{learner,partition}   counter  labels.default_label: scored against it
//	streamlearn_default_label_mistakes_total{learner,partition} counter  on those rounds
//	streamlearn_default_label_loss_total{learner,partition}     counter  on those rounds
//	streamlearn_bound{learner,partition,kind}       gauge    the theorem's bound now; kind mistakes or regret
//	streamlearn_regret{learner,partition}           gauge    loss minus the comparator's loss
//	streamlearn_regret_bound{learner,partition}     gauge
//	streamlearn_bound_status{learner,partition,status} gauge 1 for the bound's status (holds, violated, premise_false, assumed), 0 for the others
//	streamlearn_bound_violations_total{learner,partition} counter
//	streamlearn_event_duration_seconds              histogram
//	streamlearn_prediction_latency_seconds{partition} histogram  broker timestamp → prediction handed to the sink
//	streamlearn_consumer_lag{source,partition}      gauge    the report's consumer_lag (see connectors.Record.Lag)
//	streamlearn_checkpoint_age_seconds              gauge    time since the models last matched committed positions
//	streamlearn_keys{partition,state}               gauge    models per key: resident or spilled
//	streamlearn_key_evictions_total{partition}      counter  models per key evicted from memory
//	streamlearn_key_events_total{partition,key}     counter  the keys of the most records (service.TopKeys per partition)
//	streamlearn_key_mistakes_total{learner,partition,key} counter  their models' mistakes
//
// With models per key (models.by: key), a partition's rounds, mistakes
// and loss are the totals over its keys' models; bounds, regrets and
// violations are each model's (GET /v1/report?key=), so the partition has
// none of those series. The key label is bounded: only the TopKeys keys of
// the most records of each partition have series.
//
// The rounds scored against a default label (an expired event learned
// with labels.default_label) are apart: streamlearn_rounds_total and
// streamlearn_mistakes_total are the real labels', the report's headline,
// and the default_label series, present (at 0 first) whenever a default
// label is set, are the others. The bound and regret are over both, the
// learner's updates.
//
// A learner without a theorem has no streamlearn_bound series, and one
// without a comparator no regret series, as its report has no bound or
// regret object. Counters are exported from the report, whose counts only
// grow for a given model; they restart from zero with the process, which
// Prometheus' rate() handles as a counter reset.
//
// streamlearn_consumer_lag is the lag of the last record processed, as
// the broker reported it with that record; a partition whose source says
// nothing (files) has no series. streamlearn_checkpoint_age_seconds is
// computed at the scrape from the snapshot's Durable time, when the models
// last matched the positions committed to the source (with checkpoints,
// the last checkpoint that committed): it measures how much learning a
// crash now would redo, and is 0 while everything processed is committed.
package metrics
