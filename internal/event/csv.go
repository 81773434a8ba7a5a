package event

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/online"
)

// csvState is the state of a CSV record scan at a line end.
type csvState uint8

const (
	csvFieldStart csvState = iota
	csvUnquoted
	csvQuoted
	csvQuotedQuote // a quote inside a quoted field: closes it or starts ""
)

// scan advances the state over b.
func (st csvState) scan(b []byte) csvState {
	for _, c := range b {
		switch st {
		case csvFieldStart:
			switch c {
			case '"':
				st = csvQuoted
			case ',':
			default:
				st = csvUnquoted
			}
		case csvUnquoted:
			if c == ',' {
				st = csvFieldStart
			}
		case csvQuoted:
			if c == '"' {
				st = csvQuotedQuote
			}
		case csvQuotedQuote:
			switch c {
			case '"':
				st = csvQuoted
			case ',':
				st = csvFieldStart
			default:
				st = csvUnquoted // malformed; the field parser reports it
			}
		}
	}
	return st
}

// csvRecord returns the CSV record that starts with line: line itself,
// unless a quoted field goes on past the line end (RFC 4180), in which case
// the following lines are joined with "\n". A record longer than MaxBytes
// is returned truncated with over set; its remaining lines are skipped
// without being buffered. A quoted field left open at the end of input is
// returned as is (the field parser reports it). err is a read error.
func (r *Reader) csvRecord(line []byte) (rec []byte, over bool, err error) {
	if bytes.IndexByte(line, '"') < 0 {
		return line, false, nil
	}
	st := csvFieldStart.scan(line)
	if st != csvQuoted {
		return line, false, nil
	}
	rec = append(r.rec[:0], line...)
	defer func() { r.rec = rec[:0] }()
	for st == csvQuoted {
		next, lover, err := r.lr.readLine()
		if err == io.EOF {
			return rec, over, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("event: read %s: %w", r.name, err)
		}
		if lover { // the state past the kept bytes is unknown: end the record here
			return rec, true, nil
		}
		st = st.scan(next)
		if over {
			continue
		}
		if len(rec)+1+len(next) > r.s.maxBytes {
			rec = append(rec, '\n')
			rec = append(rec, next...)[:r.s.maxBytes]
			over = true
			continue
		}
		rec = append(rec, '\n')
		rec = append(rec, next...)
	}
	return rec, over, nil
}

// csvFields iterates over the fields of a CSV record.
type csvFields struct {
	rec  []byte
	i    int
	done bool
}

// next returns the next field, unescaped into *buf if it has doubled
// quotes, or a description of the fault that makes the record malformed.
func (it *csvFields) next(buf *[]byte) (f []byte, bad string) {
	rec, i := it.rec, it.i
	if i < len(rec) && rec[i] == '"' {
		j := i + 1
		start := j
		b := (*buf)[:0]
		esc := false
		for {
			k := bytes.IndexByte(rec[j:], '"')
			if k < 0 {
				it.done = true
				return nil, "unterminated quoted field"
			}
			j += k
			if j+1 < len(rec) && rec[j+1] == '"' {
				b = append(b, rec[start:j+1]...)
				j += 2
				start = j
				esc = true
				continue
			}
			break
		}
		if esc {
			b = append(b, rec[start:j]...)
			*buf, f = b, b
		} else {
			f = rec[start:j]
		}
		j++
		if j < len(rec) && rec[j] != ',' {
			it.done = true
			return nil, "unexpected character after a quoted field"
		}
		it.advance(j)
		return f, ""
	}
	end := len(rec)
	if k := bytes.IndexByte(rec[i:], ','); k >= 0 {
		end = i + k
	}
	f = rec[i:end]
	if bytes.IndexByte(f, '"') >= 0 {
		it.done = true
		return nil, "quote in an unquoted field"
	}
	it.advance(end)
	return f, ""
}

// advance moves past the field ending at j (a comma or the end).
func (it *csvFields) advance(j int) {
	if j >= len(it.rec) {
		it.done = true
	} else {
		it.i = j + 1
	}
}

// trimBlank trims ASCII spaces and tabs.
func trimBlank(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t') {
		j--
	}
	return b[i:j]
}

