package connectors

import "testing"

// What package connectors_test (the conformance suite, which cannot live
// in package connectors: sourcetest imports it) needs of the tests here.

// NATSTestStream runs the server the NATS and JetStream tests run against
// (natsTestServer: embedded, or the process STREAMLEARN_NATS_SERVER
// names), creates stream name capturing subjects on it and returns the
// server's URL.
func NATSTestStream(t testing.TB, name string, subjects ...string) string {
	t.Helper()
	url := natsTestServer(t, nil).ClientURL()
	natsTestStream(t, url, name, subjects...)
	return url
}
