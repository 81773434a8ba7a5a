package pipeline

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
	"strings"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// UnmarshalBinary restores a state encoded by MarshalBinary into p, which
// must have been built by New from the same configuration: the same
// features.bits and features.scale, and the same learners (names,
// algorithms and experts, in order) with the same settings (a state of
// format version 3 has their digests: SharedDigest, LearnerDigest). A
// state of a different configuration is refused with an error naming what
// differs (UnmarshalBinaryReset restores one of other learners in part);
// truncated or corrupt bytes (the checksum covers every byte) and unknown
// format versions are refused too. On any error p is unchanged: the state
// is decoded into freshly built learners, which replace p's only once
// everything decoded.
//
// p keeps its start time (Report's seconds), and its Tracker keeps its
// identity (the same *regret.Tracker, with restored contents; its history
// is the encoded one, see regret.Tracker.UnmarshalBinary). Models p had
// handed out before are no longer p's.
//
// It builds a whole new set of learners (as New does, SOA's Littlestone
// dimension tables included) besides decoding: a restart's cost, not a
// per-event one.
func (p *Pipeline) UnmarshalBinary(b []byte) error {
	q, err := p.renew()
	if err != nil {
		return fmt.Errorf("pipeline: unmarshal: %w", err)
	}
	if err := q.decode(b); err != nil {
		return fmt.Errorf("pipeline: unmarshal: %w", err)
	}
	tr := p.tracker
	*tr = *q.tracker
	p.nodes, p.scaler, p.domains, p.preds, p.counts, p.delay, p.warm = q.nodes, q.scaler, q.domains, q.preds, q.counts, q.delay, q.warm
	p.space, p.maps = q.space, q.maps
	return nil
}

// Clone returns an independent deep copy of p: the same learners in the
// same state, counts and tracker (history included), and p's start time.
// Nothing is shared, so the copy may be handed to another goroutine and
// used (Predict, Process, Report) while p goes on; Clone itself reads p,
// so call it from the goroutine that owns p.
//
// Cost: a MarshalBinary, a New and an UnmarshalBinary's decoding — for
// each linear learner its weights: 8·2^bits bytes (perceptron, ogd; adagrad
// keeps 16 or 32 bytes a slot)
// allocated twice (2 MiB each at the default bits 18) and its learned
// weights encoded, plus what New spends
// building hypothesis classes (SOA's Littlestone dimension tables). Take a
// clone per batch of requests or per report interval, not per event.
func (p *Pipeline) Clone() (*Pipeline, error) {
	q, _, err := p.CloneDigest()
	return q, err
}

// CloneDigest is Clone, and returns the model's digest too (ModelDigest
// of its state): equal digests are equal models, whichever process holds
// them (a serving replica's loaded from a checkpoint, the learning
// service's own copy).
func (p *Pipeline) CloneDigest() (*Pipeline, [32]byte, error) {
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, [32]byte{}, err
	}
	sum, err := ModelDigest(b)
	if err != nil {
		return nil, [32]byte{}, err
	}
	q, err := p.cloneOf(b)
	return q, sum, err
}

// cloneOf returns a pipeline of p's configuration restored from b, p's
// state.
func (p *Pipeline) cloneOf(b []byte) (*Pipeline, error) {
	q, err := p.renew()
	if err != nil {
		return nil, fmt.Errorf("pipeline: clone: %w", err)
	}
	if err := q.decode(b); err != nil {
		return nil, fmt.Errorf("pipeline: clone: %w", err) // a bug: p's own state
	}
	q.start = p.start
	return q, nil
}

// stateShape is what a state is of: the header MarshalBinary writes before
// the state itself.
type stateShape struct {
	version  uint8
	bits     uint64
	scale    string
	shared   [32]byte // version 3 on
	learners []stateLearner
}

type stateLearner struct {
	name, algorithm string
	digest          [32]byte // version 3 on
	experts         []int
}

