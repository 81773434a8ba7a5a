package pipeline

import (
	"container/list"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"time"

	"github.com/streamlearn/streamlearn/internal/codec"
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
// At most Max models are resident; past it the least recently used is
// encoded (MarshalBinary) into the spill and dropped, and decoded again on
// the key's next event. The encoding is exact, so eviction changes no
// model: it bounds the heap by the resident models plus the spilled
// states' bytes (the learned weights only, a few bytes per feature a key
// saw).
//
// Keyed is not safe for concurrent use.
type Keyed struct {
	build   *Builder // of the configuration's pipelines
	max     int
	idle    time.Duration
	warm    []byte
	warmSHA [32]byte
	names   []string // of the learners
	algs    []string
	start   time.Time

	resident map[string]*list.Element // of *keyedModel, most recent first
	lru      list.List
	spill    spill
	spillDir string // of a fileSpill; "" keeps the encodings in memory
	// stats has every key's counts, resident or spilled.
	stats map[string]*KeyStats
	// The totals over every key, and the records of no key (Reject).
	total    Counts
	learners []KeyedLearner
	// dirty has the keys whose models changed since the last
	// ServingStates; frozen has the encoding a Freeze made of each
	// resident model that has not changed since.
	dirty  map[string]struct{}
	frozen map[string]StateRef
	// now is the time of the last EvictIdle: a model used since was used
	// then.
	now     time.Time
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
	p    *Pipeline
	used time.Time // the EvictIdle time when it was last used
}

// KeyStats are what a Keyed keeps of every key, resident or not: its
// records and each learner's mistakes (in the learners' order).
type KeyStats struct {
	Events   uint64
	Mistakes []uint64
	// Mix, with a global model, is each learner's choice between the
	// key's model and the global one (global.go).
	Mix []MixCounts
}

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
	if opt.Max < 0 {
		return nil, fmt.Errorf("pipeline: keyed: max %d is negative", opt.Max)
	}
	k := &Keyed{build: NewBuilder(c), max: opt.Max, idle: opt.Idle, warm: opt.WarmStart, warmSHA: opt.WarmSHA256,
		start: time.Now(), now: time.Now(), spillDir: opt.SpillDir}
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
		k.global = p
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
	k.resident, k.stats, k.dirty = map[string]*list.Element{}, map[string]*KeyStats{}, map[string]struct{}{}
	k.frozen = map[string]StateRef{}
	k.lru.Init()
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
	p, err := k.build.New()
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
func (k *Keyed) fresh() (*Pipeline, error) {
	p, err := k.build.New()
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
		m := e.Value.(*keyedModel)
		m.used = k.now
		return m.p, nil
	}
	name := string(key)
	k.misses++
	b, spilled, err := k.spill.Get(name)
	if err != nil {
		return nil, err
	}
	var p *Pipeline
	if spilled {
		if p, err = k.build.Decode(b); err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q from the spill: %w", name, err)
		}
		k.spill.Delete(name)
	} else {
		if p, err = k.fresh(); err != nil {
			return nil, err
		}
		st := &KeyStats{Mistakes: make([]uint64, len(k.names))}
		if k.global != nil {
			st.Mix = make([]MixCounts, len(k.names))
			for i := range k.mixTerms {
				k.mixTerms[i]++ // the key's 1 + m*, m* = 0 so far
			}
		}
		k.stats[name] = st
	}
	k.resident[name] = k.lru.PushFront(&keyedModel{key: name, p: p, used: k.now})
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
	// The last Freeze's encoding, when the model has not learned since
	// (shared: no one modifies it), else a new one.
	b := k.frozen[m.key].b
	if b == nil {
		var err error
		if b, err = m.p.MarshalBinary(); err != nil {
			return fmt.Errorf("pipeline: keyed: evicting key %q: %w", m.key, err)
		}
	}
	if err := k.spill.Put(m.key, b); err != nil {
		return err
	}
	k.lru.Remove(e)
	delete(k.resident, m.key)
	delete(k.frozen, m.key) // a Freeze refers to the spill's: the heap keeps no evicted model
	k.evicted++
	return nil
}

