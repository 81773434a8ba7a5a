package connectors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// writeTestFile writes b to a new file dir/name and returns its path.
func writeTestFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testEvent is the i-th test event.
func testEvent(i int) []byte {
	return fmt.Appendf(nil, `{"id":"e-%d","label":%d,"x":[%d]}`, i, i%2, i)
}

// sinkWrite publishes events 0..n-1 through sink and closes it, which
// waits until they are acknowledged (as far as the transport does).
func sinkWrite(t testing.TB, sink Sink, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		if err := sink.Publish(ctx, nil, testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// jsTestClient connects a plain nats.go JetStream client to url, closed
// when the test ends (or before, by closing the connection).
func jsTestClient(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// goroutinesSettle waits until at most want goroutines run (want < 0:
// until the count holds still for a moment) and returns the count; it
// fails with their stacks if more than want are left after 5s:
// connections end their goroutines asynchronously.
func goroutinesSettle(t *testing.T, want int) int {
	t.Helper()
	now := runtime.NumGoroutine()
	for range 200 {
		time.Sleep(25 * time.Millisecond)
		n := runtime.NumGoroutine()
		if want >= 0 && n <= want || want < 0 && n == now {
			return n
		}
		now = n
	}
	if want >= 0 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, want at most %d:\n%s", now, want, buf[:runtime.Stack(buf, true)])
	}
	return now
}
