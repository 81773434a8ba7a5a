package connectors

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DialNATS connects to cfg's servers with its authentication and TLS, as
// the NATS and JetStream sources and sinks do (cfg.Subject, Stream and
// Durable are not used): for other users of NATS, such as a checkpoint
// store in a JetStream Object Store bucket. The connection reconnects
// forever; the first connect fails fast with an error naming the server
// (password redacted).
//
// Call closeConn, not nc.Close: it flushes what was published, closes the
// connection and waits (at most 5s) for the connection's closed callback,
// so that no goroutine of it outlives the call.
func DialNATS(cfg NATSConfig) (nc *nats.Conn, closeConn func() error, err error) {
	c, err := natsConnect(cfg.withDefaults())
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	return c.Conn, c.close, nil
}

// DialJetStream is DialNATS with the connection's JetStream context, for
// other users of JetStream such as a checkpoint store in an Object Store
// bucket. Call closeConn, not the connection's Close, as for DialNATS.
func DialJetStream(cfg NATSConfig) (js jetstream.JetStream, closeConn func() error, err error) {
	nc, closeConn, err := DialNATS(cfg)
	if err != nil {
		return nil, nil, err
	}
	if js, err = jetstream.New(nc); err != nil {
		_ = closeConn()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	return js, closeConn, nil
}
