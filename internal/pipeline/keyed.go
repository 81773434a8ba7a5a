package pipeline

import (
	"fmt"
	"slices"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// Keyed learns a model per event key: the events of each key go, in
// order, to a pipeline of their own, made on the key's first event (empty,
// or from a warm start), so that each key's model is the one a replay of
// that key's events alone makes. An event without a key is the empty
// key's.
//
// Each key's model is sparse (Builder.Sparse): it costs what its key has
// seen. At most Max models are resident, and their Footprint with the
// index of every key seen (IndexBytes) is kept within LiveBytes of
// MaxBytes; past either the least recently used is encoded
// (MarshalBinary) into the spill and dropped, and decoded again on the
// key's next event. The encoding is exact, so eviction changes no model:
// it bounds the heap by the resident models plus the keys' index (the
// states themselves are in the spill's file, or in memory, uncounted,
// without a spill directory).
//
// Keyed is not safe for concurrent use.
type Keyed struct {
	// build makes the keys' models, sparse (Builder.Sparse): each costs
	// what its key has seen; dense makes the global one.
	build    *Builder
	dense    *Builder
	max      int
	maxBytes int64
	// bytes is the resident models' Footprint, as of their last use;
	// index the keys' index, IndexBytes (keyed_index.go).
	bytes   int64
	index   int64
	idle    time.Duration
	warm    []byte
	warmSHA [32]byte
	names   []string // of the learners
	algs    []string
	start   time.Time

	resident map[string]*keyedModel
	lru      lru
	spill    spill
	spillDir string // of a fileSpill; "" keeps the encodings in memory
	// stats has every key's counts, resident or spilled.
	stats map[string]*KeyStats
	// The totals over every key, and the records of no key (Reject).
	total    Counts
	learners []KeyedLearner
	// epoch counts the ServingStates: a key whose model changed since
	// the last has epoch+1 in its KeyStats' changed. frozen has the
	// encoding a Freeze made of each resident model that has not changed
	// since.
	epoch  uint64
	frozen map[string]StateRef
	// now is the time of the last EvictIdle: a model used since was used
	// then; since is now's offset from start, what the models note.
	now     time.Time
	since   time.Duration
	evicted uint64
	misses  uint64

	// Scratch of Process: each learner's counters before the round.
	rounds, mistakes []uint64
	loss             []float64
	def              []regret.Scores
	// defaults: the models learn expired events with a default label.
	defaults bool

	// global is the partition's global model (models.global), nil
	// without; with it, each key's stats have their MixCounts, mixTotals
	// and mixTerms are their sums (global.go), and gpreds, mixPreds and
	// mixed are Process's scratch.
	global    *Pipeline
	mixTotals []MixCounts
	mixTerms  []uint64
	gpreds    []online.Prediction
	mixPreds  []online.Prediction
	mixed     Mixed
}

type keyedModel struct {
	key  string
	slot int32 // in the lru
	// frozen is whether Keyed.frozen has its encoding.
	frozen bool
	p      *Pipeline
	// used is the EvictIdle time when it was last used, as its offset
	// from the Keyed's start (Keyed.since): 8 bytes where a time.Time
	// takes 24, so that the struct each event reads is 56 bytes, one
	// cache line of the allocator's 64-byte class.
	used time.Duration
	// bytes is p's Footprint as counted in Keyed.bytes.
	bytes int64
	// st is the key's stats (Keyed.stats[key]): what each event would
	// otherwise look up by key.
	st *KeyStats
}

// measure counts m's Footprint anew in k.bytes. It does not skip the
// count when m's space has not grown: a model's arrays change without it
// (the space's sorted order made by an encoding, the scaler's statistics
// and scratch catching up with numbers other learners gave).
func (k *Keyed) measure(m *keyedModel) {
	b := int64(m.p.Footprint())
	k.bytes += b - m.bytes
	m.bytes = b
}

// KeyStats are what a Keyed keeps of every key, resident or not: its
// records and each learner's mistakes (in the learners' order).
type KeyStats struct {
	Events   uint64
	Mistakes []uint64
	// Mix, with a global model, is each learner's choice between the
	// key's model and the global one (global.go).
	Mix []MixCounts
	// changed is the Keyed's epoch+1 when the key's model last changed
	// (learned, or was restored): a mark in the stats each event touches
	// anyway, not a set of keys to insert into. Its top bit (restoredBit)
	// is set while the key's spilled encoding is the one a restore
	// (Keyed.UnmarshalBinary) put there, maybe of another build, rather
	// than one this process encoded: a bit of a word the struct has, not
	// a field that would take it to a larger size class.
	changed uint64
}

// newKeyStats returns the zero stats of a key of n learners, with their
// mix counts with a global model. Up to four learners, the mistakes are
// in the stats' own object, the line tally writes the events to, rather
// than one of their own: the same bytes of heap (KeyIndexBytes: the
// allocator rounds 64+8n up as it would 64 and 8n, to within 8 bytes),
// one object fewer for each event to reach.
func newKeyStats(n int, global bool) *KeyStats {
	var st *KeyStats
	switch n {
	case 1:
		st = statsWith(func(m *[1]uint64) []uint64 { return m[:] })
	case 2:
		st = statsWith(func(m *[2]uint64) []uint64 { return m[:] })
	case 3:
		st = statsWith(func(m *[3]uint64) []uint64 { return m[:] })
	case 4:
		st = statsWith(func(m *[4]uint64) []uint64 { return m[:] })
	default:
		st = &KeyStats{Mistakes: make([]uint64, n)}
	}
	if global {
		st.Mix = make([]MixCounts, n)
	}
	return st
}

// statsWith returns zero stats allocated with an array A of mistakes
// after them, which slice returns as a slice.
func statsWith[A any](slice func(*A) []uint64) *KeyStats {
	s := new(struct {
		KeyStats
		m A
	})
	s.Mistakes = slice(&s.m)
	return &s.KeyStats
}

// restoredBit is the bit of KeyStats.changed that marks a key's spilled
// encoding as a restore's.
const restoredBit = 1 << 63

// restored reports whether st's key's spilled encoding is a restore's.
func (st *KeyStats) restored() bool { return st.changed&restoredBit != 0 }

// KeyedLearner is one learner's totals over every key's model: every
// round learned, and Default, those of them scored against a default
// label (regret.Tracker.Defaults).
type KeyedLearner struct {
	Rounds, Mistakes uint64
	Loss             float64
	Default          regret.Scores
}

// KeyedOptions configure NewKeyed.
type KeyedOptions struct {
	// Max bounds the resident models; 0 means no bound.
	Max int
	// MaxBytes bounds the memory of the models per key in bytes; 0 means
	// no bound. The resident models' Footprint and the keys' index
	// (IndexBytes) are kept within LiveBytes of it, the rest being the
	// collector's room. The model in use stays resident whatever its
	// size, and the index whatever its size.
	MaxBytes int64
	// Idle, when positive, evicts the models not used for that long
	// (EvictIdle).
	Idle time.Duration
	// Global adds the partition's global model, which learns every
	// event, and predicts each key's events with the key's model or the
	// global one, whichever has made fewer mistakes on the key (global.go).
	Global bool
	// SpillDir, when not empty, is where the evicted models' encodings
	// go: a file of their own, removed at once (it is gone with the
	// process), so that the heap holds only their index. Empty keeps
	// them in memory.
	SpillDir string
	// WarmStart, when not nil, is the state every new key's model starts
	// from (StartFrom), of the model file of SHA-256 WarmSHA256.
	WarmStart  []byte
	WarmSHA256 [32]byte
}

// NewKeyed returns a Keyed of c's models.
func NewKeyed(c *config.Config, opt KeyedOptions) (*Keyed, error) {
	if opt.Max < 0 || opt.MaxBytes < 0 {
		return nil, fmt.Errorf("pipeline: keyed: max %d or max bytes %d is negative", opt.Max, opt.MaxBytes)
	}
	dense := NewBuilder(c)
	now := time.Now()
	k := &Keyed{build: dense.Sparse(), dense: dense, max: opt.Max, maxBytes: opt.MaxBytes, idle: opt.Idle, warm: opt.WarmStart, warmSHA: opt.WarmSHA256,
		start: now, now: now, spillDir: opt.SpillDir}
	k.clear()
	var err error
	if k.spill, err = k.newSpill(); err != nil {
		return nil, err
	}
	p, err := k.fresh() // the configuration and the warm start build
	if err != nil {
		return nil, err
	}
	k.names, k.algs = p.Names(), p.Algorithms()
	n := len(k.names)
	k.learners = make([]KeyedLearner, n)
	k.rounds, k.mistakes, k.loss, k.def = make([]uint64, n), make([]uint64, n), make([]float64, n), make([]regret.Scores, n)
	k.defaults = p.delay != nil && p.delay.def != 0
	if opt.Global {
		if k.global, err = k.freshOf(k.dense); err != nil {
			return nil, err
		}
		k.mixTotals, k.mixTerms = make([]MixCounts, n), make([]uint64, n)
		k.gpreds, k.mixPreds = make([]online.Prediction, n), make([]online.Prediction, n)
		k.mixed.fromGlobal = make([]bool, n)
	}
	return k, nil
}

// newSpill returns an empty spill of k's kind.
func (k *Keyed) newSpill() (spill, error) {
	if k.spillDir == "" {
		return memSpill{}, nil
	}
	return newFileSpill(k.spillDir)
}

// clear forgets every key but the spilled ones.
func (k *Keyed) clear() {
	k.resident, k.stats = map[string]*keyedModel{}, map[string]*KeyStats{}
	k.frozen = map[string]StateRef{}
	k.lru = lru{}
	k.bytes, k.index = 0, 0
	k.total = Counts{InvalidBy: map[event.Reason]uint64{}}
	clear(k.learners)
	clear(k.mixTotals)
	clear(k.mixTerms)
}

// StartFrom makes every key's model that Model makes from now on start
// from state, a MarshalBinary of a pipeline of the same configuration,
// of the model file of SHA-256 sha (Pipeline.StartFrom). On error k is
// unchanged.
func (k *Keyed) StartFrom(state []byte, sha [32]byte) error {
	p, err := k.dense.New()
	if err != nil {
		return err
	}
	if err := p.StartFrom(state, sha); err != nil {
		return err
	}
	k.warm, k.warmSHA = state, sha
	if k.global != nil && k.global.warm == nil && k.global.Seen() == 0 {
		// A new partition's global model starts from it too.
		k.global = p
	}
	return nil
}

// fresh returns a new key's model.
func (k *Keyed) fresh() (*Pipeline, error) { return k.freshOf(k.build) }

// freshOf returns a new model of b: a key's, or the global one.
func (k *Keyed) freshOf(b *Builder) (*Pipeline, error) {
	p, err := b.New()
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
	m, err := k.model(key)
	if err != nil {
		return nil, err
	}
	return m.p, nil
}

func (k *Keyed) model(key []byte) (*keyedModel, error) {
	if m, ok := k.resident[string(key)]; ok {
		k.lru.use(m.slot)
		m.used = k.since
		return m, nil
	}
	name := string(key)
	k.misses++
	// Every key seen has stats, and its model is resident or spilled:
	// a new key's is not looked for in the spill.
	var p *Pipeline
	st, seen := k.stats[name]
	if seen {
		b, spilled, err := k.spill.Get(name)
		if err != nil {
			return nil, err
		}
		if !spilled {
			return nil, fmt.Errorf("pipeline: keyed: key %q is neither resident nor spilled", name)
		}
		if p, err = k.build.Decode(b); err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q from the spill: %w", name, err)
		}
		k.spill.Delete(name)
		st.changed &^= restoredBit // encoded again when evicted
	} else {
		var err error
		if p, err = k.fresh(); err != nil {
			return nil, err
		}
		st = newKeyStats(len(k.names), k.global != nil)
		if k.global != nil {
			for i := range k.mixTerms {
				k.mixTerms[i]++ // the key's 1 + m*, m* = 0 so far
			}
		}
		k.stats[name] = st
		k.index += k.keyIndex(name)
	}
	m := &keyedModel{key: name, p: p, used: k.since, st: st}
	k.lru.add(m)
	k.resident[name] = m
	k.measure(m)
	if err := k.bound(); err != nil {
		return nil, err
	}
	return m, nil
}

