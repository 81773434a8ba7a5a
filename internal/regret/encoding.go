package regret

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
)

var (
	_ encoding.BinaryMarshaler   = (*Tracker)(nil)
	_ encoding.BinaryUnmarshaler = (*Tracker)(nil)
)

// The tracker's encoding, written with package codec (little-endian,
// float64 as its IEEE-754 bits, strings and blobs length-prefixed by a
// uint64):
//
//	"SLRT"  magic
//	u8      format version (trackerVersion)
//	u32     number of learners
//	per learner, in the order they were added:
//	  string  name
//	  string  algorithm
//	  u64     rounds
//	  u64     mistakes
//	  f64     loss
//	  bool    broken (the bound did not hold as of the last round)
//	  u64     crossings (times the bound went from holding to broken)
//	  the guarantee as of the last round:
//	    string kind, f64 value, string comparator, f64 comparator loss,
//	    f64 regret bound, string certificate kind, f64 certificate,
//	    u64 violations, u8 premise (online.Premise; version 2 on)
//	  version 3 only: the rounds of them scored against a default
//	  label: u64 rounds, u64 mistakes, f64 loss
//	bool    history enabled
//	when enabled:
//	  u64   max points per learner
//	  u64   stride
//	  per learner: u32 number of points, then each point as u64 round,
//	  u64 mistakes, f64 loss, f64 regret, f64 mistake bound, f64 regret
//	  bound
//
// The guarantee is stored rather than re-read from the model: it is what
// the next report publishes, and storing it keeps the tracker's state
// self-contained (restoring it does not depend on the models having been
// restored first). Version 1 had no premise: a tracker restored from it
// reads its learners' guarantees again from their models at the next
// report, the models being restored by then.
//
// Version 3 added the rounds scored against a default label
// (ObserveDefault). A tracker without such rounds is encoded in version
// 2, whose bytes (and so the digests of checkpoints and model files) are
// those of the trackers before; a version 1 or 2 encoding decodes with
// none.
const (
	trackerMagic   = "SLRT"
	trackerVersion = 3
)

// Limits on decoded lengths: they bound what a corrupt encoding can make
// UnmarshalBinary allocate, with room to spare for real names.
const (
	maxNameLen = 1 << 12 // learner names and algorithms
	maxKindLen = 64      // bound kinds, comparator and certificate names
)

// MaxHistoryPoints is the most points per learner History keeps: 2^16
// points are far more than a plot resolves, and bounding them bounds what
// decoding a tracker's encoding can allocate (3 MiB per learner).
const MaxHistoryPoints = 1 << 16

// MarshalBinary encodes every learner's counters and current guarantee and,
// when enabled, the sampled history: everything later reports and digests
// depend on, except the models, which the tracker does not own (their
// owner encodes them). The layout is documented at trackerMagic. It never
// fails.
func (t *Tracker) MarshalBinary() ([]byte, error) {
	e := codec.NewEncoder(64 + 160*len(t.learners) + historySize(t.history))
	t.encodeLearners(e)
	encodeHistory(e, t.history)
	return e.Bytes(), nil
}

// encodeLearners appends the head of t's encoding: every learner's
// counters and current guarantee.
func (t *Tracker) encodeLearners(e *codec.Encoder) {
	version := uint8(2)
	for i := range t.learners {
		if t.learners[i].def != (Scores{}) {
			version = trackerVersion
		}
	}
	e.RawString(trackerMagic)
	e.U8(version)
	e.U32(uint32(len(t.learners)))
	for i := range t.learners {
		l := &t.learners[i]
		e.String(l.name)
		e.String(l.algorithm)
		e.U64(l.rounds)
		e.U64(l.mistakes)
		e.F64(l.loss)
		e.Bool(l.broken)
		e.U64(l.crossing)
		if l.guaranteed != nil {
			l.sync()
		}
		g := &l.g
		e.String(string(g.Kind))
		e.F64(g.Value)
		e.String(g.Comparator)
		e.F64(g.ComparatorLoss)
		e.F64(g.RegretBound)
		e.String(g.CertificateKind)
		e.F64(g.Certificate)
		e.U64(g.Violations)
		e.U8(uint8(g.Premise))
		if version >= 3 {
			e.U64(l.def.Rounds)
			e.U64(l.def.Mistakes)
			e.F64(l.def.Loss)
		}
	}
}

// historySize is the size of h's encoding, about.
func historySize(h *History) int {
	if h == nil {
		return 1
	}
	n := 17
	for _, s := range h.series {
		n += 4 + 48*len(s)
	}
	return n
}

