// Package arch holds no code: its test checks that the dependencies of
// streamlearn's packages point one way.
//
//   - The learning core — online, experts, boost, regret, learners (the
//     algorithm registry) and codec, their encoding — imports only the
//     standard library and gonum.
//   - event (decoding), config and pipeline (learning a stream) import no
//     connector, checkpoint store, broker client or Prometheus package:
//     replaying a file needs none of them. (config embeds the plain
//     connection settings of connectors/settings.)
//   - connectors/settings, the connection settings the configuration and
//     the connectors share (and where a source starts), imports only the
//     standard library.
//   - connectors imports the broker clients, settings and lockfile: no
//     part of the learning core, no config, no YAML.
//   - checkpoint imports codec, lockfile and nats.go (an Object Store
//     bucket is handed to it on a connection its caller dialed): no
//     connector, no service.
//   - service runs the learners over connectors and checkpoint stores it is
//     given: it imports no cmd, no api and not the wiring that builds them
//     from a config (cmd/streamlearn's), nor anything above it (api,
//     metrics, cmd).
//   - serving (the copies of the models that answer predictions, and the
//     replica that reads them from checkpoints) imports the learning
//     packages and the checkpoint stores, never service, which imports
//     it, nor a connector, the HTTP API or Prometheus.
package arch
