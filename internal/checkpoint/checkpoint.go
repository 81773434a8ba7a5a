// Package checkpoint stores the durable state of streamlearn's models: one
// checkpoint per source partition, holding the partition's model (the
// pipeline's state, opaque here), the position of the last record whose
// effect that state contains, and a fingerprint of the model
// configuration that produced it.
//
// The service commits a position to the broker only after the checkpoint
// holding its effect is durable, and on start resumes every partition
// from its checkpoint: after a crash nothing is lost and nothing is
// applied twice (docs/design.md).
//
// # Format
//
// A checkpoint file is, in order (integers little-endian):
//
//	magic    "SLCKPT\r\n" (8 bytes; the CR LF catches text-mode mangling)
//	version  uint32, FormatVersion
//	length   uint64, bytes of the body
//	body     fields, each as internal/codec writes them:
//	           created    int64, Unix nanoseconds
//	           fingerprint 32 bytes
//	           source     string
//	           partition  int32 (as uint32)
//	           position   int64 (as uint64)
//	           state      blob
//	           report     blob (JSON, for inspect)
//	           origin     string (from version 2 on)
//	           consumer   string (from version 3 on)
//	sha256   32 bytes, SHA-256 of everything before it
//
// Version 1 files, written before origin was, still load, with an empty
// Origin; version 1 and 2 files, written before consumer was, with an
// empty Consumer (Format says which version a file was read in).
//
// A file that is short, has trailing bytes, a wrong magic or a wrong
// checksum is refused with ErrCorrupt; a version this build does not know
// with a *VersionError. Neither is ever treated as "no checkpoint".
package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// FormatVersion is the version of the file format this build writes; it
// reads every version from 1 on.
const FormatVersion = 3

const magic = "SLCKPT\r\n"

// headerLen is the length of magic, version and body length.
const headerLen = len(magic) + 4 + 8

// MaxSize bounds a checkpoint file: 1 GiB, far above any model the
// configuration allows (2^24 slots of float64 per linear learner are
// 128 MiB), so that a corrupt length cannot make the reader allocate
// without limit.
const MaxSize = 1 << 30

// ErrCorrupt is the error of a checkpoint whose bytes are not a whole,
// intact checkpoint.
var ErrCorrupt = errors.New("checkpoint corrupt")

// VersionError is the error of a checkpoint written in a format version
// this build does not read.
type VersionError struct{ Version uint32 }

func (e *VersionError) Error() string {
	return fmt.Sprintf("checkpoint format version %d, this build reads versions 1 to %d", e.Version, FormatVersion)
}

// Checkpoint is the state of one partition's model.
type Checkpoint struct {
	// Created is when the checkpoint was taken.
	Created time.Time
	// Fingerprint identifies the model configuration (features, input
	// decoding, learners): state is only loaded into the configuration
	// that wrote it.
	Fingerprint [32]byte
	// Source is the name of the source (connectors.Source.Name).
	Source string
	// Partition is the source partition the model learns.
	Partition int32
	// Position is the offset (Kafka) or stream sequence (JetStream) of the
	// last record whose effect State contains; -1 when none.
	Position int64
	// Origin names the stream Position is a position of
	// (connectors.Position.Origin): empty when the source does not say,
	// and in checkpoints of format version 1.
	Origin string
	// Consumer names the consumer whose position Position is, when the
	// source's name does not (connectors.Position.Consumer: "kafka group
	// gx"; a JetStream durable is in Source): a checkpoint is one
	// consumer's, and another consumer's positions are not its. Empty
	// when the source does not say, and in checkpoints of format versions
	// 1 and 2.
	Consumer string
	// Format is the format version the checkpoint was read in; 0 for
	// one not read (MarshalBinary writes FormatVersion).
	Format uint32
	// State is the model's state (pipeline.Pipeline.MarshalBinary).
	State []byte
	// Report is the model's report when the checkpoint was taken (JSON),
	// so that a checkpoint can be inspected without its configuration.
	Report []byte
}

// MarshalBinary encodes c in the format of the package comment.
func (c *Checkpoint) MarshalBinary() ([]byte, error) {
	e := codec.NewEncoder(headerLen + 128 + len(c.Source) + len(c.State) + len(c.Report) + len(c.Origin) + len(c.Consumer) + sha256.Size)
	e.RawString(magic)
	e.U32(FormatVersion)
	e.U64(0) // body length, set below
	e.U64(uint64(c.Created.UnixNano()))
	e.Raw(c.Fingerprint[:])
	e.String(c.Source)
	e.U32(uint32(c.Partition))
	e.U64(uint64(c.Position))
	e.Blob(c.State)
	e.Blob(c.Report)
	e.String(c.Origin)
	e.String(c.Consumer)
	b, err := seal(e)
	if err != nil {
		return nil, fmt.Errorf("checkpoint of partition %d: %w", c.Partition, err)
	}
	return b, nil
}

// seal completes the file e encoded, header (magic, version, a body length
// of 0) and body: it sets the body's length and appends the SHA-256 of
// everything. The checkpoint and model files share this framing.
func seal(e *codec.Encoder) ([]byte, error) {
	b := e.Bytes()
	binary.LittleEndian.PutUint64(b[headerLen-8:], uint64(len(b)-headerLen))
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", len(b), MaxSize)
	}
	return b, nil
}

