package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/testbroker"
)

// startNATS starts an embedded server with JetStream files in storeDir on
// a free port. Shutdown is the caller's (natsServer registers it).
func startNATS(t *testing.T, storeDir string) *connectors.Embedded {
	t.Helper()
	e, err := connectors.StartEmbedded(connectors.EmbeddedConfig{Port: -1, StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// natsServer is startNATS in a temporary directory, shut down at the end
// of the test.
func natsServer(t *testing.T) *connectors.Embedded {
	t.Helper()
	e := startNATS(t, t.TempDir())
	t.Cleanup(e.Shutdown)
	return e
}

// dialObjectStore connects to the server at url (connectors.DialJetStream)
// and opens the Store in bucket, which closes the connection on Close.
func dialObjectStore(ctx context.Context, url, bucket string, cfg ObjectStoreConfig) (*ObjectStore, error) {
	js, closeConn, err := connectors.DialJetStream(connectors.NATSConfig{URL: url})
	if err != nil {
		return nil, err
	}
	cfg.OnClose = closeConn
	s, err := OpenObjectStore(ctx, js, bucket, cfg)
	if err != nil {
		_ = closeConn()
	}
	return s, err
}

// dialStore opens bucket on the server at url, closed at the end of the
// test.
func dialStore(t *testing.T, url, bucket string, cfg ObjectStoreConfig) *ObjectStore {
	t.Helper()
	s, err := dialObjectStore(context.Background(), url, bucket, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// putRaw writes b as object name, bypassing Save.
func (s *ObjectStore) putRaw(t *testing.T, name string, b []byte) {
	t.Helper()
	if _, err := s.obs.PutBytes(context.Background(), name, b); err != nil {
		t.Fatal(err)
	}
}

func TestObjectStore(t *testing.T) {
	e := natsServer(t)
	s := dialStore(t, e.ClientURL(), "ckpt", ObjectStoreConfig{})
	if s.String() != "objectstore:ckpt" {
		t.Errorf("String = %q", s.String())
	}
	testStore(t, s, s.putRaw)
}

// A deleted object is no checkpoint; saving again brings it back.
func TestObjectStoreDeleted(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	for _, p := range []int32{1, 4} {
		if err := s.Save(ctx, sample(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.obs.Delete(ctx, objectNameAt(4, sample(4).Position)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, 4); !IsNotExist(err) {
		t.Errorf("deleted: Load = %v, want not exist", err)
	}
	if ps, err := s.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{1}) {
		t.Errorf("deleted: Partitions = %v, %v; want [1]", ps, err)
	}
	if err := s.Save(ctx, sample(4)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 4); err != nil || !sameCheckpoint(got, sample(4)) {
		t.Errorf("saved again: Load = %v", err)
	}

	// A deleted object is skipped: the next highest is the checkpoint,
	// and Saves clean up around it.
	at := func(position int64) *Checkpoint {
		c := sample(4)
		c.Position = position
		if err := s.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	at(50000)
	if err := s.obs.Delete(ctx, objectNameAt(4, 50000)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, 4); !IsNotExist(err) {
		t.Errorf("newest deleted, the one before removed by its Save: Load = %v, want not exist", err)
	}
	lower := at(45000)
	if got, err := s.Load(ctx, 4); err != nil || !sameCheckpoint(got, lower) {
		t.Errorf("Save of 45000 under a deleted 50000: Load = position %d, %v; want 45000", pos(got), err)
	}
	if ps, err := s.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{1, 4}) {
		t.Errorf("Save of 45000 under a deleted 50000: Partitions = %v, %v; want [1 4]", ps, err)
	}
	higher := at(60000)
	if got, err := s.Load(ctx, 4); err != nil || !sameCheckpoint(got, higher) {
		t.Errorf("Save of 60000: Load = position %d, %v; want 60000", pos(got), err)
	}
	want := []string{objectNameAt(1, sample(1).Position), objectNameAt(4, 60000)}
	if names := objectNames(t, s); !slices.Equal(names, want) {
		t.Errorf("Save of 60000: objects %v, want %v (the lower ones and the delete marker removed)", names, want)
	}
}

// The last saved checkpoints are there after the server restarts on the
// same store directory.
func TestObjectStoreServerRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := startNATS(t, dir)
	s, err := dialObjectStore(ctx, e.ClientURL(), "ckpt", ObjectStoreConfig{})
	if err != nil {
		e.Shutdown()
		t.Fatal(err)
	}
	big := bigSample(1, 3<<20)
	last := sample(0)
	last.Position = 42077
	for _, c := range []*Checkpoint{sample(0), big, last} {
		if err := s.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	e.Shutdown()

	e = startNATS(t, dir)
	t.Cleanup(e.Shutdown)
	s = dialStore(t, e.ClientURL(), "ckpt", ObjectStoreConfig{})
	if got, err := s.Load(ctx, 0); err != nil || !sameCheckpoint(got, last) {
		t.Errorf("after restart: Load(0) = position %d, %v; want position 42077", pos(got), err)
	}
	if got, err := s.Load(ctx, 1); err != nil || !sameCheckpoint(got, big) {
		t.Errorf("after restart: Load(1): %v", err)
	}
	if ps, err := s.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{0, 1}) {
		t.Errorf("after restart: Partitions = %v, %v", ps, err)
	}
}

// What Save acknowledged is in the server's files at once: a copy of the
// store directory taken while the server runs (what a crash of the server
// process, not of the machine, leaves) holds it.
func TestObjectStoreServerCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := startNATS(t, dir)
	t.Cleanup(e.Shutdown)
	s := dialStore(t, e.ClientURL(), "ckpt", ObjectStoreConfig{})
	big := bigSample(2, 1<<20)
	if err := s.Save(ctx, big); err != nil {
		t.Fatal(err)
	}
	last := sample(2)
	last.Position = 42099
	if err := s.Save(ctx, last); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	e2 := startNATS(t, crashed)
	t.Cleanup(e2.Shutdown)
	s2 := dialStore(t, e2.ClientURL(), "ckpt", ObjectStoreConfig{})
	if got, err := s2.Load(ctx, 2); err != nil || !sameCheckpoint(got, last) {
		t.Errorf("after a crash: Load(2) = position %d, %v; want position 42099", pos(got), err)
	}
}

// A Load while Saves of the same partition go on returns one of the saved
// checkpoints, whole, and does not stall. Saves of the same position
// replace the object: the chunks Load reads may be purged under it, and it
// starts over with the new meta. Saves of ever higher positions put new
// objects and remove the one Load is reading: it lists again and reads the
// new one. With Saves back to back, each taking about as long as a Load, a
// Load may lose that race objectReplacedReads or objectVanishedLoads times
// and give up (errReplaced); with a pause between Saves (a checkpoint
// interval) longer than a Load, every Load succeeds.
func TestObjectStoreLoadDuringSave(t *testing.T) {
	for _, tc := range []struct {
		name      string
		advancing bool
		pause     time.Duration
	}{
		{"same position/back to back", false, 0},
		{"same position/interval", false, 150 * time.Millisecond},
		{"advancing/back to back", true, 0},
		{"advancing/interval", true, 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
			// version returns the checkpoint of the i-th Save.
			version := func(i int64) *Checkpoint {
				c := bigSample(0, []int{1 << 20, 3 << 19}[i%2])
				c.Position = 1
				if tc.advancing {
					c.Position = i + 1
				}
				return c
			}
			// saved reports whether c is what one of the Saves saved.
			saved := func(c *Checkpoint) bool {
				if tc.advancing {
					return c.Position >= 1 && sameCheckpoint(c, version(c.Position-1))
				}
				return sameCheckpoint(c, version(0)) || sameCheckpoint(c, version(1))
			}
			if err := s.Save(ctx, version(0)); err != nil {
				t.Fatal(err)
			}
			var saves atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := int64(1); ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(tc.pause):
					}
					if err := s.Save(ctx, version(i)); err != nil {
						t.Error(err)
						return
					}
					saves.Add(1)
				}
			})
			var slowest time.Duration
			loads, gaveUp := 0, 0
			for deadline := time.Now().Add(20 * time.Second); loads < 10 || saves.Load() < 6; loads++ {
				if time.Now().After(deadline) {
					t.Fatalf("%d loads and %d saves in 20s", loads, saves.Load())
				}
				start := time.Now()
				got, err := s.Load(ctx, 0)
				slowest = max(slowest, time.Since(start))
				switch {
				case errors.Is(err, errReplaced) && tc.pause == 0:
					gaveUp++
				case err != nil:
					t.Errorf("Load during Saves: %v", err)
				case !saved(got):
					t.Errorf("Load during Saves: position %d with other contents", got.Position)
				}
			}
			close(stop)
			wg.Wait()
			t.Logf("%d saves during %d loads; %d loads gave up; slowest load %v", saves.Load(), loads, gaveUp, slowest)
			if slowest > 5*time.Second {
				t.Errorf("slowest Load took %v: stalled", slowest)
			}
			if tc.advancing {
				// Each Save removed the one before.
				if names := objectNames(t, s); len(names) != 1 {
					t.Errorf("after %d advancing Saves: objects %v, want 1", saves.Load()+1, names)
				}
			}
		})
	}
}

