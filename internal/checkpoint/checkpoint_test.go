package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func sample(partition int32) *Checkpoint {
	state := make([]byte, 5000)
	for i := range state {
		state[i] = byte(i * 7)
	}
	return &Checkpoint{
		Created:     time.Date(2026, 11, 22, 10, 0, 0, 123, time.UTC),
		Fingerprint: sha256.Sum256([]byte("learners: [pct]")),
		Source:      "kafka:events",
		Partition:   partition,
		Position:    41999,
		State:       state,
		Report:      []byte(`{"events":42000}`),
		Origin:      "kafka cluster kfake topic events",
		Consumer:    "kafka group gx",
	}
}

func TestRoundTrip(t *testing.T) {
	c := sample(3)
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Checkpoint
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(c.Created) || got.Fingerprint != c.Fingerprint || got.Source != c.Source ||
		got.Partition != 3 || got.Position != 41999 || !bytes.Equal(got.State, c.State) || !bytes.Equal(got.Report, c.Report) ||
		got.Origin != c.Origin || got.Consumer != "kafka group gx" || got.Format != FormatVersion {
		t.Fatalf("round trip: got %+v", got)
	}
	// The decoded checkpoint owns its bytes.
	b[headerLen+40] ^= 0xff
	if !bytes.Equal(got.State, c.State) {
		t.Error("decoded state aliases the input")
	}
	// Deterministic encoding.
	b2, _ := got.MarshalBinary()
	b3, _ := c.MarshalBinary()
	if !bytes.Equal(b2, b3) {
		t.Error("re-encoding differs")
	}
}

