package connectors

import "context"

// A Batcher is a source that can also hand over its records in batches of
// one partition, so that the goroutine that takes them does so once a
// batch, not once a record, and copies none. A batch's records come in
// their partition's order, and a partition's batches come in order;
// different partitions' batches interleave. Once FetchBatch has returned a
// batch, its records count as delivered, as Fetch's record does: the
// source's positions and commits take them alike. A source read by
// FetchBatch is read by FetchBatch alone, except that the Kafka source
// takes both.
type Batcher interface {
	// FetchBatch returns the next batch, at least one record, or Fetch's
	// errors (ErrEndOfInput at the end, after every record before it).
	FetchBatch(ctx context.Context) (Batch, error)
}

// A Batch is records of one partition a Batcher handed over. Its records
// (and their Value and Key) are valid until Release; it may be used from
// a goroutine other than the one that fetched it, but by one at a time.
type Batch interface {
	// Partition returns the partition of the batch's records.
	Partition() int32
	// Len returns the number of the batch's records, at least one.
	Len() int
	// Last returns the batch's last record without its Value and Key: its
	// position (partition, offset, lag, epoch), which the source's Commit
	// takes.
	Last() Record
	// Records returns the batch's records in order. A record its source
	// finds bad ends them: Records then returns the records before it and
	// the error Fetch would have returned after them.
	Records() ([]Record, error)
	// Release gives the batch back to its source, which may reuse it: its
	// records are not valid after.
	Release()
}
