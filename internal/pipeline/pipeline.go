// Package pipeline runs decoded events through the configured learners by
// the online learning protocol — every learner predicts, then, when the
// event is labeled, every learner updates and the tracker scores the round
// — and counts what it saw. File replays and live streams share it, which
// is what makes a replayed topic give exactly the live run's numbers.
//
// A Pipeline's whole state — models, scaler, counts, tracker — is bytes
// (MarshalBinary, UnmarshalBinary: checkpoints), and Clone copies it, so
// that predictions can be served (Predict) from a copy while the live
// pipeline learns.
package pipeline

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/streamlearn/streamlearn/internal/config"
	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/experts"
	"github.com/streamlearn/streamlearn/internal/learners"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/regret"
)

// ReasonDomain is the invalid-event reason of an event outside the finite
// domain of a configured hypothesis class (an explicit table's domain).
const ReasonDomain event.Reason = "domain"

// Pipeline owns a set of learners, their preprocessing and their tracker.
// It is not safe for concurrent use: one goroutine owns a pipeline, as it
// owns the models.
type Pipeline struct {
	nodes   []node
	scaler  *online.Scaler // nil when features.scale is none
	tracker *regret.Tracker
	scaled  online.Vector
	preds   []online.Prediction
	domains []online.Domained
	delay   *delayedStore // nil unless labels.delayed
	// space is a sparse pipeline's (Builder.Sparse), nil for a dense
	// one; with maps (a learner is sparse) the sparse learners read
	// local, the event's scaled vector in its numbers, and a waiting
	// event's in mapped.
	space         *online.Space
	maps          bool
	local, mapped online.Vector

	counts Counts
	start  time.Time
	// spec is a private copy of what New read from the config, so that
	// Clone and UnmarshalBinary can build fresh learners of the same kind.
	spec *config.Config
	// shared is SharedDigest(spec), in the encoded state.
	shared [32]byte
	// warm is the model file p started from, nil when none (StartFrom).
	warm *warmStart
	// labelNames are the names of the labels -1 and +1 (LabelName);
	// classes, with input.classes, those of the classes.
	labelNames [2]string
	classes    []string
	// answer is the index of the learner that answers for the filter
	// (config.Config.AnswerIndex).
	answer int
	// compatShared are compatSharedDigests(spec): what earlier builds of
	// state format 3 encoded, restored too when every learner's digest is
	// the same.
	compatShared [][32]byte
}

// node is one configured learner. round is learner's fused round, when it
// has one. over is learner when it is Weighted-Majority over other
// learners: the pipeline gives it their predictions of the round as its
// advice (PredictAdvice) rather than have it ask them again.
type node struct {
	name, algorithm string
	learner         online.Learner
	round           online.Rounder
	raw             bool // reads raw feature values (hypothesis classes), not scaled ones
	sparse          bool // reads vectors in the pipeline's space's numbers
	over            *experts.OverLearners
	experts         []int // node indices of over's experts
	advice          []int8
	loss            float64
	digest          [32]byte      // LearnerDigest of its configuration
	calib           *platt        // learners[i].calibrate; nil otherwise
	prober          online.Prober // the learner, when it has a probability of its own
	sizer           online.Sizer  // the learner, when it tells its arrays' bytes (Footprint)
	servedProb      float64       // calib's probability of the last prediction, before any label after it
	// since is the count of learned rounds when the learner started: 0,
	// unless a restore started it afresh (UnmarshalBinaryReset). Its
	// tracker entry counts the rounds after.
	since uint64
}

// Counts are the pipeline's event counters.
type Counts struct {
	// Events counts every record seen: learned + predicted + invalid.
	Events uint64
	// Learned counts labeled events every learner learned from;
	// Predicted, unlabeled events that were only predicted.
	Learned, Predicted uint64
	// Invalid counts rejected records, and InvalidBy splits them by reason.
	Invalid   uint64
	InvalidBy map[event.Reason]uint64
}

