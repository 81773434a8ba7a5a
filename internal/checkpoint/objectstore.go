package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultObjectStoreTimeout bounds one Save, Load or Partitions of an
// ObjectStore whose ctx has no deadline: a MaxSize (1 GiB) checkpoint
// within it needs about 18 MiB/s; one of 20 MiB takes about 0.2s on
// loopback.
const DefaultObjectStoreTimeout = time.Minute

// When the chunks Load reads vanish, the object was replaced while it
// read (a Save of the same position purged them; see ObjectStore) and
// Load starts over with the new meta, at most objectReplacedReads times.
// When they vanish and the meta still names them, a lagging replica
// answered (on a cluster) or the chunks are lost (a failed Save): Load
// waits and reads again, and after objectLostReads calls the object
// corrupt. When the meta is gone too, a Save of a higher position removed
// the object: Load lists the bucket again and reads the new highest, at
// most objectVanishedLoads times.
const (
	objectReplacedReads = 10
	objectLostReads     = 4
	objectVanishedLoads = 10
)

// errReplaced is the error of a Load that found its object replaced by
// newer checkpoints objectReplacedReads or objectVanishedLoads times while
// reading it.
var errReplaced = errors.New("replaced by newer checkpoints while read")

// ObjectStoreConfig configures an ObjectStore. The zero value works.
type ObjectStoreConfig struct {
	// Replicas is how many servers of a cluster hold the bucket; it is
	// used only when OpenObjectStore creates the bucket. Default 1.
	Replicas int
	// Timeout bounds one Save, Load or Partitions whose ctx has no
	// deadline. Default DefaultObjectStoreTimeout.
	Timeout time.Duration
	// Lease is the lifetime of this process's ownership of a partition
	// (see Own): it is renewed every fifth of it, and a process that
	// dies holds the partition this long after its last renewal. At
	// least MinLease, at most MaxLease; default MaxLease. A waiter waits
	// out the lease its holder declared, whatever its own.
	Lease time.Duration
	// OnClose, when set, is called by Close: a caller that dialed the
	// connection for this store alone hands its closing over (see
	// connectors.DialJetStream). Nil leaves the connection to the caller.
	OnClose func() error
}

