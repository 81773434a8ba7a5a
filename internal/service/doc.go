// Package service is streamlearn's live loop: it fetches records from a
// connectors.Source, decodes them, runs each through the model of its
// partition (pipeline.Pipeline), publishes predictions, dead letters and
// periodic regret reports, and commits positions back to the source only
// for records whose effect is already in the model.
//
// Models and partitions: every partition gets its own model, learned in
// partition order by the single process that owns the partition. That is
// the only arrangement in which a model is a deterministic function of a
// stream: records of different partitions interleave differently on every
// run. Users who want one model per tenant or key produce with the key as
// the partitioning key (Kafka's default partitioner keeps a key on one
// partition) and give the topic as many partitions as they want models
// learned in parallel; users who want one model over everything use one
// partition. NATS subjects and files are one partition.
//
// What Service.Run guarantees:
//   - Predict, then learn: each event is predicted by its partition's
//     model before that model learns it, and a partition's events are
//     learned in their order in the partition, by one worker
//     (worker.go); the models of different partitions learn in parallel.
//   - Outputs before the commit: no position is committed to the source,
//     nor any checkpoint written, before every output of the records up
//     to it (predictions, dead letters, reports) is durable at its sink;
//     once an output failed, nothing is committed any more (committer.go).
//   - With checkpoints, a partition's model is restored from its
//     checkpoint, checked against what the broker says was committed,
//     and never silently replaced by a fresh one (restore.go); after a
//     crash each model equals the one an uninterrupted run would have.
//   - One owner per partition: with a store that keeps owners
//     (checkpoint.Owner), a partition's model is learned only by the
//     process that owns its checkpoints, and a partition revoked by a
//     rebalance is checkpointed as it is (when it has a checkpoint
//     already) and given up, for the new owner to restore (lifecycle.go).
//   - Predictions served over HTTP come from copies (package serving),
//     never from the live models, and readers on other goroutines see
//     only immutable Snapshots (snapshot.go).
//
// The files follow the seams: service.go is the loop (fetch, dispatch,
// what is due by time, the drain), worker.go a partition's worker and
// the loop's questions to it (worker_snapshot.go its checkpoints taken
// between two records, worker_sink.go the sinks its outputs share with
// the other partitions'), lifecycle.go and restore.go the models'
// lifecycle (models), committer.go the commit rounds and the saver,
// snapshot.go and copies.go what readers see.
package service
