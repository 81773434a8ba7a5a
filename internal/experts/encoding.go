package experts

// The learners' canonical encodings, written and read with package codec:
// a version byte, a tag byte naming the learner, then little-endian
// fields (each MarshalBinary documents its own).

// encodingVersion is the first byte of every encoding of this package.
const encodingVersion = 1

// Kind bytes, the second byte of an encoding.
const (
	tagConsistent       = 'C'
	tagHalving          = 'H'
	tagSOA              = 'S'
	tagHedge            = 'E'
	tagWeightedMajority = 'W'
)
