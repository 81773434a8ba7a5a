package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// A model file holds a model without a position: what a checkpoint holds
// of a model (its state, its report, the fingerprint of the configuration
// that wrote it) and where it was taken, but no source, partition or
// position, so that it can start models of any source (`streamlearn
// export`, `replay --save`, `run --warm-start`). Its format is the
// checkpoint's framing with another magic and body (integers
// little-endian):
//
//	magic    "SLMODL\r\n" (8 bytes)
//	version  uint32, ModelFormatVersion
//	length   uint64, bytes of the body
//	body     created     int64, Unix nanoseconds
//	         fingerprint 32 bytes
//	         from        string: where the model was taken
//	         state       blob (pipeline.Pipeline.MarshalBinary)
//	         report      blob (JSON)
//	         config      blob (version 2 on): the model sections of the
//	                     configuration that wrote state, as a YAML
//	                     configuration file (config.Config.ModelYAML);
//	                     empty when not known
//	sha256   32 bytes, SHA-256 of everything before it
//
// A model is known by the SHA-256 of its whole file (what sha256sum
// prints), which the report of a model started from it carries.
//
// Version 2 added the configuration, so that a model file is served by
// itself; version 1 files still load, without it.

// ErrModelCorrupt is the error of a model file whose bytes are not a
// whole, intact model file.
var ErrModelCorrupt = errors.New("model file corrupt")

// maxFrom bounds Model.From: longer is cut (ModelOf, WriteModel).
const maxFrom = 1 << 12

// ModelFormatVersion is the version of the model file format this build
// writes; it reads every version from 1 on.
const ModelFormatVersion = 2

const modelMagic = "SLMODL\r\n"

// Model is a model file's content.
type Model struct {
	// Created is when the model's state was taken: the checkpoint's
	// time for a checkpoint's model (ModelOf), the Unix epoch for a
	// replay's, which depends on its inputs and configuration only. So
	// the same model makes the same file, of the same SHA-256.
	Created time.Time
	// Fingerprint identifies the model configuration of State: it is
	// only loaded into the configuration that wrote it.
	Fingerprint [32]byte
	// From says where the model was taken, for people: a replay's input
	// files, or a checkpoint's source, partition and position.
	From string
	// State is the model's state (pipeline.Pipeline.MarshalBinary).
	State []byte
	// Report is the model's report when it was written (JSON).
	Report []byte
	// Config is the model sections of the configuration that wrote
	// State (config.Config.ModelYAML), a configuration file of its own;
	// empty when the writer did not know it (a checkpoint exported
	// without its configuration), and in files of format version 1.
	Config []byte
	// Format is the format version the file was read in; 0 for one not
	// read (MarshalBinary writes ModelFormatVersion).
	Format uint32
}

// ModelOf returns the model of checkpoint c, taken from where c says.
func ModelOf(c *Checkpoint) *Model {
	return &Model{
		Created: c.Created, Fingerprint: c.Fingerprint, State: c.State, Report: c.Report,
		From: fmt.Sprintf("checkpoint of %s partition %d at position %d, taken %s", c.Source, c.Partition, c.Position, c.Created.UTC().Format(time.RFC3339)),
	}
}

// MarshalBinary encodes m in the format of the model file.
func (m *Model) MarshalBinary() ([]byte, error) { return m.marshal(ModelFormatVersion) }

// marshal encodes m in format version (1 or 2: tests write the older).
func (m *Model) marshal(version uint32) ([]byte, error) {
	if version < 2 && len(m.Config) > 0 {
		return nil, errors.New("model: format version 1 has no configuration")
	}
	e := codec.NewEncoder(headerLen + 72 + len(m.From) + len(m.State) + len(m.Report) + len(m.Config) + sha256.Size)
	e.RawString(modelMagic)
	e.U32(version)
	e.U64(0) // body length, set below
	e.U64(uint64(m.Created.UnixNano()))
	e.Raw(m.Fingerprint[:])
	e.String(m.From)
	e.Blob(m.State)
	e.Blob(m.Report)
	if version >= 2 {
		e.Blob(m.Config)
	}
	b, err := seal(e)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return b, nil
}

// UnmarshalBinary decodes a model file written by MarshalBinary. A short,
// damaged or appended-to file is refused with ErrCorrupt, a checkpoint
// file with an error saying to export it. State, Report and Config are
// copies.
func (m *Model) UnmarshalBinary(b []byte) error {
	if len(b) < headerLen+sha256.Size {
		return fmt.Errorf("%w: %d bytes, shorter than any model file", ErrModelCorrupt, len(b))
	}
	switch string(b[:len(modelMagic)]) {
	case modelMagic:
	case magic:
		return fmt.Errorf("a checkpoint, not a model file: write one of it with `streamlearn export -o MODEL CHECKPOINT`")
	default:
		return fmt.Errorf("%w: not a streamlearn model file (magic %q)", ErrModelCorrupt, b[:len(modelMagic)])
	}
	v := binary.LittleEndian.Uint32(b[len(modelMagic):])
	if v < 1 || v > ModelFormatVersion {
		return fmt.Errorf("model file format version %d, this build reads versions 1 to %d", v, ModelFormatVersion)
	}
	body, err := unseal(b, ErrModelCorrupt)
	if err != nil {
		return err
	}
	d := codec.NewDecoder(body)
	out := Model{Format: v}
	out.Created = time.Unix(0, int64(d.U64())).UTC()
	copy(out.Fingerprint[:], d.Take(len(out.Fingerprint)))
	out.From = d.String(maxSource)
	out.State = bytes.Clone(d.Blob())
	out.Report = bytes.Clone(d.Blob())
	if v >= 2 {
		out.Config = bytes.Clone(d.Blob())
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("%w: %v", ErrModelCorrupt, err)
	}
	*m = out
	return nil
}

// ReadModel reads and verifies the model file at path, and returns it with
// the SHA-256 of the file's bytes.
func ReadModel(path string) (*Model, [32]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("model %s: %w", path, err)
	}
	if len(b) > MaxSize {
		return nil, [32]byte{}, fmt.Errorf("model %s: %w: more than the %d bytes allowed", path, ErrModelCorrupt, MaxSize)
	}
	var m Model
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, [32]byte{}, fmt.Errorf("model %s: %w", path, err)
	}
	return &m, sha256.Sum256(b), nil
}

// WriteModel writes m to path atomically and durably (as Dir writes a
// checkpoint: a crash leaves the old file or the new one), and returns
// the SHA-256 of the bytes written.
func WriteModel(path string, m *Model) ([32]byte, error) {
	if len(m.From) > maxFrom {
		c := *m
		c.From = c.From[:maxFrom-len("…")] + "…"
		for !utf8.ValidString(c.From) {
			c.From = c.From[:len(c.From)-len("…")-1] + "…"
		}
		m = &c
	}
	b, err := m.MarshalBinary()
	if err != nil {
		return [32]byte{}, err
	}
	if err := writeFileAtomic(path, b); err != nil {
		return [32]byte{}, fmt.Errorf("model %s: %w", path, err)
	}
	// A model file is for other hosts and users to read (a checkpoint
	// stays its writer's).
	if err := os.Chmod(path, 0o644); err != nil {
		return [32]byte{}, fmt.Errorf("model %s: %w", path, err)
	}
	return sha256.Sum256(b), nil
}
