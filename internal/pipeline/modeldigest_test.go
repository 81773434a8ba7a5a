package pipeline

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

// TestModelDigest: the model's digest is of the model, not of what the
// process kept beside it. Two pipelines that learned the same events, one
// keeping the dashboard's curves (EnableHistory), have states of other
// bytes but one digest, the SHA-256 of the state without curves; a model
// that learned one more event has another digest; a damaged state is an
// error.
func TestModelDigest(t *testing.T) {
	c := mustConfig(t, strings.Replace(testConfig, "features: {bits: 16}", "features: {bits: 16, scale: standard}", 1))
	data := stream(3000, 7, 0.05, false)
	plain, curves := mustNew(t, c), mustNew(t, c)
	curves.Tracker().EnableHistory(64)
	feed(t, plain, c, data)
	feed(t, curves, c, data)
	a, err := plain.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := curves.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) || len(b) <= len(a) {
		t.Fatalf("states of %d and %d bytes: want the one with curves longer", len(a), len(b))
	}
	da, err := ModelDigest(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := ModelDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	if da != sha256.Sum256(a) {
		t.Errorf("digest of a state without curves %x, want its SHA-256 %x", da, sha256.Sum256(a))
	}
	if db != da {
		t.Errorf("digest with curves %x, without %x: want one digest of one model", db, da)
	}
	if _, sum, err := curves.CloneDigest(); err != nil || sum != da {
		t.Errorf("CloneDigest with curves: %x, %v; want %x", sum, err, da)
	}

	feed(t, plain, c, stream(1, 8, 0, false))
	a2, _ := plain.MarshalBinary()
	if d, err := ModelDigest(a2); err != nil || d == da {
		t.Errorf("one more event learned: digest %x, %v; want another than %x", d, err, da)
	}
	b[len(b)/2] ^= 1
	if _, err := ModelDigest(b); err == nil {
		t.Error("a damaged state has a digest")
	}
}
