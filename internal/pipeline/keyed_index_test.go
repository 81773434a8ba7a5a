package pipeline

import (
	"bytes"
	"runtime"
	"testing"
)

// TestKeyedIndexBytes: a key's entry in the index is counted as
// KeyIndexBytes says (its name, its counts per learner, and with a
// global model its mix counts, in the allocator's classes), the Keyed's
// IndexBytes is their sum over every key seen, and it survives a restore.
func TestKeyedIndexBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		learners int
		global   bool
		want     int64
	}{
		{"user-12345", 2, false, 222},             // 190, 10 bytes of name in 16, 2 mistakes in 16
		{"user-12345", 2, true, 286},              // and 2 MixCounts of 32 bytes
		{"", 1, false, 198},                       // no name, 1 mistake
		{string(make([]byte, 33)), 5, false, 286}, // 33 bytes of name in 48, 5 mistakes (40) in 48
		{string(make([]byte, 300)), 2, true, 654}, // 300 in 384, 16, 64
	} {
		if got := KeyIndexBytes(len(tc.name), tc.learners, tc.global); got != tc.want {
			t.Errorf("key of %d bytes, %d learners, global %v: %d bytes, want %d", len(tc.name), tc.learners, tc.global, got, tc.want)
		}
	}

	c := mustConfig(t, "features: {bits: 16}\nlearners:\n  - {name: p, algorithm: perceptron}\n  - {name: a, algorithm: adagrad}\n")
	dec := mustDecoder(t, c)
	k, err := NewKeyed(c, KeyedOptions{MaxBytes: 64 << 20, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	feedKeyed(t, k, dec, keyedLines(0, 1000))
	feedKeyed(t, k, dec, keyedLines(0, 10)) // keys seen again count once
	// user-0 … user-999: 6 to 8 bytes of name, in 8; two learners'
	// mistakes, 16: 214 bytes a key.
	if want := int64(1000 * 214); k.IndexBytes() != want {
		t.Errorf("1,000 keys: index %d bytes, want %d", k.IndexBytes(), want)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := NewKeyed(c, KeyedOptions{MaxBytes: 64 << 20, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if restored.IndexBytes() != k.IndexBytes() {
		t.Errorf("restored: index %d bytes, want %d", restored.IndexBytes(), k.IndexBytes())
	}
}

// TestKeyedBoundCountsIndex: the keys' index is counted in the bound with
// the resident models, within LiveBytes of MaxBytes: the more keys seen,
// the fewer models resident; once the index alone is over it, only the
// model in use is; and the models learn what unbounded ones learn.
func TestKeyedBoundCountsIndex(t *testing.T) {
	c := mustConfig(t, "features: {bits: 16}\nlearners:\n  - {name: p, algorithm: perceptron}\n  - {name: a, algorithm: adagrad}\n")
	dec := mustDecoder(t, c)
	const maxBytes = 4 << 20 // 2 MiB live: 2,000 new models of about 1 KB, or 9,799 keys' index of 214 bytes
	if LiveBytes(maxBytes) != 2<<20 {
		t.Fatalf("LiveBytes(%d) = %d, want half", maxBytes, LiveBytes(maxBytes))
	}
	bounded, err := NewKeyed(c, KeyedOptions{MaxBytes: maxBytes, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	free, err := NewKeyed(c, KeyedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hot := keyedLines(0, 500)
	var resident []int
	for round := range 4 {
		// 500 hot keys again, then 2,000 new ones.
		for _, lines := range [][][]byte{hot, keyedLines(1000+2000*round, 2000)} {
			feedKeyed(t, bounded, dec, lines)
			feedKeyed(t, free, dec, lines)
		}
		live := bounded.ResidentBytes() + bounded.IndexBytes()
		if live > LiveBytes(maxBytes) && bounded.Resident() > 1 {
			t.Fatalf("round %d: %d resident models of %d bytes and an index of %d: over %d", round, bounded.Resident(), bounded.ResidentBytes(), bounded.IndexBytes(), LiveBytes(maxBytes))
		}
		// 214 bytes a hot key (user-0 … user-499: a name of 8 bytes at
		// most), 222 a new one (user-1000 …: 9 or 10 bytes, in 16).
		if want := int64(500*214 + 2000*(round+1)*222); bounded.IndexBytes() != want {
			t.Fatalf("round %d: index %d bytes, want %d", round, bounded.IndexBytes(), want)
		}
		resident = append(resident, bounded.Resident())
	}
	for i := 1; i < len(resident); i++ {
		if resident[i] >= resident[i-1] {
			t.Errorf("resident models as the keys grow: %v, want fewer each time", resident)
		}
	}
	// Past the share: the index of 30,000 more keys alone is over it.
	feedKeyed(t, bounded, dec, keyedLines(100000, 30000))
	feedKeyed(t, free, dec, keyedLines(100000, 30000))
	if bounded.IndexBytes() <= LiveBytes(maxBytes) || bounded.Resident() != 1 {
		t.Errorf("an index of %d bytes over %d: %d resident, want only the one in use", bounded.IndexBytes(), LiveBytes(maxBytes), bounded.Resident())
	}
	if bounded.IndexBytes() != free.IndexBytes() {
		t.Errorf("index bounded %d, unbounded %d", bounded.IndexBytes(), free.IndexBytes())
	}
	if !bytes.Equal(mustMarshal(t, bounded), mustMarshal(t, free)) {
		t.Errorf("bounded and unbounded models differ (%d evictions)", bounded.Evicted())
	}
	t.Logf("resident as the keys grew: %v; %d evictions", resident, bounded.Evicted())
}

// TestKeyedIndexHeap: IndexBytes is within −10% and +30% of the heap the
// index holds (a Keyed whose models are all spilled to a file but the one
// in use), the contract of a model's Footprint: at 108,000 keys, where
// the maps' tables are nearly full (the fewest bytes a key), at 120,000,
// just after they doubled (the most), and with a global model.
func TestKeyedIndexHeap(t *testing.T) {
	for _, tc := range []struct {
		keys   int
		global bool
	}{{108000, false}, {120000, false}, {100000, true}} {
		c := mustConfig(t, "features: {bits: 16}\nlearners:\n  - {name: p, algorithm: perceptron}\n  - {name: a, algorithm: adagrad}\n")
		dec := mustDecoder(t, c)
		lines := keyedLines(0, tc.keys) // alive to the end: not freed in between
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		k, err := NewKeyed(c, KeyedOptions{MaxBytes: 1, SpillDir: t.TempDir(), Global: tc.global})
		if err != nil {
			t.Fatal(err)
		}
		feedKeyed(t, k, dec, lines)
		runtime.GC()
		runtime.ReadMemStats(&after)
		// Beside the index: the spill's buffer, the model in use and the
		// global one.
		other := int64(spillBuffer + k.ResidentBytes())
		if k.global != nil {
			other += int64(k.global.Footprint())
		}
		heap := int64(after.HeapAlloc-before.HeapAlloc) - other
		t.Logf("%d keys, global %v: heap %d B a key, IndexBytes %d B a key", k.Len(), tc.global, heap/int64(k.Len()), k.IndexBytes()/int64(k.Len()))
		if est := k.IndexBytes(); float64(est) < 0.9*float64(heap) || float64(est) > 1.3*float64(heap) {
			t.Errorf("%d keys, global %v: IndexBytes %d for %d bytes of heap", k.Len(), tc.global, est, heap)
		}
		runtime.KeepAlive(k)
		runtime.KeepAlive(lines)
	}
}
