package service

import (
	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
)

// Intake is what one model took in during Run: the records this process
// handed it, not those a checkpoint or a model file it started from
// already held, nor those a rebuild learned again. It tells a run that
// learned from its records from one that rejected them all.
type Intake struct {
	Partition int32
	// Records is the number of records processed.
	Records uint64
	// Learned is the number of labeled rounds they made (a labeled
	// event, a label joined to its event, an event learned with the
	// default label when its label did not come).
	Learned uint64
	// Rejected counts the records rejected (dead-lettered) by reason.
	Rejected map[event.Reason]uint64
	// LabelOnly counts the records rejected as empty that hold an id and
	// a label and nothing else: label events, of a configuration without
	// delayed labels.
	LabelOnly uint64
	// First is the first record rejected; nil when none was.
	First *Rejected
}

// Rejected is a rejected record: where it is, its key, and why.
type Rejected struct {
	// Where names the record: source:line for a file's, else
	// source/partition/offset.
	Where  string
	Key    string
	Reason event.Reason
	// Err is the error its dead letter carries.
	Err string
}

// RejectedCount returns the number of records rejected.
func (in Intake) RejectedCount() uint64 {
	var n uint64
	for _, c := range in.Rejected {
		n += c
	}
	return n
}

// reject counts rec, rejected for reason with msg, in w's intake.
func (w *worker) reject(rec *connectors.Record, reason event.Reason, msg string) {
	in := &w.intake
	if in.Rejected == nil {
		in.Rejected = map[event.Reason]uint64{}
	}
	in.Rejected[reason]++
	if reason == event.ReasonEmpty && w.ev.Labeled && len(w.ev.ID) > 0 {
		in.LabelOnly++
	}
	if in.First == nil {
		in.First = &Rejected{Where: w.where(rec), Key: string(w.outputKey(rec)), Reason: reason, Err: msg}
	}
}

// Intakes returns the intake of every model, ordered by partition. Call
// it after Run returns.
func (s *Service) Intakes() ([]Intake, error) {
	return eachModel(s, "Intakes while Run runs", func(w *worker) (Intake, error) {
		in := w.intake
		in.Partition = w.part
		return in, nil
	})
}

// LearnSeconds returns the seconds Run spent learning: the sum of its
// busy spans, each from the first record a fetch returned after a fetch
// that found nothing (or at the start) to the last clock reading before
// the next such fetch — at most clockEvery records early — or, at the end
// of the input, to the end of the workers' drain; less the time a source
// that says so (Files, reading standard input or a pipe) was blocked for
// input within them. Waits for records that had not come (a broker with
// nothing new between bursts, a file followed at its end, a paused pipe)
// are not learning: a run that waited an hour for its last records did
// not learn for an hour. A wait inside a fetch that then returned a record
// before its deadline (the next commit, report or snapshot, a second at
// most) counts. Call it after Run returns.
func (s *Service) LearnSeconds() float64 { return s.busy.total.Seconds() }
