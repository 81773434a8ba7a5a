package event

import (
	"encoding/binary"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Sizes of the slot cache: entries (a power of two below 2^16) and the
// longest name it holds.
const (
	cacheBits    = 9
	cacheSize    = 1 << cacheBits
	cacheNameMax = 55
)

// slotEntry caches the slot of one name. name[:n-1] is the name and
// name[n-1] a '"', so that name[:n] is how the name ends a JSON key.
type slotEntry struct {
	slot uint32
	next uint16 // 1 + the entry of the feature that followed this one, or 0
	n    uint8  // 0: empty
	name [cacheNameMax + 1]byte
}

// slotCache maps feature names to online.Slot with a small direct-mapped
// cache: a stream repeats the same names event after event, and a cheap
// hash and a compare cost less than Murmur3. It also predicts the next
// key: each entry links to the feature that came after it last time (head
// to the first), so that a record with the features of the previous one in
// the same order matches each key against the input bytes, without
// scanning, unescaping or hashing it. Entries hold only names that were
// unescaped JSON string contents (no '"', '\\' or control characters, valid
// UTF-8), so a byte match with the input followed by the closing quote is
// exactly that name. A miss only costs speed: every entry is a true
// name → slot pair under the decoder's mask. Not safe for concurrent use.
type slotCache struct {
	ents []slotEntry // cacheSize entries, allocated on first use
	head uint16
	dead uint16 // a sink for the link of a name not cached
}

// nameHash is a cheap hash of b for the cache index: its length and up to
// 16 of its bytes (the first and last eight), mixed. Only its high bits
// depend on all of those bytes (a product's low bits ignore the factors'
// high bits), so the index is taken from the top.
func nameHash(b []byte) uint32 {
	n := len(b)
	var lo, hi uint64
	switch {
	case n >= 8:
		lo, hi = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		lo, hi = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		lo = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	h := (lo^0x9e3779b97f4a7c15)*0xbf58476d1ce4e5b9 ^ (hi+uint64(n))*0x94d049bb133111eb
	return uint32(h >> 32)
}

// lookup returns the slot of name under mask and the entry index + 1 that
// holds it (0 if none). raw reports that name is the unescaped contents of
// a JSON string (see slotCache), the condition for caching it.
func (c *slotCache) lookup(name []byte, raw bool, mask uint32) (uint32, uint16) {
	if len(name) > cacheNameMax {
		return online.Slot(name, mask), 0
	}
	if c.ents == nil {
		c.ents = make([]slotEntry, cacheSize)
	}
	k := nameHash(name) >> (32 - cacheBits)
	e := &c.ents[k]
	if int(e.n) == len(name)+1 && string(e.name[:len(name)]) == string(name) {
		return e.slot, uint16(k + 1)
	}
	slot := online.Slot(name, mask)
	if !raw {
		return slot, 0
	}
	e.slot, e.next, e.n = slot, 0, uint8(len(name)+1)
	copy(e.name[:], name)
	e.name[len(name)] = '"'
	return slot, uint16(k + 1)
}

// match reports whether d[j:] starts with e's name and its closing quote.
// It compares eight bytes at a time; a record's keys are followed by
// their values, so the last, partial word can usually be loaded whole and
// masked.
func (e *slotEntry) match(d []byte, j int) bool {
	n := int(e.n)
	if n == 0 || len(d)-j < n {
		return false
	}
	w := e.name[:]
	s := d[j:]
	for ; n >= 8; n -= 8 {
		if binary.LittleEndian.Uint64(s) != binary.LittleEndian.Uint64(w) {
			return false
		}
		s, w = s[8:], w[8:]
	}
	if n == 0 {
		return true
	}
	if len(s) >= 8 {
		x := binary.LittleEndian.Uint64(s) ^ binary.LittleEndian.Uint64(w)
		return x&(1<<(8*uint(n))-1) == 0
	}
	return string(s[:n]) == string(w[:n])
}
