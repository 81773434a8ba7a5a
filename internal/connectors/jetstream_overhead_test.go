package connectors

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// jsFakeMsg is a jetstream.Msg with a subject, a reply subject and data:
// what Fetch reads of a message.
type jsFakeMsg struct {
	jetstream.Msg
	subject, reply string
	data           []byte
}

func (m *jsFakeMsg) Subject() string { return m.subject }
func (m *jsFakeMsg) Reply() string   { return m.reply }
func (m *jsFakeMsg) Data() []byte    { return m.data }

// jsFakeIter hands out msgs round and round; at each wrap it rewinds src's
// last sequence, so that the sequences read as new again.
type jsFakeIter struct {
	jetstream.MessagesContext
	msgs []jetstream.Msg
	i    int
	src  *JetStreamSource
}

func (it *jsFakeIter) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	if it.i == len(it.msgs) {
		it.i = 0
		it.src.last = 0
	}
	m := it.msgs[it.i]
	it.i++
	return m, nil
}

// BenchmarkJetStreamFetchOverhead: JetStreamSource.Fetch over an iterator
// that returns buffered messages at once — the source's own cost per
// record, without the client and the server.
func BenchmarkJetStreamFetchOverhead(b *testing.B) {
	it := &jsFakeIter{}
	for i := range 4096 {
		it.msgs = append(it.msgs, &jsFakeMsg{
			subject: fmt.Sprintf("events.tenant-%d", i%10),
			reply:   fmt.Sprintf("$JS.ACK.EVENTS.streamlearn.1.%d.%d.17000000000%08d.%d", i+1, i+1, i, 4096-i),
			data:    []byte(`{}`),
		})
	}
	src := &JetStreamSource{iter: it, name: "jetstream:EVENTS/streamlearn", cfg: NATSConfig{}.withDefaults()}
	it.src = src
	defer src.wait.stop()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Fetch(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJetStreamAckMeta(b *testing.B) {
	replies := make([]string, 64)
	for i := range replies {
		replies[i] = fmt.Sprintf("$JS.ACK.EVENTS.streamlearn.1.%d.%d.17000000000%08d.%d", 1000000+i, 1000000+i, i, 4096-i)
	}
	var src JetStreamSource
	var sum uint64
	i := 0
	for b.Loop() {
		seq, _, _, _ := src.ackMeta(replies[i&63])
		sum += seq
		i++
	}
	_ = sum
}
