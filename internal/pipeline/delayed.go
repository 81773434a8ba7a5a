package pipeline

import (
	"fmt"
	"slices"

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
// default label when one is set. A label whose id is not waiting is
// rejected with its reason — late (the event expired), duplicate (the
// event was labeled: the first label wins) or unknown — counted as an
// invalid record and dead-lettered. The ids of the last max_pending
// events labeled or expired are remembered to tell late and duplicate
// labels from unknown ones; older ones count as unknown.
//
// The store is part of the model's state: in the pipeline's encoding
// (checkpoints, clones) and in the digest of the labels report.

// The reasons of rejected label events.
const (
	ReasonLabelUnknown   event.Reason = "label_unknown"
	ReasonLabelLate      event.Reason = "label_late"
	ReasonLabelDuplicate event.Reason = "label_duplicate"
)

// pendingEvent is an event waiting for its label.
type pendingEvent struct {
	id  string
	at  uint64 // the record count when it arrived
	raw online.Vector
	// scaled is the vector the learners that do not read raw values
	// predicted on; nil slices when the pipeline does not scale (they read
	// raw) .
	scaled online.Vector
	preds  []online.Prediction
	done   bool // labeled or expired: its place in the queue is stale
}

// Resolutions remembered for late and duplicate labels.
const (
	resolvedJoined  = 1
	resolvedExpired = 2
)

// delayedStore is the pipeline's store of events waiting for labels.
type delayedStore struct {
	wait   uint64
	max    int
	def    int8 // the default label; 0 when expired events are dropped
	byID   map[string]*pendingEvent
	queue  []*pendingEvent // arrival order; done entries are skipped
	head   int
	seen   map[string]uint8 // ids labeled or expired, remembered
	seenQ  []string         // their order, for the bound
	seenHd int
	stats  LabelStats
}

// LabelStats are the counters of the labels report.
type LabelStats struct {
	Joined, Expired, ExpiredLearned uint64
	Unknown, Late, Duplicate        uint64
	DelaySum, DelayMax              uint64 // in records, over joined events
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
	d := &delayedStore{wait: uint64(l.Wait), max: l.MaxPending, byID: map[string]*pendingEvent{}, seen: map[string]uint8{}}
	if l.DefaultLabel != nil {
		y, err := EventConfig(c).ParseLabel(*l.DefaultLabel)
		if err != nil {
			return nil, fmt.Errorf("pipeline: labels.default_label: %w", err)
		}
		d.def = y
	}
	return d, nil
}

// tick counts a record and expires what waited too long before it.
func (p *Pipeline) tick() {
	p.counts.Events++
	if d := p.delay; d != nil {
		for d.head < len(d.queue) {
			e := d.queue[d.head]
			if !e.done && p.counts.Events-e.at <= d.wait {
				break
			}
			d.pop()
			if !e.done {
				p.expire(e)
			}
		}
	}
}

// pop drops the head of the queue, compacting it now and then.
func (d *delayedStore) pop() {
	d.queue[d.head] = nil
	d.head++
	if d.head > 1024 && d.head*2 > len(d.queue) {
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
}

// expire ends e's wait: learned with the default label, or dropped.
func (p *Pipeline) expire(e *pendingEvent) {
	d := p.delay
	e.done = true
	delete(d.byID, e.id)
	d.remember(e.id, resolvedExpired)
	d.stats.Expired++
	if d.def != 0 {
		d.stats.ExpiredLearned++
		p.learnServed(e, d.def)
	}
}

// remember notes how id was resolved, forgetting the oldest past max.
func (d *delayedStore) remember(id string, how uint8) {
	if _, ok := d.seen[id]; !ok {
		d.seenQ = append(d.seenQ, id)
	}
	d.seen[id] = how
	for len(d.seenQ)-d.seenHd > d.max {
		delete(d.seen, d.seenQ[d.seenHd])
		d.seenQ[d.seenHd] = ""
		d.seenHd++
	}
	if d.seenHd > 1024 && d.seenHd*2 > len(d.seenQ) {
		n := copy(d.seenQ, d.seenQ[d.seenHd:])
		clear(d.seenQ[n:])
		d.seenQ, d.seenHd = d.seenQ[:n], 0
	}
}

// hold stores ev, just predicted (p.preds, p.scaled), to wait for its
// label. An id already waiting keeps its first event.
func (p *Pipeline) hold(ev *event.Event) {
	d := p.delay
	if _, ok := d.byID[string(ev.ID)]; ok {
		return
	}
	if len(d.byID) >= d.max {
		for d.head < len(d.queue) {
			e := d.queue[d.head]
			d.pop()
			if !e.done {
				p.expire(e)
				break
			}
		}
	}
	e := &pendingEvent{id: string(ev.ID), at: p.counts.Events, preds: slices.Clone(p.preds)}
	e.raw = cloneVector(ev.X)
	if p.scaler != nil {
		e.scaled = cloneVector(p.scaled)
	}
	d.byID[e.id] = e
	d.queue = append(d.queue, e)
}

func cloneVector(x online.Vector) online.Vector {
	return online.Vector{Idx: slices.Clone(x.Idx), Val: slices.Clone(x.Val)}
}

// join learns the label event ev: the label of the waiting event of its
// id, or a rejected label with its reason.
func (p *Pipeline) join(ev *event.Event) event.Reason {
	p.tick()
	d := p.delay
	e := d.byID[string(ev.ID)]
	if e == nil {
		reason := ReasonLabelUnknown
		switch d.seen[string(ev.ID)] {
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
	e.done = true
	delete(d.byID, e.id)
	d.remember(e.id, resolvedJoined)
	delay := p.counts.Events - e.at
	d.stats.Joined++
	d.stats.DelaySum += delay
	d.stats.DelayMax = max(d.stats.DelayMax, delay)
	b := 0
	for b < len(LabelDelayBuckets) && float64(delay) > LabelDelayBuckets[b] {
		b++
	}
	d.stats.DelayCounts[b]++
	p.learnServed(e, ev.Label)
	return ""
}

// learnServed scores every learner on the prediction it served e and has
// it learn label y from it: one labeled round.
func (p *Pipeline) learnServed(e *pendingEvent, y int8) {
	p.counts.Learned++
	for i := range p.nodes {
		n := &p.nodes[i]
		x := e.raw
		if !n.raw && p.scaler != nil {
			x = e.scaled
		}
		served := e.preds[i]
		n.loss = n.learner.Loss(served, y)
		n.learner.Learn(x, served, y)
		p.tracker.Observe(i, served, y, n.loss)
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

func (d *delayedStore) report() *LabelsReport {
	s := d.stats
	r := &LabelsReport{Joined: s.Joined, Pending: uint64(len(d.byID)), Expired: s.Expired, ExpiredLearned: s.ExpiredLearned,
		Unknown: s.Unknown, Late: s.Late, Duplicate: s.Duplicate, Delay: DelayReport{Max: s.DelayMax},
		DelaySum: s.DelaySum, DelayCounts: s.DelayCounts}
	if s.Joined > 0 {
		r.Delay.Mean = float64(s.DelaySum) / float64(s.Joined)
	}
	return r
}

// Limits on a decoded store: bound what corrupt bytes can make
// UnmarshalBinary allocate.
const maxIDLen = 1 << 16

// encode appends the store: the counters, the waiting events in arrival
// order, the remembered ids in their order.
func (d *delayedStore) encode(e *codec.Encoder, learners int) {
	s := d.stats
	for _, v := range []uint64{s.Joined, s.Expired, s.ExpiredLearned, s.Unknown, s.Late, s.Duplicate, s.DelaySum, s.DelayMax} {
		e.U64(v)
	}
	for _, v := range s.DelayCounts {
		e.U64(v)
	}
	e.U64(uint64(len(d.byID)))
	for _, p := range d.queue[d.head:] {
		if p.done {
			continue
		}
		e.String(p.id)
		e.U64(p.at)
		encodeVector(e, p.raw)
		encodeVector(e, p.scaled)
		for i := range learners {
			e.U8(uint8(p.preds[i].Label))
			e.F64(p.preds[i].Score)
			e.U64(p.preds[i].Advice)
		}
	}
	e.U64(uint64(len(d.seenQ) - d.seenHd))
	for _, id := range d.seenQ[d.seenHd:] {
		e.String(id)
		e.U8(d.seen[id])
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

// decode restores what encode wrote into d, a store fresh from New.
func (st *delayedStore) decode(d *codec.Decoder, learners int, scaled bool) {
	s := &st.stats
	for _, v := range []*uint64{&s.Joined, &s.Expired, &s.ExpiredLearned, &s.Unknown, &s.Late, &s.Duplicate, &s.DelaySum, &s.DelayMax} {
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
	for range n {
		e := &pendingEvent{id: d.String(maxIDLen), at: d.U64()}
		e.raw = decodeVector(d)
		e.scaled = decodeVector(d)
		if !scaled && len(e.scaled.Idx) > 0 {
			d.Fail("a waiting event has a scaled vector, the pipeline does not scale")
		}
		e.preds = make([]online.Prediction, learners)
		for i := range learners {
			e.preds[i] = online.Prediction{Label: int8(d.U8()), Score: d.F64(), Advice: d.U64()}
		}
		if d.Err() != nil {
			return
		}
		if _, dup := st.byID[e.id]; dup {
			d.Fail("id %q waits twice", e.id)
			return
		}
		st.byID[e.id] = e
		st.queue = append(st.queue, e)
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
		if _, dup := st.seen[id]; dup {
			d.Fail("id %q remembered twice", id)
			return
		}
		st.seen[id] = how
		st.seenQ = append(st.seenQ, id)
	}
}
