package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/streamlearn/streamlearn/internal/config"
)

// Restoring a state written by another list of learners: every learner
// whose settings did not change keeps its model, its counters and its
// bound state; the ones added or of other settings start afresh, and the
// ones no longer configured are dropped, each by the operator's name
// (`run --reset-learner NAME`). It needs the settings digests of state
// format version 3.

// ErrNoDigests is the error of a partial restore of a state of format
// version 1 or 2: without the settings digests, nothing says which
// learners' states can be kept.
var ErrNoDigests = errors.New("the state has no settings digests (format version 3 on): it cannot be restored in part")

// Changes says how the learners of a state differ from those of a
// configuration, by name: Kept, Added and Changed in the configuration's
// order, Dropped in the state's.
type Changes struct {
	// SharedChanged: the settings every learner depends on (input,
	// features, delayed labels, the domain of the learners over a
	// hypothesis class: SharedDigest) differ, and no learner's state can
	// be kept. The lists are then still filled in.
	SharedChanged bool
	Kept          []string // the same settings: restored as they were
	Added         []string // not in the state: started afresh
	Changed       []string // in the state with other settings: started afresh
	Dropped       []string // in the state, not configured: their state dropped
}

// Reset returns the learners a partial restore must be told to reset: the
// added, changed and dropped ones.
func (c Changes) Reset() []string {
	return slices.Concat(c.Added, c.Changed, c.Dropped)
}

// String says what differs, as "learner c added; learner b: settings
// changed; learner x dropped", or "no learner added, changed or dropped".
func (c Changes) String() string {
	var s []string
	if c.SharedChanged {
		s = append(s, "the input, features or labels settings, or the domain of the learners over a hypothesis class, changed")
	}
	for _, n := range c.Added {
		s = append(s, fmt.Sprintf("learner %s added", n))
	}
	for _, n := range c.Changed {
		s = append(s, fmt.Sprintf("learner %s: settings changed", n))
	}
	for _, n := range c.Dropped {
		s = append(s, fmt.Sprintf("learner %s dropped", n))
	}
	if len(s) == 0 {
		return "no learner added, changed or dropped"
	}
	return strings.Join(s, "; ")
}

// CompareState says how the learners of state b, a MarshalBinary of
// format version 3 (else an error wrapping ErrNoDigests), differ from
// those of c. It reads b's header, after verifying its checksum, and
// decodes nothing else.
func CompareState(b []byte, c *config.Config) (Changes, error) {
	sh, _, err := openState(b)
	if err != nil {
		return Changes{}, fmt.Errorf("pipeline: %w", err)
	}
	if sh.version < 3 {
		return Changes{}, fmt.Errorf("pipeline: state format version %d: %w", sh.version, ErrNoDigests)
	}
	names := make([]string, len(c.Learners))
	digests := make([][32]byte, len(c.Learners))
	for i, l := range c.Learners {
		names[i], digests[i] = l.Name, LearnerDigest(l)
	}
	ch, _ := compareShape(sh, SharedDigest(c), names, digests)
	return ch, nil
}

// compareShape compares the learners of sh with the configured ones
// (names and digests, in order); from[i] is the index in sh of configured
// learner i when it is kept, -1 otherwise.
func compareShape(sh *stateShape, shared [32]byte, names []string, digests [][32]byte) (Changes, []int) {
	ch := Changes{SharedChanged: sh.shared != shared}
	from := make([]int, len(names))
	for i, name := range names {
		k := slices.IndexFunc(sh.learners, func(l stateLearner) bool { return l.name == name })
		from[i] = -1
		switch {
		case k < 0:
			ch.Added = append(ch.Added, name)
		case sh.learners[k].digest != digests[i]:
			ch.Changed = append(ch.Changed, name)
		default:
			ch.Kept = append(ch.Kept, name)
			from[i] = k
		}
	}
	for _, l := range sh.learners {
		if !slices.Contains(names, l.name) {
			ch.Dropped = append(ch.Dropped, l.name)
		}
	}
	return ch, from
}

// A ResetError is the error of UnmarshalBinaryReset when the learners
// named to reset are not those the state and the configuration differ by.
type ResetError struct {
	Changes
	Missing   []string // differ, and not named
	Unchanged []string // named, and the same in the state and the configuration
	Unknown   []string // named, and in neither
}

