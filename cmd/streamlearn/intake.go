package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/pipeline"
	"github.com/streamlearn/streamlearn/internal/service"
)

// exitNothingLearned is the exit status of a replay or run to which
// records came and from which nothing was learned (see checkIntake).
const exitNothingLearned = 3

// errNothingLearned marks the errors that exit with exitNothingLearned.
var errNothingLearned = errors.New("nothing learned")

// nothingLearned is the error of a run that learned nothing from the
// records that came: its message says why, with a record rejected and a
// hint.
type nothingLearned struct{ msg string }

func (e *nothingLearned) Error() string        { return e.msg }
func (e *nothingLearned) Is(target error) bool { return target == errNothingLearned }

// intakeTotal is the intake of every model of a run, added up.
type intakeTotal struct {
	records, learned, rejected, labelOnly uint64
	byReason                              map[event.Reason]uint64
	first                                 *service.Rejected
	// byKey: models per key, to whose model a label goes by its key.
	byKey bool
}

func totalIntake(ins []service.Intake) intakeTotal {
	t := intakeTotal{byReason: map[event.Reason]uint64{}}
	for _, in := range ins {
		t.records += in.Records
		t.learned += in.Learned
		t.labelOnly += in.LabelOnly
		for r, n := range in.Rejected {
			t.byReason[r] += n
			t.rejected += n
		}
		if t.first == nil {
			t.first = in.First
		}
	}
	return t
}

// ranked returns the reasons, the most frequent first (ties in byte
// order), as reasons says them.
func (t intakeTotal) ranked() []event.Reason {
	return slices.SortedFunc(maps.Keys(t.byReason), func(a, b event.Reason) int {
		return cmp.Or(cmp.Compare(t.byReason[b], t.byReason[a]), cmp.Compare(a, b))
	})
}

// reasons says the counts by reason, the most frequent first, at most
// three and how many more: "label 5574" or "empty 12, type 3, range 1 and
// 2 more".
func (t intakeTotal) reasons() string {
	rs := t.ranked()
	var parts []string
	for i, r := range rs {
		if i == 3 {
			parts[len(parts)-1] += fmt.Sprintf(" and %d more", len(rs)-3)
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", r, t.byReason[r]))
	}
	return strings.Join(parts, ", ")
}

// checkIntake tells the records that came and were not learned. When
// records came and none was learned — for replay, not one labeled round;
// for run, every record rejected (a run's events may be predicted only:
// labels come later, or never, on a stream that is served) — it returns
// an error of exit status exitNothingLearned, unless allowEmpty, saying
// the main reasons, the first record rejected and what to change.
// Otherwise, when some records were rejected, it writes a line saying how
// many and why to stderr. No record at all is not its business (the
// callers' "no record" errors). byKey says the models are per key
// (models.by: key).
func checkIntake(cmd string, ins []service.Intake, byKey, allowEmpty bool, deadLetters string, stderr io.Writer) error {
	t := totalIntake(ins)
	t.byKey = byKey
	if t.records == 0 {
		return nil
	}
	none := t.learned == 0
	if cmd == "run" {
		none = t.rejected == t.records
	}
	if !none || allowEmpty {
		if t.rejected > 0 {
			fmt.Fprintf(stderr, "streamlearn %s: %d of %s rejected: %s%s\n", cmd, t.rejected, records(t.records), t.reasons(), deadLetters)
		} else if none {
			fmt.Fprintf(stderr, "streamlearn %s: %s, none labeled: nothing learned\n", cmd, records(t.records))
		}
		return nil
	}
	var b strings.Builder
	if t.rejected > 0 {
		fmt.Fprintf(&b, "%s came and none was learned: %d rejected (%s)", records(t.records), t.rejected, t.reasons())
	} else {
		fmt.Fprintf(&b, "%s came and none was learned: none has a label (%d predicted only)", records(t.records), t.records)
	}
	if f := t.first; f != nil {
		b.WriteString("\n  first rejected")
		if f.Key != "" {
			fmt.Fprintf(&b, " (key %q)", f.Key)
		} else if t.byKey {
			b.WriteString(" (no key)")
		}
		fmt.Fprintf(&b, ": %s", f.Err) // which names where it is
	}
	for _, h := range t.hints() {
		b.WriteString("\n  hint: " + h)
	}
	b.WriteString(deadLetters)
	b.WriteString("\n  (--allow-empty exits 0 when learning nothing is expected)")
	return &nothingLearned{msg: b.String()}
}

// records says n records, "1 record" for one.
func records(n uint64) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

// hints returns what to change for the records rejected: the hint of the
// first record rejected's reason first, as it is the record shown, then
// those of the other reasons shown (reasons: the three most frequent),
// each hint once; the generic one when no reason has its own. With no
// record rejected, none had a label.
func (t intakeTotal) hints() []string {
	if t.rejected == 0 {
		return []string{"a record is learned when it has a label; labels sent later, as label events (an id and a label), are joined to their events with labels.delayed: true"}
	}
	rs := t.ranked()
	if len(rs) > 3 {
		rs = rs[:3]
	}
	if f := t.first; f != nil {
		if i := slices.Index(rs, f.Reason); i >= 0 {
			rs = slices.Delete(rs, i, i+1)
		}
		rs = slices.Insert(rs, 0, f.Reason)
	}
	var hs []string
	for _, r := range rs {
		if h := t.hint(r); h != "" && !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		hs = append(hs, "docs/configuration.md says what a record must be")
	}
	return hs
}

// hint returns what to change for the records rejected for reason r, ""
// when nothing more than docs/configuration.md is to say.
func (t intakeTotal) hint(r event.Reason) string {
	switch {
	case r == event.ReasonLabel:
		return "the labels are not the configured ones: name the values of the file's labels with input.positive and input.negative (input.classes for more than two classes), and their column with input.label_column"
	case r == event.ReasonEmpty && t.labelOnly > 0:
		return "these are label events (an id and a label, no features): labels.delayed: true joins each to its event by id"
	case r == pipeline.ReasonLabelLate:
		return "labels came after their events expired: raise labels.wait (the records an event waits for its label) above the labels' delay, and labels.max_pending (the events that wait at once) above the events that come meanwhile"
	case r == event.ReasonMalformed:
		return "the records are not in the input's format: set input.format (jsonl, libsvm, csv, tsv; a config fixes it for every file) or replay's --format to the file's"
	case r == pipeline.ReasonLabelUnknown && t.byKey && t.first != nil && t.first.Reason == r && t.first.Key == "":
		// The label went to the model of no key, where its event is not.
		return "the label has no key: with models per key (models.by: key) a label is joined to its event in the model of the event's key, so a label event carries its event's key, as the event does (labels travel keyed like their events)"
	case r == pipeline.ReasonLabelUnknown:
		return "labels name ids of no waiting event: their events came long before and expired (raise labels.wait and labels.max_pending), or never came (a label event carries its event's id)"
	}
	return ""
}

// intakeOf returns the intake of partition among ins, as a slice of one,
// or nil when none is.
func intakeOf(ins []service.Intake, partition int32) []service.Intake {
	for i := range ins {
		if ins[i].Partition == partition {
			return ins[i : i+1]
		}
	}
	return nil
}