// bound evicts the least recently used models while more than Max are
// resident, or while with the keys' index they are over LiveBytes of
// MaxBytes (overBound), but the most recently used.
func (k *Keyed) bound() error {
	for k.max > 0 && len(k.resident) > k.max || k.overBound() && len(k.resident) > 1 {
		if err := k.evict(); err != nil {
			return err
		}
	}
	return nil
}

// evict spills the least recently used model.
func (k *Keyed) evict() error {
	m := k.lru.oldest()
	// The last Freeze's encoding, when the model has not learned since
	// (shared: no one modifies it), else a new one.
	b := k.frozen[m.key].b
	if b == nil {
		var err error
		// Not noted in the tracker (MarshalBinary): m.p is dropped.
		if b, _, err = m.p.encode(m.p.written()); err != nil {
			return fmt.Errorf("pipeline: keyed: evicting key %q: %w", m.key, err)
		}
	}
	if err := k.spill.Put(m.key, b); err != nil {
		return err
	}
	k.lru.remove(m.slot)
	k.bytes -= m.bytes
	delete(k.resident, m.key)
	delete(k.frozen, m.key) // a Freeze refers to the spill's: the heap keeps no evicted model
	k.evicted++
	return nil
}

// EvictIdle evicts the models not used since now minus the Idle of the
// options (none without), and makes now the time of the models used
// until the next call.
func (k *Keyed) EvictIdle(now time.Time) error {
	k.now, k.since = now, now.Sub(k.start)
	if k.idle <= 0 {
		return nil
	}
	for m := k.lru.oldest(); m != nil && k.since-m.used >= k.idle; m = k.lru.oldest() {
		if err := k.evict(); err != nil {
			return err
		}
	}
	return nil
}

