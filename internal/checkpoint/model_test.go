package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A model file round-trips, is known by the SHA-256 of its bytes, and is
// refused whole when truncated, appended to, flipped, of another version
// or a checkpoint.
func TestModelFile(t *testing.T) {
	c := &Checkpoint{Created: time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC), Fingerprint: [32]byte{1, 2, 3},
		Source: "kafka:events", Partition: 2, Position: 41, State: []byte("state"), Report: []byte(`{"events":42}`)}
	m := ModelOf(c)
	m.Config = []byte("learners: [{name: pct, algorithm: perceptron}]\n")
	if m.From != "checkpoint of kafka:events partition 2 at position 41, taken 2026-11-26T08:00:00Z" || m.Fingerprint != c.Fingerprint {
		t.Fatalf("ModelOf: %+v", m)
	}
	path := filepath.Join(t.TempDir(), "model.slm")
	sum, err := WriteModel(path, m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum != sha256.Sum256(b) {
		t.Error("WriteModel's SHA-256 is not the file's")
	}
	got, gotSum, err := ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotSum != sum || got.From != m.From || got.Fingerprint != m.Fingerprint || !bytes.Equal(got.State, m.State) ||
		!bytes.Equal(got.Report, m.Report) || !got.Created.Equal(m.Created) || !bytes.Equal(got.Config, m.Config) || got.Format != 2 {
		t.Errorf("read back %+v, want %+v", got, m)
	}
	ckpt, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(b)
	flipped[len(b)/2] ^= 0x10
	version := bytes.Clone(b)
	version[len(modelMagic)] = 3
	for _, tc := range []struct {
		name string
		b    []byte
		want string
		corr bool
	}{
		{"empty", nil, "shorter than any model file", true},
		{"truncated", b[:len(b)-1], "truncated or appended to", true},
		{"appended", append(bytes.Clone(b), 0), "truncated or appended to", true},
		{"flipped", flipped, "SHA-256 mismatch", true},
		{"version", version, "model file format version 3, this build reads versions 1 to 2", false},
		{"checkpoint", ckpt, "a checkpoint, not a model file", false},
		{"other", bytes.Repeat([]byte("x"), 80), "not a streamlearn model file", true},
	} {
		var m Model
		err := m.UnmarshalBinary(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrModelCorrupt) != tc.corr {
			t.Errorf("%s: %v, want %q (corrupt %v)", tc.name, err, tc.want, tc.corr)
		}
	}
	// A file of format version 1, written before the configuration was
	// (the bytes pinned: the layout of the builds that wrote it), reads
	// without one.
	old := *m
	old.Config = nil
	v1, err := old.marshal(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(v1)); got != "fc6c3978c5adbecc97f0c672f70678c592b5dc66ea02e2b38929f339c03dd83c" {
		t.Errorf("a version 1 file's SHA-256 %s", got)
	}
	var back1 Model
	if err := back1.UnmarshalBinary(v1); err != nil || back1.Format != 1 || back1.Config != nil || !bytes.Equal(back1.State, m.State) || back1.From != m.From {
		t.Errorf("a version 1 file read back: %+v, %v", back1, err)
	}
	if _, err := m.marshal(1); err == nil {
		t.Error("a configuration written in version 1")
	}
	if _, _, err := ReadModel(filepath.Join(t.TempDir(), "none.slm")); err == nil {
		t.Error("a missing model file read")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("a model file's mode: %v (%v), want 0644", st.Mode(), err)
	}
	var back Checkpoint
	if err := back.UnmarshalBinary(b); err == nil || !strings.Contains(err.Error(), "a model file, not a checkpoint") {
		t.Errorf("a model file read as a checkpoint: %v", err)
	}
	// A long From is cut, so that the file reads back.
	long := *m
	long.From = strings.Repeat("é", 40000)
	if _, err := WriteModel(path, &long); err != nil {
		t.Fatal(err)
	}
	if got, _, err := ReadModel(path); err != nil || len(got.From) > maxFrom || !strings.HasSuffix(got.From, "…") {
		t.Errorf("a long From: %v, %d bytes", err, len(got.From))
	}
}