// encodeHistory appends the tail of a tracker's encoding: its history, h,
// when enabled.
func encodeHistory(e *codec.Encoder, h *History) {
	e.Bool(h != nil)
	if h != nil {
		e.U64(uint64(h.max))
		e.U64(h.stride)
		for _, s := range h.series {
			e.U32(uint32(len(s)))
			for _, p := range s {
				e.U64(p.Round)
				e.U64(p.Mistakes)
				e.F64(p.Loss)
				e.F64(p.Regret)
				e.F64(p.MistakeBound)
				e.F64(p.RegretBound)
			}
		}
	}
}

// Freeze returns a copy of t's state, for encoding on another goroutine
// (as online.Freezer does for a model): the learners' counters encoded
// now, and the history, the large part, copied, into into's memory when
// into is an earlier Freeze of t.
func (t *Tracker) Freeze(into encoding.BinaryMarshaler) encoding.BinaryMarshaler {
	f, ok := into.(*frozenTracker)
	if !ok || f == nil {
		f = new(frozenTracker)
	}
	e := codec.NewEncoder(64 + 160*len(t.learners))
	t.encodeLearners(e)
	f.head = e.Bytes()
	f.on = t.history != nil
	if h := t.history; h != nil {
		series := f.h.series
		f.h = *h
		if len(series) != len(h.series) {
			series = make([][]Point, len(h.series))
		}
		for i, s := range h.series {
			series[i] = append(series[i][:0], s...)
		}
		f.h.series = series
	}
	return f
}

// frozenTracker is a Tracker's Freeze.
type frozenTracker struct {
	head []byte
	on   bool // h is a history
	h    History
}

