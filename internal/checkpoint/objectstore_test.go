package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamlearn/streamlearn/internal/connectors"
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

// dialStore opens bucket on the server at url, closed at the end of the
// test.
func dialStore(t *testing.T, url, bucket string, cfg ObjectStoreConfig) *ObjectStore {
	t.Helper()
	s, err := DialObjectStore(context.Background(), connectors.NATSConfig{URL: url}, bucket, cfg)
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
	if err := s.obs.Delete(ctx, ObjectName(4)); err != nil {
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
}

// The last saved checkpoints are there after the server restarts on the
// same store directory.
func TestObjectStoreServerRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := startNATS(t, dir)
	s, err := DialObjectStore(ctx, connectors.NATSConfig{URL: e.ClientURL()}, "ckpt", ObjectStoreConfig{})
	if err != nil {
		e.Shutdown()
		t.Fatal(err)
	}
	big := bigSample(1, 3<<20)
	last := sample(0)
	last.Position = 77
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
		t.Errorf("after restart: Load(0) = %+v, %v; want position 77", got, err)
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
	last.Position = 99
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
		t.Errorf("after a crash: Load(2) = %+v, %v; want position 99", got, err)
	}
}

// A Load while Saves replace the same partition returns one of the saved
// checkpoints, whole, and does not stall: the chunks it reads may be
// purged under it, and it starts over with the new meta. With Saves back
// to back, each taking about as long as a Load, a Load may lose that race
// objectReplacedReads times and give up (errReplaced); with a pause
// between Saves (a checkpoint interval) longer than a Load, every Load
// succeeds.
func TestObjectStoreLoadDuringSave(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause time.Duration
	}{{"back to back", 0}, {"interval", 150 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
			versions := []*Checkpoint{bigSample(0, 1<<20), bigSample(0, 3<<19)}
			versions[0].Position, versions[1].Position = 1, 2
			if err := s.Save(ctx, versions[0]); err != nil {
				t.Fatal(err)
			}
			var saves atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 1; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(tc.pause):
					}
					if err := s.Save(ctx, versions[i%2]); err != nil {
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
				case !sameCheckpoint(got, versions[got.Position-1]):
					t.Errorf("Load during Saves: position %d with other contents", got.Position)
				}
			}
			close(stop)
			wg.Wait()
			t.Logf("%d saves during %d loads; %d loads gave up; slowest load %v", saves.Load(), loads, gaveUp, slowest)
			if slowest > 5*time.Second {
				t.Errorf("slowest Load took %v: stalled", slowest)
			}
		})
	}
}

// A Save cancelled at any point leaves the previous checkpoint or the new
// one, whole.
func TestObjectStoreCancelledSave(t *testing.T) {
	ctx := context.Background()
	s := dialStore(t, natsServer(t).ClientURL(), "ckpt", ObjectStoreConfig{})
	prev := bigSample(0, 4<<20)
	prev.Position = 1
	if err := s.Save(ctx, prev); err != nil {
		t.Fatal(err)
	}
	for i, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond} {
		next := bigSample(0, 4<<20)
		next.Position = int64(i + 2)
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
		case !sameCheckpoint(got, prev) && !sameCheckpoint(got, next):
			t.Errorf("cancelled after %v: Load returns position %d, neither the previous nor the new checkpoint", after, got.Position)
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
	info, err := s.obs.GetInfo(ctx, ObjectName(5))
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
	e := natsServer(t)
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
	if err := s2.Close(); err != nil || !nc.IsConnected() {
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
	if _, err := DialObjectStore(ctx, connectors.NATSConfig{URL: "nats://127.0.0.1:1"}, "ckpt", ObjectStoreConfig{}); err == nil {
		t.Error("DialObjectStore to a closed port succeeded")
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