// ObjectStore is a Store in a NATS JetStream Object Store bucket. Each
// checkpoint is an object named after its partition and position,
// "partition-N@P.ckpt" (N and P in canonical decimal: no sign but a
// minus, no leading zero; P may be -1), holding the checkpoint file's
// bytes (the package comment's format, verified on Load exactly as Dir
// does, and checked to hold the partition and position its name says).
//
// A Save never puts a checkpoint over one of a higher position of the same
// partition. The state at a position is a function of the partition's
// records up to it, so the checkpoint of the highest position is the
// right one, also when a process that lost the partition finishes a Save
// after the new owner saved a further position. The objects of different
// positions are different objects, never written over: Save puts the
// object of its position; Load lists the bucket and reads the partition's
// object of the highest position. A Save of a lower position than one
// stored returns nil and changes nothing Load returns. A Save of the same
// position replaces the object: the later Save wins, and both hold the
// same state. When the object of the highest position is not a whole
// checkpoint, Load returns the error and never falls back to an older
// one: damage is an error, never a missing or an older checkpoint.
// Objects marked deleted by nats.go's Delete (`nats object rm`) are no
// checkpoints: Load and Partitions skip them, so deleting the newest
// object rolls back to the one before.
//
// Listing. Save and Load list the bucket in one snapshot, the subjects
// of its meta messages, whose names say partition and position. A
// partition that has a checkpoint always has an object listed, since a
// Save removes the lower objects only after its own is stored. Every
// Save and Load lists the whole bucket, so both slow down with the number
// of partitions in it.
//
// Cleanup. After its Put, Save removes the partition's objects of
// positions lower than the highest one not marked deleted (its own
// object too, when that is lower); Load does the same after reading. A
// removal that fails is no error: the object stays until the next Save or
// Load of the partition removes it, and Load does not pick it meanwhile.
//
// Objects named "partition-N.ckpt" (ObjectName: what builds before this
// one saved, one object per partition, written over) are read as well:
// their position is their "position" metadata when it is a canonical
// decimal, else lower than any position, and at equal positions the
// position-named object wins; a Save supersedes such an object and
// removes it like any lower one. Earlier builds read only those names,
// so one group must not run both.
//
// When Save returns nil, the server has acknowledged every chunk and the
// meta: the checkpoint survives a crash of the NATS server process, and
// a crash of the machine once the server has fsynced it (at once with
// its `jetstream { sync_interval: always }`, else within its sync
// interval) or with Replicas 3 on a cluster. A reader never sees a
// half-written object, and a Load concurrent with Saves of the same
// partition returns a whole checkpoint: the highest when it listed, or a
// later one. Load reads the chunks by direct get and starts over when
// they vanish under it (objectReplacedReads, objectVanishedLoads); only
// when Saves of one partition follow each other faster than a Load can
// read does it give up with an error (never a "missing" one).
//
// When ctx ends before the acknowledgements arrive, Save returns an error
// and the new checkpoint may still be stored a moment later: Load then
// returns the previous or the new one, whole, and the caller, having seen
// the error, commits nothing. Save always gives Put a deadline (Timeout).
// An object whose meta was stored but whose chunks are gone (a Put cut
// off after storing its meta) is refused by Load with ErrCorrupt, never
// as missing, until a Save of the same or a higher position supersedes
// it.
//
// docs/design.md ("One owner per model", on checkpoints in a bucket)
// records how each rule rests on nats.go and nats-server, what it costs,
// and what leaves garbage.
//
// ObjectStore is safe for concurrent use, also by several goroutines
// saving the same partition.
type ObjectStore struct {
	obs     jetstream.ObjectStore
	stream  jetstream.Stream
	bucket  string
	timeout time.Duration
	// closeConn is ObjectStoreConfig.OnClose, called by Close.
	closeConn func() error

	// Ownership (lease.go).
	js       jetstream.JetStream
	replicas int
	lease    time.Duration // ObjectStoreConfig.Lease
	ownMu    sync.Mutex
	kv       jetstream.KeyValue  // the leases; nil until the first Own
	leases   map[int32]*lease    // this process's, by partition
	seen     map[int32]leaseSeen // other processes' leases, as this store saw them
}

var (
	_ Store = (*ObjectStore)(nil)
	_ Owner = (*ObjectStore)(nil)
)

// OpenObjectStore returns the Store in bucket, creating the bucket when it
// does not exist: file storage, cfg.Replicas replicas, no size limit, no
// TTL. An existing bucket is used as it is, but refused when it could lose
// checkpoints: memory storage, a TTL (objects expire), or sealed
// (read-only). js's connection stays the caller's: Close closes it only
// through cfg.OnClose, and a failed OpenObjectStore does not call
// OnClose.
func OpenObjectStore(ctx context.Context, js jetstream.JetStream, bucket string, cfg ObjectStoreConfig) (*ObjectStore, error) {
	if cfg.Replicas < 0 {
		return nil, fmt.Errorf("checkpoint bucket %s: replicas: %d is negative", bucket, cfg.Replicas)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("checkpoint bucket %s: timeout: %v is negative", bucket, cfg.Timeout)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Lease == 0 {
		cfg.Lease = MaxLease
	}
	if cfg.Lease < MinLease || cfg.Lease > MaxLease {
		return nil, fmt.Errorf("checkpoint bucket %s: lease: %v is not between %v and %v", bucket, cfg.Lease, MinLease, MaxLease)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultObjectStoreTimeout
	}
	s := &ObjectStore{bucket: bucket, timeout: cfg.Timeout, js: js, replicas: cfg.Replicas, lease: cfg.Lease, closeConn: cfg.OnClose,
		leases: map[int32]*lease{}, seen: map[int32]leaseSeen{}}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	fail := func(err error) (*ObjectStore, error) {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", bucket, err)
	}
	obs, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      bucket,
			Description: "streamlearn checkpoints",
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			// Created by another process since.
			obs, err = js.ObjectStore(ctx, bucket)
		}
	}
	if err != nil {
		return fail(err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return fail(err)
	}
	switch {
	case st.Storage() != jetstream.FileStorage:
		return fail(errors.New("memory storage: checkpoints would not survive a server restart"))
	case st.TTL() > 0:
		return fail(fmt.Errorf("TTL %v: checkpoints of idle partitions would expire", st.TTL()))
	case st.Sealed():
		return fail(errors.New("sealed: no checkpoint can be saved"))
	}
	// Load reads chunks by direct get on the bucket's stream (see
	// ObjectStore); its name is the Object Store protocol's (ADR-20).
	if s.stream, err = js.Stream(ctx, "OBJ_"+bucket); err != nil {
		return fail(err)
	}
	s.obs = obs
	return s, nil
}