// Process runs ev through its key's model (Pipeline.Process) and returns
// that model with the predictions, counting the round in the totals and
// the key's stats.
func (k *Keyed) Process(ev *event.Event) (*Pipeline, []online.Prediction, event.Reason, error) {
	m, err := k.model(ev.Key)
	if err != nil {
		return nil, nil, "", err
	}
	p := m.p
	if k.global != nil {
		gpreds, _ := k.global.Process(ev)
		copy(k.gpreds, gpreds)
	}
	before := k.before(p)
	preds, reason := p.Process(ev)
	st := k.tally(m, before, reason)
	if k.global != nil && reason == "" && len(preds) > 0 {
		preds = k.mix(st, p, preds, ev)
	}
	k.measure(m)
	if k.maxBytes > 0 {
		if err := k.bound(); err != nil {
			return nil, nil, "", err
		}
	}
	return p, preds, reason, nil
}

// before notes p's counters and each learner's, before a round of p.
func (k *Keyed) before(p *Pipeline) Counts {
	t := p.tracker
	for i := range k.rounds {
		k.rounds[i], k.mistakes[i], k.loss[i] = t.Rounds(i), t.Mistakes(i), t.Loss(i)
	}
	if k.defaults { // else no round is scored against a default label
		for i := range k.def {
			k.def[i] = t.Defaults(i)
		}
	}
	return p.counts
}

