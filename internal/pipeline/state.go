package pipeline

import (
	"encoding"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"reflect"
	"slices"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/regret"
)

var (
	_ encoding.BinaryMarshaler   = (*Pipeline)(nil)
	_ encoding.BinaryUnmarshaler = (*Pipeline)(nil)
)

// The pipeline's state encoding (MarshalBinary), written with package
// codec: little-endian, float64 as its IEEE-754 bits, strings and blobs
// prefixed by their length as a uint64.
//
//	"SLPL"  magic
//	u8      format version (stateVersion)
//	what the state is of, checked against the receiving pipeline first:
//	  u64     features.bits
//	  string  features.scale
//	  32 bytes  SharedDigest of the configuration (version 3 on)
//	  u32     number of learners
//	  per learner: string name, string algorithm, 32 bytes its
//	  LearnerDigest (version 3 on), u32 number of experts, then the index
//	  of each (Weighted-Majority over learners; 0 experts otherwise)
//	the state:
//	  per learner: f64 the last round's loss, u64 the learned rounds
//	  before it started (version 3 on: 0 unless UnmarshalBinaryReset
//	  started it afresh), blob the model's MarshalBinary (the learner's
//	  own, or its Hedge's), bool calibrated (version 5 on), then f64 a,
//	  b and the two sums of squared gradients (platt)
//	  bool    scaler present (features.scale is not none); blob its state
//	  u64     events, learned, predicted, invalid
//	  u32     number of invalid reasons, then per reason in increasing
//	          byte order: string reason, u64 count (> 0)
//	  blob    the tracker's MarshalBinary (regret.Tracker)
//	  bool    delayed labels (version 2 on); then the store of events
//	          waiting for labels (delayedStore.encode)
//	  bool    started from a model file (version 4 on: StartFrom); then
//	          32 bytes its SHA-256, u64 the events it had seen; then
//	          (version 6 on) bool counted apart (StartFromTracked), then
//	          u64 learned, predicted, invalid at the start, u32 number of
//	          learners, per learner u64 rounds, u64 mistakes, f64 loss
//	          against real labels, then the same against the default label
//	u32     CRC-32C (Castagnoli) of every byte before it
//
// The checksum catches what no structural check can, such as a flipped bit
// in a weight, which would otherwise restore a different model silently.
// The pipeline's start time is not state.
//
// Version 2 added delayed labels; version 3 the digests of the settings,
// with which a state of another list of learners can be restored in part
// (UnmarshalBinaryReset), and each learner's start; version 4 the model
// file a pipeline started from (StartFrom); version 5 each learner's
// calibration (learners[i].calibrate); version 6 what a pipeline had
// counted when it started from a model file (StartFromTracked), so that
// its reports count the records after apart. Versions 1 to 5 are still
// read.
const (
	stateMagic   = "SLPL"
	stateVersion = 6
)

// Limits on decoded strings: they bound what corrupt bytes can make
// UnmarshalBinary allocate, with room to spare for real names.
const (
	maxNameLen   = 1 << 12 // learner names and algorithms
	maxScaleLen  = 16      // features.scale
	maxReasonLen = 1 << 8  // invalid-event reasons
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// model is what the pipeline encodes of a node: its learner (for a
// Weighted-Majority over learners, its Hedge's state).
func (n *node) model() interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
} {
	return n.learner
}

// specOf returns a deep copy of what New reads from c (features.bits,
// features.scale and the learners), so that later changes to c cannot make
// Clone or UnmarshalBinary build different learners.
func specOf(c *config.Config) *config.Config {
	s := &config.Config{Input: c.Input, Features: c.Features, Labels: c.Labels, Learners: make([]config.Learner, len(c.Learners)), Answer: c.Answer}
	s.Input.Positive, s.Input.Negative, s.Input.Classes = slices.Clone(c.Input.Positive), slices.Clone(c.Input.Negative), slices.Clone(c.Input.Classes)
	if c.Labels.DefaultLabel != nil {
		l := *c.Labels.DefaultLabel
		s.Labels.DefaultLabel = &l
	}
	for i, l := range c.Learners {
		if l.Params != nil {
			l.Params = deepCopy(reflect.ValueOf(l.Params)).Interface()
		}
		s.Learners[i] = l
	}
	return s
}

// deepCopy copies v and everything it points to: a learner's parameters
// are plain data (pointers, structs, slices, maps, strings, numbers).
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Elem().Type())
		c.Elem().Set(deepCopy(v.Elem()))
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if c.Field(i).CanSet() {
				c.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			c.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return c
	}
	return v
}

// MarshalBinary encodes the pipeline's whole state: every learner's model,
// every Weighted-Majority-over-learners node's Hedge, the scaler's
// statistics, the event counts and the tracker (history included). The
// layout is documented at stateMagic. Equal states give equal bytes, so a
// pipeline restored from a checkpoint and run on is provably the
// uninterrupted one.
//
// It copies every model: the non-zero weights of each linear learner, up
// to 8·2^bits bytes. Like every method, it must be called by the goroutine
// that owns p.
//
// A pipeline is encoded in the first version that holds its state
// (written): version 4 without a calibrated learner or a warm start
// counted apart, which builds before those read, and whose bytes (and so
// the digests of checkpoints and model files) they did not change.
func (p *Pipeline) MarshalBinary() ([]byte, error) { return p.marshal(p.written()) }

