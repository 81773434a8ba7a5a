package regret

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/streamlearn/streamlearn/internal/online"
)

// boundSlack absorbs floating-point noise in "observed <= bound": regret is
// a difference of two sums of up to millions of floats.
const boundSlack = 1e-9

// Model is what the tracker needs of a learner: its canonical state, for
// the digest. A model that also implements online.Guaranteed has its bound
// and comparator tracked.
type Model interface {
	encoding.BinaryMarshaler
}

// Tracker keeps the scores of a fixed set of learners. It is not safe for
// concurrent use: the goroutine that owns the models owns the tracker, and
// readers take a Report.
type Tracker struct {
	learners []learner
	history  *History
	// dl: whether labels may come after their events, and how late
	// they came so far; shared with the learners.
	dl *delayState
	// defaults: some rounds may be scored against a default label
	// (DefaultLabels); every report then has DefaultLabeled.
	defaults bool
}

// DefaultLabels tells t that some rounds may be scored against a default
// label rather than one the stream gave (an expired event learned with
// labels.default_label, ObserveDefault): every learner's report then has
// DefaultLabeled, zero until such a round comes. Like AssumeDelayed, it
// is part of the configuration, not of the encoded state.
func (t *Tracker) DefaultLabels() { t.defaults = true }

// delayState is a Tracker's AssumeDelayed and SetDelay.
type delayState struct {
	on    bool
	delay uint64
}

// AssumeDelayed tells t that labels may come after their events. A
// learner whose theorem covers delays (online.DelayGuaranteed) is checked
// against its bound for the largest delay seen so far (SetDelay); the
// bound of any other is reported with Assumes "immediate labels" and never
// checked (Holds stays true, no crossing is counted). It is part of the
// configuration, not of the encoded state.
func (t *Tracker) AssumeDelayed() {
	t.dl.on = true
	for i := range t.learners {
		l := &t.learners[i]
		if dg, ok := l.guaranteed.(online.DelayGuaranteed); ok {
			if _, covered := dg.DelayedGuarantee(0); covered {
				l.delayed = dg
			}
		}
		l.gStale, l.roomOK = l.guaranteed != nil, false
	}
}

// SetDelay tells t that some label came d learned rounds late: at most d
// other rounds were learned between its prediction and its label. Bounds
// are then checked for the largest d set so far. The caller keeps d with
// its state and sets it again after a restore.
func (t *Tracker) SetDelay(d uint64) {
	if d > t.dl.delay {
		t.dl.delay = d
		for i := range t.learners {
			t.learners[i].gStale = t.learners[i].guaranteed != nil
		}
	}
}

// Delay returns the largest delay set (SetDelay).
func (t *Tracker) Delay() uint64 { return t.dl.delay }

type learner struct {
	name, algorithm string
	model           Model
	guaranteed      online.Guaranteed // nil when the learner has no theorem
	dl              *delayState
	// delayed: with delayed labels, the model when its theorem covers
	// delays (nil otherwise: the bound is not checked)
	// (online.DelayGuaranteed); the bound is not checked otherwise.
	delayed online.DelayGuaranteed

	// rounds, mistakes and loss count every round the learner learned
	// from, the bound's rounds; def are those of them scored against a
	// default label (ObserveDefault), which the report keeps apart.
	rounds   uint64
	mistakes uint64
	loss     float64
	def      Scores

	// g is the guarantee as of the last round while !gStale; Observe
	// leaves it stale (copying it into the tracker each round costs more
	// than the round's bookkeeping) and sync reads it again from the
	// model, which has not changed since.
	g      online.Guarantee
	gStale bool
	// While roomOK, the bound holds as long as the observed quantity
	// (loss for a regret bound, mistakes for a mistake bound) has grown
	// by at most room since it was from: the last guarantee computed was
	// Monotone and left that room. Observe then skips computing it. A
	// cache: not encoded, dropped by a decode.
	room, from       float64
	roomOK, roomLoss bool   // roomLoss: the quantity is the loss
	broken           bool   // the bound does not hold as of the last round
	crossing         uint64 // times the bound went from holding to broken

	// The state digest as of round digestAt, valid while digestOK: a
	// model changes only in the rounds the tracker observes (Predict is
	// pure), so an unchanged model is not encoded again.
	digest   [sha256.Size]byte
	digestAt uint64
	digestOK bool
}

