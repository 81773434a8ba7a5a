package config

import "time"

// Models says what a model is of, and where new models start.
type Models struct {
	// By is what each model learns from: "partition" (the default) gives
	// every partition of the source one model; "key" gives every event
	// key within a partition a model of its own (an event's key is its
	// `key` field), the replay of that key's events alone, as a spam
	// filter per user or per tenant. Keys stay on their partition on
	// every broker, so each key's events come in order.
	By string `yaml:"by"`
	// Max, with By "key", bounds the models in memory per partition
	// (default none): past it the least recently used is evicted as its
	// exact encoding, and decoded on its key's next event.
	Max int `yaml:"max"`
	// MaxBytes, with By "key", bounds the memory of the models per key of
	// a partition, in bytes (default DefaultModelsMaxBytes): the resident
	// models and the index of every key seen are kept within half of it
	// (the other half is the garbage collector's room), evicting models
	// as Max does. Each key's model costs what its key has seen (about 3
	// KB, and 70 to 100 bytes a feature it touched, with the default
	// learners; its footprint is the estimate counted), each key seen
	// about 220 bytes of index whether its model is resident or not. The
	// soft memory limit of run and replay is MaxBytes a partition plus a
	// fixed overhead.
	MaxBytes int64 `yaml:"max_bytes"`
	// Idle, with By "key", evicts a model not used for that long, as Max
	// does; 0 (the default) keeps models until Max pushes them out.
	Idle time.Duration `yaml:"idle"`
	// Global, with By "key", adds a global model per partition, which
	// learns every event, beside the models per key: each learner's
	// prediction for a key is its key's model's or the global model's,
	// whichever has made fewer mistakes on the key so far (the global
	// one on a tie: a new key gets the global filter).
	Global bool `yaml:"global"`
	// SpillDir, with By "key", is the directory of the file evicted
	// models are written to (removed at once, so gone with the process:
	// the checkpoints hold the models durably); default the system's
	// temporary directory.
	SpillDir string `yaml:"spill_dir"`

	// WarmStart is a model file (`streamlearn export`, `replay --save`)
	// every new model starts from instead of an empty one, in `run` and
	// `replay` alike: the model of a partition without a checkpoint (or
	// reset, or rebuilt from its first record) goes on from the file's
	// weights, counts and tracker. A model restored from its checkpoint
	// is the checkpoint's. The file must be of this model configuration.
	WarmStart string `yaml:"warm_start"`
}