// written is the state format version p is encoded in: 4, 5 with a
// calibrated learner, 6 with a warm start counted apart.
func (p *Pipeline) written() uint8 {
	switch {
	case p.warm != nil && p.warm.base != nil:
		return 6
	case slices.ContainsFunc(p.nodes, func(n node) bool { return n.calib != nil }):
		return 5
	}
	return 4
}

// marshal encodes p in format version (1 to stateVersion: tests write the
// older ones).
func (p *Pipeline) marshal(version uint8) ([]byte, error) {
	state, models, err := p.encode(version)
	if err != nil {
		return nil, err
	}
	for i, b := range models {
		p.tracker.NoteState(i, b) // the report's digest, without a second encoding
	}
	return state, nil
}

// encode returns p's state in format version and each node's model's
// encoding, without noting them in the tracker: for a pipeline about
// to be dropped (an evicted key's), whose next report is its decoded
// copy's.
func (p *Pipeline) encode(version uint8) (state []byte, models [][]byte, err error) {
	f, err := p.freeze(version, false, nil)
	if err != nil {
		return nil, nil, err
	}
	return f.encode()
}

// Frozen is a pipeline's state at one moment, taken by Freeze on the
// goroutine that owns the pipeline and encoded on any other: the large
// models (the linear learners' weights, the scaler's statistics) are
// copied, a memmove, and the rest, small, is encoded at once. The scan
// of every slot that encoding the weights is, and the SHA-256 of the
// states, are then the other goroutine's.
type Frozen struct {
	version uint8
	bits    uint64
	scale   string
	shared  [32]byte
	nodes   []frozenNode
	scaler  encoding.BinaryMarshaler // nil without a scaler
	tracker encoding.BinaryMarshaler
	counts  Counts
	delay   []byte // the delayed-label store encoded; nil without
	warm    *warmStart
}

type frozenNode struct {
	name, algorithm string
	digest          [32]byte
	experts         []int
	loss            float64
	since           uint64
	calib           *platt // a copy; nil without calibration
	model           encoding.BinaryMarshaler
	// The tracker's counts of the learner, which its state digest covers.
	rounds, mistakes uint64
	tloss            float64
	def              regret.Scores
}

// Freeze returns p's state as of now, to be encoded on any goroutine
// (Frozen.Encode): what MarshalBinary returns now. It costs a copy of
// the large models' memory (2 MiB per linear learner at the default
// bits 18), not their encoding, whose scan of every slot and digest are
// the other goroutine's. into, when not nil, is an earlier Freeze of p,
// or of a pipeline of the same configuration, that is done with: the
// copy reuses its memory (a double buffer), and nothing of into's state
// is left in it (TestFreeze). Call it from the goroutine that owns p.
func (p *Pipeline) Freeze(into *Frozen) (*Frozen, error) {
	return p.freeze(p.written(), true, into)
}

// freeze takes p's state for encoding in format version; with
// copyModels, the large models are copied (online.Freeze, into's when
// into is not nil), else they are encoded when the Frozen is.
func (p *Pipeline) freeze(version uint8, copyModels bool, into *Frozen) (*Frozen, error) {
	if version < 2 && p.delay != nil {
		return nil, errors.New("pipeline: state format version 1 has no delayed labels")
	}
	if version < 3 && slices.ContainsFunc(p.nodes, func(n node) bool { return n.since != 0 }) {
		return nil, errors.New("pipeline: state format version 2 has no learners started after the others")
	}
	if version < 4 && p.warm != nil {
		return nil, errors.New("pipeline: state format version 3 has no model file started from")
	}
	if version < 5 && slices.ContainsFunc(p.nodes, func(n node) bool { return n.calib != nil }) {
		return nil, errors.New("pipeline: state format version 4 has no calibrations")
	}
	f := &Frozen{version: version, bits: uint64(p.spec.Features.Bits), scale: p.spec.Features.Scale, shared: p.shared,
		nodes: make([]frozenNode, len(p.nodes)), counts: p.counts}
	f.counts.InvalidBy = maps.Clone(p.counts.InvalidBy)
	if into != nil && len(into.nodes) != len(p.nodes) {
		into = nil // not p's
	}
	model := func(m, _ encoding.BinaryMarshaler) encoding.BinaryMarshaler { return m }
	if copyModels {
		model = online.Freeze
	}
	for i := range p.nodes {
		n := &p.nodes[i]
		fn := &f.nodes[i]
		var old encoding.BinaryMarshaler
		if into != nil {
			old = into.nodes[i].model
		}
		*fn = frozenNode{name: n.name, algorithm: n.algorithm, digest: n.digest, experts: n.experts, loss: n.loss, since: n.since,
			model: model(n.model(), old), rounds: p.tracker.Rounds(i), mistakes: p.tracker.Mistakes(i), tloss: p.tracker.Loss(i),
			def: p.tracker.Defaults(i)}
		if n.calib != nil {
			c := *n.calib
			fn.calib = &c
		}
	}
	if p.scaler != nil {
		var old encoding.BinaryMarshaler
		if into != nil {
			old = into.scaler
		}
		f.scaler = model(p.scaler, old)
	}
	var old encoding.BinaryMarshaler
	if into != nil {
		old = into.tracker
	}
	if copyModels {
		f.tracker = p.tracker.Freeze(old)
	} else {
		b, err := p.tracker.MarshalBinary()
		f.tracker = online.Encoded{State: b, Err: err}
	}
	if p.delay != nil {
		e := codec.NewEncoder(64)
		p.delay.encode(e, len(p.nodes))
		f.delay = e.Bytes()
	}
	if p.warm != nil {
		w := *p.warm
		f.warm = &w
	}
	return f, nil
}

