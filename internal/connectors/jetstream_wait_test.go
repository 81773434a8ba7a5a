package connectors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors/settings"
)

// jsWaitDone reports whether the context the last begin handed out is done.
func jsWaitDone(w *jsWaiter) bool {
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	return ctx.Err() != nil
}

func TestJSWaiterExpires(t *testing.T) {
	var w jsWaiter
	defer w.stop()
	const d = 50 * time.Millisecond
	start := time.Now()
	w.begin(context.Background(), d)
	for !jsWaitDone(&w) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the wait never expired")
		}
		time.Sleep(time.Millisecond)
	}
	if el := time.Since(start); el < d {
		t.Errorf("expired after %v, before %v", el, d)
	}
	if !w.end() {
		t.Error("end() = false after the wait expired")
	}
	// The next wait gets a fresh context.
	w.begin(context.Background(), d)
	if jsWaitDone(&w) || w.end() {
		t.Error("a new wait starts expired")
	}
}

// Waits that each end in time never expire, however long they go on:
// the lazy timer follows the latest deadline.
func TestJSWaiterMovesForward(t *testing.T) {
	var w jsWaiter
	defer w.stop()
	const d = 30 * time.Millisecond
	ctx := context.Background()
	for end := time.Now().Add(5 * d); time.Now().Before(end); {
		w.begin(ctx, d)
		time.Sleep(d / 6)
		if w.end() {
			t.Fatal("a wait shorter than its limit expired")
		}
		time.Sleep(d / 2) // between waits: the timer may fire and rest
	}
}

func TestJSWaiterParent(t *testing.T) {
	var w jsWaiter
	defer w.stop()
	parent, cancel := context.WithCancel(context.Background())
	w.begin(parent, time.Hour)
	w.mu.Lock()
	first := w.ctx
	w.mu.Unlock()
	w.end()
	// Same parent: the context is reused (no allocation per record).
	w.begin(parent, time.Hour)
	w.mu.Lock()
	same := w.ctx == first
	w.mu.Unlock()
	w.end()
	if !same {
		t.Error("a new context for the same parent")
	}
	// Cancelling the parent ends the wait at once, as not expired.
	w.begin(parent, time.Hour)
	cancel()
	if !jsWaitDone(&w) {
		t.Error("the wait goes on after its parent was cancelled")
	}
	if w.end() {
		t.Error("a cancelled wait reported as expired")
	}
	// Another parent: a context derived from it.
	w.begin(context.Background(), time.Hour)
	if jsWaitDone(&w) {
		t.Error("the wait under a new parent is done")
	}
	w.end()
}

// Fetch's wait expires after FetchWait and runs the idle check, which ends
// an until-end source whose last message at open is gone.
func TestJetStreamFetchIdleEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for FetchWait")
	}
	url := jsTestServer(t, 10)
	cfg := NATSConfig{URL: url, JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := NewJetStreamSource(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Delete the last message (sequence 10) after open: the source waits
	// for it until the idle check finds nothing pending.
	_, js := jsTestClient(t, url)
	stream, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, 10); err != nil {
		t.Fatal(err)
	}
	natsFetchN(t, src, 9, 0)
	start := time.Now()
	if _, err := src.Fetch(ctx); !errors.Is(err, ErrEndOfInput) {
		t.Fatalf("fetch after the last message: %v, want ErrEndOfInput", err)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("ended after %v, before FetchWait", el)
	}
}

// A Fetch with nothing to deliver returns the caller's context error when
// it is done, between idle checks.
func TestJetStreamFetchContext(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for FetchWait")
	}
	url := jsTestServer(t, 0)
	src, err := NewJetStreamSource(context.Background(), NATSConfig{URL: url, JetStreamFetch: settings.JetStreamFetch{FetchWait: time.Second}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := src.Fetch(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetch: %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el < 2400*time.Millisecond || el > 4*time.Second {
		t.Errorf("returned after %v, want about 2.5s", el)
	}
	// Usable afterwards: a message published now is fetched.
	jsPublish(t, url, "events", 0, 1)
	natsFetchN(t, src, 1, 0)
}

// A wait begun while the timer ticks (waits before it kept it armed)
// expires after d and at most about a tick (d/16) more.
func TestJSWaiterExpiresWhileTicking(t *testing.T) {
	var w jsWaiter
	defer w.stop()
	const d = 160 * time.Millisecond
	ctx := context.Background()
	for end := time.Now().Add(d / 2); time.Now().Before(end); {
		w.begin(ctx, d)
		time.Sleep(time.Millisecond)
		if w.end() {
			t.Fatal("a short wait expired")
		}
	}
	start := time.Now()
	w.begin(ctx, d)
	if w.st.Load()&jsWaitArmed == 0 {
		t.Fatal("the timer rests during a wait")
	}
	for !jsWaitDone(&w) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the wait never expired")
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	if !w.end() {
		t.Error("end() = false after the wait expired")
	}
	if el < d {
		t.Errorf("expired after %v, before %v", el, d)
	}
	if el > d+d/16+50*time.Millisecond { // a tick, and slack for a loaded machine
		t.Logf("expired after %v, want about %v (slow machine?)", el, d+d/16)
	}
}

// Between waits the timer rests after a tick: an idle source does not wake.
func TestJSWaiterRests(t *testing.T) {
	var w jsWaiter
	defer w.stop()
	const d = 32 * time.Millisecond
	w.begin(context.Background(), d)
	w.end()
	deadline := time.Now().Add(5 * time.Second)
	for w.st.Load()&jsWaitArmed != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the timer never rests")
		}
		time.Sleep(time.Millisecond)
	}
	// The next wait arms it again, and expires.
	w.begin(context.Background(), d)
	for !jsWaitDone(&w) {
		if time.Now().After(deadline) {
			t.Fatal("the wait after a rest never expired")
		}
		time.Sleep(time.Millisecond)
	}
	if !w.end() {
		t.Error("end() = false after the wait expired")
	}
}