// New returns an empty tracker.
func New() *Tracker { return &Tracker{dl: &delayState{}} }

// Grow makes room for n more learners, so that as many Adds do not
// copy the ones added before.
func (t *Tracker) Grow(n int) { t.learners = slices.Grow(t.learners, n) }

// Add registers a learner and returns its index for Observe. Names must be
// unique; the caller checks.
func (t *Tracker) Add(name, algorithm string, m Model) int {
	l := learner{name: name, algorithm: algorithm, model: m, dl: t.dl}
	if g, ok := m.(online.Guaranteed); ok {
		l.guaranteed = g
		l.g = g.Guarantee()
	}
	t.learners = append(t.learners, l)
	if t.history != nil {
		t.history.grow(len(t.learners))
	}
	return len(t.learners) - 1
}

// Len returns the number of learners.
func (t *Tracker) Len() int { return len(t.learners) }

// Rounds returns the number of rounds learner i was scored on, without
// computing a report.
func (t *Tracker) Rounds(i int) uint64 { return t.learners[i].rounds }

// Mistakes and Loss return learner i's mistakes and cumulative loss,
// without computing a report.
func (t *Tracker) Mistakes(i int) uint64 { return t.learners[i].mistakes }
func (t *Tracker) Loss(i int) float64    { return t.learners[i].loss }

// Defaults returns learner i's rounds, mistakes and loss scored against a
// default label (ObserveDefault), part of Rounds, Mistakes and Loss.
func (t *Tracker) Defaults(i int) Scores { return t.learners[i].def }

// Scores are the rounds, mistakes and loss of a set of rounds.
type Scores struct {
	Rounds, Mistakes uint64
	Loss             float64
}

// Observe scores one round of learner i: it predicted p, the label was y,
// and the learner's loss for the round was loss. Call it after the
// learner's Update, so that its guarantee covers this round.
func (t *Tracker) Observe(i int, p online.Prediction, y int8, loss float64) {
	l := &t.learners[i]
	l.rounds++
	if p.Label != y {
		l.mistakes++
	}
	l.loss += loss
	if l.guaranteed != nil && l.dl.on && l.delayed == nil {
		// A theorem that assumes immediate labels: nothing to check; the
		// report reads the guarantee when it is asked for.
		l.gStale = true
	} else if l.guaranteed != nil {
		// (Written so that a NaN loss is checked, as holdsFor would.)
		if !l.roomOK || !(l.observed()-l.from <= l.room) {
			g := l.guarantee()
			broken := !l.holdsFor(&g)
			if broken && !l.broken {
				l.crossing++
			}
			l.broken = broken
			l.measureRoom(&g)
		}
		l.gStale = true
	}
	if t.history != nil {
		t.history.observe(i, l)
	}
}

// ObserveDefault is Observe for a round whose label y is a default label,
// not one the stream gave (an expired event learned with
// labels.default_label): the learner learned from it, so it counts in the
// bound and the regret as any round, but the report keeps its rounds,
// mistakes and loss apart from those scored against real labels
// (LearnerReport.DefaultLabeled).
func (t *Tracker) ObserveDefault(i int, p online.Prediction, y int8, loss float64) {
	t.Observe(i, p, y, loss)
	d := &t.learners[i].def
	d.Rounds++
	if p.Label != y {
		d.Mistakes++
	}
	d.Loss += loss
}

