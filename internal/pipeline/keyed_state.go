package pipeline

import (
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// keyedMagic starts a Keyed's encoding, which is, with package codec:
// the magic, u8 version (1, or 2 with a global model; 3 and 4 are 1 and 2
// with the rounds scored against a default label); the totals: u64
// events, learned, predicted, invalid, u32 the number of reasons and per
// reason in increasing order string reason, u64 count; u32 the number of
// learners L and per learner u64 rounds, u64 mistakes, f64 loss (version
// 3 and 4: then u64 rounds, u64 mistakes, f64 loss of them scored against
// a default label); with a
// global model, blob its MarshalBinary and per learner the totals'
// MixCounts (u64 rounds, own, global, mixed) and u64 Σ(1 + m*); u32 the
// number of keys, then per key in increasing byte order: string key, u64
// events, L × u64 mistakes, with a global model L × MixCounts, blob its
// model's MarshalBinary; u32 CRC-32C of every byte before.
const keyedMagic = "SLKY"

// IsKeyedState reports whether b is a Keyed's encoding (of models per
// key), rather than one pipeline's.
func IsKeyedState(b []byte) bool {
	return len(b) > len(keyedMagic) && string(b[:len(keyedMagic)]) == keyedMagic
}

// maxKeyLen bounds a decoded key.
const maxKeyLen = 1 << 16

// MarshalBinary encodes every key's model, resident or spilled, in key
// order: equal models give equal bytes, whatever was evicted when.
func (k *Keyed) MarshalBinary() ([]byte, error) {
	f, err := k.freeze(false, nil, nil)
	if err != nil {
		return nil, err
	}
	return f.MarshalBinary()
}

// FrozenKeyed is a Keyed's state at one moment (Keyed.Freeze), encoded on
// any goroutine: what Keyed.MarshalBinary returned then.
type FrozenKeyed struct {
	head []byte // the encoding up to the global model: magic, version, totals, learners
	// global is the global model frozen, or globalState its encoding;
	// both nil without one.
	global      *Frozen
	globalState []byte
	mix         []byte     // with a global model: the mix totals and terms
	keys        []byte     // per key, in key order: string key, u64 events, mistakes, mix counts
	ends        []int      // where each key's part of keys ends
	states      []StateRef // each key's model's encoding
}

// Freeze returns k's state as of now, to be encoded on any goroutine
// (FrozenKeyed.Encode): what MarshalBinary returns now. Each key's
// model's encoding is kept from one Freeze to the next, so that only the
// resident models that learned since the last Freeze are encoded (a
// spilled one is referred to where it lies: a StateRef); the global
// model is copied (Pipeline.Freeze, into into when not nil: the global
// model's copy of an earlier Freeze, done with), and the counts are
// encoded. Call it from the goroutine that owns k.
func (k *Keyed) Freeze(into *Frozen) (*FrozenKeyed, error) { return k.freeze(true, into, nil) }

// FreezeUntil is Freeze that gives up once stop is closed, between two
// models' encodings, with ErrFreezeStopped; the encodings made until
// then are kept for the next Freeze, which does not make them again.
func (k *Keyed) FreezeUntil(into *Frozen, stop <-chan struct{}) (*FrozenKeyed, error) {
	return k.freeze(true, into, stop)
}

// ErrFreezeStopped is the error of a FreezeUntil stopped before the end.
var ErrFreezeStopped = errors.New("pipeline: keyed: freeze stopped")

// freeze is Freeze, given up once stop is closed (never when nil);
// without cached, every model's encoding is made or read now, none kept,
// and the global model is encoded now.
func (k *Keyed) freeze(cached bool, into *Frozen, stop <-chan struct{}) (*FrozenKeyed, error) {
	keys := k.Keys()
	f := &FrozenKeyed{states: make([]StateRef, len(keys)), ends: make([]int, len(keys))}
	for i, key := range keys {
		if stop != nil {
			select {
			case <-stop:
				return nil, ErrFreezeStopped
			default:
			}
		}
		// A spilled model where it lies now (a reference is not kept
		// from one Freeze to the next: it would hold a compacted file);
		// a resident one's encoding as of the last Freeze when it has
		// not learned since, else a new one, kept for the next.
		if ref, ok := k.spill.Ref(key); ok {
			f.states[i] = ref
			continue
		}
		if ref, ok := k.frozen[key]; ok && cached {
			f.states[i] = ref
			continue
		}
		m := k.resident[key]
		b, err := m.p.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
		}
		f.states[i] = StateRef{b: b}
		if cached {
			k.frozen[key], m.frozen = f.states[i], true
		}
	}
	version := uint8(1)
	if k.global != nil {
		version = 2
	}
	defaults := slices.ContainsFunc(k.learners, func(l KeyedLearner) bool { return l.Default != regret.Scores{} })
	if defaults {
		version += 2 // 3 and 4: 1 and 2 with the totals scored against a default label
	}
	e := codec.NewEncoder(64 + 24*len(k.learners) + 16*len(k.total.InvalidBy))
	e.RawString(keyedMagic)
	e.U8(version)
	e.U64(k.total.Events)
	e.U64(k.total.Learned)
	e.U64(k.total.Predicted)
	e.U64(k.total.Invalid)
	reasons := slices.Sorted(maps.Keys(k.total.InvalidBy))
	e.U32(uint32(len(reasons)))
	for _, r := range reasons {
		e.String(string(r))
		e.U64(k.total.InvalidBy[r])
	}
	e.U32(uint32(len(k.learners)))
	for _, l := range k.learners {
		e.U64(l.Rounds)
		e.U64(l.Mistakes)
		e.F64(l.Loss)
		if defaults {
			e.U64(l.Default.Rounds)
			e.U64(l.Default.Mistakes)
			e.F64(l.Default.Loss)
		}
	}
	f.head = e.Bytes()
	if k.global != nil {
		var err error
		if cached {
			f.global, err = k.global.Freeze(into)
		} else {
			f.globalState, err = k.global.MarshalBinary()
		}
		if err != nil {
			return nil, fmt.Errorf("pipeline: keyed: the global model: %w", err)
		}
		e := codec.NewEncoder(40 * len(k.learners))
		for i, m := range k.mixTotals {
			encodeMix(e, m)
			e.U64(k.mixTerms[i])
		}
		f.mix = e.Bytes()
	}
	size := 0
	for _, key := range keys {
		size += len(key) + 16 + 8*len(k.learners)
	}
	if k.global != nil {
		size += 32 * len(k.learners) * len(keys)
	}
	e = codec.NewEncoder(size)
	for i, key := range keys {
		e.String(key)
		st := k.stats[key]
		e.U64(st.Events)
		for _, m := range st.Mistakes {
			e.U64(m)
		}
		for _, m := range st.Mix {
			encodeMix(e, m)
		}
		f.ends[i] = len(e.Bytes())
	}
	f.keys = e.Bytes()
	return f, nil
}

