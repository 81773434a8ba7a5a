package pipeline

// A Keyed's bound in bytes (KeyedOptions.MaxBytes) is on the memory of
// its models per key: the resident models (their Footprint) and the
// index of every key ever seen (IndexBytes: its counts, its name, its
// entries in the maps by key, its place in the spill). Both live; the
// collector needs room above the live heap for the garbage made between
// two collections, and that room is taken out of the bound rather than
// put on top of it: the resident models and the index are kept within
// LiveBytes of the bound, half of it, and the other half is the
// collector's (and the estimates' error: a Footprint is within −10% and
// +30% of the heap it stands for).
const (
	liveShareNum = 1
	liveShareDen = 2
)

// LiveBytes returns the part of a bound of maxBytes on the memory of
// models per key that the resident models and the keys' index are kept
// within: half of it (0 for 0, no bound).
func LiveBytes(maxBytes int64) int64 { return maxBytes / liveShareDen * liveShareNum }

// BoundOf returns the bound in bytes whose LiveBytes is live: what a
// bound would have to be for an index of live bytes to fill only its
// share (twice live).
func BoundOf(live int64) int64 { return live / liveShareNum * liveShareDen }

// The bytes of heap one key's entry in the index holds beside its name
// and its counts per learner: its KeyStats (64 bytes; with up to four
// learners their mistakes are in the same object, newKeyStats, which the
// allocator rounds to within 8 bytes of the two counted apart),
// its entry in Keyed.stats (a map from the name to *KeyStats) and in the
// spill's index (a map from the name to the encoding's place), with the
// hash tables' slack. Measured with runtime.MemStats over 60,000 to
// 300,000 keys, it is 155 to 212 bytes as the maps' tables fill and
// double, and a Keyed's keys of 9 or 10 bytes hold 178 to 237 bytes
// each with their names and two learners' mistakes (32 bytes); 190 puts
// a key's IndexBytes within −10% and +30% of its heap at every count,
// 0.94 to 1.25 times it (TestKeyedIndexHeap), the contract of a
// Footprint.
const keyIndexFixed = 190

// KeyIndexBytes returns the bytes of heap a key whose name is nameLen
// bytes long holds in the index of models per key of learners learners,
// with a global model or not, whether its model is resident or spilled:
// keyIndexFixed, its name, and its mistakes (8 bytes a learner) and with
// a global model its mix counts (32 bytes a learner), each rounded up to
// the allocator's size classes.
func KeyIndexBytes(nameLen, learners int, global bool) int64 {
	n := keyIndexFixed + allocBytes(nameLen) + allocBytes(8*learners)
	if global {
		n += allocBytes(32 * learners)
	}
	return int64(n)
}

// allocBytes returns the bytes the allocator gives an object of n bytes:
// n rounded up to 8 up to 32 bytes, to 16 up to 256 and to 128 beyond
// (close to Go's size classes, which grow by an eighth or less).
func allocBytes(n int) int {
	switch {
	case n == 0:
		return 0
	case n <= 32:
		return (n + 7) &^ 7
	case n <= 256:
		return (n + 15) &^ 15
	}
	return (n + 127) &^ 127
}

// IndexBytes returns the estimated heap of the index of every key k has
// seen, resident or spilled (KeyIndexBytes of each): what the keys cost
// whether their models are in memory or not, counted with the resident
// models against LiveBytes of the bound. When it alone reaches that
// share, every model but the one in use is spilled, and the index goes
// on growing with the keys: the bound is exceeded by it.
func (k *Keyed) IndexBytes() int64 { return k.index }

// keyIndex returns KeyIndexBytes of key in k.
func (k *Keyed) keyIndex(key string) int64 {
	return KeyIndexBytes(len(key), len(k.names), k.global != nil)
}

// countIndex counts k.index anew from k.stats (after a restore).
func (k *Keyed) countIndex() {
	k.index = 0
	for key := range k.stats {
		k.index += k.keyIndex(key)
	}
}

// overBound reports whether the resident models and the index are over
// LiveBytes of the bound in bytes (never without one).
func (k *Keyed) overBound() bool {
	return k.maxBytes > 0 && k.bytes+k.index > LiveBytes(k.maxBytes)
}