// sync brings l.g up to date with the model after Observe.
func (l *learner) sync() {
	if l.gStale {
		l.g, l.gStale = l.guarantee(), false
	}
}

// guarantee returns the model's guarantee now: with delayed labels, for
// the largest delay so far when its theorem covers delays.
func (l *learner) guarantee() online.Guarantee {
	if l.dl.on && l.delayed != nil {
		g, _ := l.delayed.DelayedGuarantee(l.dl.delay)
		return g
	}
	return l.guaranteed.Guarantee()
}

// observed returns the quantity the room is of: the loss for a regret
// bound, the mistakes otherwise.
func (l *learner) observed() float64 {
	if l.roomLoss {
		return l.loss
	}
	return float64(l.mistakes)
}

// measureRoom notes how much the observed quantity may grow before the
// Monotone guarantee g, just computed, can stop holding: as long as Value
// and ComparatorLoss do not decrease, loss − ComparatorLoss (or the
// mistakes) stays within Value while it grows by less than it was below
// it now. The room is cut by a margin far above the rounding of the sums
// involved, so that skipping a check never decides otherwise than the
// check would: reports stay equal whether a run was restored in the
// middle (which drops the room) or not.
func (l *learner) measureRoom(g *online.Guarantee) {
	l.roomOK = false
	if !g.Monotone || l.broken {
		return
	}
	l.roomLoss = g.Kind == online.RegretBound
	if g.Kind != online.RegretBound && g.Kind != online.MistakeBound {
		// No bound: it holds, and will while the kind stays.
		l.room, l.from, l.roomOK = math.Inf(1), l.observed(), true
		return
	}
	used, limit := float64(l.mistakes), g.Value
	if g.Kind == online.RegretBound {
		used = l.loss - g.ComparatorLoss
		limit += boundSlack * math.Max(1, g.Value)
	}
	scale := 1 + math.Abs(l.loss) + math.Abs(g.ComparatorLoss) + math.Abs(g.Value)
	if room := limit - used - 1e-9*scale; room > 0 {
		l.room, l.from, l.roomOK = room, l.observed(), true
	}
}

// holds reports whether the observed quantity is within the bound.
func (l *learner) holds() bool {
	l.sync()
	return l.holdsFor(&l.g)
}

// holdsFor reports whether the observed quantity is within the bound of g.
func (l *learner) holdsFor(g *online.Guarantee) bool {
	switch g.Kind {
	case online.MistakeBound:
		return float64(l.mistakes) <= g.Value+boundSlack
	case online.RegretBound:
		return l.loss-g.ComparatorLoss <= g.Value+boundSlack*math.Max(1, g.Value)
	}
	return true
}

func (l *learner) regret() float64 { l.sync(); return l.loss - l.g.ComparatorLoss }

func (l *learner) violations() uint64 { l.sync(); return l.crossing + l.g.Violations }

// LearnerReport is one learner's entry of the report.
//
// Rounds, Mistakes, Accuracy and Loss are those of the rounds scored
// against a label the stream gave; DefaultLabeled has those scored
// against a default label. Accuracy is NaN (null in JSON) when no round
// was scored on a real label. Bound and Regret are over every round the
// learner learned from, both kinds: its theorem's rounds are its updates.
type LearnerReport struct {
	Name      string  `json:"name"`
	Algorithm string  `json:"algorithm"`
	Rounds    uint64  `json:"rounds"`
	Mistakes  uint64  `json:"mistakes"`
	Accuracy  float64 `json:"accuracy"`
	Loss      float64 `json:"loss"`
	// DefaultLabeled, when the stream's expired events are learned with
	// a default label (Tracker.DefaultLabels), are the rounds scored
	// against it.
	DefaultLabeled *DefaultLabeledReport `json:"default_labeled,omitempty"`

	Bound       *BoundReport       `json:"bound,omitempty"`
	Regret      *RegretReport      `json:"regret,omitempty"`
	Certificate *CertificateReport `json:"certificate,omitempty"`

	// BoundViolations counts bound crossings plus rounds whose version
	// space became empty.
	BoundViolations uint64 `json:"bound_violations"`
	// StateSHA256 is the SHA-256 of the learner's canonical state followed
	// by its tracked counters (rounds, mistakes, loss bits).
	StateSHA256 string `json:"state_sha256,omitempty"`
	// Calibration is the probability fit of a learner with calibrate
	// (package pipeline fills it in): σ(A·score + B).
	Calibration *Calibration `json:"calibration,omitempty"`
	// Classes, with multiclass labels, has per class the rounds whose
	// label was that class and the mistakes on them (package pipeline
	// fills it in).
	Classes []ClassReport `json:"classes,omitempty"`
}