// New builds the learners of c.
func New(c *config.Config) (*Pipeline, error) { return newPipeline(c, digestsOf(c), false) }

// digests are the digests of a configuration every pipeline of it holds,
// and the private copy of it they share (spec): computed once for many
// pipelines of one configuration (Keyed), as they cost more than building
// small models.
type digests struct {
	spec     *config.Config // specOf(c)
	shared   [32]byte
	compat   [][32]byte
	learners [][32]byte
}

func digestsOf(c *config.Config) *digests {
	d := &digests{spec: specOf(c), shared: SharedDigest(c), compat: compatSharedDigests(c)}
	for _, lc := range c.Learners {
		d.learners = append(d.learners, LearnerDigest(lc))
	}
	return d
}

// A Builder makes pipelines of one configuration, empty (New) or decoded
// from a state (Decode), with the work that depends on the configuration
// alone — its digests, its private copy — done once: where there are many
// pipelines of one configuration (models per key, their serving copies),
// that work costs more than building small models.
type Builder struct {
	dg     *digests
	sparse bool
}

// NewBuilder returns the Builder of c's pipelines.
func NewBuilder(c *config.Config) *Builder { return &Builder{dg: digestsOf(c)} }

// New is New of the builder's configuration.
func (b *Builder) New() (*Pipeline, error) { return newPipeline(b.dg.spec, b.dg, b.sparse) }

// Sparse returns a Builder of the same configuration whose pipelines are
// sparse: each learner that has a sparse form (online.Spaced) holds state
// for the hashed slots its pipeline's events touched only, in a Space of
// the pipeline's own, rather than for every slot. A sparse pipeline is
// the dense one bit for bit — the same predictions, counts, reports and
// MarshalBinary — at a cost that grows with what it has seen: the form
// for models per key, where most keys see a few features.
func (b *Builder) Sparse() *Builder { return &Builder{dg: b.dg, sparse: true} }

// The fixed part of Footprint: a pipeline's own fields, maps and
// scratch, and each learner's node, tracker entry and fields, measured
// with runtime.MemStats over many small pipelines (TestFootprint).
const (
	pipelineBytes = 1024
	learnerBytes  = 768
)

// Footprint estimates the bytes of memory p holds: a fixed part, its
// space's index, its scaler's statistics, the events waiting for labels,
// and each learner's arrays (online.Sizer; a learner that does not tell
// them counts as its fixed part alone). It is what a bound
// on resident models per key in bytes counts; O(learners), no pass over
// the state.
func (p *Pipeline) Footprint() int {
	n := pipelineBytes + learnerBytes*len(p.nodes)
	if p.space != nil {
		n += p.space.Bytes()
	}
	if p.scaler != nil {
		n += p.scaler.Bytes()
	}
	if p.delay != nil {
		n += p.delay.Bytes()
	}
	for i := range p.nodes {
		if s := p.nodes[i].sizer; s != nil {
			n += s.Bytes()
		}
	}
	return n
}

// renew returns a new pipeline of p's configuration, sparse when p is
// (UnmarshalBinary's, Clone's).
func (p *Pipeline) renew() (*Pipeline, error) {
	return newPipeline(p.spec, digestsOf(p.spec), p.space != nil)
}

// Decode returns a pipeline of the builder's configuration in state, a
// MarshalBinary of one (UnmarshalBinary's conditions).
func (b *Builder) Decode(state []byte) (*Pipeline, error) { return b.decode(state, false) }

// decode is Decode; with own, state is a MarshalBinary of this
// process's, whose learners' encodings give their state digests
// (Pipeline.decodeNoting).
func (b *Builder) decode(state []byte, own bool) (*Pipeline, error) {
	p, err := b.New()
	if err != nil {
		return nil, err
	}
	// Into a pipeline fresh from New: UnmarshalBinary would build a
	// second one to keep p unchanged on error.
	if err := p.decodeNoting(state, own); err != nil {
		return nil, fmt.Errorf("pipeline: unmarshal: %w", err)
	}
	return p, nil
}

