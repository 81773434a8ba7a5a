package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
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
// partition. Several processes can save one partition at once: one that
// lost the partition in a rebalance while its Save was in flight (paused,
// say) can finish that Save after the new owner saved a further position.
// The state at a position is a function of the partition's records up to
// it, so the checkpoint of the highest position is the right one, and the
// newer one must stay, or the records between the two positions would be
// missing from the model while the group's commit says they were learned.
// The Object Store has no compare-and-swap Put (nats.go's Put publishes its
// meta message with no expected last sequence, so it cannot refuse to
// replace a higher position), hence the objects of different positions
// are different objects, never written over: Save puts the object of its
// position; Load lists the bucket and reads the partition's object of the
// highest position. A Save of a lower position than one stored puts its
// object, returns nil and changes nothing Load returns (the object is
// removed by that Save's own cleanup, below). A Save of the same position
// puts the same name, replacing the object: the later Save wins, and both
// hold the same state. When the object of the highest position is not a
// whole checkpoint, Load returns the error and never falls back to an
// older one: damage is an error, never a missing or an older checkpoint.
//
// Listing. Save and Load list the bucket by one Stream Info request for
// the subjects of its meta messages ($O.BUCKET.M.<base64 name>; ADR-20),
// whose names say partition and position: the server collects them from
// its subject index under its store's lock (nats-server
// filestore.go:5109-5122), a snapshot, taken on a cluster by the stream's
// leader. At every instant a partition that has a checkpoint has an
// object listed, since a Save removes the lower objects only after its
// own is stored: a Load that lists none (or only deleted ones) rightly
// says there is none. (nats.go's List reads the metas through a consumer that
// waits for a message reporting nothing pending, and waited its whole
// deadline here when metas were purged while it ran.) Objects marked
// deleted by nats.go's Delete (`nats object rm`) are no checkpoints:
// Load and Partitions skip them (reading their meta), and Load then takes
// the next highest, so deleting the newest object rolls back to the one
// before.
//
// Cleanup. After its Put, Save lists the bucket and removes the
// partition's objects of positions lower than the highest one not marked
// deleted (its own object too, when that is lower); Load does the same
// after reading. Removing an object purges its meta message, only the
// version just read (by stream sequence: an object put again under that
// name meanwhile stays), then the chunks that meta names. It is not
// nats.go's Delete, which leaves a delete marker per object
// (object.go:966-972), one more listed per Save, forever. A removal that
// fails is no error: the object stays until the next Save or Load of the
// partition removes it, and Load does not pick it meanwhile. Garbage that
// no Save or Load removes: the chunks of a failed Save (below), the
// chunks of a Put racing another Put of the same name or a removal of it
// (each Put purges only the chunks named by the meta it replaced), and
// delete markers above the highest live object.
//
// Objects named "partition-N.ckpt" (ObjectName: what builds before this
// one saved, one object per partition, written over) are read as well:
// their position is their "position" metadata when it is a canonical
// decimal, else lower than any position, and at equal positions the
// position-named object wins; a Save supersedes such an object and
// removes it like any lower one. Earlier builds read only those names,
// so one group must not run both.
//
// Cost: every Save and Load lists the bucket: a Stream Info reply of
// about 60 bytes per object, all partitions' objects (about one each),
// so both slow down with the number of partitions in the bucket; past
// 100,000 objects the server pages the reply (jetstream_api.go:495) and
// the list is no longer one snapshot. Then Save reads the meta of the
// partition's highest object and removes the one it superseded (a get
// and two purges); Load reads the meta of what it reads (and of a legacy
// object). Partitions reads the meta of each partition's highest object.
//
// An object is chunks (128 KiB messages on a subject of their own, fresh
// for every Put) and a meta message naming them, published after the
// last chunk and rolling up the previous meta of the same name. Save is a
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
// A reader never sees a half-written object: an object of a new name is
// not listed until its meta is stored, after its last chunk; one put
// again under the same name (the same position) keeps naming the
// previous chunks until the new meta is stored, and Put purges those only
// after the new meta is acknowledged (object.go:802-806). A Load
// concurrent with Saves of the same partition returns a whole checkpoint:
// the highest when it listed, or, when that is superseded while it reads,
// a later one. nats.go's own Get reads the chunks through an ordered
// consumer and, when they are purged under it, stalls until its deadline
// (5s by default) and fails; Load reads them by direct get instead and
// sees them vanish. When the meta still names another object, the object
// was put again: Load reads the new one, up to objectReplacedReads (10)
// times. When the meta is gone, the object was superseded and removed
// (or, on a cluster, a lagging replica answered): Load lists again and
// reads the new highest, up to objectVanishedLoads (10) times, pausing
// from the third on (5ms, doubling). Only when Saves of one partition follow each other faster
// than a Load can read does it give up with an error (never a "missing"
// one).
//
// When ctx ends before the acknowledgements arrive, Save returns an error
// and the new checkpoint may still be stored a moment later: Load then
// returns the previous or the new one, whole, and the caller, having seen
// the error, commits nothing. Chunks of such a Save may stay in the
// bucket unreferenced. Save always gives Put a deadline (Timeout):
// without one, Put times out each acknowledgement after 5s
// (object.go:682-685, publish.go:364-397) and then purges the new chunks
// although their meta may already be stored (object.go:790-794), leaving
// an object whose chunks are gone: Load picks it when its position is
// the highest (or replaces the previous one of the same position). A Put
// whose connection drops between the server storing the meta and the
// client receiving its acknowledgement ends the same way (pending
// acknowledgements fail with ErrDisconnected, publish.go:565-598). Load
// refuses such an object with ErrCorrupt, never as missing, until a Save
// of the same or a higher position supersedes it.
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

