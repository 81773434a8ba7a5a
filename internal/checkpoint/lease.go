package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ownership of an ObjectStore's partitions. A bucket has no lock to take,
// so a process owns a partition by a lease: the key "partition-N" of the
// key-value bucket "<bucket>_owners" beside the Object Store, created only
// when absent (a publish that expects no earlier message of the key),
// holding the holder's line, and renewed every leaseRenew with the
// revision it was last written at (compare-and-swap). The key-value
// bucket keeps a key leaseTTL after its last write, so the lease of a
// process that died, or lost the server for that long, expires, and the
// next process takes it. A release deletes the key at the lease's
// revision.
//
// A lease that could not be renewed — the key written by another process
// (it expired and was taken), or no renewal for leaseTTL — is lost for
// good, even if the server comes back: another process may have owned
// the partition meanwhile. Every Save of that partition then fails with
// an error that wraps ErrNotOwned, so that nothing this process learned
// after the loss is committed, and the service stops.

// Variables for tests.
var (
	leaseTTL   = 10 * time.Second
	leaseRenew = 2 * time.Second
	leasePoll  = 100 * time.Millisecond
)

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

	mu   sync.Mutex
	lost error // why the lease was lost; nil while held and after release
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
			TTL:         leaseTTL,
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
// process that dies keeps its lease until it expires, leaseTTL (10s)
// after its last renewal.
func (s *ObjectStore) Own(ctx context.Context, partition int32, holder string) (release func(), err error) {
	start := time.Now()
	kv, err := s.owners(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &HeldError{Store: s.String(), Partition: partition, Waited: time.Since(start)}
		}
		return nil, err
	}
	key := ownerKey(partition)
	for {
		rev, err := kv.Create(ctx, key, []byte(holder))
		if err == nil {
			l := &lease{s: s, partition: partition, key: key, holder: []byte(holder), stop: make(chan struct{}), done: make(chan struct{})}
			s.ownMu.Lock()
			s.leases[partition] = l
			s.ownMu.Unlock()
			go l.keep(kv, rev)
			return l.release, nil
		}
		if ctx.Err() == nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("checkpoint %s partition %d: owning: %w", s, partition, err)
		}
		t := time.NewTimer(leasePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &HeldError{Store: s.String(), Partition: partition, Holder: s.holderOf(kv, key), Waited: time.Since(start)}
		case <-t.C:
		}
	}
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

// keep renews the lease, written at revision rev, until it is released or
// lost.
func (l *lease) keep(kv jetstream.KeyValue, rev uint64) {
	defer close(l.done)
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-l.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = kv.Delete(ctx, l.key, jetstream.LastRevision(rev)) // else it expires
			cancel()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaseRenew)
		r, err := kv.Update(ctx, l.key, l.holder, rev)
		cancel()
		switch {
		case err == nil:
			rev, renewed = r, time.Now()
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound):
			l.lose(fmt.Errorf("the lease expired and was written by another process (%w)", err))
			return
		case time.Since(renewed) >= leaseTTL:
			l.lose(fmt.Errorf("no renewal for %v, the lease's lifetime: another process may own the partition (%w)", leaseTTL, err))
			return
		}
	}
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
// lease of partition was lost (a partition never owned, or released, is
// not: a late Save of a revoked Kafka partition may finish, see
// ObjectStore).
func (s *ObjectStore) checkOwned(partition int32) error {
	s.ownMu.Lock()
	l := s.leases[partition]
	s.ownMu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return fmt.Errorf("checkpoint %s partition %d: %w: %w", s, partition, ErrNotOwned, l.lost)
	}
	return nil
}