// A Save cancelled at any point leaves a whole checkpoint: the previous
// one, the new one, or one of the Saves cancelled before it (a Put the
// server received may be stored after its Save returned the
// cancellation: under load one of position 5, cancelled after 20ms, was
// loaded after the next Save was cancelled), never one of a lower
// position than Load returned before.
func TestObjectStoreCancelledSave(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	prev := bigSample(0, 4<<20)
	prev.Position = 1
	if err := s.Save(ctx, prev); err != nil {
		t.Fatal(err)
	}
	tried := map[int64]*Checkpoint{1: prev}
	for i, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond} {
		next := bigSample(0, 4<<20)
		next.Position = int64(i + 2)
		tried[next.Position] = next
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(after, cancel)
		err := s.Save(cctx, next)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %v: Save = %v, want context.Canceled", after, err)
		}
		got, lerr := s.Load(ctx, 0)
		switch {
		case lerr != nil:
			t.Fatalf("cancelled after %v (Save: %v): Load = %v", after, err, lerr)
		case err == nil && !sameCheckpoint(got, next):
			t.Errorf("cancelled after %v: Save succeeded but Load returns position %d", after, got.Position)
		case tried[got.Position] == nil || !sameCheckpoint(got, tried[got.Position]):
			t.Errorf("cancelled after %v: Load returns position %d, not a checkpoint saved whole", after, got.Position)
		case got.Position < prev.Position:
			t.Errorf("cancelled after %v: Load returns position %d, below the %d it returned before", after, got.Position, prev.Position)
		}
		t.Logf("cancelled after %v: Save %v, Load position %d", after, err, got.Position)
		prev = got
	}
}

