package config

// Labels says whether labels may come after their events (the spam-filter
// loop): with Delayed, an event with an id, features and no label is
// predicted on arrival and waits for its label, a record with an id, a
// label and no features. Time is counted in records of the partition.
type Labels struct {
	Delayed bool `yaml:"delayed"`
	// Wait is how many records of its partition an event waits for its
	// label at most; default 100000.
	Wait int64 `yaml:"wait"`
	// MaxPending bounds the events waiting, per partition: past it the
	// oldest expires first. Default 1000000.
	MaxPending int `yaml:"max_pending"`
	// DefaultLabel, when set, is the label an expired event is learned
	// with ("no complaint means ham"); unset, expired events are dropped.
	// A label text as in events: 1, 0, -1, true, false, or a configured
	// input.positive or input.negative value.
	DefaultLabel *string `yaml:"default_label"`
}

// Defaults and limits of Labels.
const (
	DefaultLabelWait       = 100000
	DefaultLabelMaxPending = 1000000
	MaxLabelMaxPending     = 1 << 26 // about 67M events: more would not fit the memory of one process
)
