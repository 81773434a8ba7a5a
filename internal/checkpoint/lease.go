package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ownership of an ObjectStore's partitions. A bucket has no lock to take,
// so a process owns a partition by a lease: the key "partition-N" of the
// key-value bucket "<bucket>_owners" beside the Object Store, created only
// when absent (a publish that expects no earlier message of the key),
// holding the holder's line, a nonce of the lease and its lifetime, and
// renewed every fifth of its lifetime with the revision it was last
// written at (compare-and-swap).
// A release deletes the key at the lease's revision.
//
// A lease lasts its lifetime (ObjectStoreConfig.Lease) from the moment its
// last renewal was sent. The holder counts it so: past that moment, less a
// tenth, it considers the lease lost, whether or not a renewal is still on
// its way. A waiter takes over a lease whose revision it has seen
// unchanged for the lifetime the lease declares (or its own, when longer;
// MaxLease for a lease that declares none), by a compare-and-swap on that
// revision: a holder that renewed meanwhile wins, and a holder that did
// not has already stopped counting on it. (The key-value bucket also drops
// keys MaxLease after their last write, which a renewal every fifth of at
// most MaxLease never lets happen to a live holder; some servers do so
// late, up to twice that, so waiters do not wait for it.)
// Both count on their own monotonic clocks, never on the server's time.
//
// A lost lease — the key written by another process, or no renewal for
// its lifetime — is lost for good, even if the server comes back: another
// process may have owned the partition meanwhile. Every Save of that
// partition then fails with an error that wraps ErrNotOwned, checked
// before the write and again after it, so that nothing this process
// learned after the loss is committed, and the service stops.

// The lease's lifetime: ObjectStoreConfig.Lease.
const (
	MinLease = time.Second
	MaxLease = 10 * time.Second
)

// Variables for tests.
var (
	leasePoll = 100 * time.Millisecond
	leaseCall = 5 * time.Second // bounds one call to the server
	// leaseRenew is how often a lease of lifetime ttl is renewed.
	leaseRenew = func(ttl time.Duration) time.Duration { return ttl / 5 }
)

// leaseMargin is how much earlier than its lifetime's end the holder of a
// lease of lifetime ttl stops counting on it.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// ErrNotOwned is wrapped by the error of a Save of a partition whose
// ownership this process had and lost (see ObjectStore.Own).
var ErrNotOwned = errors.New("ownership lost")

// lease is this process's ownership of one partition of an ObjectStore.
type lease struct {
	s         *ObjectStore
	partition int32
	key       string
	holder    []byte

	stop chan struct{} // closed by release
	done chan struct{} // closed when keep returns
	once sync.Once

	mu         sync.Mutex
	validUntil time.Time // the holder counts on the lease until then
	lost       error     // why the lease was lost; nil while held and after release
}

// ownerKey is the key of partition's lease.
func ownerKey(partition int32) string {
	return "partition-" + strconv.FormatInt(int64(partition), 10)
}

// owners returns the key-value bucket of the leases, creating it when it
// does not exist.
func (s *ObjectStore) owners(ctx context.Context) (jetstream.KeyValue, error) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	name := s.bucket + "_owners"
	kv, err := s.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "streamlearn: which process owns the checkpoints of each partition in bucket " + s.bucket,
			History:     1,
			TTL:         MaxLease,
			Storage:     jetstream.FileStorage,
			Replicas:    s.replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, name) // created by another process since
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: owners bucket %s: %w", s, name, err)
	}
	s.kv = kv
	return kv, nil
}

// Own takes the lease of partition's checkpoints for holder, waiting while
// another process holds it until ctx is done; then it returns a
// *HeldError naming that holder (see Owner, and the comment above). A
// process that dies keeps its lease until a waiter has seen it unrenewed
// for its lifetime (ObjectStoreConfig.Lease). A call to the server that Own makes is not cut short
// by ctx: the lease it may have written is then Own's, not an orphan that
// would block this process.
func (s *ObjectStore) Own(ctx context.Context, partition int32, holder string) (release func(), err error) {
	start := time.Now()
	kctx, cancel := context.WithTimeout(context.Background(), leaseCall)
	kv, err := s.owners(kctx)
	cancel()
	if err != nil {
		return nil, err
	}
	key := ownerKey(partition)
	value := []byte(holder + "\n" + strconv.FormatUint(rand.Uint64(), 16) + "\n" + s.lease.String())
	for {
		sent := time.Now()
		kctx, cancel := context.WithTimeout(context.Background(), leaseCall)
		rev, err := kv.Create(kctx, key, value)
		if errors.Is(err, jetstream.ErrKeyExists) {
			rev, err = s.takeOver(kctx, kv, partition, key, value)
		}
		cancel()
		if err == nil && rev > 0 {
			l := &lease{s: s, partition: partition, key: key, holder: value, validUntil: sent.Add(s.lease - leaseMargin(s.lease)),
				stop: make(chan struct{}), done: make(chan struct{})}
			s.ownMu.Lock()
			s.leases[partition] = l
			delete(s.seen, partition)
			s.ownMu.Unlock()
			go l.keep(kv, rev, leaseRenew(s.lease))
			return l.release, nil
		}
		t := time.NewTimer(leasePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			holder := s.holderOf(kv, key)
			if err != nil {
				holder = "an unknown process (" + err.Error() + ")"
			}
			return nil, &HeldError{Store: s.String(), Partition: partition, Holder: holder, Waited: time.Since(start)}
		case <-t.C:
		}
	}
}