// tally adds what m's model counted since before (a record, and with
// delayed labels the events it let expire and learned) to the totals and
// its key's stats, and marks the key changed; it returns the key's stats.
func (k *Keyed) tally(m *keyedModel, before Counts, reason event.Reason) *KeyStats {
	after, t := &m.p.counts, m.p.tracker
	st := m.st
	st.Events += after.Events - before.Events
	k.total.Events += after.Events - before.Events
	k.total.Learned += after.Learned - before.Learned
	k.total.Predicted += after.Predicted - before.Predicted
	if d := after.Invalid - before.Invalid; d > 0 {
		k.total.Invalid += d
		k.total.InvalidBy[reason] += d
	}
	for i := range k.names {
		l := &k.learners[i]
		d := t.Mistakes(i) - k.mistakes[i]
		l.Rounds += t.Rounds(i) - k.rounds[i]
		l.Mistakes += d
		l.Loss += t.Loss(i) - k.loss[i]
		if k.defaults { // else no round is scored against a default label (before)
			if def := t.Defaults(i); def != k.def[i] {
				l.Default.Rounds += def.Rounds - k.def[i].Rounds
				l.Default.Mistakes += def.Mistakes - k.def[i].Mistakes
				l.Default.Loss += def.Loss - k.def[i].Loss
			}
		}
		st.Mistakes[i] += d
	}
	st.changed = k.epoch + 1
	if m.frozen {
		delete(k.frozen, m.key) // no longer its model's
		m.frozen = false
	}
	return st
}

