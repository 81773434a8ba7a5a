package pipeline

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// ModelDigest returns the model's digest of state, a MarshalBinary of a
// pipeline or of models per key: the SHA-256 of the state without its
// tracker's history (regret.WithoutHistory), the curves a process keeps
// only while it serves the dashboard. Equal models have equal digests,
// whichever process encoded them and whether it kept curves or not: the
// learners' models (the encodings their state_sha256 digests are of),
// their counters and guarantees, the scaler, the counts, the events
// waiting for labels and the model file the model started from. A state
// that keeps no history has the SHA-256 of its bytes as its digest.
//
// The digest of a partition's models per key is the SHA-256 of their
// whole encoding: the keys' models keep no curves of their own, but one
// started from a model file that held curves keeps them (each key's
// model alone, as served, has its ModelDigest).
func ModelDigest(state []byte) ([32]byte, error) {
	if IsKeyedState(state) {
		return sha256.Sum256(state), nil
	}
	canon, err := withoutHistory(state)
	if err != nil {
		return [32]byte{}, fmt.Errorf("pipeline: model digest: %w", err)
	}
	return sha256.Sum256(canon), nil
}

// withoutHistory returns state, a pipeline's MarshalBinary, with its
// tracker's encoding replaced by one without history, and its checksum
// computed again; state itself when it has none.
func withoutHistory(state []byte) ([]byte, error) {
	sh, d, err := openState(state)
	if err != nil {
		return nil, err
	}
	// The learners' states, then the scaler and the counts (decode's
	// order), up to the tracker.
	for range sh.learners {
		d.F64()
		if sh.version >= 3 {
			d.U64()
		}
		d.Blob()
		if sh.version >= 5 && d.Bool() {
			d.F64()
			d.F64()
			d.F64()
			d.F64()
		}
	}
	if d.Bool() {
		d.Blob()
	}
	d.U64()
	d.U64()
	d.U64()
	d.U64()
	n := d.U32()
	if d.Err() == nil && uint64(n) > uint64(d.Len())/16 {
		return nil, codec.ErrTruncated
	}
	for range n {
		d.String(maxReasonLen)
		d.U64()
	}
	body := state[:len(state)-4]
	at := len(body) - d.Len() // the tracker's blob
	tracker := d.Blob()
	if err := d.Err(); err != nil {
		return nil, err
	}
	after := len(body) - d.Len()
	bare, err := regret.WithoutHistory(tracker)
	if err != nil {
		return nil, err
	}
	if len(bare) == len(tracker) {
		return state, nil
	}
	e := codec.NewEncoder(len(state))
	e.Raw(body[:at])
	e.Blob(bare)
	e.Raw(body[after:])
	e.U32(crc32.Checksum(e.Bytes(), castagnoli))
	return e.Bytes(), nil
}
