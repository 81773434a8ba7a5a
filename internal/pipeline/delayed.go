package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"strings"
	"unsafe"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/online"
)

// Delayed labels (labels.delayed). An event with an id, features and no
// label is predicted on arrival, like any unlabeled event, and then waits
// in the pipeline's store with the predictions it was served and the
// vectors they were computed from. A label event (event.Event.LabelOnly:
// an id and a label, no features) is its label: every learner is scored
// on the prediction it served on arrival — mistakes, loss, regret — and
// learns, as the delayed-feedback literature defines it, from that
// prediction and the vector it served it on, applied to its state now
// (online.Learner.Learn: the Perceptron updates iff y·score_served ≤ 0,
// OGD steps along the loss gradient at the served score, a version space
// removes the hypotheses that disagree, Weighted-Majority charges each
// expert its served advice).
//
// Time is counted in records of the partition (every record the pipeline
// sees, invalid ones included), never by the wall clock, so live runs and
// replays agree. Before each record, the events that have waited more
// than wait records expire, oldest first; past max_pending the oldest
// expires to make room. An expired event is dropped, or learned with the
// default label when one is set: a round the learners learn from, which
// the tracker scores apart from those of the labels the stream gave
// (regret.Tracker.ObserveDefault). A label whose id is not waiting is
// rejected with its reason — late (the event expired), duplicate (the
// event was labeled: the first label wins) or unknown — counted as an
// invalid record and dead-lettered. The ids of the last max_pending
// events labeled or expired are remembered to tell late and duplicate
// labels from unknown ones; older ones count as unknown (which the labels
// report's warning counts as late once events expired: labelsWarning).
//
// The store is part of the model's state: in the pipeline's encoding
// (checkpoints, clones) and in the digest of the labels report.

// The reasons of rejected label events.
const (
	ReasonLabelUnknown   event.Reason = "label_unknown"
	ReasonLabelLate      event.Reason = "label_late"
	ReasonLabelDuplicate event.Reason = "label_duplicate"
)

// The store keeps its events in slots that are reused, with their slices:
// once it has held max_pending events, holding, joining and expiring
// allocate nothing. Ids are found by a hash of their bytes (hash/maphash)
// in a chainIndex, one for the waiting events and one for the remembered
// ids, so that no string is made per event.

// pendingSlot is an event waiting for its label, or a free slot.
// Its id and hash are in the store's index of waiting events.
type pendingSlot struct {
	gen uint32 // bumped when the slot is freed: queue entries of earlier uses are stale
	at  uint64 // the record count when it arrived
	// learnedAt is the count of learned rounds when it arrived: the
	// rounds learned before its label are the delay its learners' bounds
	// pay for (online.DelayGuaranteed).
	learnedAt uint64
	raw       online.Vector
	// scaled is the vector the learners that do not read raw values
	// predicted on, when the pipeline scales; empty otherwise (they read
	// raw).
	scaled online.Vector
	preds  []online.Prediction
	used   bool
}

// room is the bytes of s's vectors and predictions.
func (s *pendingSlot) room() int {
	return 12*(cap(s.raw.Idx)+cap(s.scaled.Idx)) + 24*cap(s.preds) // 4+8 a vector entry
}

// queued is a slot in arrival order, with the generation it was held in
// and the record count when it arrived (its slot's at): tick reads the
// queue alone.
type queued struct {
	slot int32
	gen  uint32
	at   uint64
}

// Resolutions remembered for late and duplicate labels.
const (
	resolvedJoined  = 1
	resolvedExpired = 2
)

// delayedStore is the pipeline's store of events waiting for labels.
type delayedStore struct {
	wait uint64
	max  int
	def  int8 // the default label; 0 when expired events are dropped
	seed maphash.Seed

	slots   []pendingSlot
	waiting chainIndex // the ids of the slots in use
	free    []int32
	n       int      // slots in use
	queue   []queued // arrival order, from head; stale entries are skipped
	head    int

	// The ids of the last max events labeled or expired and how
	// (resolvedJoined, resolvedExpired): a ring of slots, seenNext the
	// next to overwrite once it is full.
	seen     chainIndex
	seenHow  []uint8
	seenNext int

	stats LabelStats
	// held counts the bytes the slots hold: each slot's fields and its
	// vectors' and predictions' room, which a slot keeps when freed.
	held int
}