// unseal checks the body length and the SHA-256 of b, a sealed file whose
// magic and version were checked, and returns the body after the header;
// its errors wrap corrupt.
func unseal(b []byte, corrupt error) ([]byte, error) {
	n := binary.LittleEndian.Uint64(b[headerLen-8:])
	if n != uint64(len(b)-headerLen-sha256.Size) {
		return nil, fmt.Errorf("%w: body of %d bytes, the file has room for %d (truncated or appended to)", corrupt, n, len(b)-headerLen-sha256.Size)
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if want := sha256.Sum256(body); !bytes.Equal(sum, want[:]) {
		// Whole digests: prefixes of two different ones can read alike.
		return nil, fmt.Errorf("%w: SHA-256 mismatch (stored %x, computed %x)", corrupt, sum, want)
	}
	return body[headerLen:], nil
}

// IsCheckpointFile reports whether the file at path begins as a checkpoint
// does (its magic), without reading or verifying the rest.
func IsCheckpointFile(path string) (bool, error) { return begins(path, magic) }

// IsModelFile reports whether the file at path begins as a model file
// does (its magic), without reading or verifying the rest.
func IsModelFile(path string) (bool, error) { return begins(path, modelMagic) }

// begins reports whether the file at path begins with magic.
func begins(path, magic string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, len(magic))
	n, _ := io.ReadFull(f, head)
	return n == len(magic) && string(head) == magic, nil
}

// maxSource bounds Checkpoint.Source when decoding.
const maxSource = 1 << 16

// maxHeadLen is the longest prefix of a checkpoint that holds everything
// before State.
const maxHeadLen = headerLen + 8 + 32 + 8 + maxSource + 4 + 8

// readHead decodes the fields before State (Created, Fingerprint, Source,
// Partition, Position) from the start of a checkpoint file, without
// reading the rest or verifying the checksum: what they say is only a
// claim until the whole file is read.
func readHead(r io.Reader) (*Checkpoint, error) {
	b := make([]byte, headerLen+8+32+8, maxHeadLen)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := checkMagicVersion(b); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(b[len(b)-8:]) // the length of Source
	if n > maxSource {
		return nil, fmt.Errorf("%w: source of %d bytes", ErrCorrupt, n)
	}
	b = b[:len(b)+int(n)+4+8]
	if _, err := io.ReadFull(r, b[headerLen+8+32+8:]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	d := codec.NewDecoder(b[headerLen:])
	var c Checkpoint
	c.decodeHead(d)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &c, nil
}

// checkMagicVersion checks the magic and the format version at the start
// of b, which holds at least headerLen bytes.
func checkMagicVersion(b []byte) error {
	if string(b[:len(magic)]) != magic {
		if string(b[:len(modelMagic)]) == modelMagic {
			return fmt.Errorf("%w: a model file, not a checkpoint (run --warm-start and serve --model take it)", ErrCorrupt)
		}
		return fmt.Errorf("%w: not a streamlearn checkpoint (magic %q)", ErrCorrupt, b[:len(magic)])
	}
	if v := binary.LittleEndian.Uint32(b[len(magic):]); v < 1 || v > FormatVersion {
		return &VersionError{Version: v}
	}
	return nil
}

// decodeHead decodes the body's fields before State into c.
func (c *Checkpoint) decodeHead(d *codec.Decoder) {
	c.Created = time.Unix(0, int64(d.U64())).UTC()
	copy(c.Fingerprint[:], d.Take(len(c.Fingerprint)))
	c.Source = d.String(maxSource)
	c.Partition = int32(d.U32())
	c.Position = int64(d.U64())
}

// UnmarshalBinary decodes a checkpoint written by MarshalBinary. State and
// Report are copies: c does not alias b.
func (c *Checkpoint) UnmarshalBinary(b []byte) error {
	if len(b) < headerLen+sha256.Size {
		return fmt.Errorf("%w: %d bytes, shorter than any checkpoint", ErrCorrupt, len(b))
	}
	if err := checkMagicVersion(b); err != nil {
		return err
	}
	body, err := unseal(b, ErrCorrupt)
	if err != nil {
		return err
	}
	d := codec.NewDecoder(body)
	var out Checkpoint
	out.decodeHead(d)
	out.State = bytes.Clone(d.Blob())
	out.Report = bytes.Clone(d.Blob())
	if out.Format = binary.LittleEndian.Uint32(b[len(magic):]); out.Format >= 2 {
		out.Origin = d.String(maxSource)
	}
	if out.Format >= 3 {
		out.Consumer = d.String(maxSource)
	}
	if err := d.Finish(); err != nil {
		// The checksum matched, so this build wrote something it cannot
		// read back: a bug, reported as corruption rather than ignored.
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	*c = out
	return nil
}

// A Stamper says what each partition's checkpoint is without reading it
// whole: two equal stamps are the same checkpoint, so that a reader
// following the store (`serve`) reads only the ones that changed. Stamps
// has a stamp for every partition that has a checkpoint.
type Stamper interface {
	Stamps(ctx context.Context) (map[int32]string, error)
}