// An object whose meta outlived its chunks (a Put that failed after its
// meta was stored) is refused with ErrCorrupt, promptly.
func TestObjectStoreChunksGone(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	if err := s.Save(ctx, bigSample(5, 1<<20)); err != nil {
		t.Fatal(err)
	}
	info, err := s.obs.GetInfo(ctx, objectNameAt(5, sample(5).Position))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject("$O.ckpt.C."+info.NUID)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Load(ctx, 5); !errors.Is(err, ErrCorrupt) || IsNotExist(err) {
		t.Errorf("chunks gone: Load = %v, want ErrCorrupt", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("chunks gone: Load took %v", d)
	}
}

// An existing bucket is used as it is; one that could lose checkpoints is
// refused; a bad name or config is an error.
func TestOpenObjectStore(t *testing.T) {
	ctx := context.Background()
	js := testbroker.JetStream(t, natsServer(t).ClientURL())
	s, err := OpenObjectStore(ctx, js, "ckpt", ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, sample(1)); err != nil {
		t.Fatal(err)
	}
	st, err := s.obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Storage() != jetstream.FileStorage || st.Replicas() != 1 || st.TTL() != 0 {
		t.Errorf("created bucket: storage %v, replicas %d, TTL %v", st.Storage(), st.Replicas(), st.TTL())
	}
	s2, err := OpenObjectStore(ctx, js, "ckpt", ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Load(ctx, 1); err != nil || !sameCheckpoint(got, sample(1)) {
		t.Errorf("reopened: Load(1) = %v", err)
	}
	if err := s2.Close(); err != nil || !js.Conn().IsConnected() {
		t.Errorf("Close of an opened store: %v; the caller's connection must stay open", err)
	}

	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "mem", Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "ttl", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bucket string
		cfg    ObjectStoreConfig
	}{
		{"mem", ObjectStoreConfig{}},
		{"ttl", ObjectStoreConfig{}},
		{"bad.name", ObjectStoreConfig{}},
		{"", ObjectStoreConfig{}},
		{"neg", ObjectStoreConfig{Replicas: -1}},
		{"neg", ObjectStoreConfig{Timeout: -time.Second}},
		{"r3", ObjectStoreConfig{Replicas: 3}}, // a single server has no 3 replicas
	} {
		if _, err := OpenObjectStore(ctx, js, tc.bucket, tc.cfg); err == nil {
			t.Errorf("OpenObjectStore(%q, %+v) succeeded", tc.bucket, tc.cfg)
		} else {
			t.Logf("%q %+v: %v", tc.bucket, tc.cfg, err)
		}
	}
	if _, err := dialObjectStore(ctx, "nats://127.0.0.1:1", "ckpt", ObjectStoreConfig{}); err == nil {
		t.Error("dialObjectStore to a closed port succeeded")
	}
}

// Without a server, Save and Load fail within Timeout, not hang.
func TestObjectStoreTimeout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := startNATS(t, dir)
	s := dialStore(t, e.ClientURL(), "ckpt", ObjectStoreConfig{Timeout: 300 * time.Millisecond})
	if err := s.Save(ctx, sample(0)); err != nil {
		t.Fatal(err)
	}
	e.Shutdown()
	start := time.Now()
	if err := s.Save(ctx, sample(0)); err == nil {
		t.Error("Save without a server succeeded")
	}
	if _, err := s.Load(ctx, 0); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load without a server: %v, want an error other than not exist", err)
	}
	if _, err := s.Partitions(ctx); err == nil {
		t.Error("Partitions without a server succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("three calls without a server took %v", d)
	}
}