func (f *frozenTracker) MarshalBinary() ([]byte, error) {
	h := &f.h
	if !f.on {
		h = nil
	}
	e := codec.NewEncoder(len(f.head) + historySize(h))
	e.Raw(f.head)
	encodeHistory(e, h)
	return e.Bytes(), nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary into a tracker
// that has the same learners added (same names and algorithms, in the same
// order); the models those learners track keep their own state and must be
// restored by their owner. The history is restored as encoded: enabled
// with the encoded size when the encoding has one, disabled when it has
// none (call EnableHistory afterwards to start a new one).
//
// Truncated, corrupt or inconsistent encodings (mistakes above rounds, a
// broken flag the guarantee contradicts, history points out of order, ...)
// and encodings of a different set of learners are errors, and then the
// tracker is unchanged.
func (t *Tracker) UnmarshalBinary(b []byte) error {
	ls, h, err := t.decode(b, len(t.learners), nil)
	if err != nil {
		return fmt.Errorf("regret: unmarshal tracker: %w", err)
	}
	t.learners, t.history = ls, h
	return nil
}

// UnmarshalBinaryFrom restores, learner by learner, a state MarshalBinary
// encoded for another set of learners: learner i of t takes the entry of
// encoded learner from[i] (its rounds, mistakes, loss, bound state and
// history series), which must have learner i's name and algorithm; a
// learner with from[i] < 0 keeps its own entry (in a tracker just built,
// the fresh one: no rounds). Encoded learners no learner takes are checked
// as far as they can be without their models, and dropped. The history is
// restored as UnmarshalBinary restores it, the series of a learner that
// takes no entry empty. len(from) must be t.Len(), and no encoded learner
// taken twice. b must encode encoded learners, the state's number: a
// tracker of another number of learners is not the state's.
//
// It is for restoring a model whose configuration added, dropped or
// changed learners (pipeline.Pipeline.UnmarshalBinaryReset). Errors are
// UnmarshalBinary's, and then the tracker is unchanged.
func (t *Tracker) UnmarshalBinaryFrom(b []byte, encoded int, from []int) error {
	if len(from) != len(t.learners) {
		return fmt.Errorf("regret: unmarshal tracker: %d sources for %d learners", len(from), len(t.learners))
	}
	ls, h, err := t.decode(b, encoded, from)
	if err != nil {
		return fmt.Errorf("regret: unmarshal tracker: %w", err)
	}
	t.learners, t.history = ls, h
	return nil
}

// decode decodes b into a copy of t's learners and a new history: learner
// i from encoded learner from[i] (kept as it is when from[i] < 0) of
// encoded, or, with from nil, from encoded learner i of as many.
func (t *Tracker) decode(b []byte, encoded int, from []int) ([]learner, *History, error) {
	d := codec.NewDecoder(b)
	hdr := d.Take(len(trackerMagic) + 1)
	switch {
	case hdr == nil:
		return nil, nil, d.Err()
	case string(hdr[:len(trackerMagic)]) != trackerMagic:
		return nil, nil, fmt.Errorf("not a tracker encoding (magic %q)", hdr[:len(trackerMagic)])
	case hdr[len(trackerMagic)] < 1 || hdr[len(trackerMagic)] > trackerVersion:
		return nil, nil, fmt.Errorf("unsupported format version %d (this build reads 1 to %d)", hdr[len(trackerMagic)], trackerVersion)
	}
	version := hdr[len(trackerMagic)]
	n := d.U32()
	if d.Err() != nil {
		return nil, nil, d.Err()
	}
	if int64(n) != int64(encoded) {
		if from == nil {
			return nil, nil, fmt.Errorf("encoding has %d learners, tracker has %d", n, encoded)
		}
		return nil, nil, fmt.Errorf("encoding has %d learners, the state %d", n, encoded)
	}
	if uint64(n) > uint64(d.Len())/64 { // ≥ 64 bytes per learner
		return nil, nil, codec.ErrTruncated
	}
	// taker[k] is the learner of t that takes encoded learner k, -1 when
	// none does.
	taker := make([]int, n)
	for k := range taker {
		taker[k] = -1
		if from == nil {
			taker[k] = k
		}
	}
	for i, k := range from {
		switch {
		case k < 0:
		case int64(k) >= int64(n):
			return nil, nil, fmt.Errorf("learner %q: no encoded learner %d of %d", t.learners[i].name, k, n)
		case taker[k] >= 0:
			return nil, nil, fmt.Errorf("encoded learner %d taken twice", k)
		default:
			taker[k] = i
		}
	}
	enc := make([]learner, n)
	for k := range enc {
		l := &enc[k]
		name, alg := d.String(maxNameLen), d.String(maxNameLen)
		i := taker[k]
		if i >= 0 {
			if d.Err() == nil && (name != t.learners[i].name || alg != t.learners[i].algorithm) {
				if from == nil {
					return nil, nil, fmt.Errorf("learner %d: encoding has %q (%s), tracker has %q (%s)", i, name, alg, t.learners[i].name, t.learners[i].algorithm)
				}
				return nil, nil, fmt.Errorf("learner %q (%s) takes encoded learner %d, %q (%s)", t.learners[i].name, t.learners[i].algorithm, k, name, alg)
			}
			*l = t.learners[i]
		} else {
			// Dropped: checked without its model.
			*l = learner{name: name, algorithm: alg, dl: t.dl}
		}
		l.digestOK = false // the model is restored apart, if at all
		l.rounds, l.mistakes, l.loss = d.U64(), d.U64(), d.F64()
		l.broken, l.crossing = d.Bool(), d.U64()
		l.gStale, l.roomOK = false, false
		l.g = online.Guarantee{
			Kind:            online.BoundKind(d.String(maxKindLen)),
			Value:           d.F64(),
			Comparator:      d.String(maxKindLen),
			ComparatorLoss:  d.F64(),
			RegretBound:     d.F64(),
			CertificateKind: d.String(maxKindLen),
			Certificate:     d.F64(),
			Violations:      d.U64(),
		}
		if version >= 2 {
			l.g.Premise = online.Premise(d.U8())
		}
		l.def = Scores{}
		if version >= 3 {
			l.def = Scores{Rounds: d.U64(), Mistakes: d.U64(), Loss: d.F64()}
		}
		if d.Err() != nil {
			return nil, nil, d.Err()
		}
		check := l.check
		if i < 0 {
			check = l.checkCounts
		}
		if err := check(); err != nil {
			return nil, nil, fmt.Errorf("learner %q: %w", l.name, err)
		}
		if version < 2 {
			// No premise encoded: the next report reads the model's.
			l.gStale = l.guaranteed != nil
		}
	}
	var h *History
	if d.Bool() {
		var err error
		if h, err = decodeHistory(d, enc); err != nil {
			return nil, nil, err
		}
	}
	if err := d.Finish(); err != nil {
		return nil, nil, err
	}
	if from == nil {
		return enc, h, nil
	}
	ls := make([]learner, len(t.learners))
	copy(ls, t.learners)
	var series [][]Point
	if h != nil {
		series = make([][]Point, len(ls))
	}
	for i, k := range from {
		if k >= 0 {
			ls[i] = enc[k]
		}
		switch {
		case h == nil:
		case k >= 0:
			series[i] = h.series[k]
		default:
			series[i] = make([]Point, 0, h.max)
		}
	}
	if h != nil {
		h.series = series
	}
	return ls, h, nil
}

// check rejects decoded counters no run can produce. With delayed labels
// the bound depends on the delay, which the tracker's owner sets after the
// decoding (SetDelay): the broken flag is not checked against it then.
func (l *learner) check() error {
	if err := l.checkCounts(); err != nil {
		return err
	}
	if l.guaranteed == nil {
		// Add leaves the guarantee zero for a model without a theorem, and
		// Observe never sets it.
		if l.g.Kind != online.NoBound || l.g.Comparator != "" || l.g.CertificateKind != "" || l.g.Premise != 0 || l.broken || l.crossing != 0 ||
			math.Float64bits(l.g.Value)|math.Float64bits(l.g.ComparatorLoss)|math.Float64bits(l.g.RegretBound)|
				math.Float64bits(l.g.Certificate)|l.g.Violations != 0 {
			return errors.New("bound state for a learner without a theorem")
		}
		return nil
	}
	// broken is !holds() as of the last round, and false before the first.
	if l.rounds == 0 && (l.broken || l.crossing != 0) {
		return errors.New("bound crossings before the first round")
	}
	if l.dl.on && l.delayed == nil && (l.broken || l.crossing != 0) {
		return errors.New("a bound that assumes immediate labels checked on a stream with delayed labels")
	}
	if !l.dl.on && l.rounds > 0 && l.broken != !l.holds() {
		return fmt.Errorf("broken flag %v contradicts the bound", l.broken)
	}
	return nil
}

// checkCounts is what check can check of a learner without its model.
func (l *learner) checkCounts() error {
	switch {
	case l.mistakes > l.rounds:
		return fmt.Errorf("%d mistakes in %d rounds", l.mistakes, l.rounds)
	case l.crossing > l.rounds:
		return fmt.Errorf("%d bound crossings in %d rounds", l.crossing, l.rounds)
	case l.def.Rounds > l.rounds || l.def.Mistakes > l.def.Rounds || l.def.Mistakes > l.mistakes ||
		l.rounds-l.def.Rounds < l.mistakes-l.def.Mistakes:
		return fmt.Errorf("%d rounds (%d mistakes) scored against a default label of %d rounds (%d mistakes)",
			l.def.Rounds, l.def.Mistakes, l.rounds, l.mistakes)
	}
	switch l.g.Kind {
	case online.NoBound, online.MistakeBound, online.RegretBound:
	default:
		return fmt.Errorf("unknown bound kind %q", l.g.Kind)
	}
	if l.g.Premise > online.PremiseFalse {
		return fmt.Errorf("unknown premise %d", l.g.Premise)
	}
	return nil
}

func decodeHistory(d *codec.Decoder, ls []learner) (*History, error) {
	max, stride := d.U64(), d.U64()
	if d.Err() != nil {
		return nil, d.Err()
	}
	if max < 2 || max > MaxHistoryPoints {
		return nil, fmt.Errorf("history of %d points per learner, want 2..%d", max, MaxHistoryPoints)
	}
	// Strides double from 1; one past 2^62 could double to 0.
	if bits.OnesCount64(stride) != 1 || stride > 1<<62 {
		return nil, fmt.Errorf("history stride %d is not a power of two up to 2^62", stride)
	}
	h := &History{max: int(max), stride: stride, series: make([][]Point, len(ls))}
	for i := range ls {
		n := d.U32()
		if d.Err() != nil {
			return nil, d.Err()
		}
		if uint64(n) > max {
			return nil, fmt.Errorf("history of learner %q has %d points, at most %d", ls[i].name, n, max)
		}
		// Each point is 48 bytes: refuse a count the input cannot hold
		// before allocating max points for it.
		if uint64(d.Len()) < 48*uint64(n) {
			return nil, codec.ErrTruncated
		}
		s := make([]Point, n, max)
		var prev Point
		for k := range s {
			p := Point{Round: d.U64(), Mistakes: d.U64(), Loss: d.F64(), Regret: d.F64(), MistakeBound: d.F64(), RegretBound: d.F64()}
			if p.Round <= prev.Round || p.Round%stride != 0 || p.Round > ls[i].rounds ||
				p.Mistakes < prev.Mistakes || p.Mistakes > p.Round || p.Mistakes > ls[i].mistakes {
				return nil, fmt.Errorf("history of learner %q: point %d (round %d) inconsistent", ls[i].name, k, p.Round)
			}
			prev = p
			s[k] = p
		}
		h.series[i] = s
	}
	return h, nil
}
