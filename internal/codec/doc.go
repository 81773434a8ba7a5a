// Package codec is the byte-level reader and writer of streamlearn's
// canonical model-state encodings, the bytes of the learners'
// MarshalBinary and UnmarshalBinary that checkpoints and state digests
// depend on.
//
// Every fixed-width field is little-endian; a float64 is written as its
// IEEE-754 bits, so equal states give equal bytes, NaN payloads included.
// Strings and float64 slices are prefixed with their length as a uint64.
// An Encoder appends fields to a byte slice. A Decoder reads them back and
// keeps the first error: once a read fails, later reads return zero
// values and Finish reports that first error.
//
// The package knows nothing of any particular encoding's framing (magic,
// version and tag bytes); its callers write and check those with the same
// primitives. It imports only the standard library.
package codec