// objectNames lists the names of the bucket's objects, deleted ones
// (delete markers) included, sorted.
func objectNames(t *testing.T, s *ObjectStore) []string {
	t.Helper()
	infos, err := s.obs.List(context.Background(), jetstream.ListObjectsShowDeleted())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		name := info.Name
		if info.Deleted {
			name += " (deleted)"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func TestParseObjectName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		partition int32
		position  int64
		at        bool
	}{
		{"partition-0.ckpt", 0, 0, false},
		{"partition-12.ckpt", 12, 0, false},
		{"partition-2147483647.ckpt", math.MaxInt32, 0, false},
		{"partition--3.ckpt", -3, 0, false},
		{"partition-0@0.ckpt", 0, 0, true},
		{"partition-5@-1.ckpt", 5, -1, true},
		{"partition-5@41999.ckpt", 5, 41999, true},
		{"partition-2147483647@9223372036854775807.ckpt", math.MaxInt32, math.MaxInt64, true},
		{"partition--2147483648@-9223372036854775808.ckpt", math.MinInt32, math.MinInt64, true},
	} {
		p, pos, at, ok := parseObjectName(tc.name)
		if !ok || p != tc.partition || pos != tc.position || at != tc.at {
			t.Errorf("parseObjectName(%q) = %d, %d, %v, %v; want %d, %d, %v, true", tc.name, p, pos, at, ok, tc.partition, tc.position, tc.at)
		}
		want := ObjectName(tc.partition)
		if tc.at {
			want = objectNameAt(tc.partition, tc.position)
		}
		if want != tc.name {
			t.Errorf("%q: the name of partition %d position %d is %q", tc.name, tc.partition, tc.position, want)
		}
	}
	for _, name := range []string{
		"", "partition-", "partition-.ckpt", "partition-x.ckpt", "partition-07.ckpt", "partition-+8.ckpt",
		"partition--0.ckpt", "partition- 5.ckpt", "partition-5.ckpt.bak", "partition-5.CKPT", "Partition-5.ckpt",
		"partition-99999999999.ckpt", "partition-2147483648.ckpt", "notes.txt", "5.ckpt", "partition-5",
		"partition-5@07.ckpt", "partition-5@.ckpt", "partition-5@+3.ckpt", "partition-5@1@2.ckpt",
		"partition-5@-0.ckpt", "partition-5@-07.ckpt", "partition-5@ 3.ckpt", "partition-5@3 .ckpt",
		"partition-5@x.ckpt", "partition-5@3.ckpt.bak", "partition-@3.ckpt", "partition-05@3.ckpt",
		"partition-5@@3.ckpt", "partition-5@9223372036854775808.ckpt", "partition-99999999999@1.ckpt",
		"partition-5@0x10.ckpt", "partition-5@1_000.ckpt",
	} {
		if p, pos, at, ok := parseObjectName(name); ok {
			t.Errorf("parseObjectName(%q) = %d, %d, %v, true; want not a checkpoint name", name, p, pos, at)
		}
	}
}

