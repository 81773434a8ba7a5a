package config

import "time"

// Checkpoint says where and how often state is saved.
type Checkpoint struct {
	// Dir keeps checkpoints in a local directory, one file per partition.
	Dir string `yaml:"dir"`
	// Bucket keeps them in a NATS JetStream Object Store bucket instead
	// (created when missing), reached with the source's NATS connection
	// settings, or at URL when the source is not NATS.
	Bucket string `yaml:"bucket"`
	URL    string `yaml:"url"`
	// Every: a checkpoint (and the commit it allows) every Every records
	// of a partition at most; default 100000, and every 5 seconds.
	Every int `yaml:"every"`
	// OnMismatch is what `run` does with a partition whose checkpoint does
	// not hold what the broker says was committed (none, one behind the
	// commit, one of another partition or stream): "fail" (the default)
	// stops with an error naming the partition; "reset" moves the
	// checkpoint aside and starts the model afresh from the committed
	// position, as `run --reset` does; "accept" restores the checkpoint
	// as it is, as `run --accept` does; "rebuild" learns the partition
	// again from the broker's log up to the committed position, as `run
	// --rebuild` does. Each logs what it drops, skips or relearns.
	OnMismatch string `yaml:"on_mismatch"`
	// OwnWait is how long `run` waits to own a partition's checkpoints
	// while another process owns them (a checkpoint directory is owned by
	// one process per partition) before it stops with an error naming
	// that process; default 30s.
	OwnWait time.Duration `yaml:"own_wait"`
	// Lease is the lifetime of a process's ownership of a partition's
	// checkpoints in a bucket: renewed every fifth of it, it is what a
	// process killed holds its partitions for after its last renewal.
	// Between 1s and 10s; default 10s.
	Lease time.Duration `yaml:"lease"`
}

// The bounds of checkpoint.lease: the checkpoint package's MinLease and
// MaxLease, which it checks again.
const (
	MinLease = time.Second
	MaxLease = 10 * time.Second
)
