package connectors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsWaiter is what JetStreamSource.Fetch waits for a message under: a
// context done when the caller's context is or when the wait has lasted
// its limit d (FetchWait). A context.WithTimeout per record costs four
// allocations and a timer started and stopped per record; here the context
// is derived once per caller context (told apart by its Done channel) and
// again only after a wait expired.
//
// Nor does a wait read the clock or take a lock: begin and end each add one
// to a count of wait edges in st (odd while a wait is in progress), and one
// timer, ticking every d/16 while it is armed, looks at the count. A wait
// it sees in progress under the same count for d since it first saw it (or
// since begin armed the timer for it) expires: a wait expires after d and
// at most a tick more. A tick that finds no wait in progress lets the
// timer rest until the next begin arms it again, so a source whose caller
// does not fetch costs no wake-ups, and a flowing one at most 16 per d.
//
// begin and end are called by Fetch's goroutine, fire by the timer's.
type jsWaiter struct {
	// st: jsWaitArmed, jsWaitExpired and, from jsWaitOne up, the count of
	// begins and ends. Only fire sets the two flags and only under the
	// count it saw; begin clears them, under mu.
	st atomic.Uint64

	// Fetch's goroutine only.
	opts   []jetstream.NextOpt // NextContext(ctx); nil before the first wait
	parent <-chan struct{}     // Done of the caller's context ctx derives from

	mu      sync.Mutex
	ctx     context.Context // derived from the caller's
	cancel  context.CancelFunc
	timer   *time.Timer
	d, tick time.Duration
	seen    uint64    // the count of the wait fire watches
	seenAt  time.Time // when that wait was first seen (at most when it began)
	stopped bool
}

const (
	jsWaitArmed   uint64 = 1 << iota // the timer will call fire
	jsWaitExpired                    // fire cancelled ctx: the wait expired
	jsWaitOne                        // the count's unit; its bit is set while waiting
)

// begin starts a wait of at most d under parent and returns the options
// that make MessagesContext.Next honour it.
func (w *jsWaiter) begin(parent context.Context, d time.Duration) []jetstream.NextOpt {
	done := parent.Done()
	if w.opts == nil || done != w.parent || d != w.d || w.st.Load()&jsWaitExpired != 0 {
		w.renew(parent, done, d)
	}
	if s := w.st.Add(jsWaitOne); s&jsWaitArmed == 0 {
		w.arm(s)
	}
	return w.opts
}

// end ends the wait begin started and reports whether it expired.
func (w *jsWaiter) end() bool {
	return w.st.Add(jsWaitOne)&jsWaitExpired != 0
}

// renew derives a new context from parent, for waits of at most d, and
// clears the expiry of the last wait. No wait is in progress.
func (w *jsWaiter) renew(parent context.Context, done <-chan struct{}, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
	w.ctx, w.cancel = context.WithCancel(parent)
	w.opts = append(w.opts[:0], jetstream.NextContext(w.ctx))
	w.parent = done
	w.d, w.tick = d, max(d/16, time.Microsecond)
	w.st.And(^jsWaitExpired)
}

// arm starts the timer for the wait begin started, st s, while the timer
// rests: fire is not pending and does not run.
func (w *jsWaiter) arm(s uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.st.Or(jsWaitArmed)
	w.seen, w.seenAt = s&^(jsWaitArmed|jsWaitExpired), time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(w.tick, w.fire)
	} else {
		w.timer.Reset(w.tick)
	}
}

// fire runs on the timer: it expires the wait in progress once it has
// been seen for d, ticks on while a wait is in progress, and otherwise lets
// the timer rest until the next begin.
func (w *jsWaiter) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	now := time.Now()
	for {
		s := w.st.Load()
		count := s &^ (jsWaitArmed | jsWaitExpired)
		switch {
		case s&jsWaitOne == 0: // between waits
			if w.st.CompareAndSwap(s, s&^jsWaitArmed) {
				return
			}
		case count != w.seen: // a wait begun since the last look
			w.seen, w.seenAt = count, now
			w.timer.Reset(w.tick)
			return
		case now.Sub(w.seenAt) < w.d:
			w.timer.Reset(min(w.tick, w.d-now.Sub(w.seenAt)))
			return
		default: // the same wait for d: expire it, unless it just ended
			if w.st.CompareAndSwap(s, (s|jsWaitExpired)&^jsWaitArmed) {
				w.cancel()
				return
			}
		}
	}
}

// stop releases the timer and the derived context.
func (w *jsWaiter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.cancel != nil {
		w.cancel()
	}
}
