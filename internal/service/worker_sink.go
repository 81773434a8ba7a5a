package service

import (
	"context"
	"sync"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// lockedSink makes a sink safe for the workers of every partition: one
// message or one Flush at a time.
type lockedSink struct {
	mu   sync.Mutex
	sink connectors.Sink
}

func (l *lockedSink) Publish(ctx context.Context, key, value []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sink.Publish(ctx, key, value)
}

func (l *lockedSink) Flush(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sink.Flush(ctx)
}

// Barrier returns the wait for what was published before the call
// (connectors.BarrierSink): taken under the lock, in order with the
// publishes, and waited for without it. For a sink that has no barrier,
// the wait is its Flush, under the lock: publishes wait for it.
func (l *lockedSink) Barrier() func(context.Context) error {
	if b, ok := l.sink.(connectors.BarrierSink); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		return b.Barrier()
	}
	return l.Flush
}

func (l *lockedSink) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sink.Close()
}

// lockedIDSink is lockedSink for a sink that deduplicates on identities.
type lockedIDSink struct {
	lockedSink
	ids connectors.IDSink
}

func (l *lockedIDSink) PublishID(ctx context.Context, id string, key, value []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids.PublishID(ctx, id, key, value)
}

// lock returns sink made safe for concurrent use, nil for nil.
func lock(sink connectors.Sink) connectors.Sink {
	switch sink := sink.(type) {
	case nil:
		return nil
	case connectors.IDSink:
		return &lockedIDSink{lockedSink: lockedSink{sink: sink}, ids: sink}
	default:
		return &lockedSink{sink: sink}
	}
}