func (e *ResetError) Error() string {
	var s []string
	if len(e.Missing) > 0 {
		s = append(s, fmt.Sprintf("%s not named to be reset (%s)", strings.Join(e.Missing, ", "), e.Changes))
	}
	if len(e.Unchanged) > 0 {
		s = append(s, fmt.Sprintf("%s named to be reset, but the same in the state and the configuration: it is kept as it is (rename a learner to start it afresh)", strings.Join(e.Unchanged, ", ")))
	}
	if len(e.Unknown) > 0 {
		s = append(s, fmt.Sprintf("%s named to be reset, but neither in the state nor in the configuration", strings.Join(e.Unknown, ", ")))
	}
	return "learners to reset: " + strings.Join(s, "; ")
}

// UnmarshalBinaryReset restores into p a state encoded by MarshalBinary
// (format version 3, else an error wrapping ErrNoDigests) for another list
// of learners, over the same input, features and labels settings and the
// same domain of the learners over a hypothesis class (SharedDigest; else an
// error saying no learner's state can be kept). reset names the learners
// the state and p's configuration differ by — added, of changed settings
// (LearnerDigest), dropped — each of them and no other (else a
// *ResetError), so that a list left in place cannot reset a model at every
// restore:
//   - a learner of p whose settings are the state's learner of its name's
//     gets its model, last loss, tracker entry (rounds, mistakes, loss,
//     bound, history) and, with delayed labels, its predictions of the
//     events waiting for their labels — wherever it is in the list;
//   - a learner added, or of changed settings, starts afresh: no rounds
//     (its rounds count from the state's learned rounds on, so fewer than
//     the pipeline's), and it predicts the events waiting for their
//     labels now, from its fresh state (a Weighted-Majority over learners
//     from its experts' predictions of them), to be scored on and learn
//     from when their labels come;
//   - a learner of the state p does not have is dropped.
//
// The counts, the scaler and the store of waiting events are the state's.
// A Weighted-Majority over learners kept keeps its weights: its experts
// are named in its settings, so it is kept only if they are the same
// learners (though one of them may have started afresh).
//
// It returns how the learners differ. On any error p is unchanged. With
// reset empty and the same learners (in any order), it is UnmarshalBinary
// by name.
func (p *Pipeline) UnmarshalBinaryReset(b []byte, reset []string) (Changes, error) {
	q, err := p.renew()
	if err != nil {
		return Changes{}, fmt.Errorf("pipeline: unmarshal: %w", err)
	}
	ch, err := q.decodeReset(b, reset)
	if err != nil {
		return ch, fmt.Errorf("pipeline: unmarshal: %w", err)
	}
	tr := p.tracker
	*tr = *q.tracker
	p.nodes, p.scaler, p.domains, p.preds, p.counts, p.delay, p.warm = q.nodes, q.scaler, q.domains, q.preds, q.counts, q.delay, q.warm
	p.space, p.maps = q.space, q.maps
	return ch, nil
}

// decodeReset is UnmarshalBinaryReset's decode into q, fresh from New.
func (q *Pipeline) decodeReset(b []byte, reset []string) (Changes, error) {
	sh, d, err := openState(b)
	if err != nil {
		return Changes{}, err
	}
	if sh.version < 3 {
		return Changes{}, fmt.Errorf("state format version %d: %w", sh.version, ErrNoDigests)
	}
	names := make([]string, len(q.nodes))
	digests := make([][32]byte, len(q.nodes))
	for i := range q.nodes {
		names[i], digests[i] = q.nodes[i].name, q.nodes[i].digest
	}
	ch, from := compareShape(sh, q.shared, names, digests)
	if ch.SharedChanged || sh.bits != uint64(q.spec.Features.Bits) || sh.scale != q.spec.Features.Scale {
		return ch, errors.New("the state is of other input, features or labels settings, or another domain of the learners over a hypothesis class: no learner's state can be kept")
	}
	e := &ResetError{Changes: ch}
	need := ch.Reset()
	for _, n := range need {
		if !slices.Contains(reset, n) {
			e.Missing = append(e.Missing, n)
		}
	}
	for _, n := range reset {
		switch {
		case slices.Contains(need, n) || slices.Contains(e.Unchanged, n) || slices.Contains(e.Unknown, n):
		case slices.Contains(ch.Kept, n):
			e.Unchanged = append(e.Unchanged, n)
		default:
			e.Unknown = append(e.Unknown, n)
		}
	}
	if len(e.Missing)+len(e.Unchanged)+len(e.Unknown) > 0 {
		return ch, e
	}
	return ch, q.decodeState(d, sh, from, true, nil)
}
