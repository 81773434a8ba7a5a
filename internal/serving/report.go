package serving

import (
	"time"

	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// Snapshot is what the service (or a Replica) looked like at one moment,
// for readers on other goroutines (metrics, the HTTP API). It is immutable once
// published: readers must not modify it, and every reader of one Snapshot
// sees the same numbers.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time
	// Source is the source's name (connectors.Source.Name).
	Source string
	// Reports has the report of every model, ordered by partition.
	Reports []Report
	// Started is true once the service's Run has started consuming the
	// source (a Replica: once it has a model to serve).
	Started bool
	// Durable is when the models last matched the positions committed to
	// the source (the last commit) while some processed record is not yet
	// committed, and zero when everything processed is committed. The
	// time since Durable is streamlearn_checkpoint_age_seconds: how much
	// learning a crash now would make the service redo.
	Durable time.Time
	// Digests says whether the reports carry the learners' state digests
	// (StateSHA256): they cost a pass over every model's state, so a
	// snapshot has them only while someone reads them (the service's
	// WantDigests), and the last snapshot of its Run always.
	Digests bool
	// Curves[i] has the sampled curves of the model of Reports[i], one
	// series per learner in the order of its Learners, each ending with
	// the learner's state when they were copied (regret.Tracker.History);
	// nil when the service's Options.HistoryPoints is negative. They are
	// copied at most every 250ms and in the final snapshot, so they may
	// end a little before Reports: a reader drawing them appends the
	// report's numbers (package api does). Snapshots may share them; no
	// one modifies them.
	Curves [][][]regret.Point
}

// Report is a model's regret report with the source
// and partition it learned from.
type Report struct {
	Source    string `json:"source"`
	Partition int32  `json:"partition"`
	// Key, with models per key (models.by: key), is the key of the model
	// reported; absent in the report of a partition's models, which has
	// their totals (pipeline.Report.Keys) and the keys of the most
	// records (TopKeys).
	Key     *string     `json:"key,omitempty"`
	TopKeys []KeyReport `json:"top_keys,omitempty"`
	// ConsumerLag is the Lag of the last record the model processed (see
	// connectors.Record): how far behind the broker's end it was then.
	// Absent when the source does not say or before the first record.
	ConsumerLag *int64 `json:"consumer_lag,omitempty"`
	pipeline.Report
}

// TopKeys is how many keys of each partition the snapshot reports on
// their own (Report.TopKeys; the metrics' key label): the keys of the
// most records. The others are in the partition's totals only, which
// bounds the metrics' series whatever the number of keys.
const TopKeys = 10

// KeyReport is what a partition's report says of one of its keys with
// models per key: its records and each learner's mistakes, in the
// learners' order. Each key's whole report is GET /v1/report?key=, and in
// `--report json` at the end.
type KeyReport struct {
	Key      string   `json:"key"`
	Events   uint64   `json:"events"`
	Mistakes []uint64 `json:"mistakes"`
	// Served, with a global model (models.global), is each learner's
	// mistakes on the key's events as served: the choice between the
	// key's model and the global one (the mix's mistakes); absent
	// without one, when what was served is the key's model.
	Served []uint64 `json:"served,omitempty"`
}