// Each Save puts the object of its position and removes the partition's
// objects of lower positions, its own when it is the lower; the removed
// ones leave nothing behind (no delete marker, no chunks).
func TestObjectStoreLayout(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	save := func(partition int32, position int64, state string) *Checkpoint {
		t.Helper()
		c := sample(partition)
		c.Position, c.State = position, []byte(state)
		if err := s.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	save(1, -1, "empty")
	save(2, 5, "other partition")
	if got, want := objectNames(t, s), []string{"partition-1@-1.ckpt", "partition-2@5.ckpt"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	old, err := s.obs.GetInfo(ctx, objectNameAt(1, -1))
	if err != nil {
		t.Fatal(err)
	}
	newer := save(1, 900, "newer")
	if got, want := objectNames(t, s), []string{"partition-1@900.ckpt", "partition-2@5.ckpt"}; !slices.Equal(got, want) {
		t.Fatalf("after a Save of position 900: objects %v, want %v", got, want)
	}
	if _, err := s.stream.GetLastMsgForSubject(ctx, "$O.ckpt.C."+old.NUID); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("chunks of the removed object: %v, want none", err)
	}
	// A late Save of a lower position: its object goes at once.
	save(1, 400, "zombie")
	if got, want := objectNames(t, s), []string{"partition-1@900.ckpt", "partition-2@5.ckpt"}; !slices.Equal(got, want) {
		t.Errorf("after a late Save of position 400: objects %v, want %v", got, want)
	}
	if got, err := s.Load(ctx, 1); err != nil || !sameCheckpoint(got, newer) {
		t.Errorf("after a late Save of position 400: Load = position %d, %v; want 900", pos(got), err)
	}
	// The same position again: the same object, replaced.
	again := save(1, 900, "again")
	if got, err := s.Load(ctx, 1); err != nil || !sameCheckpoint(got, again) {
		t.Errorf("after a second Save of position 900: Load = %q, %v; want it", state(got), err)
	}
	if got, want := objectNames(t, s), []string{"partition-1@900.ckpt", "partition-2@5.ckpt"}; !slices.Equal(got, want) {
		t.Errorf("after a second Save of position 900: objects %v, want %v", got, want)
	}
	if st, err := s.stream.Info(ctx); err != nil || st.State.Msgs != 2+2 {
		t.Errorf("stream: %+v, %v; want 4 messages (2 metas, 2 chunks)", st.State, err)
	}
}

// Removal (prune) is a compare-and-delete: it leaves an object whose
// position is not below the given one, and one put again under the name
// since the meta it read.
func TestObjectStoreRemove(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	c := sample(3)
	c.Position = 10
	if err := s.Save(ctx, c); err != nil {
		t.Fatal(err)
	}
	name := objectNameAt(3, 10)
	s.remove(ctx, name, 10)
	if _, err := s.Load(ctx, 3); err != nil {
		t.Errorf("after remove below 10: Load = %v", err)
	}
	s.remove(ctx, name, 11)
	if _, err := s.Load(ctx, 3); !IsNotExist(err) {
		t.Errorf("after remove below 11: Load = %v, want not exist", err)
	}
	if names := objectNames(t, s); len(names) != 0 {
		t.Errorf("after remove: objects %v, want none", names)
	}
	// An object other than a checkpoint is never removed.
	s.putRaw(t, "notes.txt", []byte("keep"))
	s.remove(ctx, "notes.txt", math.MaxInt64)
	if names := objectNames(t, s); !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("objects %v, want [notes.txt]", names)
	}
}

