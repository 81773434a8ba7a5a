package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawWriter stores b under name in a Store's backend, bypassing Save: a
// file in a Dir, an object in an ObjectStore.
type rawWriter func(t *testing.T, name string, b []byte)

// sameCheckpoint reports whether a and b hold the same checkpoint.
func sameCheckpoint(a, b *Checkpoint) bool {
	return a.Created.Equal(b.Created) && a.Fingerprint == b.Fingerprint && a.Source == b.Source &&
		a.Partition == b.Partition && a.Position == b.Position &&
		bytes.Equal(a.State, b.State) && bytes.Equal(a.Report, b.Report)
}

// bigSample is sample(partition) with a state of n bytes.
func bigSample(partition int32, n int) *Checkpoint {
	c := sample(partition)
	c.State = make([]byte, n)
	for i := range c.State {
		c.State[i] = byte(i*31 + i>>13)
	}
	return c
}

// testStore is the contract every Store keeps; s must be empty.
func testStore(t *testing.T, s Store, writeRaw rawWriter) {
	ctx := context.Background()
	if s.String() == "" {
		t.Error("String is empty")
	}
	if _, err := s.Load(ctx, 0); !IsNotExist(err) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty store: Load = %v, want not exist", err)
	}
	if ps, err := s.Partitions(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("empty store: Partitions = %v, %v", ps, err)
	}

	// Save, replace, Load, Partitions.
	for _, p := range []int32{10, 2, 0} {
		if err := s.Save(ctx, sample(p)); err != nil {
			t.Fatal(err)
		}
	}
	c := sample(2)
	c.Position = 50000
	c.State = c.State[:100]
	if err := s.Save(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 2); err != nil || !sameCheckpoint(got, c) {
		t.Fatalf("Load(2) after replace = %+v, %v; want position 50000", got, err)
	}
	if got, err := s.Load(ctx, 10); err != nil || !sameCheckpoint(got, sample(10)) {
		t.Fatalf("Load(10) = %+v, %v", got, err)
	}
	if ps, err := s.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{0, 2, 10}) {
		t.Fatalf("Partitions = %v, %v; want [0 2 10]", ps, err)
	}
	if _, err := s.Load(ctx, 1); !IsNotExist(err) {
		t.Errorf("Load(1) = %v, want not exist", err)
	}

	// Large checkpoints: 20 MiB (JetStream chunks it into 160 messages).
	big := bigSample(7, 20<<20)
	if err := s.Save(ctx, big); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 7); err != nil || !sameCheckpoint(got, big) {
		t.Fatalf("Load of a 20 MiB checkpoint: %v (equal: %v)", err, got != nil && sameCheckpoint(got, big))
	}
	// Replaced by a small one.
	if err := s.Save(ctx, sample(7)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 7); err != nil || !sameCheckpoint(got, sample(7)) {
		t.Fatalf("Load(7) after replacing the large one: %v", err)
	}

	// Other names are not partitions.
	for _, name := range []string{"partition-x.ckpt", "partition-07.ckpt", "partition-+8.ckpt",
		"partition-5.ckpt.bak", "partition-99999999999.ckpt", "notes.txt"} {
		writeRaw(t, name, []byte("not a checkpoint"))
	}
	if ps, err := s.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{0, 2, 7, 10}) {
		t.Fatalf("Partitions with other names around = %v, %v; want [0 2 7 10]", ps, err)
	}

	// Damage is refused, never taken for a missing checkpoint.
	good, err := sample(3).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"text", []byte("SLCKPT\r\nnot really")},
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"flipped", append(append([]byte(nil), good[:100]...), append([]byte{good[100] ^ 1}, good[101:]...)...)},
	} {
		writeRaw(t, ObjectName(3), tc.b)
		if _, err := s.Load(ctx, 3); !errors.Is(err, ErrCorrupt) || IsNotExist(err) {
			t.Errorf("%s object: Load = %v, want ErrCorrupt", tc.name, err)
		}
	}
	next := bytes.Clone(good)
	next[len(magic)] = FormatVersion + 1
	writeRaw(t, ObjectName(3), next)
	var ve *VersionError
	if _, err := s.Load(ctx, 3); !errors.As(err, &ve) || ve.Version != FormatVersion+1 {
		t.Errorf("version %d: Load = %v, want a VersionError", FormatVersion+1, err)
	}
	// Saving over a damaged checkpoint repairs it.
	if err := s.Save(ctx, sample(3)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 3); err != nil || !sameCheckpoint(got, sample(3)) {
		t.Fatalf("Load(3) after Save over damage: %v", err)
	}

	// Concurrent Saves of different partitions.
	const n = 12
	var wg sync.WaitGroup
	for i := range int32(n) {
		wg.Go(func() {
			for round := range int64(3) {
				c := sample(100 + i)
				c.Position = round
				if err := s.Save(ctx, c); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range int32(n) {
		if got, err := s.Load(ctx, 100+i); err != nil || got.Partition != 100+i || got.Position != 2 {
			t.Errorf("after concurrent Saves: Load(%d) = %+v, %v; want the last one", 100+i, got, err)
		}
	}
	ps, err := s.Partitions(ctx)
	if err != nil || len(ps) != 5+n {
		t.Fatalf("after concurrent Saves: Partitions = %v, %v", ps, err)
	}

	// A cancelled context: nothing happens.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c = sample(2)
	c.Position = 1
	if err := s.Save(cctx, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Save with a cancelled context: %v", err)
	}
	if _, err := s.Load(cctx, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context: %v", err)
	}
	if _, err := s.Partitions(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Partitions with a cancelled context: %v", err)
	}
	if got, err := s.Load(ctx, 2); err != nil || got.Position != 50000 {
		t.Errorf("after a cancelled Save: Load(2) = %+v, %v; want position 50000", got, err)
	}

	testStoreMonotonic(t, s)
	testStoreDiscard(t, s)
}

// testStoreMonotonic: a Save never puts a checkpoint over one of a higher
// position. A process that lost a partition while its save was in flight
// (paused, say) can finish that save after the new owner saved further;
// the newer checkpoint must stay, or the records between the two would be
// missing from the model while the group's commit says they were learned.
func testStoreMonotonic(t *testing.T, s Store) {
	ctx := context.Background()
	newer := sample(20)
	newer.Position = 900
	older := sample(20)
	older.Position = 400
	older.State = []byte("zombie")
	if err := s.Save(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, older); err != nil {
		t.Fatalf("Save of an older checkpoint: %v, want nil (nothing to do)", err)
	}
	if got, err := s.Load(ctx, 20); err != nil || !sameCheckpoint(got, newer) {
		t.Fatalf("after a late Save of position 400 over 900: Load = position %d, %v; want the one of 900", pos(got), err)
	}
	// The same position again: the same records, so the same state; the
	// later Save wins.
	again := sample(20)
	again.Position = 900
	again.Report = []byte(`{"events":901}`)
	if err := s.Save(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 20); err != nil || !sameCheckpoint(got, again) {
		t.Fatalf("after a second Save of position 900: Load = %+v, %v; want it", got, err)
	}
	if ps, err := s.Partitions(ctx); err != nil || slices.Index(ps, 20) < 0 || len(slices.Compact(slices.Clone(ps))) != len(ps) {
		t.Fatalf("Partitions = %v, %v; want 20 once", ps, err)
	}

	// Several writers of one partition at once, each saving its positions
	// in its own order: the highest position ever saved is what stays.
	const writers, each = 4, 6
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for k := range each {
				c := sample(21)
				c.Position = int64(((k*5+w*3)%each)*writers + w) // a permutation per writer
				c.State = []byte{byte(c.Position)}
				if err := s.Save(ctx, c); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	const top = writers*each - 1
	if got, err := s.Load(ctx, 21); err != nil || got.Position != top || !bytes.Equal(got.State, []byte{top}) {
		t.Fatalf("after %d concurrent writers: Load(21) = position %d, %v; want %d", writers, pos(got), err, top)
	}
}

// testStoreDiscard: Discard moves a partition's checkpoint where Load
// and Partitions do not find it, so that a Save of a lower position (a
// model reset by its operator) is what Load returns next; a checkpoint of
// another stream (origin) does not keep a Save of a lower position out.
func testStoreDiscard(t *testing.T, s Store) {
	ctx := context.Background()
	old := sample(30)
	old.Position = 800
	if err := s.Save(ctx, old); err != nil {
		t.Fatal(err)
	}
	where, err := s.Discard(ctx, 30)
	if err != nil || where == "" {
		t.Fatalf("Discard = %q, %v; want where the checkpoint went", where, err)
	}
	if _, err := s.Load(ctx, 30); !IsNotExist(err) {
		t.Fatalf("Load after Discard: %v, want not found", err)
	}
	if ps, err := s.Partitions(ctx); err != nil || slices.Contains(ps, 30) {
		t.Fatalf("Partitions after Discard = %v, %v; want no 30", ps, err)
	}
	if where, err := s.Discard(ctx, 30); err != nil || where != "" {
		t.Errorf("Discard of nothing = %q, %v; want \"\", nil", where, err)
	}
	fresh := sample(30)
	fresh.Position = 200
	if err := s.Save(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, 30); err != nil || !sameCheckpoint(got, fresh) {
		t.Fatalf("Load after Discard and a Save of 200 = position %d, %v; want 200", pos(got), err)
	}
}

// pos is c's position, or -2 for nil.
func pos(c *Checkpoint) int64 {
	if c == nil {
		return -2
	}
	return c.Position
}

func TestDirStore(t *testing.T) {
	path := t.TempDir()
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, d, func(t *testing.T, name string, b []byte) {
		if err := os.WriteFile(filepath.Join(path, name), b, 0o640); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDirSaveWaitsForLock: a Save waits while another holder (a paused
// process) has the partition's lock, gives up when its context ends, and
// goes through once the lock is released.
func TestDirSaveWaitsForLock(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(context.Background(), d.lockFile(4))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := d.Save(ctx, sample(4)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Save while the lock is held: %v, want DeadlineExceeded", err)
	}
	if _, err := d.Load(context.Background(), 4); !IsNotExist(err) {
		t.Fatalf("Load after the refused Save: %v, want not exist", err)
	}
	done := make(chan error)
	go func() { done <- d.Save(context.Background(), sample(4)) }()
	time.Sleep(20 * time.Millisecond)
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := d.Load(context.Background(), 4); err != nil || !sameCheckpoint(got, sample(4)) {
		t.Fatalf("Load after the lock was released: %v", err)
	}
	if ps, err := d.Partitions(context.Background()); err != nil || !slices.Equal(ps, []int32{4}) {
		t.Fatalf("Partitions = %v, %v; the lock file is not a partition", ps, err)
	}
}

// TestReadHead: the head of a checkpoint gives its fields without the
// rest; damage in the head is ErrCorrupt, another version a VersionError.
func TestReadHead(t *testing.T) {
	c := sample(9)
	c.Source = strings.Repeat("s", 1000)
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	head, err := readHead(bytes.NewReader(b))
	if err != nil || head.Position != c.Position || head.Partition != 9 || head.Source != c.Source ||
		head.Fingerprint != c.Fingerprint || !head.Created.Equal(c.Created) {
		t.Fatalf("readHead = %+v, %v", head, err)
	}
	for n := 0; n < headerLen+8+32+8+1000+4+8; n += 7 {
		if _, err := readHead(bytes.NewReader(b[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("readHead of %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
	long := bytes.Clone(b)
	binary.LittleEndian.PutUint64(long[headerLen+8+32:], maxSource+1)
	if _, err := readHead(bytes.NewReader(long)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("readHead with a source of %d bytes: %v, want ErrCorrupt", maxSource+1, err)
	}
	next := bytes.Clone(b)
	next[len(magic)] = FormatVersion + 1
	var ve *VersionError
	if _, err := readHead(bytes.NewReader(next)); !errors.As(err, &ve) {
		t.Errorf("readHead of version %d: %v, want a VersionError", FormatVersion+1, err)
	}
}

// TestDirSaveOverOtherOrigin: a stored checkpoint of a higher position
// but of another stream, or another partition's (copied over by hand),
// does not keep a Save out: its position means nothing for this one.
func TestDirSaveOverOtherOrigin(t *testing.T) {
	ctx := context.Background()
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, foreign := range []func(c *Checkpoint){
		func(c *Checkpoint) { c.Origin = "jetstream stream EVENTS created 2026-01-01T00:00:00Z" },
		func(c *Checkpoint) { c.Partition = 6 },
	} {
		old := sample(5)
		old.Position = 800
		foreign(old)
		b, err := old.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.File(5), b, 0o640); err != nil {
			t.Fatal(err)
		}
		c := sample(5)
		c.Position = 200
		if err := d.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Load(ctx, 5); err != nil || !sameCheckpoint(got, c) {
			t.Errorf("Save of 200 over a foreign checkpoint of 800: Load = position %d, %v; want 200", pos(got), err)
		}
	}
}