// Learned returns the rounds, mistakes and loss of every round the
// learner learned from, scored against a real label or a default one:
// those its bound, regret and curves (History) are of.
func (r *LearnerReport) Learned() (rounds, mistakes uint64, loss float64) {
	rounds, mistakes, loss = r.Rounds, r.Mistakes, r.Loss
	if d := r.DefaultLabeled; d != nil && d.Rounds > 0 {
		rounds, mistakes, loss = rounds+d.Rounds, mistakes+d.Mistakes, loss+d.Loss
	}
	return rounds, mistakes, loss
}

// DefaultLabeledReport is a learner's record on the rounds scored against
// a default label: Accuracy is 1 − Mistakes/Rounds, NaN (null in JSON)
// when there was none.
type DefaultLabeledReport struct {
	Rounds   uint64  `json:"rounds"`
	Mistakes uint64  `json:"mistakes"`
	Accuracy float64 `json:"accuracy"`
	Loss     float64 `json:"loss"`
}

// MarshalJSON writes a non-finite accuracy or loss as null (see
// LearnerReport).
func (r DefaultLabeledReport) MarshalJSON() ([]byte, error) {
	type plain DefaultLabeledReport
	return json.Marshal(struct {
		plain
		Accuracy *float64 `json:"accuracy"`
		Loss     *float64 `json:"loss"`
	}{plain(r), FiniteOrNil(r.Accuracy), FiniteOrNil(r.Loss)})
}

// Accuracy returns 1 − mistakes/rounds, NaN when rounds is 0: no round,
// no accuracy (never a 1 or a 0 that no round earned).
func Accuracy(rounds, mistakes uint64) float64 {
	if rounds == 0 {
		return math.NaN()
	}
	return 1 - float64(mistakes)/float64(rounds)
}

// ClassReport is a multiclass learner's record on the rounds of one
// class: Accuracy is 1 − Mistakes/Rounds (the class's recall).
type ClassReport struct {
	Class    string  `json:"class"`
	Rounds   uint64  `json:"rounds"`
	Mistakes uint64  `json:"mistakes"`
	Accuracy float64 `json:"accuracy"`
	// Model, one versus the rest, is the class's own model's record on
	// its labels (+1 on the class's rounds, −1 on the others').
	Model *ClassModelReport `json:"model,omitempty"`
}

// ClassModelReport is a class model's record, one versus the rest: its
// mistakes and loss on its own labels over every round, and its theorem's
// bound and regret, as a learner's report has them.
type ClassModelReport struct {
	Mistakes uint64        `json:"mistakes"`
	Loss     float64       `json:"loss"`
	Bound    *BoundReport  `json:"bound,omitempty"`
	Regret   *RegretReport `json:"regret,omitempty"`
}

// MarshalJSON writes a non-finite loss as null (see LearnerReport).
func (r ClassModelReport) MarshalJSON() ([]byte, error) {
	type plain ClassModelReport
	return json.Marshal(struct {
		plain
		Loss *float64 `json:"loss"`
	}{plain(r), FiniteOrNil(r.Loss)})
}