// newPipeline is New with c's digests, sparse or not (Builder.Sparse).
func newPipeline(c *config.Config, dg *digests, sparse bool) (*Pipeline, error) {
	bits := c.Features.Bits
	var space *online.Space
	var scaler *online.Scaler
	var err error
	if sparse {
		if space, err = online.NewSpace(bits); err != nil {
			return nil, fmt.Errorf("pipeline: features.bits: %w", err)
		}
	}
	switch {
	case sparse && c.Features.Scale == "none":
		// Made per key: no scaler made to be dropped below (the space
		// checked the bits).
	case sparse:
		scaler, err = online.NewSparseScaler(space, c.Features.Scale)
	default:
		scaler, err = online.NewScaler(bits, c.Features.Scale)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: features.scale: %w", err)
	}
	if c.Features.Scale == "none" {
		scaler = nil // scaling by 1: learners read the decoded vector itself
	}
	p := &Pipeline{
		scaler:       scaler,
		space:        space,
		tracker:      regret.New(),
		counts:       Counts{InvalidBy: map[event.Reason]uint64{}},
		start:        time.Now(),
		spec:         dg.spec,
		shared:       dg.shared,
		compatShared: dg.compat,
		labelNames:   [2]string{cmp.Or(first(c.Input.Negative), "0"), cmp.Or(first(c.Input.Positive), "1")},
		classes:      dg.spec.Input.Classes,
		answer:       dg.spec.AnswerIndex(),
	}
	// Room for every learner at once: a model per key is made per key.
	n := len(c.Learners)
	p.nodes = make([]node, 0, n)
	p.tracker.Grow(n)
	env := learners.Env{Bits: bits, Classes: len(c.Input.Classes), Space: space,
		Prior: make([]string, 0, n), Built: make([]online.Learner, 0, n)}
	for i, lc := range c.Learners {
		env.Name = lc.Name
		n, err := build(lc, env)
		if err != nil {
			return nil, fmt.Errorf("pipeline: learners[%d] (%s): %w", i, lc.Name, err)
		}
		n.digest = dg.learners[i]
		if lc.Calibrate {
			n.calib = newPlatt()
		}
		env.Prior, env.Built = append(env.Prior, lc.Name), append(env.Built, n.learner)
		if s, ok := n.learner.(online.Spaced); ok && s.Space() != nil {
			n.sparse, p.maps = true, true
		}
		p.nodes = append(p.nodes, n)
		p.tracker.Add(n.name, n.algorithm, n.learner)
		if d, ok := n.learner.(online.Domained); ok {
			p.domains = append(p.domains, d)
		}
	}
	p.preds = make([]online.Prediction, len(p.nodes))
	if p.delay, err = newDelayedStore(c); err != nil {
		return nil, err
	}
	if p.delay != nil {
		p.tracker.AssumeDelayed()
		if p.delay.def != 0 {
			p.tracker.DefaultLabels()
		}
	}
	return p, nil
}

