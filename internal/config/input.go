package config

// Input says how records are decoded.
type Input struct {
	// Format is jsonl, libsvm, csv or tsv; empty infers it from each file's
	// name and first line (replay) or means jsonl (streams).
	Format string `yaml:"format"`
	// LabelColumn is the CSV column holding the label; default "label" when
	// the header has it, else the last column.
	LabelColumn string `yaml:"label_column"`
	// Positive and Negative are label values meaning +1 and -1, on top of
	// the built-in 1/+1/true and 0/-1/false.
	Positive []string `yaml:"positive"`
	Negative []string `yaml:"negative"`
	// Classes, when set, makes the labels classes (multiclass): a label
	// is one of these names, exactly. Every learner then predicts a
	// class: the multiclass algorithms by themselves, the others one
	// versus the rest (a model per class, the class of the highest
	// score).
	Classes []string `yaml:"classes" json:",omitempty"` // omitted when empty: the digests of configurations without classes stay as they were
	// MaxBytes is the largest record accepted; default 1 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// MaxAbsValue is the largest magnitude of a feature value accepted;
	// records with a larger one are dead-lettered as "range". Default
	// 2^53−1 (event.DefaultMaxAbs, which says why); at least 1 and at
	// most 1e100 (event.MaxMaxAbs, which keeps every learner finite).
	MaxAbsValue float64 `yaml:"max_abs_value"`
}
