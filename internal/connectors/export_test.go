package connectors

import "testing"

// What package connectors_test (the conformance suite, which cannot live
// in package connectors: sourcetest imports it) needs of the tests here.

// JetStreamTestServer runs the server the NATS and JetStream tests run
// against (natsTestServer: embedded, or the process
// STREAMLEARN_NATS_SERVER names) with stream EVENTS on subject events,
// and returns its URL.
func JetStreamTestServer(t testing.TB) string { return jsTestServer(t, 0) }