// EvictIdle evicts the models not used since now minus the Idle of the
// options (none without), and makes now the time of the models used
// until the next call.
func (k *Keyed) EvictIdle(now time.Time) error {
	k.now = now
	if k.idle <= 0 {
		return nil
	}
	for e := k.lru.Back(); e != nil && now.Sub(e.Value.(*keyedModel).used) >= k.idle; e = k.lru.Back() {
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
	p, err := k.Model(ev.Key)
	if err != nil {
		return nil, nil, "", err
	}
	if k.global != nil {
		gpreds, _ := k.global.Process(ev)
		copy(k.gpreds, gpreds)
	}
	before := k.before(p)
	preds, reason := p.Process(ev)
	st := k.tally(p, before, ev.Key, reason)
	if k.global != nil && reason == "" && len(preds) > 0 {
		preds = k.mix(st, p, preds, ev)
	}
	return p, preds, reason, nil
}

// before notes p's counters and each learner's, before a round of p.
func (k *Keyed) before(p *Pipeline) Counts {
	t := p.tracker
	for i := range k.names {
		k.rounds[i], k.mistakes[i], k.loss[i], k.def[i] = t.Rounds(i), t.Mistakes(i), t.Loss(i), t.Defaults(i)
	}
	return p.counts
}

// tally adds what p, key's model, counted since before (a record, and
// with delayed labels the events it let expire and learned) to the
// totals and key's stats, and marks key changed; it returns key's stats.
func (k *Keyed) tally(p *Pipeline, before Counts, key []byte, reason event.Reason) *KeyStats {
	after, t := &p.counts, p.tracker
	st := k.stats[string(key)]
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
		if def := t.Defaults(i); def != k.def[i] {
			l.Default.Rounds += def.Rounds - k.def[i].Rounds
			l.Default.Mistakes += def.Mistakes - k.def[i].Mistakes
			l.Default.Loss += def.Loss - k.def[i].Loss
		}
		st.Mistakes[i] += d
	}
	if _, ok := k.dirty[string(key)]; !ok { // (a lookup does not allocate)
		k.dirty[string(key)] = struct{}{}
	}
	if _, ok := k.frozen[string(key)]; ok {
		delete(k.frozen, string(key)) // no longer its model's
	}
	return st
}