// MarshalBinary returns the state f holds, as the pipeline's
// MarshalBinary returned it when f was taken.
func (f *Frozen) MarshalBinary() ([]byte, error) {
	state, _, err := f.encode()
	return state, err
}

// Encode returns the state f holds (MarshalBinary) and each learner's
// state digest, as its report has it (regret.LearnerReport.StateSHA256),
// in the order of the configuration's learners.
func (f *Frozen) Encode() (state []byte, digests [][32]byte, err error) {
	state, models, err := f.encode()
	if err != nil {
		return nil, nil, err
	}
	digests = make([][32]byte, len(models))
	for i, b := range models {
		n := &f.nodes[i]
		digests[i] = regret.StateDigest(b, n.rounds, n.mistakes, n.tloss, n.def)
	}
	return state, digests, nil
}

// encode returns the state f holds and each learner's model's encoding in
// it.
func (f *Frozen) encode() ([]byte, [][]byte, error) {
	version := f.version
	models := make([][]byte, len(f.nodes))
	size := 64
	for i := range f.nodes {
		n := &f.nodes[i]
		b, err := n.model.MarshalBinary()
		if err != nil {
			return nil, nil, fmt.Errorf("pipeline: marshal learner %q: %w", n.name, err)
		}
		models[i] = b
		size += len(b) + 104 + len(n.name) + len(n.algorithm) + 4*len(n.experts)
	}
	var scaler []byte
	if f.scaler != nil {
		var err error
		if scaler, err = f.scaler.MarshalBinary(); err != nil {
			return nil, nil, fmt.Errorf("pipeline: marshal scaler: %w", err)
		}
	}
	tracker, err := f.tracker.MarshalBinary()
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: marshal tracker: %w", err)
	}
	reasons := make([]event.Reason, 0, len(f.counts.InvalidBy))
	for r := range f.counts.InvalidBy {
		reasons = append(reasons, r)
		size += len(r) + 16
	}
	slices.Sort(reasons)
	size += len(scaler) + len(tracker) + len(f.scale) + len(f.delay)

	e := codec.NewEncoder(size + 32)
	e.RawString(stateMagic)
	e.U8(version)
	e.U64(f.bits)
	e.String(f.scale)
	if version >= 3 {
		e.Raw(f.shared[:])
	}
	e.U32(uint32(len(f.nodes)))
	for i := range f.nodes {
		n := &f.nodes[i]
		e.String(n.name)
		e.String(n.algorithm)
		if version >= 3 {
			e.Raw(n.digest[:])
		}
		e.U32(uint32(len(n.experts)))
		for _, x := range n.experts {
			e.U32(uint32(x))
		}
	}
	for i := range f.nodes {
		n := &f.nodes[i]
		e.F64(n.loss)
		if version >= 3 {
			e.U64(n.since)
		}
		e.Blob(models[i])
		if version >= 5 {
			c := n.calib
			e.Bool(c != nil)
			if c != nil {
				e.F64(c.a)
				e.F64(c.b)
				e.F64(c.ga)
				e.F64(c.gb)
			}
		}
	}
	e.Bool(f.scaler != nil)
	if f.scaler != nil {
		e.Blob(scaler)
	}
	c := &f.counts
	e.U64(c.Events)
	e.U64(c.Learned)
	e.U64(c.Predicted)
	e.U64(c.Invalid)
	e.U32(uint32(len(reasons)))
	for _, r := range reasons {
		e.String(string(r))
		e.U64(c.InvalidBy[r])
	}
	e.Blob(tracker)
	if version >= 2 {
		e.Bool(f.delay != nil)
	}
	if f.delay != nil {
		e.Raw(f.delay)
	}
	if version >= 4 {
		e.Bool(f.warm != nil)
		if f.warm != nil {
			e.Raw(f.warm.sha[:])
			e.U64(f.warm.events)
			if version >= 6 {
				e.Bool(f.warm.base != nil)
				if f.warm.base != nil {
					f.warm.base.encode(e)
				}
			}
		}
	}
	e.U32(crc32.Checksum(e.Bytes(), castagnoli))
	return e.Bytes(), models, nil
}