// build makes the node of one learner with its algorithm's registry entry;
// env has the learners built before it.
func build(lc config.Learner, env learners.Env) (node, error) {
	n := node{name: lc.Name, algorithm: lc.Algorithm}
	a, ok := learners.Lookup(lc.Algorithm)
	if !ok {
		return n, fmt.Errorf("unknown algorithm %q", lc.Algorithm)
	}
	var l online.Learner
	var err error
	switch {
	case env.Classes > 0 && !a.Multiclass:
		// One versus the rest: a binary learner per class.
		ls := make([]online.Learner, env.Classes)
		for c := range ls {
			if ls[c], err = a.New(lc.Params, env); err != nil {
				return n, err
			}
		}
		var o *online.OneVsRest
		if o, err = online.NewOneVsRest(ls); err == nil {
			l = o
			if d, ok := ls[0].(online.Domained); ok {
				l = domainOneVsRest{o, d}
			}
		}
	case env.Classes == 0 && a.Multiclass:
		err = fmt.Errorf("%s predicts one of several classes: list them in input.classes", lc.Algorithm)
	default:
		l, err = a.New(lc.Params, env)
	}
	if err != nil {
		return n, err
	}
	n.learner = l
	if over, ok := l.(*experts.OverLearners); ok {
		wm, _ := lc.Params.(*learners.WeightedMajorityParams)
		if wm == nil {
			return n, fmt.Errorf("weighted-majority over learners without its parameters (%T)", lc.Params)
		}
		n.over, n.advice = over, make([]int8, len(wm.Experts))
		for _, e := range wm.Experts {
			n.experts = append(n.experts, slices.Index(env.Prior, e))
		}
	}
	// A learner over a hypothesis class reads raw feature values: the
	// class's grid is in the feature's own units.
	_, n.raw = l.(online.Domained)
	n.round, _ = l.(online.Rounder)
	n.prober, _ = l.(online.Prober)
	n.sizer, _ = l.(online.Sizer)
	return n, nil
}

// domainOneVsRest is one versus the rest over learners of a hypothesis
// class: the class's domain is theirs (every class's learner has the
// same).
type domainOneVsRest struct {
	*online.OneVsRest
	d online.Domained
}

func (o domainOneVsRest) InDomain(x online.Vector) bool { return o.d.InDomain(x) }

// Process runs one decoded event through every learner and returns their
// predictions, in configuration order (valid until the next call). An
// event outside a hypothesis class's domain is rejected before any model,
// the scaler included, sees it: Process counts it and returns the reason.
//
// With delayed labels (see delayed.go), an unlabeled event with an id also
// waits for its label, and a label event (ev.LabelOnly) is learned as the
// label of the waiting event of its id: Process returns no predictions
// for it, and a reason when it is rejected (late, duplicate, unknown).
func (p *Pipeline) Process(ev *event.Event) ([]online.Prediction, event.Reason) {
	if ev.LabelOnly {
		if p.delay == nil {
			p.Reject(event.ReasonEmpty)
			return nil, event.ReasonEmpty
		}
		return nil, p.join(ev)
	}
	for _, d := range p.domains {
		if !d.InDomain(ev.X) {
			p.Reject(ReasonDomain)
			return nil, ReasonDomain
		}
	}
	p.tick()
	switch {
	case p.maps && p.scaler != nil:
		// Mapped first, so that a standard scaler reads the numbers of
		// the slots rather than looking them up again: the scaled
		// vector has x's indices.
		p.space.Map(&p.local, ev.X)
		p.scaler.TransformMapped(&p.scaled, ev.X, p.local.Idx)
		p.local.Val = p.scaled.Val[:len(p.local.Idx)]
	case p.scaler != nil:
		p.scaler.Transform(&p.scaled, ev.X)
	default:
		p.scaled = ev.X
		if p.maps {
			p.space.Map(&p.local, p.scaled)
		}
	}
	if !ev.Labeled {
		p.predict(ev)
		p.counts.Predicted++
		if p.delay != nil && len(ev.ID) > 0 {
			p.hold(ev)
		}
		return p.preds, ""
	}
	p.counts.Learned++
	// Learner by learner, each predicts, then learns: the same as every
	// learner predicting before any learns, since a learner's prediction
	// depends on its own state only (and the advice of a Weighted-Majority
	// over learners on the predictions of learners before it, made this
	// round, which their updates leave as they are; the prediction carries
	// that advice to Learn).
	y := ev.Label
	for i := range p.nodes {
		n := &p.nodes[i]
		if n.round != nil {
			p.preds[i], n.loss = n.round.Round(p.input(n, ev), y)
		} else {
			p.preds[i] = p.predictNode(n, ev)
			n.loss = n.learner.Loss(p.preds[i], y)
			n.learner.Learn(p.input(n, ev), p.preds[i], y)
		}
		p.tracker.Observe(i, p.preds[i], y, n.loss)
		if n.calib != nil {
			n.servedProb = n.calib.prob(p.preds[i].Score)
			n.calib.learn(p.preds[i].Score, y)
		}
	}
	return p.preds, ""
}