// openState checks b's magic, format version and checksum, and reads what
// the state is of; the decoder returned is at the state that follows.
func openState(b []byte) (*stateShape, *codec.Decoder, error) {
	const header = len(stateMagic) + 1
	switch {
	case len(b) < header+4:
		return nil, nil, fmt.Errorf("%d bytes: %w", len(b), codec.ErrTruncated)
	case string(b[:len(stateMagic)]) != stateMagic:
		return nil, nil, fmt.Errorf("not a pipeline state (magic %q)", b[:len(stateMagic)])
	case b[len(stateMagic)] < 1 || b[len(stateMagic)] > stateVersion:
		return nil, nil, fmt.Errorf("unsupported state format version %d (this build reads versions 1 to %d)", b[len(stateMagic)], stateVersion)
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if got, want := crc32.Checksum(body, castagnoli), uint32(sum[0])|uint32(sum[1])<<8|uint32(sum[2])<<16|uint32(sum[3])<<24; got != want {
		return nil, nil, fmt.Errorf("checksum mismatch (%08x, encoded %08x): the state is truncated or corrupt", got, want)
	}
	sh := &stateShape{version: b[len(stateMagic)]}
	d := codec.NewDecoder(body[header:])
	sh.bits, sh.scale = d.U64(), d.String(maxScaleLen)
	if sh.version >= 3 {
		copy(sh.shared[:], d.Take(len(sh.shared)))
	}
	n := d.U32()
	if d.Err() != nil {
		return nil, nil, d.Err()
	}
	least := uint64(20) // bytes per learner: two strings' lengths, the experts' count
	if sh.version >= 3 {
		least += 32 // and the digest
	}
	if uint64(n) > uint64(d.Len())/least {
		return nil, nil, codec.ErrTruncated
	}
	sh.learners = make([]stateLearner, n)
	var seen map[string]bool
	if sh.version >= 3 {
		seen = make(map[string]bool, n)
	}
	for i := range sh.learners {
		l := &sh.learners[i]
		l.name, l.algorithm = d.String(maxNameLen), d.String(maxNameLen)
		if sh.version >= 3 {
			copy(l.digest[:], d.Take(len(l.digest)))
			if d.Err() == nil && seen[l.name] {
				return nil, nil, fmt.Errorf("learner %q twice", l.name)
			}
			seen[l.name] = true
		}
		k := d.U32()
		if d.Err() == nil && uint64(k) > uint64(i) {
			return nil, nil, fmt.Errorf("learner %d (%q) has %d experts among the %d learners before it", i, l.name, k, i)
		}
		for range k {
			x := d.U32()
			if d.Err() == nil && int64(x) >= int64(i) {
				return nil, nil, fmt.Errorf("learner %d (%q) has expert %d, not a learner before it", i, l.name, x)
			}
			l.experts = append(l.experts, int(x))
		}
		if d.Err() != nil {
			return nil, nil, d.Err()
		}
	}
	return sh, d, nil
}

// decode restores b into q, a pipeline fresh from New; on error q is
// half-restored and must be discarded.
func (q *Pipeline) decode(b []byte) error { return q.decodeNoting(b, false) }

// decodeNoting is decode; with own, b is a MarshalBinary of this
// process's (a spilled model's), whose learners' encodings are the ones
// they encode to again, so that the tracker takes their state digests
// from them (regret.Tracker.NoteState) rather than from a second
// encoding at the next report. A state of another build may be of an
// earlier format, which its learners do not encode to: not own.
func (q *Pipeline) decodeNoting(b []byte, own bool) error {
	sh, d, err := openState(b)
	if err != nil {
		return err
	}
	if err := q.sameShape(sh); err != nil {
		return err
	}
	from := make([]int, len(q.nodes))
	for i := range from {
		from[i] = i
	}
	var blobs [][]byte
	if own {
		blobs = make([][]byte, len(q.nodes))
	}
	if err := q.decodeState(d, sh, from, false, blobs); err != nil {
		return err
	}
	for i, b := range blobs {
		q.tracker.NoteState(i, b)
	}
	return nil
}

// decodeState restores the state d is at, of shape sh, into q, a pipeline
// fresh from New: learner i from the state's learner from[i], or, when
// from[i] < 0, afresh (partial: from is not every learner in order, see
// UnmarshalBinaryReset). On error q is half-restored and must be
// discarded. blobs, when not nil, gets each node's encoding (aliasing
// d's bytes).
func (q *Pipeline) decodeState(d *codec.Decoder, sh *stateShape, from []int, partial bool, blobs [][]byte) error {
	taker := make([]int, len(sh.learners)) // the node that takes each learner's state, -1 when none
	for k := range taker {
		taker[k] = -1
	}
	for i, k := range from {
		if k >= 0 {
			taker[k] = i
		}
	}
	for k := range sh.learners {
		loss := d.F64()
		var since uint64
		if sh.version >= 3 {
			since = d.U64()
		}
		blob := d.Blob()
		var calib *platt
		if sh.version >= 5 && d.Bool() {
			calib = &platt{a: d.F64(), b: d.F64(), ga: d.F64(), gb: d.F64()}
		}
		if d.Err() != nil {
			return d.Err()
		}
		i := taker[k]
		if i < 0 {
			continue // dropped
		}
		n := &q.nodes[i]
		if (calib != nil) != (n.calib != nil) && sh.version >= 5 {
			return fmt.Errorf("learner %q: calibrated %v in the state, %v in the configuration", n.name, calib != nil, n.calib != nil)
		}
		if calib != nil {
			if !calib.valid() {
				return fmt.Errorf("learner %q: calibration a=%g b=%g, sums %g %g: not finite, or negative sums", n.name, calib.a, calib.b, calib.ga, calib.gb)
			}
			n.calib = calib
		}
		n.loss, n.since = loss, since
		if err := n.model().UnmarshalBinary(blob); err != nil {
			return fmt.Errorf("learner %q: %w", n.name, err)
		}
		if blobs != nil {
			blobs[i] = blob
		}
	}
	if has := d.Bool(); d.Err() == nil && has != (q.scaler != nil) {
		return fmt.Errorf("scaler present %v with features.scale %q", has, q.spec.Features.Scale)
	}
	if q.scaler != nil {
		blob := d.Blob()
		if d.Err() != nil {
			return d.Err()
		}
		if err := q.scaler.UnmarshalBinary(blob); err != nil {
			return err
		}
	}
	if err := q.decodeCounts(d); err != nil {
		return err
	}
	blob := d.Blob()
	if d.Err() != nil {
		return d.Err()
	}
	if !partial {
		if err := q.tracker.UnmarshalBinary(blob); err != nil {
			return err
		}
	} else if err := q.tracker.UnmarshalBinaryFrom(blob, len(sh.learners), from); err != nil {
		return err
	}
	delayed := false // version 1 has no delayed labels
	if sh.version >= 2 {
		delayed = d.Bool()
	}
	if d.Err() == nil && delayed != (q.delay != nil) {
		return fmt.Errorf("delayed labels %v in the state, %v in the configuration", delayed, q.delay != nil)
	}
	if q.delay != nil {
		q.delay.decode(d, len(sh.learners), q.scaler != nil, q.counts.Events, q.counts.Learned)
		c, st := &q.counts, &q.delay.stats
		switch {
		case d.Err() != nil:
		case st.ExpiredLearned > st.Expired || q.delay.def == 0 && st.ExpiredLearned != 0:
			return fmt.Errorf("%d expired events learned with the default label of %d expired (default label %d)", st.ExpiredLearned, st.Expired, q.delay.def)
		case st.Unknown != c.InvalidBy[ReasonLabelUnknown] || st.Late != c.InvalidBy[ReasonLabelLate] || st.Duplicate != c.InvalidBy[ReasonLabelDuplicate]:
			return fmt.Errorf("labels unknown, late, duplicate %d, %d, %d, invalid by those reasons %d, %d, %d",
				st.Unknown, st.Late, st.Duplicate, c.InvalidBy[ReasonLabelUnknown], c.InvalidBy[ReasonLabelLate], c.InvalidBy[ReasonLabelDuplicate])
		case st.Joined+st.ExpiredLearned > c.Learned || st.DelayRounds > c.Learned:
			return fmt.Errorf("%d joined and %d expired events learned, delay %d rounds, of %d learned rounds", st.Joined, st.ExpiredLearned, st.DelayRounds, c.Learned)
		}
		q.tracker.SetDelay(st.DelayRounds)
		for i := range q.tracker.Len() {
			if def := q.tracker.Defaults(i); d.Err() == nil && def.Rounds > st.ExpiredLearned {
				return fmt.Errorf("learner %q: %d rounds scored against the default label, of %d expired events learned with it", q.nodes[i].name, def.Rounds, st.ExpiredLearned)
			}
		}
		if d.Err() == nil && c.Learned+c.Predicted+c.Invalid != c.Events+st.ExpiredLearned {
			return fmt.Errorf("counts do not add up: %d events, %d learned (%d of them expired events given the default label), %d predicted, %d invalid",
				c.Events, c.Learned, q.delay.stats.ExpiredLearned, c.Predicted, c.Invalid)
		}
	}
	if q.delay == nil {
		for i := range q.tracker.Len() {
			if q.tracker.Defaults(i) != (regret.Scores{}) {
				return fmt.Errorf("learner %q: rounds scored against a default label without delayed labels", q.nodes[i].name)
			}
		}
	}
	if sh.version >= 4 && d.Bool() {
		w := &warmStart{}
		copy(w.sha[:], d.Take(len(w.sha)))
		if w.events = d.U64(); d.Err() == nil && w.events > q.counts.Events {
			return fmt.Errorf("started from a model of %d events, more than the %d seen", w.events, q.counts.Events)
		}
		if sh.version >= 6 && d.Bool() {
			var err error
			if w.base, err = q.decodeWarmBase(d, len(sh.learners), from); err != nil {
				return err
			}
		}
		q.warm = w
	}
	if err := d.Finish(); err != nil {
		return err
	}
	for i, k := range from {
		if k < 0 {
			q.nodes[i].since = q.counts.Learned // starts now
		}
	}
	if partial && q.delay != nil {
		q.predictWaiting(from)
	}
	// Process observes every learner on every labeled event since it
	// started.
	for i := range q.nodes {
		n := &q.nodes[i]
		if r := q.tracker.Rounds(i); n.since > q.counts.Learned || r != q.counts.Learned-n.since {
			if n.since == 0 {
				return fmt.Errorf("learner %q tracked %d rounds, but %d events were learned", n.name, r, q.counts.Learned)
			}
			return fmt.Errorf("learner %q tracked %d rounds since round %d, but %d events were learned", n.name, r, n.since, q.counts.Learned)
		}
	}
	return nil
}

// predictWaiting gives the events waiting for their labels, which the
// store holds with the predictions of the state's learners, the
// predictions of q's: learner i's is the state's learner from[i]'s, and a
// learner started afresh (from[i] < 0) predicts each now, from its fresh
// state, as it would have on the event's arrival had it been there — a
// Weighted-Majority over learners from its experts' predictions of the
// event — so that it is scored on, and learns from, a prediction made
// before the label when the label comes.
func (q *Pipeline) predictWaiting(from []int) {
	d := q.delay
	for k := range d.slots {
		s := &d.slots[k]
		if !s.used {
			continue
		}
		q.mapWaiting(s.raw, s.scaled)
		for i, j := range from {
			n := &q.nodes[i]
			switch {
			case j >= 0:
				q.preds[i] = s.preds[j]
			case n.over != nil:
				for e, x := range n.experts {
					n.advice[e] = q.preds[x].Label
				}
				q.preds[i] = n.over.PredictAdvice(n.advice)
			default:
				q.preds[i] = n.learner.Predict(q.inputOf(n, s.raw, s.scaled))
			}
		}
		s.preds = append(s.preds[:0:0], q.preds...)
	}
}

// sameShape compares what a state is of with q's configuration, naming
// the first difference.
func (q *Pipeline) sameShape(sh *stateShape) error {
	f := q.spec.Features
	if sh.bits != uint64(f.Bits) {
		return fmt.Errorf("state is of features.bits %d, pipeline has %d", sh.bits, f.Bits)
	}
	if sh.scale != f.Scale {
		return fmt.Errorf("state is of features.scale %q, pipeline has %q", sh.scale, f.Scale)
	}
	ls := sh.learners
	names := func(pick func(i int) string, m int) string {
		s := make([]string, m)
		for i := range s {
			s[i] = pick(i)
		}
		return strings.Join(s, ", ")
	}
	stateNames := func(idx []int) string { return names(func(i int) string { return ls[idx[i]].name }, len(idx)) }
	ourNames := func(idx []int) string { return names(func(i int) string { return q.nodes[idx[i]].name }, len(idx)) }
	for i := range min(len(ls), len(q.nodes)) {
		l, nd := &ls[i], &q.nodes[i]
		if l.name != nd.name || l.algorithm != nd.algorithm {
			return fmt.Errorf("learner %d: state has %q (%s), pipeline has %q (%s)", i, l.name, l.algorithm, nd.name, nd.algorithm)
		}
		if !slices.Equal(l.experts, nd.experts) {
			return fmt.Errorf("learner %q: state's experts are [%s], pipeline's are [%s]", nd.name, stateNames(l.experts), ourNames(nd.experts))
		}
	}
	if len(ls) != len(q.nodes) {
		return fmt.Errorf("state has %d learners (%s), pipeline has %d (%s)",
			len(ls), names(func(i int) string { return ls[i].name }, len(ls)),
			len(q.nodes), names(func(i int) string { return q.nodes[i].name }, len(q.nodes)))
	}
	if sh.version < 3 {
		return nil // no digests: the learners' own encodings check what they can
	}
	if sh.shared != q.shared && !slices.Contains(q.compatShared, sh.shared) {
		return errors.New("state is of other input, features or labels settings than the pipeline's")
	}
	for i := range ls {
		if ls[i].digest != q.nodes[i].digest {
			return fmt.Errorf("learner %q: state is of other settings than the pipeline's", ls[i].name)
		}
	}
	return nil
}

// decodeCounts reads the event counters, checking that they add up as
// Process and Reject keep them.
func (q *Pipeline) decodeCounts(d *codec.Decoder) error {
	c := Counts{Events: d.U64(), Learned: d.U64(), Predicted: d.U64(), Invalid: d.U64()}
	n := d.U32()
	if d.Err() != nil {
		return d.Err()
	}
	if uint64(n) > uint64(d.Len())/16 { // ≥ 16 bytes per reason
		return codec.ErrTruncated
	}
	c.InvalidBy = make(map[event.Reason]uint64, n)
	var prev string
	var sum uint64
	for k := range n {
		r, v := d.String(maxReasonLen), d.U64()
		if d.Err() != nil {
			return d.Err()
		}
		if (k > 0 && r <= prev) || v == 0 {
			return fmt.Errorf("invalid-event reasons out of order or zero at %q", r)
		}
		prev = r
		c.InvalidBy[event.Reason(r)] = v
		var carry uint64
		if sum, carry = bits.Add64(sum, v, 0); carry != 0 {
			return errors.New("invalid-event counts overflow")
		}
	}
	total, c1 := bits.Add64(c.Learned, c.Predicted, 0)
	total, c2 := bits.Add64(total, c.Invalid, 0)
	// With delayed labels, an expired event learned with the default
	// label is a labeled round without a record of its own: checked once
	// the store is decoded.
	if sum != c.Invalid || (total != c.Events && q.delay == nil) || c1|c2 != 0 {
		return fmt.Errorf("counts do not add up: %d events, %d learned, %d predicted, %d invalid (%d by reason)",
			c.Events, c.Learned, c.Predicted, c.Invalid, sum)
	}
	q.counts = c
	return nil
}