// Bytes estimates the memory d holds: its slots, their vectors, the ids
// waiting and remembered, the queue (Pipeline.Footprint).
func (d *delayedStore) Bytes() int {
	return d.held + d.waiting.held + d.seen.held + 24*cap(d.queue) + 4*cap(d.free) + cap(d.seenHow)
}

// LabelStats are the counters of the labels report.
type LabelStats struct {
	Joined, Expired, ExpiredLearned uint64
	Unknown, Late, Duplicate        uint64
	DelaySum, DelayMax              uint64 // in records, over joined events
	// DelayRounds is the most rounds learned while an event waited for
	// its label (joined, or expired and learned with the default label).
	DelayRounds uint64
	// DelayCounts counts joined events by delay: [i] those with delay at
	// most LabelDelayBuckets[i] (and above the bucket before), the last
	// those above every bound.
	DelayCounts [len(LabelDelayBuckets) + 1]uint64
}

// LabelDelayBuckets are the upper bounds, in records, of the buckets of
// label delays (streamlearn_label_delay_events).
var LabelDelayBuckets = [...]float64{0, 1, 10, 100, 1000, 10000, 100000, 1000000}

func newDelayedStore(c *config.Config) (*delayedStore, error) {
	l := c.Labels
	if !l.Delayed {
		return nil, nil
	}
	d := &delayedStore{wait: uint64(l.Wait), max: l.MaxPending, seed: maphash.MakeSeed()}
	if l.DefaultLabel != nil {
		y, err := EventConfig(c).ParseLabel(*l.DefaultLabel)
		if err != nil {
			return nil, fmt.Errorf("pipeline: labels.default_label: %w", err)
		}
		d.def = y
	}
	return d, nil
}

// alloc returns a free slot, growing the slots when none is.
func (d *delayedStore) alloc() int32 {
	if n := len(d.free); n > 0 {
		i := d.free[n-1]
		d.free = d.free[:n-1]
		return i
	}
	d.slots = append(d.slots, pendingSlot{})
	d.held += int(unsafe.Sizeof(pendingSlot{}))
	return int32(len(d.slots) - 1)
}

// release frees slot i, once its event joined or expired; first is the
// first slot of its hash.
func (d *delayedStore) release(i, first int32) {
	d.waiting.remove(i, first)
	s := &d.slots[i]
	s.used = false
	s.gen++
	d.n--
	d.free = append(d.free, i)
}

// oldest returns the slot of the waiting event that arrived first, and
// drops the stale entries before it; -1 when none waits.
func (d *delayedStore) oldest() int32 {
	for d.head < len(d.queue) {
		q := d.queue[d.head]
		if s := &d.slots[q.slot]; s.used && s.gen == q.gen {
			return q.slot
		}
		d.pop()
	}
	return -1
}

// tick counts a record and expires what waited too long before it. The
// queue is in arrival order: once its head, live or stale, arrived within
// the wait, so did every event after it.
func (p *Pipeline) tick() {
	p.counts.Events++
	if d := p.delay; d != nil {
		for d.head < len(d.queue) {
			q := d.queue[d.head]
			if p.counts.Events-q.at <= d.wait {
				break
			}
			d.pop()
			if s := &d.slots[q.slot]; s.used && s.gen == q.gen {
				p.expire(q.slot)
			}
		}
	}
}

// pop drops the head of the queue, compacting it now and then.
func (d *delayedStore) pop() {
	d.head++
	if d.head > 1024 && d.head*2 > len(d.queue) {
		n := copy(d.queue, d.queue[d.head:])
		d.queue, d.head = d.queue[:n], 0
	}
}

// expire ends the wait of the event in slot i: learned with the default
// label, or dropped. An event that came with the model file p started
// from is dropped: the file may start the models of several partitions,
// and its label, if it comes, comes to one of them.
func (p *Pipeline) expire(i int32) {
	d := p.delay
	d.stats.Expired++
	if d.def != 0 && (p.warm == nil || d.slots[i].at > p.warm.events) {
		d.stats.ExpiredLearned++
		p.learnServed(&d.slots[i], d.def, true)
	}
	h := d.waiting.hashes[i]
	d.remember(d.waiting.ids[i], h, resolvedExpired)
	d.release(i, d.waiting.head(h))
}

