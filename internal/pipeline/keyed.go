package pipeline

import (
	"container/list"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// Keyed learns a model per event key: the events of each key go, in
// order, to a pipeline of their own, made on the key's first event (empty,
// or from a warm start), so that each key's model is the one a replay of
// that key's events alone makes. An event without a key is the empty
// key's.
//
// At most Max models are resident; past it the least recently used is
// encoded (MarshalBinary) into the spill and dropped, and decoded again on
// the key's next event. The encoding is exact, so eviction changes no
// model: it bounds the heap by the resident models plus the spilled
// states' bytes (the learned weights only, a few bytes per feature a key
// saw).
//
// Keyed is not safe for concurrent use.
type Keyed struct {
	cfg     *config.Config
	max     int
	warm    []byte
	warmSHA [32]byte

	resident map[string]*list.Element // of *keyedModel, most recent first
	lru      list.List
	spill    map[string][]byte
	evicted  uint64
	misses   uint64
}

type keyedModel struct {
	key string
	p   *Pipeline
}

// KeyedOptions configure NewKeyed.
type KeyedOptions struct {
	// Max bounds the resident models; 0 means no bound.
	Max int
	// WarmStart, when not nil, is the state every new key's model starts
	// from (StartFrom), of the model file of SHA-256 WarmSHA256.
	WarmStart  []byte
	WarmSHA256 [32]byte
}

// NewKeyed returns a Keyed of c's models.
func NewKeyed(c *config.Config, opt KeyedOptions) (*Keyed, error) {
	if opt.Max < 0 {
		return nil, fmt.Errorf("pipeline: keyed: max %d is negative", opt.Max)
	}
	k := &Keyed{cfg: specOf(c), max: opt.Max, warm: opt.WarmStart, warmSHA: opt.WarmSHA256,
		resident: map[string]*list.Element{}, spill: map[string][]byte{}}
	if _, err := k.fresh(); err != nil { // the configuration and the warm start build
		return nil, err
	}
	return k, nil
}

// fresh returns a new key's model.
func (k *Keyed) fresh() (*Pipeline, error) {
	p, err := New(k.cfg)
	if err != nil {
		return nil, err
	}
	if k.warm != nil {
		if err := p.StartFrom(k.warm, k.warmSHA); err != nil {
			return nil, fmt.Errorf("pipeline: keyed: warm start: %w", err)
		}
	}
	return p, nil
}

// Model returns key's model, made or decoded from the spill when it is
// not resident, and marks it the most recently used. It may evict
// another key's.
func (k *Keyed) Model(key []byte) (*Pipeline, error) {
	if e, ok := k.resident[string(key)]; ok {
		k.lru.MoveToFront(e)
		return e.Value.(*keyedModel).p, nil
	}
	name := string(key)
	k.misses++
	var p *Pipeline
	var err error
	if b, ok := k.spill[name]; ok {
		// Decoded into a pipeline fresh from New (UnmarshalBinary would
		// build a second one to keep p unchanged on error: p is new).
		if p, err = New(k.cfg); err == nil {
			err = p.decode(b)
		}
		if err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q from the spill: %w", name, err)
		}
		delete(k.spill, name)
	} else if p, err = k.fresh(); err != nil {
		return nil, err
	}
	k.resident[name] = k.lru.PushFront(&keyedModel{key: name, p: p})
	for k.max > 0 && k.lru.Len() > k.max {
		if err := k.evict(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// evict spills the least recently used model.
func (k *Keyed) evict() error {
	e := k.lru.Back()
	m := e.Value.(*keyedModel)
	b, err := m.p.MarshalBinary()
	if err != nil {
		return fmt.Errorf("pipeline: keyed: evicting key %q: %w", m.key, err)
	}
	k.spill[m.key] = b
	k.lru.Remove(e)
	delete(k.resident, m.key)
	k.evicted++
	return nil
}

// Process runs ev through its key's model (Pipeline.Process) and returns
// that model with the predictions.
func (k *Keyed) Process(ev *event.Event) (*Pipeline, []online.Prediction, event.Reason, error) {
	p, err := k.Model(ev.Key)
	if err != nil {
		return nil, nil, "", err
	}
	preds, reason := p.Process(ev)
	return p, preds, reason, nil
}

// Keys returns every key that has a model, resident or spilled, sorted.
func (k *Keyed) Keys() []string {
	keys := make([]string, 0, len(k.resident)+len(k.spill))
	for key := range k.resident {
		keys = append(keys, key)
	}
	for key := range k.spill {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

// Len returns how many keys have a model; Resident how many of them are
// decoded in memory; Evicted how many evictions there were.
func (k *Keyed) Len() int        { return len(k.resident) + len(k.spill) }
func (k *Keyed) Resident() int   { return len(k.resident) }
func (k *Keyed) Evicted() uint64 { return k.evicted }

// Misses counts the models Model made or decoded: first events of keys
// and events of spilled keys.
func (k *Keyed) Misses() uint64    { return k.misses }
func (k *Keyed) SpillBytes() int64 { return spillBytes(k.spill) }

func spillBytes(m map[string][]byte) int64 {
	var n int64
	for key, b := range m {
		n += int64(len(key) + len(b))
	}
	return n
}

// keyedMagic starts a Keyed's encoding, which is, with package codec:
// the magic, u8 version 1, u32 the number of keys, then per key in
// increasing byte order: string key, blob its model's MarshalBinary; u32
// CRC-32C of every byte before.
const keyedMagic = "SLKY"

// maxKeyLen bounds a decoded key.
const maxKeyLen = 1 << 16

// MarshalBinary encodes every key's model, resident or spilled, in key
// order: equal models give equal bytes, whatever was evicted when.
func (k *Keyed) MarshalBinary() ([]byte, error) {
	keys := k.Keys()
	states := make([][]byte, len(keys))
	size := 16
	for i, key := range keys {
		if b, ok := k.spill[key]; ok {
			states[i] = b
		} else {
			b, err := k.resident[key].Value.(*keyedModel).p.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
			}
			states[i] = b
		}
		size += len(key) + len(states[i]) + 16
	}
	e := codec.NewEncoder(size)
	e.RawString(keyedMagic)
	e.U8(1)
	e.U32(uint32(len(keys)))
	for i, key := range keys {
		e.String(key)
		e.Blob(states[i])
	}
	e.U32(crc32.Checksum(e.Bytes(), castagnoli))
	return e.Bytes(), nil
}

// UnmarshalBinary restores a MarshalBinary of a Keyed of the same
// configuration: every key's model goes to the spill, decoded on its
// key's next event (each is checked as it is decoded then, and its
// encoding's checksum now). On error k is unchanged.
func (k *Keyed) UnmarshalBinary(b []byte) error {
	const header = len(keyedMagic) + 1
	switch {
	case len(b) < header+8:
		return fmt.Errorf("pipeline: keyed: %d bytes: %w", len(b), codec.ErrTruncated)
	case string(b[:len(keyedMagic)]) != keyedMagic:
		return fmt.Errorf("pipeline: keyed: not a keyed state (magic %q)", b[:len(keyedMagic)])
	case b[len(keyedMagic)] != 1:
		return fmt.Errorf("pipeline: keyed: unsupported format version %d", b[len(keyedMagic)])
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if got, want := crc32.Checksum(body, castagnoli), uint32(sum[0])|uint32(sum[1])<<8|uint32(sum[2])<<16|uint32(sum[3])<<24; got != want {
		return fmt.Errorf("pipeline: keyed: checksum mismatch (%08x, encoded %08x): truncated or corrupt", got, want)
	}
	d := codec.NewDecoder(body[header:])
	n := d.U32()
	if d.Err() == nil && uint64(n) > uint64(d.Len())/16 {
		return fmt.Errorf("pipeline: keyed: %w", codec.ErrTruncated)
	}
	spill := make(map[string][]byte, n)
	prev := ""
	for i := range n {
		key, state := d.String(maxKeyLen), d.Blob()
		if d.Err() != nil {
			return fmt.Errorf("pipeline: keyed: %w", d.Err())
		}
		if i > 0 && key <= prev {
			return fmt.Errorf("pipeline: keyed: key %q after %q: not in increasing order", key, prev)
		}
		if _, _, err := openState(state); err != nil {
			return fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
		}
		spill[key], prev = slices.Clone(state), key
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("pipeline: keyed: %w", err)
	}
	k.resident, k.spill = map[string]*list.Element{}, spill
	k.lru.Init()
	return nil
}

// Report returns key's report; an error wrapping ErrNoKey when key has no
// model. A spilled model is decoded for it (and becomes resident).
func (k *Keyed) Report(key string) (Report, error) {
	if _, ok := k.resident[key]; !ok {
		if _, ok := k.spill[key]; !ok {
			return Report{}, fmt.Errorf("pipeline: keyed: key %q: %w", key, ErrNoKey)
		}
	}
	p, err := k.Model([]byte(key))
	if err != nil {
		return Report{}, err
	}
	return p.Report()
}

// ErrNoKey is the error of Keyed.Report for a key that has no model.
var ErrNoKey = errors.New("no model for this key")