// Objects named as earlier builds named them ("partition-N.ckpt") are
// read: their position is their "position" metadata, or below any other.
func TestObjectStoreLegacy(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	putLegacy := func(c *Checkpoint, meta map[string]string) {
		t.Helper()
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: ObjectName(c.Partition), Metadata: meta}, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	at := func(partition int32, position int64, state string) *Checkpoint {
		c := sample(partition)
		c.Position, c.State = position, []byte(state)
		return c
	}

	// With its position: a lower Save does not supersede it, a higher one
	// does and removes it.
	legacy := at(1, 500, "legacy")
	putLegacy(legacy, map[string]string{"position": "500"})
	if got, err := s.Load(ctx, 1); err != nil || !sameCheckpoint(got, legacy) {
		t.Fatalf("legacy alone: Load = %q, %v", state(got), err)
	}
	if err := s.Save(ctx, at(1, 400, "lower")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 1); err != nil || !sameCheckpoint(got, legacy) {
		t.Errorf("legacy of 500 and a Save of 400: Load = %q, %v; want the legacy one", state(got), err)
	}
	if ps, err := s.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{1}) {
		t.Errorf("Partitions = %v, %v; want [1]", ps, err)
	}
	higher := at(1, 600, "higher")
	if err := s.Save(ctx, higher); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 1); err != nil || !sameCheckpoint(got, higher) {
		t.Errorf("legacy of 500 and a Save of 600: Load = %q, %v; want the Save's", state(got), err)
	}
	if names := objectNames(t, s); !slices.Equal(names, []string{"partition-1@600.ckpt"}) {
		t.Errorf("objects %v, want the Save's only", names)
	}

	// At the same position, the position-named object wins.
	putLegacy(at(2, 700, "legacy"), map[string]string{"position": "700"})
	same := at(2, 700, "same")
	if err := s.Save(ctx, same); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 2); err != nil || !sameCheckpoint(got, same) {
		t.Errorf("legacy and a Save of the same position: Load = %q, %v; want the Save's", state(got), err)
	}

	// Without a position (or an odd one): below any Save, even of -1.
	for i, meta := range []map[string]string{nil, {"position": "0500"}, {"position": "x"}} {
		p := int32(3 + i)
		putLegacy(at(p, 500, "legacy"), meta)
		first := at(p, -1, "first")
		if err := s.Save(ctx, first); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx, p); err != nil || !sameCheckpoint(got, first) {
			t.Errorf("legacy with metadata %v and a Save of -1: Load = %q, %v; want the Save's", meta, state(got), err)
		}
		if names := objectNames(t, s); slices.Contains(names, ObjectName(p)) {
			t.Errorf("legacy with metadata %v: not removed: %v", meta, names)
		}
	}
}

// The object of the highest position decides: damaged, it is an error,
// never a fall back to an older checkpoint; a Save of a higher position
// repairs it. An object whose checkpoint is not the one its name says is
// damaged too.
func TestObjectStoreDamagedHighest(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	if err := s.Save(ctx, sample(8)); err != nil {
		t.Fatal(err)
	}
	s.putRaw(t, objectNameAt(8, 50000), []byte("SLCKPT\r\nnot really"))
	if _, err := s.Load(ctx, 8); !errors.Is(err, ErrCorrupt) || IsNotExist(err) {
		t.Errorf("damaged highest: Load = %v, want ErrCorrupt", err)
	}
	if names := objectNames(t, s); len(names) != 2 {
		t.Errorf("a Load that failed removed objects: %v", names)
	}
	c := sample(8)
	c.Position = 50001
	if err := s.Save(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 8); err != nil || !sameCheckpoint(got, c) {
		t.Errorf("after a Save of a higher position: Load = position %d, %v", pos(got), err)
	}
	if names := objectNames(t, s); !slices.Equal(names, []string{objectNameAt(8, 50001)}) {
		t.Errorf("after a Save of a higher position: objects %v", names)
	}

	// Named for another position, or another partition.
	for _, name := range []string{objectNameAt(6, 5), objectNameAt(7, sample(6).Position)} {
		b, err := sample(6).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		s.putRaw(t, name, b)
		p, _, _, _ := parseObjectName(name)
		if _, err := s.Load(ctx, p); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s holding partition 6 position %d: Load = %v, want ErrCorrupt", name, sample(6).Position, err)
		}
	}
}