// remember notes how id (of hash h) was resolved, forgetting the oldest
// past max.
func (d *delayedStore) remember(id []byte, h uint64, how uint8) {
	i, first := d.seen.find(id, h)
	if i >= 0 {
		d.seenHow[i] = how // an id used again: its place stays
		return
	}
	if len(d.seenHow) < d.max {
		d.seenHow = append(d.seenHow, how)
		i = int32(len(d.seenHow) - 1)
	} else {
		i = int32(d.seenNext)
		d.seenNext = (d.seenNext + 1) % d.max
		old := d.seen.hashes[i]
		d.seen.remove(i, d.seen.head(old))
		if old == h {
			first = d.seen.head(h) // the chain just read changed
		}
		d.seenHow[i] = how
	}
	d.seen.add(i, id, h, first)
}

// resolved returns how id was resolved, 0 when it is not remembered.
func (d *delayedStore) resolved(id []byte, h uint64) uint8 {
	if i, _ := d.seen.find(id, h); i >= 0 {
		return d.seenHow[i]
	}
	return 0
}

// hold stores ev, just predicted (p.preds, p.scaled), to wait for its
// label. An id already waiting keeps its first event.
func (p *Pipeline) hold(ev *event.Event) {
	d := p.delay
	// Rounds learned from here on count in its delay, the eviction's
	// below included: it comes after the prediction served.
	learnedAt := p.counts.Learned
	h := idHash(maphash.Bytes(d.seed, ev.ID))
	found, first := d.waiting.find(ev.ID, h)
	if found >= 0 {
		return
	}
	if d.n >= d.max {
		if i := d.oldest(); i >= 0 {
			d.pop()
			p.expire(i)
			first = d.waiting.head(h) // the expired one may have been first
		}
	}
	i := d.alloc()
	s := &d.slots[i]
	s.at, s.learnedAt, s.used = p.counts.Events, learnedAt, true
	room := s.room()
	copyVector(&s.raw, ev.X)
	if p.scaler != nil {
		copyVector(&s.scaled, p.scaled)
	}
	s.preds = append(s.preds[:0], p.preds...)
	d.held += s.room() - room
	d.waiting.add(i, ev.ID, h, first)
	d.n++
	d.queue = append(d.queue, queued{i, s.gen, s.at})
	if len(d.queue)-d.head > 2*d.n+1024 {
		d.compact()
	}
}

// compact drops the stale entries of the queue (events labeled while an
// older one still waits at its head), keeping the live ones in order, so
// that the queue holds about max_pending entries, not wait.
func (d *delayedStore) compact() {
	live := d.queue[:0]
	for _, q := range d.queue[d.head:] {
		if s := &d.slots[q.slot]; s.used && s.gen == q.gen {
			live = append(live, q)
		}
	}
	d.queue, d.head = live, 0
}

// copyVector copies x into dst, reusing dst's slices.
func copyVector(dst *online.Vector, x online.Vector) {
	dst.Idx = append(dst.Idx[:0], x.Idx...)
	dst.Val = append(dst.Val[:0], x.Val[:len(x.Idx)]...)
}

// join learns the label event ev: the label of the waiting event of its
// id, or a rejected label with its reason.
func (p *Pipeline) join(ev *event.Event) event.Reason {
	p.tick()
	d := p.delay
	h := idHash(maphash.Bytes(d.seed, ev.ID))
	i, first := d.waiting.find(ev.ID, h)
	if i < 0 {
		reason := ReasonLabelUnknown
		switch d.resolved(ev.ID, h) {
		case resolvedJoined:
			reason = ReasonLabelDuplicate
			d.stats.Duplicate++
		case resolvedExpired:
			reason = ReasonLabelLate
			d.stats.Late++
		default:
			d.stats.Unknown++
		}
		p.counts.Invalid++
		p.counts.InvalidBy[reason]++
		return reason
	}
	s := &d.slots[i]
	delay := p.counts.Events - s.at
	d.stats.Joined++
	d.stats.DelaySum += delay
	d.stats.DelayMax = max(d.stats.DelayMax, delay)
	b := 0
	for b < len(LabelDelayBuckets) && float64(delay) > LabelDelayBuckets[b] {
		b++
	}
	d.stats.DelayCounts[b]++
	p.learnServed(s, ev.Label, false)
	d.remember(d.waiting.ids[i], h, resolvedJoined)
	d.release(i, first)
	return ""
}

