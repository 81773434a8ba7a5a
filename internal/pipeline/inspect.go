package pipeline

import (
	"fmt"
	"hash/crc32"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// Model returns the model of learner i (configuration order): an
// online.Learner (*online.Perceptron, *online.OGD, a version-space or
// Weighted-Majority learner of package experts, *experts.OverLearners for
// Weighted-Majority over other learners). It is for inspection (tests,
// debugging): the pipeline owns it, so read it only on the pipeline's
// goroutine and do not modify it.
func (p *Pipeline) Model(i int) regret.Model { return p.nodes[i].learner }

// KeyedContents is what an encoding of models per key (a Keyed's
// MarshalBinary, a checkpoint's state with models.by: key) holds, read
// without the configuration that wrote it (ReadKeyed): its totals, its
// global model's state and every key's counts and model digest.
type KeyedContents struct {
	// Events, Learned, Predicted and Invalid are the totals over every
	// key; Learners how many learners each model has.
	Events, Learned, Predicted, Invalid uint64
	Learners                            int
	// Global is the global model's state (models.global), nil without
	// one; GlobalSHA256 its ModelDigest.
	Global       []byte
	GlobalSHA256 [32]byte
	// Keys has every key, in increasing byte order.
	Keys []KeyContents
}

// KeyContents is one key's part of an encoding of models per key.
type KeyContents struct {
	Key string
	// Events is the key's records; Mistakes each learner's mistakes by
	// the key's own model; Mix, with a global model, each learner's
	// choice between the key's model and the global one (Mixed: the
	// mistakes of what was served).
	Events   uint64
	Mistakes []uint64
	Mix      []MixCounts
	// ModelSHA256 is the ModelDigest of the key's model's state, the
	// model_sha256 an answer of the key's model carries; StateBytes the
	// state's size.
	ModelSHA256 [32]byte
	StateBytes  int
}

// ReadKeyed reads an encoding of models per key (IsKeyedState) without
// its configuration, checking its checksum, its keys' order and each
// key's model's encoding. The states in the result share b's memory.
func ReadKeyed(b []byte) (*KeyedContents, error) {
	const header = len(keyedMagic) + 1
	if !IsKeyedState(b) || len(b) < header+8 {
		return nil, fmt.Errorf("pipeline: keyed: %d bytes: not an encoding of models per key", len(b))
	}
	version := b[len(keyedMagic)]
	if version < 1 || version > 4 {
		return nil, fmt.Errorf("pipeline: keyed: unsupported format version %d", version)
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if got, want := crc32.Checksum(body, castagnoli), uint32(sum[0])|uint32(sum[1])<<8|uint32(sum[2])<<16|uint32(sum[3])<<24; got != want {
		return nil, fmt.Errorf("pipeline: keyed: checksum mismatch (%08x, encoded %08x): truncated or corrupt", got, want)
	}
	d := codec.NewDecoder(body[header:])
	c := &KeyedContents{Events: d.U64(), Learned: d.U64(), Predicted: d.U64(), Invalid: d.U64()}
	for range min(d.U32(), uint32(d.Len())) {
		d.String(maxKeyLen)
		d.U64()
	}
	c.Learners = int(min(d.U32(), uint32(d.Len())))
	for range c.Learners {
		d.U64()
		d.U64()
		d.F64()
		if version >= 3 { // the rounds scored against a default label
			d.U64()
			d.U64()
			d.F64()
		}
	}
	global := version%2 == 0
	if global {
		c.Global = d.Blob()
		for range c.Learners {
			decodeMix(d)
			d.U64()
		}
	}
	n := d.U32()
	if d.Err() == nil && uint64(n) > uint64(d.Len())/16 {
		return nil, fmt.Errorf("pipeline: keyed: %w", codec.ErrTruncated)
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("pipeline: keyed: %w", d.Err())
	}
	if global {
		var err error
		if c.GlobalSHA256, err = ModelDigest(c.Global); err != nil {
			return nil, fmt.Errorf("pipeline: keyed: the global model: %w", err)
		}
	}
	c.Keys = make([]KeyContents, 0, n)
	for i := range n {
		k := KeyContents{Key: d.String(maxKeyLen), Events: d.U64(), Mistakes: make([]uint64, c.Learners)}
		for j := range k.Mistakes {
			k.Mistakes[j] = d.U64()
		}
		if global {
			k.Mix = make([]MixCounts, c.Learners)
			for j := range k.Mix {
				k.Mix[j] = decodeMix(d)
			}
		}
		state := d.Blob()
		if d.Err() != nil {
			return nil, fmt.Errorf("pipeline: keyed: %w", d.Err())
		}
		if i > 0 && k.Key <= c.Keys[i-1].Key {
			return nil, fmt.Errorf("pipeline: keyed: key %q after %q: not in increasing order", k.Key, c.Keys[i-1].Key)
		}
		var err error
		if k.ModelSHA256, err = ModelDigest(state); err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q: %w", k.Key, err)
		}
		k.StateBytes = len(state)
		c.Keys = append(c.Keys, k)
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("pipeline: keyed: %w", err)
	}
	return c, nil
}