// Reject counts a record of key that could not be used (Pipeline.Reject)
// in key's model (and the global one), the totals and the key's stats. A
// record that could not be decoded is the key the decoder read before
// the fault, else the empty key's, as a replay of the key's records alone
// counts it.
func (k *Keyed) Reject(key []byte, reason event.Reason) error {
	m, err := k.model(key)
	if err != nil {
		return err
	}
	p := m.p
	if k.global != nil {
		k.global.Reject(reason)
	}
	before := k.before(p)
	p.Reject(reason) // with delayed labels, may learn events it lets expire
	k.tally(m, before, reason)
	k.measure(m) // what it learned may have grown its space
	if k.maxBytes > 0 {
		return k.bound()
	}
	return nil
}

// Seen returns the records counted, of every key; Learned
// the labeled rounds learned; Started when k was made.
func (k *Keyed) Seen() uint64       { return k.total.Events }
func (k *Keyed) Learned() uint64    { return k.total.Learned }
func (k *Keyed) Started() time.Time { return k.start }
func (k *Keyed) Stats(key string) (KeyStats, bool) {
	st, ok := k.stats[key]
	if !ok {
		return KeyStats{}, false
	}
	return KeyStats{Events: st.Events, Mistakes: slices.Clone(st.Mistakes)}, true
}

// Keys returns every key that has a model, resident or spilled, sorted.
func (k *Keyed) Keys() []string {
	keys := make([]string, 0, len(k.stats))
	for key := range k.resident {
		keys = append(keys, key)
	}
	k.spill.Each(func(key string) { keys = append(keys, key) })
	slices.Sort(keys)
	return keys
}

// Len returns how many keys have a model; Resident how many of them are
// decoded in memory; Evicted how many evictions there were.
func (k *Keyed) Len() int { return len(k.stats) }

// ResidentBytes returns the resident models' Footprint, as of their last
// use.
func (k *Keyed) ResidentBytes() int64 { return k.bytes }
func (k *Keyed) Resident() int        { return len(k.resident) }
func (k *Keyed) Evicted() uint64      { return k.evicted }

// Misses counts the models Model made or decoded: first events of keys
// and events of spilled keys.
func (k *Keyed) Misses() uint64    { return k.misses }
func (k *Keyed) SpillBytes() int64 { return k.spill.Bytes() }

func spillBytes(m map[string][]byte) int64 {
	var n int64
	for key, b := range m {
		n += int64(len(key) + len(b))
	}
	return n
}

// lru is the order of a Keyed's resident models, least recently used
// first, kept at the cost of an append a use: each model has a slot, use
// stamps the slot with a new tick and appends (slot, tick) to uses, so
// that the entries whose tick is still their slot's are the models in
// the order of their last uses, from head. The entries of earlier uses
// are skipped, and dropped once they outnumber the live ones twice, or
// once those before head (skipped by oldest) are half of uses: evictions
// move head on, and the entries behind it are held until dropped.
type lru struct {
	uses   []lruUse
	head   int
	last   []uint64 // by slot: the tick of its model's last use, 0 when free
	models []*keyedModel
	free   []int32 // slots
	tick   uint64
	n      int // models
}

type lruUse struct {
	slot int32
	tick uint64
}

// add gives m a slot, as the most recently used.
func (l *lru) add(m *keyedModel) {
	if n := len(l.free); n > 0 {
		m.slot, l.free = l.free[n-1], l.free[:n-1]
		l.models[m.slot] = m
	} else {
		m.slot = int32(len(l.models))
		l.models, l.last = append(l.models, m), append(l.last, 0)
	}
	l.n++
	l.use(m.slot)
}

// use makes slot's model the most recently used.
func (l *lru) use(slot int32) {
	l.tick++
	l.last[slot] = l.tick
	if len(l.uses)-l.head > 2*l.n+64 || l.head > 64 && l.head >= len(l.uses)/2 {
		live := l.uses[:0]
		for _, u := range l.uses[l.head:] {
			if l.last[u.slot] == u.tick {
				live = append(live, u)
			}
		}
		l.uses, l.head = live, 0
	}
	l.uses = append(l.uses, lruUse{slot, l.tick})
}

// oldest returns the least recently used model, nil without one.
func (l *lru) oldest() *keyedModel {
	for ; l.head < len(l.uses); l.head++ {
		if u := l.uses[l.head]; l.last[u.slot] == u.tick {
			return l.models[u.slot]
		}
	}
	return nil
}

// remove frees slot.
func (l *lru) remove(slot int32) {
	l.last[slot], l.models[slot] = 0, nil
	l.free = append(l.free, slot)
	l.n--
}