// Processes (stores on connections of their own) saving one partition at
// once, each its positions in its own order: the highest stays, alone.
func TestObjectStoreConcurrentProcesses(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t).ClientURL()
	const writers, each = 4, 8
	stores := make([]*ObjectStore, writers)
	for w := range stores {
		stores[w] = dialStore(t, url, "ckpt", ObjectStoreConfig{})
	}
	var wg sync.WaitGroup
	for w, s := range stores {
		wg.Go(func() {
			for k := range each {
				c := bigSample(9, 200<<10)
				c.Position = int64(((k*3+w*5)%each)*writers + w)
				c.State[0] = byte(c.Position)
				if err := s.Save(ctx, c); err != nil {
					t.Error(err)
				}
				if _, err := s.Load(ctx, 9); err != nil {
					t.Errorf("Load during Saves: %v", err)
				}
			}
		})
	}
	wg.Wait()
	const top = writers*each - 1
	for _, s := range stores {
		if got, err := s.Load(ctx, 9); err != nil || got.Position != top || got.State[0] != top {
			t.Fatalf("after %d concurrent processes: Load = position %d, %v; want %d", writers, pos(got), err, top)
		}
	}
	if names := objectNames(t, stores[0]); !slices.Equal(names, []string{objectNameAt(9, top)}) {
		t.Errorf("after %d concurrent processes: objects %v, want the highest only", writers, names)
	}
}

// state is c's state as a string, "<nil>" for nil.
func state(c *Checkpoint) string {
	if c == nil {
		return "<nil>"
	}
	return string(c.State)
}

// One owner per partition of a bucket: a lease another process (another
// connection) waits for, naming its holder, that a release gives back at
// once and a process that lost the server gives back when it expires; the
// process that lost it can save that partition no more.
func TestObjectStoreOwn(t *testing.T) {
	defer func(renew func(time.Duration) time.Duration) { leaseRenew = renew }(leaseRenew)
	const leaseTTL = MinLease
	ctx := context.Background()
	url := natsServer(t).ClientURL()
	a := dialStore(t, url, "ckpt", ObjectStoreConfig{Lease: leaseTTL})
	b := dialStore(t, url, "ckpt", ObjectStoreConfig{Lease: leaseTTL})
	wait := func(s *ObjectStore, partition int32, holder string, d time.Duration) (func(), error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return s.Own(ctx, partition, holder)
	}
	release, err := a.Own(ctx, 0, "pid 1 on here since then")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = wait(b, 0, "pid 2", 300*time.Millisecond)
	var held *HeldError
	if !errors.As(err, &held) || held.Partition != 0 || held.Holder != "pid 1 on here since then" || held.Store != "objectstore:ckpt" {
		t.Fatalf("Own of a held partition: %v, want a HeldError naming pid 1", err)
	}
	// At least the wait; the upper bound only catches a hang (a loaded
	// machine may take long over the calls it makes).
	if took := time.Since(start); took < 300*time.Millisecond || took > 30*time.Second {
		t.Errorf("gave up after %v, want the 300ms wait", took)
	}
	// Renewed past its lifetime: still held after 1.5 TTL.
	time.Sleep(3 * leaseTTL / 2)
	if _, err := wait(b, 0, "pid 2", 100*time.Millisecond); !errors.As(err, &held) {
		t.Fatalf("Own after 1.5 lease lifetimes of a renewed lease: %v, want a HeldError", err)
	}
	other, err := wait(b, 1, "pid 2", time.Second)
	if err != nil {
		t.Fatalf("Own of another partition: %v", err)
	}
	other()
	release()
	release() // twice is once
	// The release gave the lease back: its key is gone, so the next Own
	// need not wait for it to expire.
	if _, err := a.kv.Get(ctx, ownerKey(0)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the lease's key after the release: %v, want it deleted", err)
	}
	relB, err := wait(b, 0, "pid 2", time.Second)
	if err != nil {
		t.Fatalf("Own after the release: %v", err)
	}
	if err := b.Save(ctx, sample(0)); err != nil {
		t.Fatalf("Save by the owner: %v", err)
	}
	// The owner loses the server (its connection closed): its lease
	// expires a lifetime after its last renewal, a third process takes
	// it, and the old owner's Saves of the partition fail.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := dialStore(t, url, "ckpt", ObjectStoreConfig{Lease: leaseTTL})
	start = time.Now()
	relC, err := wait(c, 0, "pid 3", 5*time.Second)
	if err != nil {
		t.Fatalf("Own of a lease whose holder lost the server: %v", err)
	}
	defer relC()
	if took := time.Since(start); took < leaseTTL/2 {
		t.Errorf("a dead holder's lease taken after %v, want about its lifetime %v", took, leaseTTL)
	}
	time.Sleep(2 * leaseRenew(leaseTTL))
	if err := b.Save(ctx, sample(0)); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Save after the lease was lost: %v, want ErrNotOwned", err)
	}
	// A holder paused past its lease (no renewal runs: its renewal period
	// is an hour) cannot save once the lease's time is out, before any
	// renewal has failed, and a waiter takes the lease over.
	renew := leaseRenew
	leaseRenew = func(time.Duration) time.Duration { return time.Hour }
	relP, err := a.Own(ctx, 5, "pid 5")
	if err != nil {
		t.Fatal(err)
	}
	leaseRenew = renew
	if err := a.Save(ctx, sample(5)); err != nil {
		t.Fatalf("Save within the lease: %v", err)
	}
	relW, err := wait(c, 5, "pid 6", 5*time.Second)
	if err != nil {
		t.Fatalf("Own of a lease its paused holder does not renew: %v", err)
	}
	if err := a.Save(ctx, sample(5)); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Save by a holder paused past its lease: %v, want ErrNotOwned", err)
	}
	relW()
	relP()
	relB() // a lost lease's release deletes nothing of the new owner's
	if _, err := wait(a, 0, "pid 1", 200*time.Millisecond); !errors.As(err, &held) || held.Holder != "pid 3" {
		t.Fatalf("Own held by pid 3 after the old owner's release: %v, want it named", err)
	}
}

