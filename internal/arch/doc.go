// Package arch holds no code: its test checks that the dependencies of
// streamlearn's packages point one way.
//
//   - The learning core — online, experts, boost, regret, learners (the
//     algorithm registry) and codec, their encoding — imports only the
//     standard library and gonum.
//   - event (decoding), config and pipeline (learning a stream) import no
//     connector, checkpoint store, broker client or Prometheus package:
//     replaying a file needs none of them.
//   - serving (the copies of the models that answer predictions, and the
//     replica that reads them from checkpoints) imports the learning
//     packages and the checkpoint stores, never service, which imports
//     it, nor the HTTP API or Prometheus.
//   - Only service, the wiring that builds sources, sinks and stores from
//     a config, and what is above it (api, metrics, cmd) may.
package arch
