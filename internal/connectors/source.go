package connectors

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrEndOfInput is returned by Fetch of a source opened with UntilEnd once
// every partition it owns reached the end it had when the source was
// opened: what a test replaying a recorded topic wants.
var ErrEndOfInput = errors.New("connectors: end of input")

// ErrPartitionRevoked is wrapped by Commit when the record's partition is
// no longer this source's: a Kafka rebalance gave it to another member
// since the record was fetched. The commit is not sent, as it would
// overwrite the new owner's position; the caller may carry on, and the new
// owner reads the partition from the group's last committed position.
var ErrPartitionRevoked = errors.New("partition revoked by a rebalance")

// Record is one message of a source. Its slices are valid until the next
// Fetch: "Fetch overwrites the previous record".
type Record struct {
	// Value is the message body: one JSON event.
	Value []byte
	// Key is the Kafka record key or the NATS subject's last token; may be
	// empty.
	Key []byte
	// Partition is the Kafka partition; 0 for NATS and files.
	Partition int32
	// Offset is the Kafka offset, the JetStream stream sequence, the
	// arrival count of a NATS core subscription, or a file's line number.
	Offset int64
	// Time is the broker's timestamp, zero when unknown.
	Time time.Time
	// Lag is how many records of the partition followed this one when it
	// was fetched: the Kafka high watermark of the fetch minus the next
	// offset, the JetStream consumer's pending count, the messages waiting
	// in a NATS core subscription's buffer; -1 when the transport does not
	// say (files).
	Lag int64
	// Epoch changes when the partition's records stop continuing the ones
	// this source delivered before: a Kafka partition assigned to this
	// process anew after a rebalance (another member may have learned it
	// meanwhile). A model of the partition held in memory is then stale
	// and must be reloaded from its checkpoint. Always 0 for other sources.
	Epoch uint64

	// Size is the record's length in bytes when Value holds only its
	// start (a file line longer than the file source's limit); 0 when
	// Value is the whole record.
	Size int

	// ack is the transport's handle for Commit (a JetStream message).
	ack any
}

// A Source delivers the records of one stream, in order within each
// partition. Sources are not safe for concurrent use: one goroutine
// fetches, processes and commits.
type Source interface {
	// Fetch blocks until the next record is available. It returns
	// ErrEndOfInput when the source was opened with UntilEnd and is
	// consumed up to the end it had at start, and ctx.Err() when ctx is
	// done.
	Fetch(ctx context.Context) (Record, error)
	// Commit acknowledges r and every record before it in r's partition
	// (commits are cumulative, as Kafka offsets and JetStream AckAll are).
	// Callers commit only records whose effect is in the model; sources
	// never commit on their own.
	Commit(ctx context.Context, r Record) error
	// Name says what the source reads, for metrics and errors
	// ("kafka:events", "jetstream:EVENTS/streamlearn").
	Name() string
	// Close stops the source and waits for every goroutine it started.
	Close() error
}

// A MultiCommitter commits records of several partitions in one request
// to the broker rather than one request each: a commit round of a source
// of many partitions then costs one round trip. CommitMany returns, for
// every record, what Commit would have returned for it (nil slices mean
// every commit succeeded).
type MultiCommitter interface {
	Source
	CommitMany(ctx context.Context, recs []Record) []error
}

// An Assigned source has its partitions assigned to it by a group, and
// the assignment changes with the group (a Kafka consumer group). A
// partition it no longer owns must leave this process: its model is handed
// over through its checkpoint.
type Assigned interface {
	Source
	// Assignments returns the partitions this source owns now, sorted.
	Assignments() []int32
}

// A Positioned source says where the broker stands on a partition, so
// that a model restored from its checkpoint can be checked against it: the
// checkpoint must hold every record the broker says this consumer
// committed, and come from the same stream. Without the check a lost,
// older or foreign checkpoint would start a model that silently lacks
// what the committed position says was learned.
type Positioned interface {
	Source
	// Position returns what the broker said of partition when it was
	// last assigned to this source (Kafka) or when the source was opened
	// (JetStream); ok is false for a partition the source knows nothing
	// of.
	Position(partition int32) (pos Position, ok bool)
}

// Position is where the broker stands on one partition.
type Position struct {
	// Committed is the position (Record.Offset) of the last record
	// committed for this consumer: the Kafka group's committed offset
	// minus one, the ack floor of a JetStream durable that acknowledged
	// something; -1 when nothing was committed. (A new durable's ack
	// floor is the stream's first sequence less one: the server's, not a
	// commit.)
	Committed int64
	// First is the position of the first record the partition still
	// holds (the Kafka log start offset, the stream's first sequence),
	// as of when the source said Committed: records before it were
	// deleted (retention, a purge) and cannot be learned by anyone.
	First int64
	// Start is where the consumer began delivering when it had no
	// position (connectors.Start): the first position it delivers while
	// nothing is committed; -1 (or 0) when that is the partition's first
	// record (earliest) or not known. A checkpoint behind it, with nothing
	// committed, would leave the records between unlearned.
	Start int64
	// Origin names the stream the positions are of, so that positions of
	// another stream of the same name are not taken for them: the Kafka
	// cluster id and topic ("kafka cluster kfake topic events"), the
	// JetStream stream and its creation time, which changes when the
	// stream is deleted and created again.
	Origin string
	// Consumer names the consumer Committed is of: the Kafka group
	// ("kafka group gx"), the JetStream durable ("jetstream durable da",
	// which the source's name holds too: SplitConsumer). A checkpoint is
	// one consumer's: another consumer's commits say nothing of it.
	Consumer string
}