// learnServed scores every learner on the prediction it served the event
// in s and has it learn label y from it: one labeled round; def says y is
// the default label, not one the stream gave (the tracker keeps those
// rounds apart: regret.Tracker.ObserveDefault).
func (p *Pipeline) learnServed(s *pendingSlot, y int8, def bool) {
	if d := p.counts.Learned - s.learnedAt; d > p.delay.stats.DelayRounds {
		p.delay.stats.DelayRounds = d
		p.tracker.SetDelay(d)
	}
	p.counts.Learned++
	p.mapWaiting(s.raw, s.scaled)
	for i := range p.nodes {
		n := &p.nodes[i]
		x := p.inputOf(n, s.raw, s.scaled)
		served := s.preds[i]
		n.loss = n.learner.Loss(served, y)
		n.learner.Learn(x, served, y)
		if def {
			p.tracker.ObserveDefault(i, served, y, n.loss)
		} else {
			p.tracker.Observe(i, served, y, n.loss)
		}
		if n.calib != nil {
			n.calib.learn(served.Score, y)
		}
	}
}

// LabelsReport is the labels section of a report (delayed labels only).
type LabelsReport struct {
	Joined  uint64 `json:"joined"`
	Pending uint64 `json:"pending"`
	Expired uint64 `json:"expired"`
	// ExpiredLearned counts the expired events learned with the default
	// label.
	ExpiredLearned uint64      `json:"expired_learned"`
	Unknown        uint64      `json:"unknown"`
	Late           uint64      `json:"late"`
	Duplicate      uint64      `json:"duplicate"`
	Delay          DelayReport `json:"delay"`
	// Warning, when not empty, says that the labels the stream gave were
	// not what the learners were scored on: most of them came after
	// their events expired (more late than in time, joined or with their
	// events, once MinLateLabels came late; unknown labels count as late
	// once events expired: labelsWarning), or no round was scored on one
	// while expired events were learned with the default label.
	Warning string `json:"warning,omitempty"`
	// StateSHA256 is the SHA-256 of the store's canonical encoding: the
	// events waiting, with the predictions they were served, the ids
	// remembered, the counters. Final reports have it (StoreDigest), not
	// the snapshots taken while a model learns: it costs a pass over the
	// store.
	StateSHA256 string `json:"state_sha256,omitempty"`

	// DelaySum and DelayCounts are the delay histogram's, for metrics
	// (LabelStats).
	DelaySum    uint64                             `json:"-"`
	DelayCounts [len(LabelDelayBuckets) + 1]uint64 `json:"-"`
}

// DelayReport is the delay of joined labels, in records of the partition.
type DelayReport struct {
	Max  uint64  `json:"max"`
	Mean float64 `json:"mean"`
}

// report returns the labels report, of a pipeline that learned learned
// rounds.
func (d *delayedStore) report(learned uint64) *LabelsReport {
	s := d.stats
	r := &LabelsReport{Joined: s.Joined, Pending: uint64(d.n), Expired: s.Expired, ExpiredLearned: s.ExpiredLearned,
		Unknown: s.Unknown, Late: s.Late, Duplicate: s.Duplicate, Delay: DelayReport{Max: s.DelayMax},
		DelaySum: s.DelaySum, DelayCounts: s.DelayCounts}
	if s.Joined > 0 {
		r.Delay.Mean = float64(s.DelaySum) / float64(s.Joined)
	}
	r.Warning = labelsWarning(s, d.wait, d.max, learned-s.ExpiredLearned)
	return r
}

// MinLateLabels is how many labels must have come after their events
// expired before the report says that most did (LabelsReport.Warning):
// the first few labels of a stream say little.
const MinLateLabels = 10

