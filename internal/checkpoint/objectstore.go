package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// DefaultObjectStoreTimeout bounds one Save, Load or Partitions of an
// ObjectStore whose ctx has no deadline: a MaxSize (1 GiB) checkpoint
// within it needs about 18 MiB/s; one of 20 MiB takes about 0.2s on
// loopback.
const DefaultObjectStoreTimeout = time.Minute

// When the chunks Load reads vanish, the object was replaced while it
// read (the Save that replaced it purged them; see ObjectStore) and Load
// starts over with the new meta, at most objectReplacedReads times. When
// they vanish and the meta still names them, a lagging replica answered
// (on a cluster) or the chunks are lost (a failed Save): Load waits and
// reads again, and after objectLostReads calls the object corrupt.
const (
	objectReplacedReads = 10
	objectLostReads     = 4
)

// errReplaced is the error of a Load that found its object replaced
// objectReplacedReads times while reading it.
var errReplaced = errors.New("replaced by newer checkpoints while read")

// ObjectStoreConfig configures an ObjectStore. The zero value works.
type ObjectStoreConfig struct {
	// Replicas is how many servers of a cluster hold the bucket; it is
	// used only when OpenObjectStore creates the bucket. Default 1.
	Replicas int
	// Timeout bounds one Save, Load or Partitions whose ctx has no
	// deadline. Default DefaultObjectStoreTimeout.
	Timeout time.Duration
}

// ObjectStore is a Store in a NATS JetStream Object Store bucket: one
// object per partition, named "partition-N.ckpt" like Dir's files, holding
// the checkpoint file's bytes (the package comment's format, verified on
// Load exactly as Dir does).
//
// An object is chunks (128 KiB messages on a subject of their own, fresh
// for every Put) and a meta message naming them, published after the
// last chunk and rolling up the previous meta. Save is a
// jetstream.ObjectStore.Put, which returns only after the server has
// acknowledged every chunk and the meta (nats.go v1.55.0
// jetstream/object.go:744 publishes each chunk asynchronously,
// object.go:766-779 the meta last, object.go:787-798 waits for
// PublishAsyncComplete, that is for the acknowledgement of all of them;
// publish.go:457-551 turns an error acknowledgement into Put's error). The
// server acknowledges a message after storing it (nats-server v2.15.2
// server/stream.go:7380 StoreMsg, the acknowledgement at
// stream.go:7506-7517); a file-stored R1 stream writes it to its block
// file before (filestore.go:482 flush in place by default,
// filestore.go:7949-7950 and 8898 write(2), fsync at 8926 only with
// SyncAlways). So when Save returns the checkpoint survives
// a crash of the NATS server process; it survives a crash of the machine
// only once fsynced: at once with the server's `jetstream {
// sync_interval: always }`, else within its sync interval (2 minutes by
// default, filestore.go:339), or with Replicas 3 on a cluster, where
// the acknowledgement waits for a quorum.
//
// A reader never sees a half-written object: until the new meta is
// stored, the meta names the previous object's chunks, which Put purges
// only after the new meta is acknowledged (object.go:802-806). A Load
// concurrent with a Save of the same partition returns the previous
// checkpoint or the new one, whole. nats.go's own Get reads the chunks
// through an ordered consumer and, when they are purged under it, stalls
// until its deadline (5s by default) and fails; Load reads them by direct
// get instead, sees them vanish, and starts over with the new meta, up to
// objectReplacedReads (10) times: only when Saves of one partition follow
// each other faster than a Load can read does it give up with an error.
//
// When ctx ends before the acknowledgements arrive, Save returns an error
// and the new checkpoint may still be stored a moment later: Load then
// returns the previous or the new one, whole, and the caller, having seen
// the error, commits nothing. Chunks of such a Save may stay in the
// bucket unreferenced. Save always gives Put a deadline (Timeout):
// without one, Put times out each acknowledgement after 5s
// (object.go:682-685, publish.go:364-397) and then purges the new chunks
// although their meta may already be stored (object.go:790-794), leaving
// an object whose chunks are gone, and the previous one replaced. A Put
// whose connection drops between the server storing the meta and the
// client receiving its acknowledgement ends the same way (pending
// acknowledgements fail with ErrDisconnected, publish.go:565-598). Load
// refuses such an object with ErrCorrupt, never as missing.
//
// ObjectStore is safe for concurrent use; as for any Store, one goroutine
// saves a given partition.
type ObjectStore struct {
	obs     jetstream.ObjectStore
	stream  jetstream.Stream
	bucket  string
	timeout time.Duration
	// closeConn closes the connection DialObjectStore made; nil for
	// OpenObjectStore, whose caller owns the connection.
	closeConn func() error
}

