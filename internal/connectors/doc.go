// Package connectors moves records in and out of streamlearn: sources that
// read a stream (Kafka through segmentio/kafka-go, NATS core and JetStream
// through nats.go, a file replayed line by line) and sinks that publish
// predictions, dead letters and reports (Kafka, NATS core, JetStream, an
// append-only file), plus an embedded NATS JetStream server for the
// default run. It knows bytes, partitions and positions, never what a
// record means.
//
// # Sources
//
// A Source delivers the records of one stream in order within each
// partition, to one goroutine that fetches, processes and commits:
//
//   - Fetch blocks until the next record and returns it; its slices are
//     valid until the next Fetch. A source opened with UntilEnd returns
//     ErrEndOfInput once every partition it owns reached the end it had
//     when the source opened.
//   - Commit acknowledges a record and every record before it in its
//     partition (cumulative, as Kafka offsets and JetStream AckAll are).
//     A source never commits on its own: the caller commits only records
//     whose effect is in the model, and a commit of a partition a
//     rebalance took away wraps ErrPartitionRevoked and is not sent.
//   - A Record names its partition and its position (Offset: the Kafka
//     offset, the JetStream stream sequence, the arrival count of a core
//     NATS subscription, a file's line number), the records behind it at
//     the broker (Lag) and, for a Kafka partition assigned anew, a new
//     Epoch: a model of the partition held in memory is then stale.
//   - Name says what the source reads ("kafka:events",
//     "jetstream:EVENTS/streamlearn"); SplitConsumer cuts it into the
//     stream and the consumer.
//
// What only some sources can do is an optional interface, asserted by the
// caller: MultiCommitter (one commit request for several partitions),
// Assigned (partitions given and taken by a consumer group), Positioned
// (the committed position and the first retained one per partition, the
// consumer and the stream's origin, so that a restore can be checked),
// Rereader (read a partition again through a position, outside the group,
// committing nothing; NotRetainedError when records are gone) and
// Progresser (how much of a finite input has been read). What a source is,
// rather than does, is one Traits value (TraitsOf): Volatile (offsets that
// do not survive a restart: core NATS), ProducerKeyed (Record.Key is the
// producer's key: Kafka) and Lined (offsets are line numbers: the file
// source). The sources of files that decode their records (replay's Files
// and Envelopes) live beside this package, in filesource.
//
// # Sinks
//
// A Sink publishes messages: Publish sends a key and a value without
// retaining them (it may batch), Flush waits until everything published so
// far is acknowledged, Close flushes and releases. A BarrierSink returns a
// barrier that waits for the messages published before it, and reports
// the delivery failures among those only, while publishing goes on: the
// commit of a round waits on it. An IDSink publishes a message with its
// identity (source/partition/offset/kind), which JetStream deduplicates on
// as Nats-Msg-Id and Kafka carries in the header streamlearn-id. A
// FileSink writes whole lines, fsyncs at a barrier, removes a torn tail at
// open and has one writer, held by an exclusive lock (FileInUseError names
// the holder). A Checker says before a run whether publishes can succeed
// (the topic or stream exists, the file can be written). sinktest is the
// suite every sink passes.
//
// # Dependencies
//
// Connectors import no learning code (decoders, learners, the pipeline,
// the tracker), no checkpoint store and no YAML: settings arrive as plain
// structs (KafkaConfig, NATSConfig, EmbeddedConfig), filled by the
// caller. internal/arch's test holds that rule.
package connectors
