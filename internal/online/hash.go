package online

import "math/bits"

// Feature hashing. Every feature has a name; its slot in a space of 2^b
// slots is fixed by this file, so indices survive restarts, machines and
// versions (a change here is a breaking change to every checkpoint):
//
//   - a name that is a decimal integer n (ASCII digits only, no sign, at most
//     ten digits, n < 2^32) has slot n mod 2^b: LIBSVM index 7, the JSON
//     feature "7" and the dense x[7] are one feature, as in Vowpal Wabbit;
//   - any other name has slot Murmur3(name, 0) mod 2^b, where Murmur3 is
//     Austin Appleby's MurmurHash3 x86_32, the hash Vowpal Wabbit uses;
//   - a text token or n-gram (tokens joined by one space) has slot
//     Murmur3(token, TextSeed) mod 2^b, so the word "len" in a message and
//     the named feature "len" do not share a weight by construction.
//
// Slots collide when names do; colliding values are summed.

// TextSeed is the Murmur3 seed of text tokens: the ASCII bytes of "text"
// read as a little-endian uint32.
const TextSeed uint32 = 0x74786574

// MaxBits is the largest hashed space: 2^28 slots of float64 is 2 GiB per
// dense weight vector, the most a learner should ever allocate.
const MaxBits = 28

// Mask returns the slot mask of a 2^b space.
func Mask(b uint) uint32 { return uint32(1)<<b - 1 }

// Slot returns the slot of the feature name in a space with mask m.
func Slot[S ~string | ~[]byte](name S, m uint32) uint32 {
	if n, ok := decimal(name); ok {
		return n & m
	}
	return Murmur3(name, 0) & m
}

// TextSlot returns the slot of a text token or n-gram in a space with mask m.
func TextSlot[S ~string | ~[]byte](tok S, m uint32) uint32 {
	return Murmur3(tok, TextSeed) & m
}

func decimal[S ~string | ~[]byte](s S) (uint32, bool) {
	if len(s) == 0 || len(s) > 10 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

// Murmur3 is MurmurHash3 x86_32 of data with the given seed.
func Murmur3[S ~string | ~[]byte](data S, seed uint32) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	h := seed
	n := len(data)
	// Blocks of four bytes read little-endian (one 32-bit load: the
	// compiler combines the byte loads, and len(p) ≥ 4 removes the bounds
	// checks), for strings and byte slices alike.
	p := data
	for ; len(p) >= 4; p = p[4:] {
		k := uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(p) {
	case 3:
		k ^= uint32(p[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(p[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(p[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