var _ Store = (*ObjectStore)(nil)

// OpenObjectStore returns the Store in bucket, creating the bucket when it
// does not exist: file storage, cfg.Replicas replicas, no size limit, no
// TTL. An existing bucket is used as it is, but refused when it could lose
// checkpoints: memory storage, a TTL (objects expire), or sealed
// (read-only). js's connection stays the caller's: Close does not close
// it.
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
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultObjectStoreTimeout
	}
	s := &ObjectStore{bucket: bucket, timeout: cfg.Timeout}
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

// DialObjectStore connects with nc (its URL, TLS and authentication; see
// connectors.DialNATS) and opens the Store in bucket as OpenObjectStore
// does. Close closes the connection.
func DialObjectStore(ctx context.Context, nc connectors.NATSConfig, bucket string, cfg ObjectStoreConfig) (*ObjectStore, error) {
	conn, closeConn, err := connectors.DialNATS(nc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", bucket, err)
	}
	js, err := jetstream.New(conn)
	if err != nil {
		_ = closeConn()
		return nil, fmt.Errorf("checkpoint bucket %s: %w", bucket, err)
	}
	s, err := OpenObjectStore(ctx, js, bucket, cfg)
	if err != nil {
		_ = closeConn()
		return nil, err
	}
	s.closeConn = closeConn
	return s, nil
}

// Close closes the connection if DialObjectStore made it; otherwise it
// does nothing. Call it once no Save, Load or Partitions runs; the store
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

// ObjectName returns the name of partition's checkpoint object:
// "partition-N.ckpt", the name of Dir's file.
func ObjectName(partition int32) string {
	return "partition-" + strconv.FormatInt(int64(partition), 10) + ".ckpt"
}

// parseObjectName returns the partition of a checkpoint object's name,
// and false for any other name (as Dir.Partitions reads file names).
func parseObjectName(name string) (int32, bool) {
	n, ok := strings.CutPrefix(name, "partition-")
	if !ok {
		return 0, false
	}
	if n, ok = strings.CutSuffix(n, ".ckpt"); !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(n, 10, 32)
	if err != nil || strconv.FormatInt(p, 10) != n {
		return 0, false
	}
	return int32(p), true
}

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

// Save puts c's bytes as the object of c.Partition, durably when it
// returns (see ObjectStore). On an error the previous checkpoint stays,
// or, when ctx ended, possibly the new one: either whole.
func (s *ObjectStore) Save(ctx context.Context, c *Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	name := ObjectName(c.Partition)
	meta := jetstream.ObjectMeta{
		Name: name,
		// For people looking with `nats object info`; Load reads only
		// the checkpoint's own bytes.
		Metadata: map[string]string{
			"source":      c.Source,
			"position":    strconv.FormatInt(c.Position, 10),
			"fingerprint": hex.EncodeToString(c.Fingerprint[:]),
			"created":     c.Created.UTC().Format(time.RFC3339Nano),
		},
	}
	if _, err := s.obs.Put(bctx, meta, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("checkpoint %s %s: save: %w", s, name, s.ctxErr(ctx, bctx, err))
	}
	return nil
}