// labelsWarning returns the labels report's warning for the counters s
// under wait and max_pending max, with real rounds learned from labels
// that came in time (joined, or with their events), "" when there is
// nothing to say.
//
// A label that came after its event expired is late while the store
// remembers the event's id, which it does for the last max events labeled
// or expired; after that it is unknown. So once events expired, unknown
// labels count with the late ones: labels whose events expired long
// before (max_pending pushing each out after a few newer events) are
// unknown, and would otherwise hide that most labels came late. The rule
// reads the counters alone: no state of its own, the same live and in a
// replay.
//
// The limit named follows from the configuration: the events waiting
// arrived within the last wait records, so at most wait of them wait
// before a record's event is held, and max_pending makes room only when
// max ≤ wait.
func labelsWarning(s LabelStats, wait uint64, max int, real uint64) string {
	var parts []string
	unknown := uint64(0)
	if s.Expired > 0 {
		unknown = s.Unknown
	}
	if after := s.Late + unknown; after >= MinLateLabels && after > real {
		counts := fmt.Sprintf("%d late", s.Late)
		if unknown > 0 {
			counts += fmt.Sprintf(", %d unknown (ids of events expired before the last %d are not remembered: these labels came late, or for no event)", unknown, max)
		}
		limit, fix := fmt.Sprintf("wait %d records", wait), "raise labels.wait"
		if uint64(max) <= wait {
			limit = fmt.Sprintf("wait %d records; max_pending %d pushes the oldest out once %d wait", wait, max, max)
			fix = "raise labels.max_pending above the events that come while a label is on its way, and labels.wait above its delay in records"
		}
		parts = append(parts, fmt.Sprintf("most labels came after their events expired: %s, %d in time; %d events expired (%s); %s",
			counts, real, s.Expired, limit, fix))
	}
	if real == 0 && s.ExpiredLearned > 0 {
		parts = append(parts, fmt.Sprintf("no round was scored on a real label: the %d rounds learned were scored against the default label", s.ExpiredLearned))
	}
	return strings.Join(parts, "; ")
}

// maxIDLen bounds an id of a decoded store: an id is at most a whole
// record, and a record at most config.MaxMaxBytes. (Decoding never
// allocates more than the bytes it is given.)
const maxIDLen = config.MaxMaxBytes

// encode appends the store: the counters, the waiting events in arrival
// order, the remembered ids in their order.
func (d *delayedStore) encode(e *codec.Encoder, learners int) {
	s := d.stats
	for _, v := range []uint64{s.Joined, s.Expired, s.ExpiredLearned, s.Unknown, s.Late, s.Duplicate, s.DelaySum, s.DelayMax, s.DelayRounds} {
		e.U64(v)
	}
	for _, v := range s.DelayCounts {
		e.U64(v)
	}
	e.U64(uint64(d.n))
	for _, q := range d.queue[d.head:] {
		p := &d.slots[q.slot]
		if !p.used || p.gen != q.gen {
			continue
		}
		e.String(string(d.waiting.ids[q.slot]))
		e.U64(p.at)
		e.U64(p.learnedAt)
		encodeVector(e, p.raw)
		encodeVector(e, p.scaled)
		for i := range learners {
			e.U8(uint8(p.preds[i].Label))
			e.F64(p.preds[i].Score)
			e.U64(p.preds[i].Advice)
		}
	}
	// The remembered ids, oldest first.
	e.U64(uint64(len(d.seenHow)))
	for k := range d.seenHow {
		i := (d.seenNext + k) % len(d.seenHow)
		e.String(string(d.seen.ids[i]))
		e.U8(d.seenHow[i])
	}
}

func encodeVector(e *codec.Encoder, x online.Vector) {
	e.U32(uint32(len(x.Idx)))
	for i, k := range x.Idx {
		e.U32(k)
		e.F64(x.Val[i])
	}
}

func decodeVector(d *codec.Decoder) online.Vector {
	n := int(d.U32())
	if n > d.Len()/12 {
		d.Fail("vector of %d entries in %d bytes", n, d.Len())
		return online.Vector{}
	}
	var x online.Vector
	if n > 0 {
		x = online.Vector{Idx: make([]uint32, n), Val: make([]float64, n)}
	}
	for i := range n {
		x.Idx[i] = d.U32()
		x.Val[i] = d.F64()
	}
	return x
}