// ObjectName returns "partition-N.ckpt", the name of Dir's file and the
// name under which builds before position-named objects kept partition's
// checkpoint object. ObjectStore still reads such an object (see
// ObjectStore) but saves under objectNameAt.
func ObjectName(partition int32) string {
	return "partition-" + strconv.FormatInt(int64(partition), 10) + ".ckpt"
}

// objectNameAt returns the name of partition's checkpoint object of
// position: "partition-N@P.ckpt".
func objectNameAt(partition int32, position int64) string {
	return "partition-" + strconv.FormatInt(int64(partition), 10) + "@" + strconv.FormatInt(position, 10) + ".ckpt"
}

// parseObjectName parses a checkpoint object's name: "partition-N@P.ckpt"
// gives partition N, position P and at true; "partition-N.ckpt" (the name
// ObjectName gives) partition N and at false. N and P are canonical
// decimals (as Dir.Partitions reads file names: no "+", no leading zero,
// no "-0"), N an int32 and P an int64. Any other name gives ok false.
func parseObjectName(name string) (partition int32, position int64, at, ok bool) {
	n, ok := strings.CutPrefix(name, "partition-")
	if !ok {
		return 0, 0, false, false
	}
	if n, ok = strings.CutSuffix(n, ".ckpt"); !ok {
		return 0, 0, false, false
	}
	n, pos, at := strings.Cut(n, "@")
	p, ok := parseDecimal(n, 32)
	if !ok {
		return 0, 0, false, false
	}
	if at {
		if position, ok = parseDecimal(pos, 64); !ok {
			return 0, 0, false, false
		}
	}
	return int32(p), position, at, true
}

// parseDecimal parses s as a canonical decimal integer of bits bits.
func parseDecimal(s string, bits int) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}

// object is a checkpoint object named in the bucket: a name
// parseObjectName takes.
type object struct {
	name      string
	partition int32
	// position is the one of the name; for a legacy name (ObjectName),
	// the "position" metadata, or math.MinInt64 when there is none (see
	// resolve).
	position int64
	legacy   bool
}

// above reports whether Load prefers o to q: a higher position, or at the
// same one a position-named object over a legacy one.
func (o object) above(q object) bool {
	if o.position != q.position {
		return o.position > q.position
	}
	return !o.legacy && q.legacy
}