// Load reads and verifies partition's checkpoint. A missing (or deleted)
// object is an error wrapping fs.ErrNotExist; one that is not a whole
// checkpoint wraps ErrCorrupt, and one of another format version is a
// *VersionError.
func (s *ObjectStore) Load(ctx context.Context, partition int32) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	name := ObjectName(partition)
	b, err := s.read(bctx, name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s %s: %w", s, name, s.ctxErr(ctx, bctx, err))
	}
	var c Checkpoint
	if err := c.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("checkpoint %s %s: %w", s, name, err)
	}
	return &c, nil
}

// errChunkGone is the error of a chunk that the object's meta counts but
// the stream no longer holds.
var errChunkGone = errors.New("chunk gone")

// read returns the bytes of object name, verified against its meta
// (size, SHA-256 digest), starting over when its chunks vanish (see
// objectReplacedReads).
func (s *ObjectStore) read(ctx context.Context, name string) ([]byte, error) {
	var gone string // NUID of the object whose chunks vanished last
	wait := 10 * time.Millisecond
	for replaced, lost := 0, 0; ; {
		info, err := s.obs.GetInfo(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("load: %w (%w)", fs.ErrNotExist, err)
		}
		if err != nil {
			return nil, fmt.Errorf("load: meta: %w", err)
		}
		switch {
		case gone == "":
		case info.NUID == gone:
			if lost++; lost == objectLostReads {
				return nil, fmt.Errorf("%w: %d chunks named by the object's meta are gone (a Save that failed after storing its meta?)", ErrCorrupt, info.Chunks)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			wait *= 2
		default:
			if replaced++; replaced == objectReplacedReads {
				return nil, fmt.Errorf("load: %w %d times", errReplaced, replaced)
			}
		}
		b, err := s.readChunks(ctx, info)
		if !errors.Is(err, errChunkGone) {
			return b, err
		}
		gone = info.NUID
	}
}

// readChunks reads the chunks info names, in stream order, each by a
// direct get of the next message on their subject.
func (s *ObjectStore) readChunks(ctx context.Context, info *jetstream.ObjectInfo) ([]byte, error) {
	if info.Opts != nil && info.Opts.Link != nil {
		return nil, fmt.Errorf("%w: a link to %s/%s, not a checkpoint", ErrCorrupt, info.Opts.Link.Bucket, info.Opts.Link.Name)
	}
	if info.Size > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrCorrupt, info.Size, MaxSize)
	}
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil && info.Size > 0 {
		return nil, fmt.Errorf("%w: object digest %q: %v", ErrCorrupt, info.Digest, err)
	}
	subject := "$O." + s.bucket + ".C." + info.NUID
	b := make([]byte, 0, info.Size)
	seq := uint64(1)
	for i := range info.Chunks {
		m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("%w: %d of %d", errChunkGone, i+1, info.Chunks)
		}
		if err != nil {
			return nil, fmt.Errorf("load: chunk %d of %d: %w", i+1, info.Chunks, err)
		}
		if uint64(len(b)+len(m.Data)) > info.Size {
			return nil, fmt.Errorf("%w: chunks longer than the object's %d bytes", ErrCorrupt, info.Size)
		}
		b = append(b, m.Data...)
		seq = m.Sequence + 1
	}
	if uint64(len(b)) != info.Size {
		return nil, fmt.Errorf("%w: %d bytes in %d chunks, the object has %d", ErrCorrupt, len(b), info.Chunks, info.Size)
	}
	if info.Size > 0 {
		if sum := sha256.Sum256(b); !bytes.Equal(sum[:], want) {
			return nil, fmt.Errorf("%w: object digest mismatch", ErrCorrupt)
		}
	}
	return b, nil
}

// Partitions lists the partitions with a checkpoint object, ignoring
// deleted objects and other names.
func (s *ObjectStore) Partitions(ctx context.Context) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	objs, err := s.obs.List(bctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: list: %w", s, s.ctxErr(ctx, bctx, err))
	}
	var out []int32
	for _, o := range objs {
		if p, ok := parseObjectName(o.Name); ok && !o.Deleted {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}