// Reject counts a record of key that could not be used (Pipeline.Reject)
// in key's model (and the global one), the totals and the key's stats. A
// record that could not be decoded is the key the decoder read before
// the fault, else the empty key's, as a replay of the key's records alone
// counts it.
func (k *Keyed) Reject(key []byte, reason event.Reason) error {
	p, err := k.Model(key)
	if err != nil {
		return err
	}
	if k.global != nil {
		k.global.Reject(reason)
	}
	before := k.before(p)
	p.Reject(reason) // with delayed labels, may learn events it lets expire
	k.tally(p, before, key, reason)
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

// KeyTop is a key and its stats.
type KeyTop struct {
	Key string
	KeyStats
}

// Top returns the n keys of the most records, most first (ties by key),
// with copies of their stats.
func (k *Keyed) Top(n int) []KeyTop {
	if n <= 0 {
		return nil
	}
	top := make([]KeyTop, 0, min(n, len(k.stats))+1)
	before := func(a, b *KeyTop) bool { return a.Events > b.Events || a.Events == b.Events && a.Key < b.Key }
	for key, st := range k.stats {
		c := KeyTop{Key: key, KeyStats: *st}
		if len(top) == n && !before(&c, &top[n-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, c, func(a, b KeyTop) int {
			if before(&a, &b) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, c)
		if len(top) > n {
			top = top[:n]
		}
	}
	for i := range top {
		top[i].Mistakes = slices.Clone(top[i].Mistakes)
	}
	return top
}

// KeysReport says how many keys a partition's models are of.
type KeysReport struct {
	// Keys is how many keys have a model; Resident how many are decoded
	// in memory, the others being spilled as their encodings of
	// SpillBytes bytes in all; Evicted how many evictions there were.
	Keys       int    `json:"keys"`
	Resident   int    `json:"resident"`
	Evicted    uint64 `json:"evicted"`
	SpillBytes int64  `json:"spill_bytes"`
}

// Report returns the totals over every key's model: the records (those
// of no key included) and each learner's rounds, mistakes and loss.
// Bounds, regrets and state digests are each model's (KeyReport): a
// theorem is about one model's rounds. With a global model, its report is
// Global, state digests included.
func (k *Keyed) Report() Report { return k.report(true) }

// ReportWithoutDigests is Report without the global model's state digests
// (Pipeline.ReportWithoutDigests): no pass over its states.
func (k *Keyed) ReportWithoutDigests() Report { return k.report(false) }

func (k *Keyed) report(digests bool) Report {
	r := Report{
		Events:          k.total.Events,
		Labeled:         k.total.Learned,
		Predicted:       k.total.Predicted,
		Invalid:         k.total.Invalid,
		InvalidByReason: make(map[string]uint64, len(k.total.InvalidBy)),
		Seconds:         time.Since(k.start).Seconds(),
		Keys:            &KeysReport{Keys: k.Len(), Resident: k.Resident(), Evicted: k.evicted, SpillBytes: k.SpillBytes()},
		Learners:        make([]regret.LearnerReport, len(k.names)),
	}
	for reason, n := range k.total.InvalidBy {
		r.InvalidByReason[string(reason)] = n
	}
	for i, l := range k.learners {
		lr := regret.LearnerReport{Name: k.names[i], Algorithm: k.algs[i], Rounds: l.Rounds - l.Default.Rounds,
			Mistakes: l.Mistakes - l.Default.Mistakes, Loss: l.Loss}
		if l.Default.Rounds > 0 {
			lr.Loss = l.Loss - l.Default.Loss
		}
		lr.Accuracy = regret.Accuracy(lr.Rounds, lr.Mistakes)
		if k.defaults || l.Default.Rounds > 0 {
			lr.DefaultLabeled = &regret.DefaultLabeledReport{Rounds: l.Default.Rounds, Mistakes: l.Default.Mistakes,
				Accuracy: regret.Accuracy(l.Default.Rounds, l.Default.Mistakes), Loss: l.Default.Loss}
		}
		r.Learners[i] = lr
	}
	if k.global != nil {
		r.Mix = k.mixReports(nil)
		if g, err := k.global.report(digests); err == nil {
			r.Global = &g
		}
	}
	return r
}

// peek returns key's model without making it resident: a spilled one is
// decoded into a pipeline of its own.
func (k *Keyed) peek(key string) (*Pipeline, error) {
	if e, ok := k.resident[key]; ok {
		return e.Value.(*keyedModel).p, nil
	}
	b, ok, err := k.spill.Get(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, ErrNoKey)
	}
	p, err := k.build.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("pipeline: keyed: key %q from the spill: %w", key, err)
	}
	return p, nil
}

// Each calls f with every key's model, in key order, until f returns an
// error; a spilled model is decoded for the call and not kept (the
// resident ones stay as they are). f must not keep p.
func (k *Keyed) Each(f func(key string, p *Pipeline) error) error {
	for _, key := range k.Keys() {
		p, err := k.peek(key)
		if err != nil {
			return err
		}
		if err := f(key, p); err != nil {
			return err
		}
	}
	return nil
}

// ServingStates returns every key's encoding (MarshalBinary of its
// model), for serving predictions from: prev's, the encodings of the
// last call, for the keys whose models have not changed since, new ones
// for the others (all of them when prev is nil). The slices are shared:
// no one modifies them.
func (k *Keyed) ServingStates(prev map[string]StateRef) (map[string]StateRef, error) {
	out := make(map[string]StateRef, k.Len())
	for key, b := range prev {
		if _, ok := k.stats[key]; ok {
			out[key] = b
		}
	}
	for key := range k.stats {
		if _, ok := out[key]; ok {
			if _, changed := k.dirty[key]; !changed {
				continue
			}
		}
		if r, ok := k.spill.Ref(key); ok {
			out[key] = r
			continue
		}
		b, err := k.resident[key].Value.(*keyedModel).p.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
		}
		out[key] = StateRef{b: b}
	}
	clear(k.dirty)
	return out, nil
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
func (k *Keyed) Len() int        { return len(k.stats) }
func (k *Keyed) Resident() int   { return len(k.resident) }
func (k *Keyed) Evicted() uint64 { return k.evicted }

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
	f, err := k.freeze(false, nil)
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
func (k *Keyed) Freeze(into *Frozen) (*FrozenKeyed, error) { return k.freeze(true, into) }

// freeze is Freeze; without cached, every model's encoding is made or
// read now, none kept, and the global model is encoded now.
func (k *Keyed) freeze(cached bool, into *Frozen) (*FrozenKeyed, error) {
	keys := k.Keys()
	f := &FrozenKeyed{states: make([]StateRef, len(keys)), ends: make([]int, len(keys))}
	for i, key := range keys {
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
		b, err := k.resident[key].Value.(*keyedModel).p.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("pipeline: keyed: key %q: %w", key, err)
		}
		f.states[i] = StateRef{b: b}
		if cached {
			k.frozen[key] = f.states[i]
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
		if global, err = k.build.Decode(gb); err != nil {
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
		st := &KeyStats{Events: d.U64(), Mistakes: make([]uint64, len(learners))}
		for j := range st.Mistakes {
			st.Mistakes[j] = d.U64()
		}
		if global != nil {
			st.Mix = make([]MixCounts, len(learners))
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
	for key := range stats {
		k.dirty[key] = struct{}{}
	}
	return nil
}

// KeyReport returns key's report; an error wrapping ErrNoKey when key has
// no model. A spilled model is decoded for it, and not kept.
func (k *Keyed) KeyReport(key string) (Report, error) {
	p, err := k.peek(key)
	if err != nil {
		return Report{}, err
	}
	r, err := p.Report()
	if err == nil {
		r.Mix = k.mixReports(k.stats[key])
	}
	return r, err
}

// ErrNoKey is the error of Keyed.Report for a key that has no model.
var ErrNoKey = errors.New("no model for this key")
