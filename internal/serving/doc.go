// Package serving is what readers of streamlearn's models see: the
// reports of every model at one moment (Snapshot, Report) and the copies
// of the models that answer predictions (Predictor, Copies), for the HTTP
// API and the metrics.
//
// Serving predictions (POST /v1/predict) must not touch the live models:
// they belong to the service's loop, and a prediction must never change
// what a model learns. So the service publishes copies (NewPredictor,
// NewKeyed) in a Copies, and a Predictor is safe for concurrent use.
// Copying costs a few MiB per linear learner, so the service copies only
// while someone asks: a request marks serving active for ServeIdle, and
// while it is, each snapshot (every SnapshotInterval) also refreshes the
// copy of every model that learned something since its last copy. The
// first request after an idle spell waits for the next snapshot; later
// ones are answered at once by a copy at most about one SnapshotInterval
// behind the live model.
//
// A Replica serves models it does not learn — a model file, or the
// checkpoints a learning service saves, read again as they change
// (`streamlearn serve`) — through the same Snapshot and Predictor.
//
// The package knows nothing of the service that learns (package service
// imports it, not the other way round): it depends on the models
// (pipeline), their configuration and the checkpoint stores only.
package serving