// Global returns the global model's copy, nil without one (or when f was
// not made by Freeze): the memory a later Freeze may reuse.
func (f *FrozenKeyed) Global() *Frozen { return f.global }

// MarshalBinary returns the state f holds, as the Keyed's MarshalBinary
// returned it when f was taken.
func (f *FrozenKeyed) MarshalBinary() ([]byte, error) {
	state, _, err := f.Encode()
	return state, err
}

// Encode returns the state f holds (MarshalBinary) and, with a global
// model frozen, each of its learners' state digests, as its report has
// them (Frozen.Encode).
func (f *FrozenKeyed) Encode() (state []byte, globalDigests [][32]byte, err error) {
	global := f.globalState
	if f.global != nil {
		if global, globalDigests, err = f.global.Encode(); err != nil {
			return nil, nil, fmt.Errorf("pipeline: keyed: the global model: %w", err)
		}
	}
	states := make([][]byte, len(f.states))
	size := len(f.head) + len(f.mix) + len(f.keys) + len(global) + 16
	for i, r := range f.states {
		if states[i], err = r.Bytes(); err != nil {
			return nil, nil, err
		}
		size += len(states[i]) + 8
	}
	e := codec.NewEncoder(size)
	e.Raw(f.head)
	if global != nil {
		e.Blob(global)
		e.Raw(f.mix)
	}
	e.U32(uint32(len(states)))
	start := 0
	for i, b := range states {
		e.Raw(f.keys[start:f.ends[i]])
		start = f.ends[i]
		e.Blob(b)
	}
	e.U32(crc32.Checksum(e.Bytes(), castagnoli))
	return e.Bytes(), globalDigests, nil
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
	case b[len(keyedMagic)] < 1 || b[len(keyedMagic)] > 4:
		return fmt.Errorf("pipeline: keyed: unsupported format version %d", b[len(keyedMagic)])
	case (b[len(keyedMagic)]%2 == 0) != (k.global != nil):
		return fmt.Errorf("pipeline: keyed: a state %s a global model (models.global), and this configuration %s", map[bool]string{true: "with", false: "without"}[b[len(keyedMagic)]%2 == 0],
			map[bool]string{true: "has one", false: "has none"}[k.global != nil])
	}
	defaults := b[len(keyedMagic)] >= 3
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if got, want := crc32.Checksum(body, castagnoli), uint32(sum[0])|uint32(sum[1])<<8|uint32(sum[2])<<16|uint32(sum[3])<<24; got != want {
		return fmt.Errorf("pipeline: keyed: checksum mismatch (%08x, encoded %08x): truncated or corrupt", got, want)
	}
	d := codec.NewDecoder(body[header:])
	total := Counts{Events: d.U64(), Learned: d.U64(), Predicted: d.U64(), Invalid: d.U64(), InvalidBy: map[event.Reason]uint64{}}
	nr := d.U32()
	for i := uint32(0); i < nr && d.Err() == nil; i++ {
		r := event.Reason(d.String(maxKeyLen))
		total.InvalidBy[r] = d.U64()
	}
	if d.Err() == nil && d.U32() != uint32(len(k.learners)) {
		return fmt.Errorf("pipeline: keyed: a state of another number of learners (%d here)", len(k.learners))
	}
	learners := make([]KeyedLearner, len(k.learners))
	for i := range learners {
		l := &learners[i]
		*l = KeyedLearner{Rounds: d.U64(), Mistakes: d.U64(), Loss: d.F64()}
		if defaults {
			l.Default = regret.Scores{Rounds: d.U64(), Mistakes: d.U64(), Loss: d.F64()}
			if d.Err() == nil && (l.Default.Rounds > l.Rounds || l.Default.Mistakes > l.Default.Rounds || l.Default.Mistakes > l.Mistakes) {
				return fmt.Errorf("pipeline: keyed: learner %q: %d rounds (%d mistakes) scored against a default label of %d (%d)",
					k.names[i], l.Default.Rounds, l.Default.Mistakes, l.Rounds, l.Mistakes)
			}
		}
	}
	var global *Pipeline
	var mixTotals []MixCounts
	var mixTerms []uint64
	if k.global != nil {
		gb := d.Blob()
		mixTotals, mixTerms = make([]MixCounts, len(learners)), make([]uint64, len(learners))
		for i := range mixTotals {
			mixTotals[i] = decodeMix(d)
			mixTerms[i] = d.U64()
		}
		if d.Err() != nil {
			return fmt.Errorf("pipeline: keyed: %w", d.Err())
		}
		var err error
		if global, err = k.dense.Decode(gb); err != nil {
			return fmt.Errorf("pipeline: keyed: the global model: %w", err)
		}
	}
	n := d.U32()
	if d.Err() == nil && uint64(n) > uint64(d.Len())/16 {
		return fmt.Errorf("pipeline: keyed: %w", codec.ErrTruncated)
	}
	states := make(map[string][]byte, n)
	stats := make(map[string]*KeyStats, n)
	prev := ""
	for i := range n {
		key := d.String(maxKeyLen)
		st := newKeyStats(len(learners), global != nil)
		st.Events = d.U64()
		for j := range st.Mistakes {
			st.Mistakes[j] = d.U64()
		}
		if global != nil {
			for j := range st.Mix {
				st.Mix[j] = decodeMix(d)
			}
		}
		state := d.Blob()
		if d.Err() != nil {
			return fmt.Errorf("pipeline: keyed: %w", d.Err())
		}
		if i > 0 && key <= prev {
			return fmt.Errorf("pipeline: keyed: key %q after %q: not in increasing order", key, prev)
		}
		if _, _, err := openState(state); err != nil {
			return fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
		}
		states[key], stats[key], prev = state, st, key
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("pipeline: keyed: %w", err)
	}
	sp, err := k.newSpill()
	if err != nil {
		return err
	}
	for key, state := range states {
		if err := sp.Put(key, slices.Clone(state)); err != nil {
			return err
		}
	}
	k.clear()
	k.spill, k.stats, k.total, k.learners = sp, stats, total, learners
	if global != nil {
		k.global, k.mixTotals, k.mixTerms = global, mixTotals, mixTerms
	}
	for _, st := range stats {
		st.changed = (k.epoch + 1) | restoredBit
	}
	k.countIndex()
	return nil
}