// header reads the CSV header and resolves the label column.
func (r *Reader) header(labelColumn string) error {
	line, over, no, err := r.line()
	if err == nil && over {
		err = fmt.Errorf("header longer than %d bytes", r.s.maxBytes)
	}
	if err != nil {
		return fmt.Errorf("event: %s:%d: csv header: %w", r.name, no, err)
	}
	rec, over, err := r.csvRecord(line)
	if err != nil {
		return err
	}
	if over {
		return fmt.Errorf("event: %s:%d: csv header longer than %d bytes", r.name, no, r.s.maxBytes)
	}
	var names []string
	it := csvFields{rec: rec}
	for !it.done {
		f, bad := it.next(&r.fbuf)
		if bad != "" {
			return fmt.Errorf("event: %s:%d: csv header: %s", r.name, no, bad)
		}
		name := string(f)
		if slices.Contains(names, name) {
			return fmt.Errorf("event: %s:%d: csv header: duplicate column %q", r.name, no, name)
		}
		names = append(names, name)
	}
	r.labelCol = -1
	switch {
	case labelColumn != "":
		r.labelCol = slices.Index(names, labelColumn)
		if r.labelCol < 0 {
			return fmt.Errorf("event: %s:%d: label column %q is not in the csv header (%s)",
				r.name, no, labelColumn, strings.Join(names, ","))
		}
	case slices.Contains(names, "label"):
		r.labelCol = slices.Index(names, "label")
	default:
		r.labelCol = len(names) - 1
	}
	r.cols = make([]csvColumn, len(names))
	for k, name := range names {
		r.cols[k] = csvColumn{name: name, slot: online.Slot(name, r.s.mask), prefix: []byte(name + "=")}
	}
	return nil
}

// csv parses a CSV record.
func (r *Reader) csv(rec []byte, ev *Event) *Error {
	ev.reset()
	var first *Error
	mask := r.s.mask
	x := &ev.X
	it := csvFields{rec: rec}
	n := 0
	for ; !it.done; n++ {
		f, bad := it.next(&r.fbuf)
		if bad != "" {
			e := &Error{Reason: ReasonMalformed, Err: errors.New(bad)}
			if n < len(r.cols) {
				e.Field = r.cols[n].name
			}
			return e
		}
		if n >= len(r.cols) || first != nil {
			continue
		}
		c := &r.cols[n]
		t := trimBlank(f)
		if n == r.labelCol {
			if len(t) > 0 {
				y, ok := r.s.labels.parse(t)
				if !ok {
					first = &Error{Field: c.name, Reason: ReasonLabel, Err: r.s.labels.unknown(t)}
					continue
				}
				ev.Labeled, ev.Label = true, y
			}
			continue
		}
		if len(t) == 0 {
			continue // missing
		}
		v, st := parseFloat(t)
		switch st {
		case numOK:
			if math.Abs(v) > r.s.maxAbs {
				first = &Error{Field: c.name, Reason: ReasonRange, Err: errRange(t, r.s.maxAbs)}
				continue
			}
			x.Idx = append(x.Idx, c.slot)
			x.Val = append(x.Val, v)
		case numNonFinite:
			first = &Error{Field: c.name, Reason: ReasonNonFinite, Err: fmt.Errorf("%q is not finite", clip(t))}
		default:
			if !utf8.Valid(f) {
				first = &Error{Field: c.name, Reason: ReasonUTF8, Err: errors.New("value is not valid UTF-8")}
				continue
			}
			cat := append(append(r.cbuf[:0], c.prefix...), f...)
			r.cbuf = cat
			x.Idx = append(x.Idx, online.Slot(cat, mask))
			x.Val = append(x.Val, 1)
		}
	}
	if n != len(r.cols) {
		return &Error{Reason: ReasonLength, Err: fmt.Errorf("%d fields, the header has %d", n, len(r.cols))}
	}
	if first != nil {
		return first
	}
	if reason := r.p.canon.canonicalize(x, r.s.maxAbs); reason != "" {
		return errSum(reason, r.s.maxAbs)
	}
	return nil
}