// NewClassModelReport returns the report of a class model of mistakes
// and loss under guarantee g.
func NewClassModelReport(mistakes uint64, loss float64, g online.Guarantee) *ClassModelReport {
	r := &ClassModelReport{Mistakes: mistakes, Loss: loss}
	observed := float64(mistakes)
	if g.Kind == online.RegretBound {
		observed = loss - g.ComparatorLoss
	}
	if g.Kind != online.NoBound && finite(g.Value) {
		holds := observed <= g.Value
		r.Bound = &BoundReport{Kind: g.Kind, Value: g.Value, Holds: holds, Status: Status(g.Premise, holds, false)}
	}
	if g.Comparator != "" {
		r.Regret = &RegretReport{Comparator: g.Comparator, Value: loss - g.ComparatorLoss}
		if finite(g.RegretBound) {
			b := g.RegretBound
			r.Regret.Bound = &b
		}
	}
	return r
}

// Calibration is a learner's Platt scaling: the probability of the
// positive label at score s is σ(A·s + B).
type Calibration struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// BoundReport is a learner's theorem at the current round.
type BoundReport struct {
	Kind  online.BoundKind `json:"kind"`
	Value float64          `json:"value"`
	// Holds is false exactly when the observed quantity (mistakes, or
	// regret) exceeded Value; whether the theorem proves Value is Status.
	Holds bool `json:"holds"`
	// Status says what is known of the bound (see BoundStatus).
	Status BoundStatus `json:"status"`
	// Assumes names what the theorem assumes and the stream does not
	// guarantee ("immediate labels" on a stream with delayed labels):
	// the bound is then proved only while no label came late, its
	// status premise false after that, and no crossing is counted.
	Assumes string `json:"assumes,omitempty"`
	// DelayRounds, with delayed labels, is the delay the bound is for: at
	// most that many labeled rounds were learned between a prediction and
	// its label.
	DelayRounds uint64 `json:"delay_rounds,omitempty"`
}

// BoundStatus is what is known of a bound at the current round, one of
// four:
//
//   - StatusHolds: the observed quantity is within the bound and the
//     theorem proves the bound for this stream: it is unconditional, or
//     its premise is established on the rounds so far;
//   - StatusViolated: the observed quantity exceeded a bound whose
//     premise holds;
//   - StatusPremiseFalse: the learner saw the theorem's premise fail (a
//     version space emptied, updates past what a margin allows, a label
//     that came late to a theorem of immediate labels), or the bound was
//     exceeded while its premise was the user's word, which disproves
//     it: the theorem says nothing of this stream, whether or not the
//     quantity is within the bound (Holds says);
//   - StatusAssumed: the quantity is within the bound, and the theorem
//     proves it if the user's word (a margin) is true, which nothing has
//     contradicted.
//
// Premise false comes before violated: a theorem whose premise failed is
// not broken by a stream it does not speak of, and a bound exceeded under
// a premise that is only assumed proves the premise false, not the
// theorem wrong. Violated is left for a bound a proof covers.
type BoundStatus string

const (
	StatusHolds        BoundStatus = "holds"
	StatusViolated     BoundStatus = "violated"
	StatusPremiseFalse BoundStatus = "premise_false"
	StatusAssumed      BoundStatus = "assumed"
)

// Status returns the status of a bound whose theorem's premise is p,
// holds saying whether the observed quantity is within it, and unmet
// whether the stream broke a premise the learner does not check (a label
// that came late to a theorem of immediate labels).
func Status(p online.Premise, holds, unmet bool) BoundStatus {
	switch {
	case unmet || p == online.PremiseFalse:
		return StatusPremiseFalse
	case p == online.PremiseAssumed && !holds:
		// The premise and the theorem imply the bound: the bound
		// exceeded disproves the premise.
		return StatusPremiseFalse
	case !holds:
		return StatusViolated
	case p == online.PremiseAssumed:
		return StatusAssumed
	}
	return StatusHolds
}