// Close calls ObjectStoreConfig.OnClose, when it was set, once; otherwise
// it does nothing. Call it once no Save, Load or Partitions runs; the store
// is not used after.
func (s *ObjectStore) Close() error {
	if s.closeConn == nil {
		return nil
	}
	c := s.closeConn
	s.closeConn = nil
	return c()
}

// String returns "objectstore:BUCKET".
func (s *ObjectStore) String() string { return "objectstore:" + s.bucket }

// bound returns ctx with the store's timeout when it has no deadline.
func (s *ObjectStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// ctxErr replaces err by the reason ctx ended, if it did: nats.go reports
// an ended context as nats.ErrTimeout or a pipe timeout. parent is the
// caller's context, ctx the bounded one.
func (s *ObjectStore) ctxErr(parent, ctx context.Context, err error) error {
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("timed out after %v (%w): %w", s.timeout, context.DeadlineExceeded, err)
	}
	return err
}

// Save puts c's bytes as the object of c.Partition and c.Position,
// durably when it returns, then removes the partition's objects of lower
// positions (see ObjectStore). When the bucket holds a checkpoint of a
// higher position, Save's object is one of them: Load still returns the
// higher one. On an error the previous checkpoints stay, or, when ctx
// ended, possibly the new one too: each whole.
func (s *ObjectStore) Save(ctx context.Context, c *Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.checkOwned(c.Partition); err != nil {
		return err
	}
	b, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	name := objectNameAt(c.Partition, c.Position)
	meta := jetstream.ObjectMeta{
		Name: name,
		// For people looking with `nats object info`; Load reads only
		// the checkpoint's own bytes and the name.
		Metadata: map[string]string{
			"source":      c.Source,
			"consumer":    c.Consumer,
			"position":    strconv.FormatInt(c.Position, 10),
			"fingerprint": hex.EncodeToString(c.Fingerprint[:]),
			"created":     c.Created.UTC().Format(time.RFC3339Nano),
		},
	}
	if _, err := s.obs.Put(bctx, meta, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("checkpoint %s %s: save: %w", s, name, s.ctxErr(ctx, bctx, err))
	}
	if err := s.checkOwned(c.Partition); err != nil {
		// Lost while writing: the checkpoint stays (its state is the
		// model's at its position, as any checkpoint's), but what it
		// holds is not committed by this process.
		return err
	}
	// The checkpoint is saved; what follows only removes garbage.
	if objs, err := s.list(bctx); err == nil {
		if cands, err := s.candidates(bctx, objs, c.Partition); err == nil {
			if top, ok, err := s.top(bctx, cands); err == nil && ok {
				s.prune(bctx, cands, top)
			}
		}
	}
	return nil
}