// decode restores what encode wrote into d, a store fresh from New; events
// and learned are the pipeline's decoded counts, which no waiting event can
// be ahead of.
func (st *delayedStore) decode(d *codec.Decoder, learners int, scaled bool, events, learned uint64) {
	s := &st.stats
	for _, v := range []*uint64{&s.Joined, &s.Expired, &s.ExpiredLearned, &s.Unknown, &s.Late, &s.Duplicate, &s.DelaySum, &s.DelayMax, &s.DelayRounds} {
		*v = d.U64()
	}
	var joined uint64
	for i := range s.DelayCounts {
		s.DelayCounts[i] = d.U64()
		joined += s.DelayCounts[i]
	}
	if d.Err() == nil && joined != s.Joined {
		d.Fail("%d joined labels, %d in the delay buckets", s.Joined, joined)
		return
	}
	n := d.U64()
	if n > uint64(st.max) || n > uint64(d.Len()) {
		d.Fail("%d events waiting, more than max_pending %d", n, st.max)
		return
	}
	var lastAt uint64
	for range n {
		id, at, learnedAt := d.String(maxIDLen), d.U64(), d.U64()
		if d.Err() == nil && (at <= lastAt || at > events || events-at > st.wait || learnedAt > learned) {
			d.Fail("a waiting event arrived at record %d (after %d learned rounds), not after the one before (%d) and within the wait of the %d records and %d rounds so far",
				at, learnedAt, lastAt, events, learned)
			return
		}
		lastAt = at
		raw, scaledX := decodeVector(d), decodeVector(d)
		if !scaled && len(scaledX.Idx) > 0 {
			d.Fail("a waiting event has a scaled vector, the pipeline does not scale")
		}
		preds := make([]online.Prediction, learners)
		for i := range learners {
			preds[i] = online.Prediction{Label: int8(d.U8()), Score: d.F64(), Advice: d.U64()}
			if y := preds[i].Label; d.Err() == nil && y != online.Positive && y != online.Negative {
				d.Fail("a served prediction of label %d", y)
				return
			}
		}
		if d.Err() != nil {
			return
		}
		h := idHash(maphash.String(st.seed, id))
		found, first := st.waiting.find([]byte(id), h)
		if found >= 0 {
			d.Fail("id %q waits twice", id)
			return
		}
		i := st.alloc()
		s := &st.slots[i]
		s.at, s.learnedAt, s.raw, s.scaled, s.preds, s.used = at, learnedAt, raw, scaledX, preds, true
		st.held += s.room()
		st.waiting.add(i, []byte(id), h, first)
		st.n++
		st.queue = append(st.queue, queued{i, s.gen, s.at})
	}
	m := d.U64()
	if m > uint64(st.max) || m > uint64(d.Len()) {
		d.Fail("%d ids remembered, more than max_pending %d", m, st.max)
		return
	}
	for range m {
		id, how := d.String(maxIDLen), d.U8()
		if d.Err() != nil {
			return
		}
		if how != resolvedJoined && how != resolvedExpired {
			d.Fail("id %q resolved as %d", id, how)
			return
		}
		h := idHash(maphash.String(st.seed, id))
		if st.resolved([]byte(id), h) != 0 {
			d.Fail("id %q remembered twice", id)
			return
		}
		st.remember([]byte(id), h, how)
	}
}

// StoreDigest returns the SHA-256, in hex, of the canonical encoding of the
// store of events waiting for labels, the part of the model's state the
// learners' digests do not cover; "" without delayed labels. It encodes
// the whole store (about 200 bytes a waiting event): call it for a final
// report, not per snapshot.
func (p *Pipeline) StoreDigest() string {
	if p.delay == nil {
		return ""
	}
	e := codec.NewEncoder(256 + 256*p.delay.n)
	p.delay.encode(e, len(p.nodes))
	sum := sha256.Sum256(e.Bytes())
	return hex.EncodeToString(sum[:])
}