// legacyPosition returns the position of a legacy object of meta info:
// its "position" metadata when that is a canonical decimal, else
// math.MinInt64, below any position.
func legacyPosition(info *jetstream.ObjectInfo) int64 {
	if v, ok := parseDecimal(info.Metadata["position"], 64); ok {
		return v
	}
	return math.MinInt64
}

// metaSubject returns the subject of object name's meta messages, the
// Object Store protocol's (ADR-20), as object.go:767 builds it.
func (s *ObjectStore) metaSubject(name string) string {
	return "$O." + s.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// list returns the checkpoint objects named in the bucket, in no order:
// the names of the stream's meta subjects, all in one Stream Info reply
// (an atomic snapshot, where nats.go's List reads the metas through a
// consumer that can wait for its deadline when metas are purged while it
// runs). Objects nats.go's Delete marked deleted are included; the
// position of a legacy name is not known yet (resolve).
func (s *ObjectStore) list(ctx context.Context) ([]object, error) {
	prefix := "$O." + s.bucket + ".M."
	si, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	var out []object
	for subject := range si.State.Subjects {
		enc, ok := strings.CutPrefix(subject, prefix)
		if !ok {
			continue
		}
		raw, err := base64.URLEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		p, pos, at, ok := parseObjectName(string(raw))
		if !ok {
			continue
		}
		out = append(out, object{name: string(raw), partition: p, position: pos, legacy: !at})
	}
	return out, nil
}

// meta returns object name's current meta and its stream sequence, nil
// when there is none (the object was removed).
func (s *ObjectStore) meta(ctx context.Context, name string) (*jetstream.ObjectInfo, uint64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.metaSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("meta of %s: %w", name, err)
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(m.Data, &info); err != nil || info.Name != name {
		return nil, 0, fmt.Errorf("%w: meta of %s is not an object's meta", ErrCorrupt, name)
	}
	return &info, m.Sequence, nil
}

// errVanished is the error of resolve when an object listed is gone: a
// Save of a higher position removed it since the list.
var errVanished = errors.New("object removed since listed")

// candidates returns partition's objects among objs, the one Load prefers
// first. The legacy one is resolved: its meta read for its position, and
// left out when deleted; when it is gone, the error is errVanished.
func (s *ObjectStore) candidates(ctx context.Context, objs []object, partition int32) ([]object, error) {
	var out []object
	for _, o := range objs {
		if o.partition != partition {
			continue
		}
		if o.legacy {
			info, _, err := s.meta(ctx, o.name)
			switch {
			case err != nil:
				return nil, err
			case info == nil:
				return nil, errVanished
			case info.Deleted:
				continue
			}
			o.position = legacyPosition(info)
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b object) int {
		switch {
		case a.above(b):
			return -1
		case b.above(a):
			return 1
		}
		return 0
	})
	return out, nil
}

// top returns the first object of cands (as candidates orders them) that
// is not deleted, and false when all are; its meta is read, so when it is
// gone the error is errVanished.
func (s *ObjectStore) top(ctx context.Context, cands []object) (object, bool, error) {
	for _, o := range cands {
		info, _, err := s.meta(ctx, o.name)
		switch {
		case err != nil:
			return object{}, false, err
		case info == nil:
			return object{}, false, errVanished
		case !info.Deleted:
			return o, true, nil
		}
	}
	return object{}, false, nil
}

// prune removes the objects among cands (partition's, as candidates
// returns them) of positions lower than top's (see ObjectStore,
// "Cleanup"), as far as it can: a removal that fails leaves the object
// for a later Save or Load.
func (s *ObjectStore) prune(ctx context.Context, cands []object, top object) {
	for _, o := range cands {
		if o.position < top.position {
			s.remove(ctx, o.name, top.position)
		}
	}
}

// remove removes object name if its current meta is that of a checkpoint
// object (or a delete marker) of a position lower than below: it purges
// that meta message, by sequence, so that a meta stored since stays, then
// the chunks the meta names. Errors are ignored (see prune).
func (s *ObjectStore) remove(ctx context.Context, name string, below int64) {
	_, position, at, ok := parseObjectName(name)
	if !ok {
		return
	}
	info, seq, err := s.meta(ctx, name)
	if err != nil || info == nil {
		return
	}
	if !at {
		position = legacyPosition(info)
	}
	if position >= below {
		return
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.metaSubject(name)), jetstream.WithPurgeSequence(seq+1)); err != nil {
		return
	}
	if !info.Deleted && info.NUID != "" {
		_ = s.stream.Purge(ctx, jetstream.WithPurgeSubject("$O."+s.bucket+".C."+info.NUID))
	}
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

// errChunkGone is the error of a chunk that the object's meta counts but
// the stream no longer holds.
var errChunkGone = errors.New("chunk gone")

// errDeleted is the error of read for an object nats.go's Delete marked
// deleted (`nats object rm`, say): no checkpoint.
var errDeleted = errors.New("object deleted")

// read returns the bytes of object name, verified against its meta
// (size, SHA-256 digest), starting over when its chunks vanish (see
// objectReplacedReads). An object without a meta is an error wrapping
// fs.ErrNotExist, a deleted one errDeleted.
func (s *ObjectStore) read(ctx context.Context, name string) ([]byte, error) {
	var gone string // NUID of the object whose chunks vanished last
	wait := 10 * time.Millisecond
	for replaced, lost := 0, 0; ; {
		info, err := s.obs.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("load: %w (%w)", fs.ErrNotExist, err)
		}
		if err != nil {
			return nil, fmt.Errorf("load: meta: %w", err)
		}
		if info.Deleted {
			return nil, errDeleted
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

// Partitions lists the partitions with a checkpoint object, each once,
// ascending, ignoring deleted objects and other names. It reads the meta
// of each partition's highest object.
func (s *ObjectStore) Partitions(ctx context.Context) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	fail := func(err error) ([]int32, error) {
		return nil, fmt.Errorf("checkpoint %s: list: %w", s, s.ctxErr(ctx, bctx, err))
	}
	objs, err := s.list(bctx)
	if err != nil {
		return fail(err)
	}
	var listed []int32
	for _, o := range objs {
		listed = append(listed, o.partition)
	}
	slices.Sort(listed)
	var out []int32
	for _, p := range slices.Compact(listed) {
		cands, err := s.candidates(bctx, objs, p)
		var ok bool
		if err == nil {
			_, ok, err = s.top(bctx, cands)
		}
		switch {
		case errors.Is(err, errVanished):
			// Removed since listed, by a Save of a higher position.
			ok = true
		case err != nil:
			return fail(err)
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Stamps returns, for each partition that has a checkpoint, the name of
// its object of the highest position and the stream sequence of its meta:
// a Save puts an object of another name, or the same name again under a
// new meta. It lists the bucket once and reads a meta or two per
// partition, not the objects.
func (s *ObjectStore) Stamps(ctx context.Context) (map[int32]string, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	for tries := 1; ; tries++ {
		out, err := s.stamps(bctx)
		switch {
		case errors.Is(err, errVanished) && tries < objectVanishedLoads:
			continue
		case err != nil:
			return nil, fmt.Errorf("checkpoint %s: stamps: %w", s, s.ctxErr(ctx, bctx, err))
		}
		return out, nil
	}
}

// stamps is one attempt of Stamps; errVanished when an object listed was
// removed meanwhile.
func (s *ObjectStore) stamps(ctx context.Context) (map[int32]string, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	parts := map[int32]bool{}
	for _, o := range objs {
		parts[o.partition] = true
	}
	out := make(map[int32]string, len(parts))
	for p := range parts {
		cands, err := s.candidates(ctx, objs, p)
		if err != nil {
			return nil, err
		}
		top, ok, err := s.top(ctx, cands)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		info, seq, err := s.meta(ctx, top.name)
		if err != nil {
			return nil, err
		}
		if info == nil {
			return nil, errVanished
		}
		out[p] = fmt.Sprintf("%s %d", top.name, seq)
	}
	return out, nil
}

var _ Stamper = (*ObjectStore)(nil)