// A Rereader reads a partition's records again, apart from its consumer
// and without committing anything: what a model rebuilt from the log,
// rather than restored from a lost or stale checkpoint, learns.
type Rereader interface {
	Source
	// Reread calls fn with each record of partition from position from
	// through position through, in order, as Fetch would have returned
	// them, and returns once the record at through (or the last before
	// it) was handed to fn, or at fn's first error. A negative from is
	// the partition's very first position (Kafka offset 0, JetStream
	// sequence 1). Records are valid only during fn. When the partition
	// no longer holds from, because retention or a purge removed the
	// records before its first one, Reread reads nothing and returns a
	// *NotRetainedError.
	Reread(ctx context.Context, partition int32, from, through int64, fn func(*Record) error) error
}

// A NotRetainedError says that a partition no longer holds the records a
// Reread asked for: the first it holds is at First, after From, or a
// record at or before Gap was removed from the middle of the range (Gap 0
// when not; First -1 when not known).
type NotRetainedError struct {
	Partition   int32
	From, First int64
	Gap         int64
}

func (e *NotRetainedError) Error() string {
	if e.Gap > 0 {
		return fmt.Sprintf("partition %d no longer holds every record from position %d: records were removed from the middle of the log, at or before position %d (a purge, a deletion, a per-subject limit, compaction, or retention during the reading)",
			e.Partition, e.From, e.Gap)
	}
	return fmt.Sprintf("partition %d no longer holds the records from position %d: its first record is at %d (retention or a purge removed the ones before)",
		e.Partition, e.From, e.First)
}

// Traits are constant capabilities of a source: what its records'
// offsets and keys mean, which does not change while it is open. The zero
// Traits are a broker's: offsets that name records across runs, keys that
// are not a producer's, offsets that are not lines. A source declares
// other traits with a method Traits() Traits, which TraitsOf reads.
type Traits struct {
	// Volatile: the offsets do not name the records across runs (a core
	// NATS subscription numbers arrivals from 1 in every run). A
	// checkpoint cannot say where it stands in the stream, only that it
	// learned so many records.
	Volatile bool
	// ProducerKeyed: Record.Key is the producer's key (a Kafka message
	// key), which the outputs of a record keep: a prediction lands on the
	// same partition of a co-partitioned topic as its event. (A NATS
	// record's Key is its subject's last token, not a producer's key.)
	ProducerKeyed bool
	// Lined: the offsets are line numbers of one file, and messages name
	// a record as name:line rather than name/partition/offset.
	Lined bool
}

// traiter is a source that declares its Traits.
type traiter interface{ Traits() Traits }

// TraitsOf returns src's traits: what its Traits method returns, the zero
// Traits when it has none. Traits are constant, so a caller may read them
// once, when it takes the source.
func TraitsOf(src Source) Traits {
	if t, ok := src.(traiter); ok {
		return t.Traits()
	}
	return Traits{}
}

// A Progresser says how much of its input a source has read, when the
// input has a known end: the bytes of the files a replay reads.
type Progresser interface {
	// Progress returns what was read so far and the input's total size,
	// -1 when unknown (standard input, a pipe). It is safe to call from
	// any goroutine, while another fetches.
	Progress() (read, total int64)
}

// A Sink publishes messages: predictions, reports or dead letters.
type Sink interface {
	// Publish sends value (and key, when the transport has keys). It may
	// batch; it does not retain key or value after it returns.
	Publish(ctx context.Context, key, value []byte) error
	// Flush waits until everything published so far is acknowledged.
	Flush(ctx context.Context) error
	// Close flushes and releases the sink.
	Close() error
}

// A BarrierSink waits for what was published up to a point without
// holding up what is published after it: a commit of the records whose
// outputs came before waits, while the outputs of the next records go
// out.
type BarrierSink interface {
	Sink
	// Barrier returns a function that waits until every message
	// published before Barrier was called is acknowledged (as Flush
	// would have then), and returns the delivery failures among those
	// messages not returned yet, never a later message's. Publish may be
	// called meanwhile, by the goroutine that publishes; the function may
	// be called on any goroutine, once.
	Barrier() func(ctx context.Context) error
}

// An IDSink publishes a message with its identity: the JetStream sink
// sends it as Nats-Msg-Id, which the server deduplicates on (the stream
// stores a message whose id it has stored within its duplicate window, two
// minutes by default, only once: the outputs a crash repeats, those since
// the last commit, are then stored once); the Kafka sink as the header
// streamlearn-id (IDHeader), by which a consumer drops the repeats.
type IDSink interface {
	Sink
	// PublishID is Publish with the message's identity id.
	PublishID(ctx context.Context, id string, key, value []byte) error
}

// A Checker is a sink that can say, before anything is published,
// whether its publishes can succeed: that its destination exists and
// takes them (a JetStream stream that captures the subject, a Kafka topic
// that exists, a file that can be locked and opened). A run checks its
// sinks before it opens its source, so a refusal comes before anything is
// consumed.
type Checker interface {
	Sink
	// Check returns an error naming the sink and what it cannot do; nil
	// when publishes can go out.
	Check(ctx context.Context) error
}

// orDefault sets *p to d when *p is the zero value: the defaults of the
// connector configurations.
func orDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// DefaultConnectTimeout bounds connecting to a Kafka broker or a NATS
// server when the configuration does not (connect_timeout): a broker that
// cannot be reached fails a run within it, with its address.
const DefaultConnectTimeout = 5 * time.Second