// A waiter waits out the lifetime its holder's lease declares, not its
// own shorter one: a process configured with a short lease never takes a
// partition from a live holder of a longer one. A lease of a process
// that declares none (an earlier version's) lasts MaxLease, and a lease
// out of bounds is refused.
func TestObjectStoreLeaseDeclared(t *testing.T) {
	ctx := context.Background()
	url := natsServer(t).ClientURL()
	long, err := dialObjectStore(ctx, url, "ckpt", ObjectStoreConfig{Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	short := dialStore(t, url, "ckpt", ObjectStoreConfig{Lease: MinLease})
	if _, err := long.Own(ctx, 0, "pid 1"); err != nil {
		t.Fatal(err)
	}
	// The holder loses the server: its last renewal is its lease's start.
	if err := long.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	release, err := short.Own(wctx, 0, "pid 2")
	if err != nil {
		t.Fatalf("Own of a dead holder's lease: %v", err)
	}
	defer release()
	// The holder's lease may have been renewed up to a fifth of its
	// lifetime (600ms) before the close, so the waiter can take it
	// 2.4s after it started to wait; with its own 1s it would at 1s.
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("a 3s lease taken by a waiter of a 1s lease after %v, want at least the holder's lifetime less a renewal period", took)
	}

	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"pid 1 on h since t\n3f2a", MaxLease}, // no lifetime: before leases could be set
		{"pid 1 on h since t\n3f2a\n2s", 2 * time.Second},
		{"pid 1 on h since t\n3f2a\n1h", MaxLease},
		{"pid 1 on h since t\n3f2a\n10ms", MaxLease},
		{"pid 1 on h since t\n3f2a\nsoon", MaxLease},
	} {
		if got := lifetime([]byte(tc.value)); got != tc.want {
			t.Errorf("lifetime(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
	for _, lease := range []time.Duration{MinLease - 1, MaxLease + 1, -time.Second} {
		s, err := dialObjectStore(ctx, url, "ckpt", ObjectStoreConfig{Lease: lease})
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "lease") {
			t.Errorf("a lease of %v: %v, want an error naming the lease", lease, err)
		}
	}
}
