package event

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reason classifies why a record was rejected. The set is closed and small,
// so it is safe to use as a metric label (streamlearn_invalid_events_total
// {reason}); Reasons lists it.
type Reason string

// The reasons a record is rejected. Doc comments say which inputs produce
// each one; doc.go has the full rules per format.
const (
	// ReasonMalformed: the record is not valid syntax for its format:
	// invalid JSON (RFC 8259), a LIBSVM token that is not idx:number, an
	// unterminated or misplaced CSV quote, a TSV line without a tab.
	ReasonMalformed Reason = "malformed"
	// ReasonType: a JSON value of the wrong type, such as a string in `x`,
	// an object as a feature value, a number as `id`, or a record that is
	// valid JSON but not an object.
	ReasonType Reason = "type"
	// ReasonNonFinite: a feature value that is not a finite float64: a
	// number that overflows (1e400), "inf"/"nan" in text formats, or
	// duplicate slots whose sum overflows.
	ReasonNonFinite Reason = "nonfinite"
	// ReasonRange: a finite feature value whose magnitude exceeds
	// Config.MaxAbs (1e308, or colliding values whose sum does): accepted,
	// it could overflow a learner's weights or scores to ±Inf.
	ReasonRange Reason = "range"
	// ReasonLabel: a label that is neither in the configured sets nor
	// numerically 1, 0 or -1.
	ReasonLabel Reason = "label"
	// ReasonLength: a dense `x` whose length is not Config.Dense, or a CSV
	// record whose field count differs from the header's.
	ReasonLength Reason = "length"
	// ReasonOversized: a record longer than Config.MaxBytes.
	ReasonOversized Reason = "oversized"
	// ReasonDepth: JSON nested deeper than MaxDepth arrays and objects.
	ReasonDepth Reason = "depth"
	// ReasonUTF8: invalid UTF-8 in a JSON string, a CSV field or TSV text.
	ReasonUTF8 Reason = "utf8"
	// ReasonDuplicate: a JSON record that repeats one of the keys id, key,
	// ts, label, features, x or text (parsers disagree on which copy wins,
	// so streamlearn accepts neither).
	ReasonDuplicate Reason = "duplicate"
	// ReasonEmpty: a JSON record with none of the keys features, x and
	// text: a label on its own ({"id": "m42", "label": 1}), a misspelled
	// key. A learner would take it for an example whose every feature is
	// zero. (An explicit empty "features": {} is such an example, on
	// purpose, and accepted.)
	ReasonEmpty Reason = "empty"
)

// Reasons returns every Reason, in a fixed order (for pre-registering
// metric label values).
func Reasons() []Reason {
	return []Reason{ReasonMalformed, ReasonType, ReasonNonFinite, ReasonRange, ReasonLabel,
		ReasonLength, ReasonOversized, ReasonDepth, ReasonUTF8, ReasonDuplicate, ReasonEmpty}
}

// Error is the error for one bad record, shaped like fs.PathError. The
// stream goes on after it: Reader.Next returns the next record on the next
// call.
type Error struct {
	// Source names the input: a file name for a Reader, Decoder.Source for
	// a Decoder (a topic or subject), possibly empty.
	Source string
	// Offset is the 1-based line number where the record starts (Reader)
	// or the 1-based count of records passed to the Decoder. Callers that
	// know a better position (a Kafka offset) may overwrite it.
	Offset int64
	// Partition, with InPartition, is the partition of a broker's record,
	// and the message names it as source/partition/offset, the form of
	// the record's outputs' identities; without, as source:offset (a
	// file's line).
	Partition   int32
	InPartition bool
	// Field names the part of the record at fault: "label", "id", "x[3]",
	// "features.len", "text", a CSV column name, a LIBSVM index; empty when
	// the fault is the whole record.
	Field string
	// Reason is the class of the fault.
	Reason Reason
	// Err describes the fault in detail.
	Err error
}

// Error returns one line, e.g.
//
//	event: a9a:17: field "3": nonfinite: 1e400 overflows float64
//	event: kafka:events/3/1033: field "v": nonfinite: 1e400 overflows float64
//
// The field is quoted, so the message is one line whatever the input.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("event: ")
	switch {
	case e.Source != "" && e.InPartition:
		b.WriteString(e.Source)
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(int64(e.Partition), 10))
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	case e.Source != "":
		b.WriteString(e.Source)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	default:
		b.WriteString("record ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	}
	b.WriteString(": ")
	b.WriteString(e.Detail())
	return b.String()
}

// Detail is Error without the record's position: the field, the reason
// and what is wrong, e.g. `field "3": nonfinite: 1e400 overflows float64`.
// It is the same for the same fault wherever the record came from.
func (e *Error) Detail() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString("field ")
		b.WriteString(strconv.Quote(clip(e.Field)))
		b.WriteString(": ")
	}
	b.WriteString(string(e.Reason))
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// maxQuoted bounds how much of a record an error message quotes: a record
// may be a megabyte (a feature name, a label, a number's digits), its
// error is one line for a log, a dead letter or an HTTP answer.
const maxQuoted = 64

// clip returns s, or its first maxQuoted bytes, cut at a UTF-8 boundary,
// followed by "...", for quoting in an error message.
func clip[S ~string | ~[]byte](s S) string {
	if len(s) <= maxQuoted {
		return string(s)
	}
	n := maxQuoted
	for n > maxQuoted-utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return string(s[:n]) + "..."
}

// errRange is the error of a feature value v, written as text, beyond
// maxAbs.
func errRange(text []byte, maxAbs float64) error {
	return fmt.Errorf("%s exceeds the limit %g in magnitude", clip(text), maxAbs)
}

// errSum is the error of colliding features whose sum is not finite or
// beyond maxAbs (canonicalize's reason r).
func errSum(r Reason, maxAbs float64) *Error {
	if r == ReasonNonFinite {
		return &Error{Reason: r, Err: errors.New("values of colliding features sum to an infinity")}
	}
	return &Error{Reason: r, Err: fmt.Errorf("values of colliding features sum beyond the limit %g in magnitude", maxAbs)}
}