// predict fills p.preds with every learner's prediction of ev, whose
// scaled vector is in p.scaled.
func (p *Pipeline) predict(ev *event.Event) {
	for i := range p.nodes {
		n := &p.nodes[i]
		p.preds[i] = p.predictNode(n, ev)
		if n.calib != nil {
			n.servedProb = n.calib.prob(p.preds[i].Score)
		}
	}
}

// predictNode returns n's prediction of ev; a Weighted-Majority over
// learners is given the labels its experts, configured before it,
// predicted this round (in p.preds).
func (p *Pipeline) predictNode(n *node, ev *event.Event) online.Prediction {
	if n.over != nil {
		for k, e := range n.experts {
			n.advice[k] = p.preds[e].Label
		}
		return n.over.PredictAdvice(n.advice)
	}
	return n.learner.Predict(p.input(n, ev))
}

// Predict returns every learner's prediction of ev, in configuration
// order, as Process would return them for the same event, without learning
// and without counting: Counts, the tracker, the scaler's statistics and
// every model's weights, version space and expert weights are untouched,
// labeled or not. It applies Process's domain check (an event outside a
// hypothesis class's domain returns nil and ReasonDomain, uncounted), its
// scaling (with standard scaling, the statistics as Process would update
// them with ev, computed aside: see scaleAsObserved) and
// Weighted-Majority-over-learners advice. It is for serving predictions.
//
// Predict changes no model (every learner's Predict is pure, and
// Weighted-Majority draws from a copy of its generator): the pipeline
// encodes (MarshalBinary) to the same bytes before and after. It does use
// the pipeline's scratch space, so it is not safe for concurrent use, nor
// concurrent with Process; serve from a Clone.
//
// The returned slice is valid until the next call of Predict or Process.
// Predict does not retain ev.
func (p *Pipeline) Predict(ev *event.Event) ([]online.Prediction, event.Reason) {
	for _, d := range p.domains {
		if !d.InDomain(ev.X) {
			return nil, ReasonDomain
		}
	}
	if p.scaler != nil {
		scaleAsObserved(p.scaler, &p.scaled, ev.X)
	} else {
		p.scaled = ev.X
	}
	if p.maps {
		p.space.Map(&p.local, p.scaled)
	}
	p.predict(ev)
	return p.preds, ""
}

func (p *Pipeline) input(n *node, ev *event.Event) online.Vector {
	switch {
	case n.raw:
		return ev.X
	case n.sparse:
		return p.local
	}
	return p.scaled
}

// inputOf returns what n reads of a waiting event whose raw and scaled
// vectors are raw and scaled, mapped into p.mapped (whose numbers the
// caller took once for every node: mapWaiting).
func (p *Pipeline) inputOf(n *node, raw, scaled online.Vector) online.Vector {
	switch {
	case n.sparse:
		return p.mapped
	case n.raw || p.scaler == nil:
		return raw
	}
	return scaled
}

// mapWaiting maps a waiting event's vector the learners that do not read
// raw values read (scaled, or raw without a scaler) into p.mapped, when
// p is sparse.
func (p *Pipeline) mapWaiting(raw, scaled online.Vector) {
	if !p.maps {
		return
	}
	if p.scaler != nil {
		raw = scaled
	}
	p.space.Map(&p.mapped, raw)
}

// Reject counts a record that could not be used, by reason.
func (p *Pipeline) Reject(reason event.Reason) {
	p.tick()
	p.counts.Invalid++
	p.counts.InvalidBy[reason]++
}

// Counts returns a copy of the event counters.
func (p *Pipeline) Counts() Counts {
	c := p.counts
	c.InvalidBy = make(map[event.Reason]uint64, len(p.counts.InvalidBy))
	for r, n := range p.counts.InvalidBy {
		c.InvalidBy[r] = n
	}
	return c
}