// Discard copies partition's checkpoint, the object Load would read, to
// "partition-N@P.ckpt.dropped-TIME", a name Load does not read and Save
// does not remove, then deletes every object of the partition (see
// Store); it returns the name of the copy. Objects of lower positions,
// which a Save or Load would have removed anyway, are deleted without a
// copy, and a failure to delete one is ignored (Load skips what it cannot
// read only if deleted, so the copied one's deletion is not).
func (s *ObjectStore) Discard(ctx context.Context, partition int32) (string, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	objs, err := s.list(bctx)
	if err != nil {
		return "", fmt.Errorf("checkpoint %s partition %d: discard: list: %w", s, partition, s.ctxErr(ctx, bctx, err))
	}
	cands, err := s.candidates(bctx, objs, partition)
	if err != nil {
		return "", fmt.Errorf("checkpoint %s partition %d: discard: %w", s, partition, s.ctxErr(ctx, bctx, err))
	}
	copied := ""
	for _, o := range cands {
		if copied != "" {
			_ = s.obs.Delete(bctx, o.name)
			continue
		}
		b, err := s.read(bctx, o.name)
		switch {
		case errors.Is(err, errDeleted) || errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", fmt.Errorf("checkpoint %s %s: discard: %w", s, o.name, s.ctxErr(ctx, bctx, err))
		}
		to := o.name + droppedSuffix(time.Now())
		if _, err := s.obs.Put(bctx, jetstream.ObjectMeta{Name: to}, bytes.NewReader(b)); err != nil {
			return "", fmt.Errorf("checkpoint %s %s: discard: copy: %w", s, o.name, s.ctxErr(ctx, bctx, err))
		}
		if err := s.obs.Delete(bctx, o.name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return "", fmt.Errorf("checkpoint %s %s: discard: %w", s, o.name, s.ctxErr(ctx, bctx, err))
		}
		copied = s.String() + "/" + to
	}
	return copied, nil
}

// Load reads and verifies partition's checkpoint: its object of the
// highest position (see ObjectStore). No object of partition (or only
// deleted ones) is an error wrapping fs.ErrNotExist; an object that is not
// a whole checkpoint, or not the one its name says, wraps ErrCorrupt, and
// one of another format version is a *VersionError.
func (s *ObjectStore) Load(ctx context.Context, partition int32) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	fail := func(name string, err error) (*Checkpoint, error) {
		return nil, fmt.Errorf("checkpoint %s %s: %w", s, name, s.ctxErr(ctx, bctx, err))
	}
	wait := 5 * time.Millisecond
	for loads := 1; ; loads++ {
		if loads > 2 {
			// Superseded again, or a lagging replica answered the
			// meta's get (on a cluster): give it a moment.
			select {
			case <-time.After(wait):
			case <-bctx.Done():
				return fail(fmt.Sprintf("partition %d", partition), bctx.Err())
			}
			wait = min(2*wait, 100*time.Millisecond)
		}
		objs, err := s.list(bctx)
		if err != nil {
			return fail(fmt.Sprintf("partition %d", partition), fmt.Errorf("list: %w", err))
		}
		c, name, err := s.load(bctx, objs, partition)
		switch {
		case err == nil:
			return c, nil
		case errors.Is(err, errVanished) && loads < objectVanishedLoads:
			continue
		case errors.Is(err, errVanished):
			return fail(name, fmt.Errorf("load: %w %d times", errReplaced, loads))
		}
		return fail(name, err)
	}
}

// load reads partition's checkpoint from its objects as objs lists them,
// and removes the lower ones. It returns the name of the object it read
// or tried last, for errors; errVanished when an object it read was
// removed since listed.
func (s *ObjectStore) load(ctx context.Context, objs []object, partition int32) (*Checkpoint, string, error) {
	name := fmt.Sprintf("partition %d", partition)
	cands, err := s.candidates(ctx, objs, partition)
	if err != nil {
		return nil, name, fmt.Errorf("load: %w", err)
	}
	for _, o := range cands {
		b, err := s.read(ctx, o.name)
		switch {
		case errors.Is(err, errDeleted):
			continue
		case errors.Is(err, fs.ErrNotExist):
			return nil, o.name, errVanished
		case err != nil:
			return nil, o.name, err
		}
		var c Checkpoint
		if err := c.UnmarshalBinary(b); err != nil {
			return nil, o.name, err
		}
		if !o.legacy && (c.Partition != partition || c.Position != o.position) {
			return nil, o.name, fmt.Errorf("%w: holds partition %d position %d", ErrCorrupt, c.Partition, c.Position)
		}
		s.prune(ctx, cands, o)
		return &c, o.name, nil
	}
	return nil, name, fmt.Errorf("load: no object partition-%d@POSITION.ckpt or %s: %w", partition, ObjectName(partition), fs.ErrNotExist)
}