// takeOver takes the lease of key, held by another process, when this
// store has seen its revision unchanged for the lease's lifetime (see
// lifetime); it returns 0 when it did not.
func (s *ObjectStore) takeOver(ctx context.Context, kv jetstream.KeyValue, partition int32, key string, value []byte) (uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil // released or expired since: the next Create
	}
	if err != nil {
		return 0, err
	}
	s.ownMu.Lock()
	seen, ok := s.seen[partition]
	if !ok || seen.rev != e.Revision() {
		seen = leaseSeen{rev: e.Revision(), at: time.Now()}
		s.seen[partition] = seen
	}
	s.ownMu.Unlock()
	if time.Since(seen.at) < max(s.lease, lifetime(e.Value())) {
		return 0, nil
	}
	rev, err := kv.Update(ctx, key, value, e.Revision())
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return 0, nil // renewed, or taken by another waiter
	}
	return rev, err
}

// lifetime returns the lifetime a lease's value declares on its third
// line, MaxLease when it declares none (a process of an earlier version,
// whose leases all lasted MaxLease) or one out of bounds.
func lifetime(value []byte) time.Duration {
	lines := strings.SplitN(string(value), "\n", 3)
	if len(lines) < 3 {
		return MaxLease
	}
	d, err := time.ParseDuration(lines[2])
	if err != nil || d < MinLease || d > MaxLease {
		return MaxLease
	}
	return d
}

// leaseSeen is a revision of another process's lease, and when this store
// first saw it.
type leaseSeen struct {
	rev uint64
	at  time.Time
}

// holderOf returns what the holder of key's lease said of itself, empty
// when that cannot be read.
func (s *ObjectStore) holderOf(kv jetstream.KeyValue, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e, err := kv.Get(ctx, key)
	if err != nil {
		return ""
	}
	return firstLine(e.Value())
}

// keep renews the lease, written at revision rev, every period until it is released or
// lost.
func (l *lease) keep(kv jetstream.KeyValue, rev uint64, period time.Duration) {
	defer close(l.done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			ctx, cancel := context.WithTimeout(context.Background(), leaseCall)
			_ = kv.Delete(ctx, l.key, jetstream.LastRevision(rev)) // else it expires
			cancel()
			return
		case <-t.C:
		}
		sent := time.Now()
		if !sent.Before(l.until()) {
			l.lose(fmt.Errorf("no renewal for %v, the lease's lifetime: another process may own the partition", l.s.lease-leaseMargin(l.s.lease)))
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), l.until())
		r, err := kv.Update(ctx, l.key, l.holder, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			// A renewal that timed out may have been stored: the key then
			// holds this lease's value at a later revision.
			if e, gerr := kv.Get(ctx, l.key); gerr == nil && string(e.Value()) == string(l.holder) {
				r, err = e.Revision(), nil
			}
		}
		cancel()
		switch {
		case err == nil:
			rev = r
			l.mu.Lock()
			l.validUntil = sent.Add(l.s.lease - leaseMargin(l.s.lease))
			l.mu.Unlock()
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound):
			l.lose(fmt.Errorf("the lease was written by another process (%w)", err))
			return
		}
	}
}

// until returns when the holder stops counting on the lease.
func (l *lease) until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

func (l *lease) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = err
}

// release gives the lease up and waits until its key is deleted.
func (l *lease) release() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.s.ownMu.Lock()
		if l.s.leases[l.partition] == l {
			delete(l.s.leases, l.partition)
		}
		l.s.ownMu.Unlock()
	})
}

// checkOwned returns an error wrapping ErrNotOwned when this process's
// lease of partition was lost, or has run out of time with no renewal (a
// process paused past its lease: its renewal, due meanwhile, may not have
// failed yet). A partition never owned, or released, is not: a late Save
// of a revoked Kafka partition may finish (see ObjectStore).
func (s *ObjectStore) checkOwned(partition int32) error {
	s.ownMu.Lock()
	l := s.leases[partition]
	s.ownMu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil && !time.Now().Before(l.validUntil) {
		l.lost = fmt.Errorf("no renewal for %v, the lease's lifetime: another process may own the partition", s.lease-leaseMargin(s.lease))
	}
	if l.lost != nil {
		return fmt.Errorf("checkpoint %s partition %d: %w: %w", s, partition, ErrNotOwned, l.lost)
	}
	return nil
}