// Names returns the learner names in configuration order.
func (p *Pipeline) Names() []string {
	names := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		names[i] = n.name
	}
	return names
}

// Name returns the name of learner i.
func (p *Pipeline) Name(i int) string { return p.nodes[i].name }

// Answer returns the index of the learner that answers for the filter:
// the one the configuration's answer names, else the first.
func (p *Pipeline) Answer() int { return p.answer }

// From returns "": a pipeline's predictions are its own (Mixed.From).
func (p *Pipeline) From(int) string { return "" }

// Started returns when the pipeline was made: a report's Seconds count
// from it.
func (p *Pipeline) Started() time.Time { return p.start }

// StartNow makes now the time p was made, for a pipeline made ahead of
// its first event: a report's Seconds count from now on.
func (p *Pipeline) StartNow() { p.start = time.Now() }

// Learned returns the number of labeled rounds learned.
func (p *Pipeline) Learned() uint64 { return p.counts.Learned }

// Seen returns the number of events processed, invalid ones included.
func (p *Pipeline) Seen() uint64 { return p.counts.Events }

// Algorithms returns the learner algorithms in configuration order.
func (p *Pipeline) Algorithms() []string {
	algs := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		algs[i] = n.algorithm
	}
	return algs
}

// Tracker returns the pipeline's tracker (owned by the pipeline's goroutine).
func (p *Pipeline) Tracker() *regret.Tracker { return p.tracker }

// Report is the regret report: what `replay --report json`
// prints, the live service publishes and GET /v1/report serves.
type Report struct {
	Events          uint64            `json:"events"`
	Labeled         uint64            `json:"labeled"`
	Predicted       uint64            `json:"predicted"`
	Invalid         uint64            `json:"invalid"`
	InvalidByReason map[string]uint64 `json:"invalid_by_reason"`
	Seconds         float64           `json:"seconds"`
	// Answer is the name of the learner that answers for the filter
	// (the configuration's answer): its mistakes and bound, among
	// Learners (and, with a global model, its entry of Mix: what was
	// served), are the filter's.
	Answer string `json:"answer,omitempty"`
	// Labels is present with delayed labels (labels.delayed).
	Labels *LabelsReport `json:"labels,omitempty"`
	// WarmStart is present when the model started from a model file
	// (StartFrom).
	WarmStart *WarmStartReport `json:"warm_start,omitempty"`
	// Keys is present in the totals of a partition's models per key
	// (Keyed.Report).
	Keys     *KeysReport            `json:"keys,omitempty"`
	Learners []regret.LearnerReport `json:"learners"`
	// Mix, with a global model beside the models per key
	// (models.global), is each learner's choice between a key's model and
	// the global one: a key's, or the totals of a partition's keys.
	Mix []MixReport `json:"mix,omitempty"`
	// Global is, in a partition's totals, the global model's report.
	Global *Report `json:"global,omitempty"`
}

// WarmStartReport says which model file a model started from, so that
// what serves can be traced to what was trained.
type WarmStartReport struct {
	// SHA256 is the hex SHA-256 of the model file (what sha256sum prints).
	SHA256 string `json:"sha256"`
	// Events is how many of the model's events the file held: the ones
	// learned before it started here.
	Events uint64 `json:"events"`
	// After has the figures of the records after the start alone
	// (StartFromTracked): absent for a key's model, and for a model
	// whose state was written before they were kept (state format
	// versions 4 and 5).
	After *AfterReport `json:"after,omitempty"`
}

// warmStart is the model file a pipeline started from.
type warmStart struct {
	sha    [32]byte
	events uint64
	base   *warmBase // nil when not counted apart (StartFrom)
}

