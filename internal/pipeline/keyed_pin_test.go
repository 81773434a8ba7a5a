package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// keyedPinned is the SHA-256 of the models per key TestKeyedDigestPinned
// learns, as the dense models per key of earlier versions encoded them:
// the keys' models are sparse now, and encode to the same bytes.
const keyedPinned = "dad782ae2ed87390828f15b16bf561ec176c49d09155f43285883f1e26874f59"

// TestKeyedDigestPinned: models per key over a wide space (bits 18, 12
// words an event, 300 keys of Zipf-distributed sizes, 40 resident and
// the others spilled) encode to the bytes dense models per key encoded.
func TestKeyedDigestPinned(t *testing.T) {
	c := mustConfig(t, "features: {bits: 18}\n"+sparseLearners)
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, 299)
	lines := withKeys(wordStream(3000, false, 2), func(int) uint64 { return zipf.Uint64() })
	k, err := NewKeyed(c, KeyedOptions{Max: 40})
	if err != nil {
		t.Fatal(err)
	}
	feedKeyed(t, k, mustDecoder(t, c), lines)
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != keyedPinned {
		t.Fatalf("models per key of %d keys (%d bytes): SHA-256 %s, want %s", k.Len(), len(b), got, keyedPinned)
	}
}