// Every damaged file is refused, never read as something else: each single
// flipped byte, each truncation, appended bytes, another version.
func TestRefusesDamage(t *testing.T) {
	good, err := sample(0).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		if i >= len(magic) && i < len(magic)+4 {
			continue // the version: below
		}
		b := bytes.Clone(good)
		b[i] ^= 0x5a
		var c Checkpoint
		if err := c.UnmarshalBinary(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(good) {
		var c Checkpoint
		if err := c.UnmarshalBinary(good[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
	var c Checkpoint
	if err := c.UnmarshalBinary(append(bytes.Clone(good), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("one byte appended: %v, want ErrCorrupt", err)
	}
	b := bytes.Clone(good)
	b[len(magic)] = FormatVersion + 1
	var ve *VersionError
	if err := c.UnmarshalBinary(b); !errors.As(err, &ve) || ve.Version != FormatVersion+1 {
		t.Errorf("version %d: %v, want a VersionError", FormatVersion+1, err)
	}
}

// olderFormat returns c encoded in format version v (1 or 2), built by
// hand from this version's encoding of c, whose fields after v's last one
// (origin, consumer) must be empty: each is a uint64 length of 0, dropped.
func olderFormat(t *testing.T, c *Checkpoint, v uint32) []byte {
	t.Helper()
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Drop the empty fields and the checksum; set the version and the
	// body length; checksum again.
	b = b[:len(b)-sha256.Size-8*int(FormatVersion-v)]
	binary.LittleEndian.PutUint32(b[len(magic):], v)
	binary.LittleEndian.PutUint64(b[len(magic)+4:], uint64(len(b)-headerLen))
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// TestVersion2 loads a checkpoint of format version 2, which has no
// consumer: every field but Consumer comes back, and Format says 2.
func TestVersion2(t *testing.T) {
	c := sample(5)
	c.Consumer = ""
	var got Checkpoint
	if err := got.UnmarshalBinary(olderFormat(t, c, 2)); err != nil {
		t.Fatal(err)
	}
	c.Format = 2
	if !reflect.DeepEqual(&got, c) {
		t.Errorf("version 2 decoded as source %q partition %d position %d origin %q consumer %q format %d, want %q %d %d %q \"\" 2",
			got.Source, got.Partition, got.Position, got.Origin, got.Consumer, got.Format, c.Source, c.Partition, c.Position, c.Origin)
	}
}

// TestVersion1 loads a checkpoint of format version 1, which has no
// origin: every field but Origin (and Consumer) comes back.
func TestVersion1(t *testing.T) {
	c := sample(4)
	c.Origin, c.Consumer = "", ""
	b := olderFormat(t, c, 1)
	var got Checkpoint
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	c.Format = 1
	if !reflect.DeepEqual(&got, c) {
		t.Errorf("version 1 decoded as source %q partition %d position %d origin %q format %d (%d state bytes), want %q %d %d %q 1 (%d)",
			got.Source, got.Partition, got.Position, got.Origin, got.Format, len(got.State), c.Source, c.Partition, c.Position, c.Origin, len(c.State))
	}
	h, err := readHead(bytes.NewReader(b))
	if err != nil || h.Position != c.Position || h.Partition != c.Partition {
		t.Errorf("readHead of version 1: %+v, %v", h, err)
	}
}

func TestDir(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state")
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(ctx, 0); !IsNotExist(err) {
		t.Fatalf("empty dir: Load = %v, want not exist", err)
	}
	if ps, err := d.Partitions(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("empty dir: Partitions = %v, %v", ps, err)
	}
	for _, p := range []int32{10, 2, 0} {
		if err := d.Save(ctx, sample(p)); err != nil {
			t.Fatal(err)
		}
	}
	c := sample(2)
	c.Position = 50000
	if err := d.Save(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := d.Load(ctx, 2)
	if err != nil || got.Position != 50000 {
		t.Fatalf("Load(2) = %+v, %v; want position 50000", got, err)
	}
	if ps, err := d.Partitions(ctx); err != nil || !slices.Equal(ps, []int32{0, 2, 10}) {
		t.Fatalf("Partitions = %v, %v; want [0 2 10]", ps, err)
	}
	// No temporary file is left behind: the checkpoints and their lock
	// files.
	entries, _ := os.ReadDir(path)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".partition-0.lock", ".partition-10.lock", ".partition-2.lock", "partition-0.ckpt", "partition-10.ckpt", "partition-2.ckpt"}; !slices.Equal(names, want) {
		t.Errorf("directory holds %v, want %v", names, want)
	}
	// A damaged file is refused with its path, not taken as missing.
	if err := os.WriteFile(d.File(0), []byte("SLCKPT\r\nnot really"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(ctx, 0); !errors.Is(err, ErrCorrupt) || IsNotExist(err) {
		t.Errorf("damaged file: %v, want ErrCorrupt", err)
	}
}

// An unwritable directory fails at open; one that becomes unwritable
// fails Save and keeps the previous checkpoint.
func TestDirUnwritable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permissions")
	}
	ctx := context.Background()
	path := t.TempDir()
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Save(ctx, sample(1)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(path, 0o700) })
	if f, err := os.CreateTemp(path, "x"); err == nil {
		f.Close()
		t.Skip("running as a user that ignores directory permissions (root)")
	}
	c := sample(1)
	c.Position = 99
	if err := d.Save(ctx, c); err == nil {
		t.Fatal("Save into a read-only directory succeeded")
	}
	if got, err := d.Load(ctx, 1); err != nil || got.Position != 41999 {
		t.Errorf("after a failed Save: %+v, %v; want the previous checkpoint", got, err)
	}
	if _, err := OpenDir(filepath.Join(path, "sub")); err == nil {
		t.Error("OpenDir under a read-only directory succeeded")
	}
}

// FuzzUnmarshal: no input panics, and whatever decodes re-encodes to the
// same bytes.
func FuzzUnmarshal(f *testing.F) {
	good, _ := sample(0).MarshalBinary()
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Checkpoint
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Fatal("accepted bytes re-encode differently")
		}
	})
}

// TestChecksumErrorWholeDigests: a checksum error prints both SHA-256s
// whole (64 hex digits each), the stored one and the computed one, for a
// checkpoint and a model file: prefixes of two digests can read alike.
func TestChecksumErrorWholeDigests(t *testing.T) {
	ck, err := sample(0).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mf, err := ModelOf(sample(0)).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for name, good := range map[string][]byte{"checkpoint": ck, "model file": mf} {
		b := bytes.Clone(good)
		b[headerLen+3] ^= 1 // in the body: the checksum fails
		stored := b[len(b)-sha256.Size:]
		computed := sha256.Sum256(b[:len(b)-sha256.Size])
		var err error
		if name == "checkpoint" {
			err = new(Checkpoint).UnmarshalBinary(b)
		} else {
			err = new(Model).UnmarshalBinary(b)
		}
		want := fmt.Sprintf("SHA-256 mismatch (stored %x, computed %x)", stored, computed)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", name, err, want)
		}
	}
}