// Text returns s as a report's text says it: "premise false" for
// StatusPremiseFalse, the status itself otherwise.
func (s BoundStatus) Text() string {
	if s == StatusPremiseFalse {
		return "premise false"
	}
	return string(s)
}

// RegretReport is the learner's regret against its comparator. Bound is
// omitted when the theorem gives no regret bound.
type RegretReport struct {
	Comparator string   `json:"comparator"`
	Value      float64  `json:"value"`
	Bound      *float64 `json:"bound,omitempty"`
}

// CertificateReport is a quantity the learner certifies online.
type CertificateReport struct {
	Kind  string  `json:"kind"`
	Value float64 `json:"value"`
}

// Learners returns the current report of every learner, in the order they
// were added. It computes each learner's state digest, which costs a pass
// over its state: call it per report, not per event.
func (t *Tracker) Learners() ([]LearnerReport, error) { return t.learnerReports(true) }

// LearnersWithoutDigests is Learners without the state digests
// (StateSHA256 empty, unless a digest of the current round is at hand):
// counts, bounds and regrets only, which cost no pass over the states.
func (t *Tracker) LearnersWithoutDigests() ([]LearnerReport, error) { return t.learnerReports(false) }

func (t *Tracker) learnerReports(digests bool) ([]LearnerReport, error) {
	out := make([]LearnerReport, len(t.learners))
	for i := range t.learners {
		r, err := t.report(&t.learners[i], digests)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func (t *Tracker) report(l *learner, digest bool) (LearnerReport, error) {
	r := LearnerReport{
		Name:            l.name,
		Algorithm:       l.algorithm,
		Rounds:          l.rounds - l.def.Rounds,
		Mistakes:        l.mistakes - l.def.Mistakes,
		Loss:            l.loss,
		BoundViolations: l.violations(),
	}
	if l.def.Rounds > 0 {
		r.Loss = l.loss - l.def.Loss
	}
	r.Accuracy = Accuracy(r.Rounds, r.Mistakes)
	if t.defaults || l.def.Rounds > 0 {
		r.DefaultLabeled = &DefaultLabeledReport{Rounds: l.def.Rounds, Mistakes: l.def.Mistakes,
			Accuracy: Accuracy(l.def.Rounds, l.def.Mistakes), Loss: l.def.Loss}
	}
	if l.guaranteed != nil {
		l.sync()
		g := l.g
		if g.Kind != online.NoBound && finite(g.Value) {
			r.Bound = &BoundReport{Kind: g.Kind, Value: g.Value}
			holds, unmet := !l.broken, false
			switch {
			case l.dl.on && l.delayed == nil:
				// Not checked round by round: compared now, and its
				// premise failed once a label came late.
				r.Bound.Assumes = "immediate labels"
				holds, unmet = l.holdsFor(&g), l.dl.delay > 0
			case l.dl.on:
				r.Bound.DelayRounds = l.dl.delay
			}
			r.Bound.Holds, r.Bound.Status = holds, Status(g.Premise, holds, unmet)
		}
		if g.Comparator != "" {
			r.Regret = &RegretReport{Comparator: g.Comparator, Value: l.regret()}
			if finite(g.RegretBound) {
				b := g.RegretBound
				r.Regret.Bound = &b
			}
		}
		if g.CertificateKind != "" && finite(g.Certificate) {
			r.Certificate = &CertificateReport{Kind: g.CertificateKind, Value: g.Certificate}
		}
	}
	current := l.digestOK && l.digestAt == l.rounds
	if digest && !current {
		if err := l.noteModel(); err != nil {
			return LearnerReport{}, fmt.Errorf("regret: state of learner %q: %w", l.name, err)
		}
		current = true
	}
	if current {
		r.StateSHA256 = hex.EncodeToString(l.digest[:])
	}
	return r, nil
}

// stateBufs hold the encodings noteModel hashes: a report of many
// models (one per key) encodes each into a buffer used again.
var stateBufs = sync.Pool{New: func() any { return new([]byte) }}

// noteModel takes the digest of the model's encoding as of now: appended
// to a pooled buffer when the model appends its encoding
// (encoding.BinaryAppender), the same bytes MarshalBinary returns.
func (l *learner) noteModel() error {
	a, ok := l.model.(encoding.BinaryAppender)
	if !ok {
		state, err := l.model.MarshalBinary()
		if err != nil {
			return err
		}
		l.noteState(state)
		return nil
	}
	buf := stateBufs.Get().(*[]byte)
	state, err := a.AppendBinary((*buf)[:0])
	if err == nil {
		l.noteState(state)
		*buf = state[:0]
	}
	stateBufs.Put(buf)
	return err
}

// noteState takes the digest of state, the model's encoding as of now,
// with the round count, mistakes and loss.
func (l *learner) noteState(state []byte) {
	l.digest = StateDigest(state, l.rounds, l.mistakes, l.loss, l.def)
	l.digestAt, l.digestOK = l.rounds, true
}

// StateDigest is a learner's state digest (LearnerReport.StateSHA256):
// the SHA-256 of its state, its model's encoding, followed by its round
// count, mistakes and loss (every round it learned from, as Rounds,
// Mistakes and Loss count them) and, when some rounds were scored against
// a default label, their rounds, mistakes and loss (def, as Defaults has
// them): without such rounds the digest is the one of the states before
// they were counted apart.
func StateDigest(state []byte, rounds, mistakes uint64, loss float64, def Scores) [32]byte {
	h := sha256.New()
	h.Write(state)
	var c [48]byte
	binary.LittleEndian.PutUint64(c[0:], rounds)
	binary.LittleEndian.PutUint64(c[8:], mistakes)
	binary.LittleEndian.PutUint64(c[16:], math.Float64bits(loss))
	n := 24
	if def != (Scores{}) {
		binary.LittleEndian.PutUint64(c[24:], def.Rounds)
		binary.LittleEndian.PutUint64(c[32:], def.Mistakes)
		binary.LittleEndian.PutUint64(c[40:], math.Float64bits(def.Loss))
		n = 48
	}
	h.Write(c[:n])
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// NoteState tells the tracker that learner i's model encodes to state now
// (its MarshalBinary, taken anyway for a checkpoint or a copy): the next
// report takes the state digest from it rather than encoding the model
// again. A digest already taken at this round is kept, not hashed again.
// The tracker keeps the digest, not state.
func (t *Tracker) NoteState(i int, state []byte) {
	if l := &t.learners[i]; !l.digestOK || l.digestAt != l.rounds {
		l.noteState(state)
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// MarshalJSON writes a non-finite accuracy or loss as null: JSON has no
// Inf or NaN, and a diverging learner (an OGD with squared loss and no
// projection on a hostile scale) must not stop a report.
func (r LearnerReport) MarshalJSON() ([]byte, error) {
	type plain LearnerReport
	return json.Marshal(struct {
		plain
		Accuracy *float64 `json:"accuracy"`
		Loss     *float64 `json:"loss"`
	}{plain(r), FiniteOrNil(r.Accuracy), FiniteOrNil(r.Loss)})
}

// MarshalJSON writes a non-finite regret as null (see LearnerReport).
func (r RegretReport) MarshalJSON() ([]byte, error) {
	type plain RegretReport
	return json.Marshal(struct {
		plain
		Value *float64 `json:"value"`
	}{plain(r), FiniteOrNil(r.Value)})
}

// FiniteOrNil returns a pointer to f, nil when f is NaN or infinite: a
// report's figure that JSON writes as null when it has no value.
func FiniteOrNil(f float64) *float64 {
	if !finite(f) {
		return nil
	}
	return &f
}