// StartFrom makes p the model of state, a MarshalBinary of a pipeline of
// the same configuration (UnmarshalBinary's conditions), taken from the
// model file of SHA-256 sha: p goes on from that model's weights, counts
// and tracker as if it had seen its events, and its report says which
// file it started from (WarmStart), in every state it encodes from now
// on. On error p is unchanged.
func (p *Pipeline) StartFrom(state []byte, sha [32]byte) error {
	if err := p.UnmarshalBinary(state); err != nil {
		return err
	}
	p.warm = &warmStart{sha: sha, events: p.counts.Events}
	return nil
}

// Report returns the report as of now. It digests every learner's state:
// call it per report, not per event.
func (p *Pipeline) Report() (Report, error) { return p.report(true) }

// ReportWithoutDigests is Report without the learners' state digests
// (regret.Tracker.LearnersWithoutDigests): no pass over the states.
func (p *Pipeline) ReportWithoutDigests() (Report, error) { return p.report(false) }

func (p *Pipeline) report(digests bool) (Report, error) {
	var ls []regret.LearnerReport
	var err error
	if digests {
		ls, err = p.tracker.Learners()
	} else {
		ls, err = p.tracker.LearnersWithoutDigests()
	}
	if err != nil {
		return Report{}, err
	}
	r := Report{
		Events:          p.counts.Events,
		Labeled:         p.counts.Learned,
		Predicted:       p.counts.Predicted,
		Invalid:         p.counts.Invalid,
		InvalidByReason: map[string]uint64{},
		Seconds:         time.Since(p.start).Seconds(),
		Learners:        ls,
		Answer:          p.nodes[p.answer].name,
	}
	if p.delay != nil {
		r.Labels = p.delay.report(p.counts.Learned)
	}
	if p.warm != nil {
		r.WarmStart = &WarmStartReport{SHA256: hex.EncodeToString(p.warm.sha[:]), Events: p.warm.events, After: p.after(ls)}
	}
	for i := range p.nodes {
		if c := p.nodes[i].calib; c != nil && i < len(r.Learners) {
			r.Learners[i].Calibration = &regret.Calibration{A: c.a, B: c.b}
		}
		if cc, ok := p.nodes[i].learner.(online.ClassCounter); ok && i < len(r.Learners) {
			rounds, mistakes := cc.ClassCounts()
			var models []online.ClassRecord
			if o, ok := p.nodes[i].learner.(interface{ ClassRecords() []online.ClassRecord }); ok {
				models = o.ClassRecords()
			}
			for c := range rounds {
				cr := regret.ClassReport{Class: p.LabelName(int8(c)), Rounds: rounds[c], Mistakes: mistakes[c]}
				if cr.Rounds > 0 {
					cr.Accuracy = 1 - float64(cr.Mistakes)/float64(cr.Rounds)
				}
				if c < len(models) {
					m := models[c]
					cr.Model = regret.NewClassModelReport(m.Mistakes, m.Loss, m.Guarantee)
				}
				r.Learners[i].Classes = append(r.Learners[i].Classes, cr)
			}
		}
	}
	reasons := make([]event.Reason, 0, len(p.counts.InvalidBy))
	for reason := range p.counts.InvalidBy {
		reasons = append(reasons, reason)
	}
	slices.Sort(reasons)
	for _, reason := range reasons {
		r.InvalidByReason[string(reason)] = p.counts.InvalidBy[reason]
	}
	return r, nil
}

// EventConfig returns the decoding configuration of c.
func EventConfig(c *config.Config) event.Config {
	return event.Config{
		Bits:        c.Features.Bits,
		NGrams:      c.Features.Text.NGrams,
		Positive:    c.Input.Positive,
		Negative:    c.Input.Negative,
		Classes:     c.Input.Classes,
		Dense:       c.Features.Dense,
		MaxBytes:    c.Input.MaxBytes,
		MaxAbs:      c.Input.MaxAbsValue,
		LabelColumn: c.Input.LabelColumn,
		Format:      event.Format(c.Input.Format),
		LabelEvents: c.Labels.Delayed,
	}
}
