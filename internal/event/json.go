package event

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Event is one decoded record. Decoders overwrite an Event and reuse its
// slices: the caller owns ev and must not retain ev's slices across calls
// (copy what must outlive the next call).
type Event struct {
	// ID, Key and TS are the record's `id`, `key` and `ts` strings
	// (unescaped copies), empty when absent or null.
	ID, Key, TS []byte
	// Labeled reports whether the record has a label; Label is then
	// online.Positive or online.Negative, and 0 otherwise.
	Labeled bool
	Label   int8
	// LabelOnly reports a label event (Config.LabelEvents): an id and a
	// label, no features; it labels the earlier event of that id.
	LabelOnly bool
	// X holds the features, canonical: Idx strictly increasing, the values
	// of colliding slots summed, every value finite and within ±Config.MaxAbs.
	X online.Vector
}

// reset empties ev, keeping its slices.
func (ev *Event) reset() {
	ev.ID, ev.Key, ev.TS = ev.ID[:0], ev.Key[:0], ev.TS[:0]
	ev.Labeled, ev.Label, ev.LabelOnly = false, 0, false
	ev.X.Idx, ev.X.Val = ev.X.Idx[:0], ev.X.Val[:0]
}

// A Decoder decodes event records (a Kafka record value, a NATS message, a
// line of a file) into Events: JSON, or with Config.Format LIBSVM or TSV,
// one line of that format. It keeps reusable buffers, so it allocates
// nothing per event in steady state. A Decoder is not safe for concurrent
// use: use one per goroutine.
type Decoder struct {
	// Source names the input in errors (a topic, a subject); may be empty.
	Source string

	n int64
	p jsonParser
	// r parses LIBSVM and TSV records, with r.p's tokenizer and
	// canonicalizer; nil for JSON.
	r *Reader
}

// NewDecoder returns a Decoder for cfg, or an error naming the first
// invalid setting. cfg.Format may be JSONL (or empty), LIBSVM or TSV: a
// CSV record needs the header of its file, which a record of a stream
// does not have.
func NewDecoder(cfg Config) (*Decoder, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	d := &Decoder{p: jsonParser{s: s}}
	switch s.format {
	case "", JSONL:
	case LIBSVM, TSV:
		d.r = &Reader{s: s, format: s.format}
		d.r.p.s = s
	default:
		return nil, fmt.Errorf("event: input.format %s: a record of a stream has no header line; use jsonl, libsvm or tsv (csv is for files that replay reads)", s.format)
	}
	return d, nil
}

// Decode decodes the record data into ev, overwriting it. It returns an
// *Error when data is not a valid event; ev's contents are then
// unspecified. Decode never panics and does not retain data.
func (d *Decoder) Decode(data []byte, ev *Event) error {
	d.n++
	var e *Error
	if d.r == nil {
		e = d.p.decode(data, ev)
	} else {
		// A line of the Reader's format, through the Reader's own decoding:
		// over the limit (size > what it is given) it is oversized.
		line := trimEOL(data)
		e = d.r.decode(line[:min(len(line), d.r.s.maxBytes)], len(line), ev)
	}
	if e != nil {
		e.Source, e.Offset = d.Source, d.n
		return e
	}
	return nil
}

// trimEOL drops a record's trailing line terminator, which a producer
// that sends lines may leave on.
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// Keys of a JSON event, as bits of a set.
const (
	keyID = 1 << iota
	keyKey
	keyTS
	keyLabel
	keyFeatures
	keyX
	keyText
)

// strSafe[c] reports whether byte c stands for itself inside a JSON string
// (printable ASCII other than the quote and the backslash).
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// jsonParser is a strict RFC 8259 scanner specialized to events. Errors
// come in two kinds: a syntax fault (malformed, depth, utf8) stops the scan
// at once; a semantic fault (type, label, nonfinite, length, duplicate) is
// recorded and the scan goes on, so a record that is both wrong and
// malformed is reported as malformed. The first fault of each kind wins.
type jsonParser struct {
	s settings

	data []byte
	i    int
	cur  string // the top-level key being decoded, for error messages
	// other: where the record's first key that is not an event's key
	// starts (its opening quote), -1 when there is none: named by
	// ReasonEmpty's message. An offset, not a copy, so that records with
	// extra keys cost nothing more.
	other int

	fail    Reason // syntax fault
	failMsg string
	failPos int

	sem      Reason // first semantic fault
	semField string
	semErr   error

	kbuf, vbuf, cbuf, sbuf []byte // unescape buffers: keys, values, categorical names, skipped strings
	tok                    tokenizer
	canon                  canonicalizer
	slots                  slotCache
	shape                  shape // the layout of the last learnable record
}

func (p *jsonParser) decode(data []byte, ev *Event) *Error {
	ev.reset()
	if len(data) > p.s.maxBytes {
		return &Error{Reason: ReasonOversized,
			Err: fmt.Errorf("record of %d bytes exceeds the limit of %d", len(data), p.s.maxBytes)}
	}
	p.data = data
	p.fail, p.sem = "", ""
	shaped := p.shape.use && p.shaped(ev)
	if !shaped {
		p.shape.miss()
		ev.reset()
		p.i, p.cur, p.other = 0, "", -1
		p.fail, p.sem = "", ""
		p.event(ev)
	}
	e := p.result(ev)
	if e == nil && !shaped {
		if p.shape.misses++; p.shape.learnNow() {
			p.learnShape()
		}
	} else if shaped {
		p.shape.misses = 0
	}
	p.data = nil
	return e
}

// result returns the fault of the record just decoded into ev, if any,
// after putting ev.X in canonical form.
func (p *jsonParser) result(ev *Event) *Error {
	if p.fail != "" {
		return &Error{Field: p.cur, Reason: p.fail, Err: fmt.Errorf("%s at byte %d", p.failMsg, p.failPos)}
	}
	if p.sem != "" {
		return &Error{Field: p.semField, Reason: p.sem, Err: p.semErr}
	}
	if r := p.canon.canonicalize(&ev.X, p.s.maxAbs); r != "" {
		return errSum(r, p.s.maxAbs)
	}
	return nil
}

// syntax records a syntax fault at the current position and returns false.
func (p *jsonParser) syntax(r Reason, msg string) bool {
	if p.fail == "" {
		p.fail, p.failMsg, p.failPos = r, msg, p.i
	}
	return false
}

// semantic records a semantic fault unless one is recorded already. Loops
// over values check p.sem first, so that a record of a million bad values
// builds one message, not a million.
func (p *jsonParser) semantic(r Reason, field string, err error) {
	if p.sem == "" {
		p.sem, p.semField, p.semErr = r, field, err
	}
}

func (p *jsonParser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *jsonParser) ws() {
	if p.i < len(p.data) && p.data[p.i] > ' ' {
		return // the common case: no space
	}
	p.wsSlow()
}

func (p *jsonParser) wsSlow() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// colon consumes optional space, a colon and optional space.
func (p *jsonParser) colon() bool {
	if i := p.i; i < len(p.data) && p.data[i] == ':' {
		p.i = i + 1
		p.ws()
		return true
	}
	p.ws()
	if p.peek() != ':' {
		return p.syntax(ReasonMalformed, "expected ':'")
	}
	p.i++
	p.ws()
	return true
}

// next consumes optional space and then a comma (more members follow:
// returns true, true) or the closing byte end (returns false, true).
func (p *jsonParser) next(end byte) (more, ok bool) {
	p.ws()
	if i := p.i; i < len(p.data) {
		switch p.data[i] {
		case ',':
			p.i = i + 1
			p.ws()
			return true, true
		case end:
			p.i = i + 1
			return false, true
		}
	}
	switch p.peek() {
	case ',':
		p.i++
		p.ws()
		return true, true
	case end:
		p.i++
		return false, true
	}
	if end == '}' {
		return false, p.syntax(ReasonMalformed, "expected ',' or '}'")
	}
	return false, p.syntax(ReasonMalformed, "expected ',' or ']'")
}

// literal consumes the literal word (true, false, null).
func (p *jsonParser) literal(word string) bool {
	if len(p.data)-p.i >= len(word) && string(p.data[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return p.syntax(ReasonMalformed, "invalid literal")
}

// key parses an object key and the colon after it.
func (p *jsonParser) key(buf *[]byte) ([]byte, bool) {
	if p.peek() != '"' {
		return nil, p.syntax(ReasonMalformed, "expected a string key")
	}
	k, ok := p.str(buf)
	return k, ok && p.colon()
}

// str parses the string at p.i (an opening quote) and returns its
// contents: a slice of the input when it has no escapes, else the unescaped
// text in *buf.
func (p *jsonParser) str(buf *[]byte) ([]byte, bool) {
	d := p.data
	start := p.i + 1
	j := start
	for j < len(d) {
		j = plainRun(d, j)
		if j >= len(d) {
			break
		}
		c := d[j]
		if strSafe[c] {
			j++
			continue
		}
		switch {
		case c == '"':
			p.i = j + 1
			return d[start:j], true
		case c == '\\':
			return p.strEscaped(buf, start, j)
		case c < 0x20:
			p.i = j
			return nil, p.syntax(ReasonMalformed, "control character in string")
		}
		r, size := utf8.DecodeRune(d[j:])
		if r == utf8.RuneError && size == 1 {
			p.i = j
			return nil, p.syntax(ReasonUTF8, "invalid UTF-8 in string")
		}
		j += size
	}
	p.i = j
	return nil, p.syntax(ReasonMalformed, "unterminated string")
}

// strEscaped continues str from the first backslash, at j.
func (p *jsonParser) strEscaped(buf *[]byte, start, j int) ([]byte, bool) {
	d := p.data
	b := append((*buf)[:0], d[start:j]...)
	for j < len(d) {
		c := d[j]
		switch {
		case strSafe[c]:
			// Copy the run of plain bytes up to the next special one.
			k := plainRun(d, j+1)
			b = append(b, d[j:k]...)
			j = k
		case c == '"':
			p.i = j + 1
			*buf = b
			return b, true
		case c == '\\':
			if j+1 >= len(d) {
				p.i = j
				return nil, p.syntax(ReasonMalformed, "unterminated string")
			}
			switch e := d[j+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(d[j+2:])
				if !ok {
					p.i = j
					return nil, p.syntax(ReasonMalformed, "invalid \\u escape")
				}
				j += 6
				if 0xD800 <= r && r < 0xDC00 {
					// A high surrogate pairs with a following low one.
					if len(d)-j >= 6 && d[j] == '\\' && d[j+1] == 'u' {
						if r2, ok := hex4(d[j+2:]); ok && 0xDC00 <= r2 && r2 < 0xE000 {
							r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
							j += 6
						}
					}
				}
				b = utf8.AppendRune(b, r) // lone surrogates become U+FFFD
				continue
			default:
				p.i = j
				return nil, p.syntax(ReasonMalformed, "invalid escape")
			}
			j += 2
		case c < 0x20:
			p.i = j
			return nil, p.syntax(ReasonMalformed, "control character in string")
		default:
			r, size := utf8.DecodeRune(d[j:])
			if r == utf8.RuneError && size == 1 {
				p.i = j
				return nil, p.syntax(ReasonUTF8, "invalid UTF-8 in string")
			}
			b = append(b, d[j:j+size]...)
			j += size
		}
	}
	p.i = j
	return nil, p.syntax(ReasonMalformed, "unterminated string")
}

// plainRun returns the end of the run of plain bytes (strSafe) of d
// starting at j, or, in the last 7 bytes of d, an earlier index from which
// the run goes on byte by byte. It skips 8 bytes at a time (SWAR): m flags the bytes that are '"',
// '\\', control characters or non-ASCII; its lowest flag is exact.
func plainRun(d []byte, j int) int {
	for j+8 <= len(d) {
		w := binary.LittleEndian.Uint64(d[j:])
		const ones, highs = 0x0101010101010101, 0x8080808080808080
		q, b := w^(ones*'"'), w^(ones*'\\')
		m := ((q - ones) &^ q) | ((b - ones) &^ b) | ((w - ones*0x20) &^ w) | w
		if m &= highs; m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
		j += 8
	}
	return j
}

// hex4 decodes four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number scans a JSON number and returns its text.
func (p *jsonParser) number() ([]byte, bool) {
	d := p.data
	start, j := p.i, p.i
	if j < len(d) && d[j] == '-' {
		j++
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && '1' <= d[j] && d[j] <= '9':
		for j++; j < len(d) && '0' <= d[j] && d[j] <= '9'; j++ {
		}
	default:
		p.i = j
		return nil, p.syntax(ReasonMalformed, "invalid number")
	}
	if j < len(d) && d[j] == '.' {
		j++
		k := j
		for ; j < len(d) && '0' <= d[j] && d[j] <= '9'; j++ {
		}
		if j == k {
			p.i = j
			return nil, p.syntax(ReasonMalformed, "invalid number")
		}
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		k := j
		for ; j < len(d) && '0' <= d[j] && d[j] <= '9'; j++ {
		}
		if j == k {
			p.i = j
			return nil, p.syntax(ReasonMalformed, "invalid number")
		}
	}
	p.i = j
	return d[start:j], true
}

// num scans a JSON number, as number, and parses it, as parseFloat:
// integers and decimals of at most 15 significant digits without an
// exponent are computed in the same pass (exactly: Clinger's fast path,
// as in floatPrefix), anything else by parseFloat of the scanned text.
// The text is p.data[start:p.i].
func (p *jsonParser) num() (v float64, st numStatus, ok bool) {
	d := p.data
	start, j := p.i, p.i
	neg := false
	if j < len(d) && d[j] == '-' {
		neg = true
		j++
	}
	var mant uint64
	nd, exp := 0, 0
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && '1' <= d[j] && d[j] <= '9':
		k := j
		for ; j < len(d); j++ {
			c := d[j] - '0'
			if c > 9 {
				break
			}
			mant = mant*10 + uint64(c) // wraps past 19 digits: then unused
		}
		nd = j - k
	default:
		p.i = j
		return 0, 0, p.syntax(ReasonMalformed, "invalid number")
	}
	if j < len(d) && d[j] == '.' {
		j++
		k := j
		for ; j < len(d); j++ {
			c := d[j] - '0'
			if c > 9 {
				break
			}
			if mant != 0 || c != 0 {
				mant = mant*10 + uint64(c)
				nd++
			}
			exp--
		}
		if j == k {
			p.i = j
			return 0, 0, p.syntax(ReasonMalformed, "invalid number")
		}
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		p.i = start
		if _, ok := p.number(); !ok {
			return 0, 0, false
		}
		v, st = parseFloat(d[start:p.i])
		return v, st, true
	}
	p.i = j
	if nd <= 15 && exp >= -22 {
		v = float64(int64(mant)) // exact: mant < 10^15
		if neg {
			v = -v
		}
		if exp != 0 && mant != 0 {
			v /= pow10[-exp]
		}
		return v, numOK, true
	}
	v, st = parseFloat(d[start:j])
	return v, st, true
}

// skip validates and skips one value nested in depth containers.
func (p *jsonParser) skip(depth int) bool {
	switch c := p.peek(); c {
	case '{', '[':
		if depth >= MaxDepth {
			return p.syntax(ReasonDepth, fmt.Sprintf("nesting deeper than %d", MaxDepth))
		}
		p.i++
		p.ws()
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		if p.peek() == end {
			p.i++
			return true
		}
		for {
			if c == '{' {
				if _, ok := p.key(&p.sbuf); !ok {
					return false
				}
			}
			if !p.skip(depth + 1) {
				return false
			}
			more, ok := p.next(end)
			if !more {
				return ok
			}
		}
	case '"':
		_, ok := p.str(&p.sbuf)
		return ok
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	case 0:
		if p.i >= len(p.data) {
			return p.syntax(ReasonMalformed, "unexpected end of record")
		}
	}
	if c := p.peek(); c == '-' || '0' <= c && c <= '9' {
		_, ok := p.number()
		return ok
	}
	return p.syntax(ReasonMalformed, "invalid character")
}

// event parses a whole record.
func (p *jsonParser) event(ev *Event) bool {
	p.ws()
	if p.i >= len(p.data) {
		return p.syntax(ReasonMalformed, "empty record")
	}
	if p.data[p.i] != '{' {
		if !p.skip(0) {
			return false
		}
		p.semantic(ReasonType, "", errors.New("record is not a JSON object"))
	} else if !p.members(ev) {
		return false
	}
	p.ws()
	if p.i != len(p.data) {
		return p.syntax(ReasonMalformed, "data after the event object")
	}
	return true
}

// members parses the event object.
func (p *jsonParser) members(ev *Event) bool {
	p.i++
	p.ws()
	if p.peek() == '}' {
		p.i++
		p.noFeatures(ev, 0)
		return true
	}
	seen := 0
	for {
		at := p.i
		k, ok := p.knownKey()
		if ok {
			ok = p.colon()
		} else {
			k, ok = p.key(&p.kbuf)
		}
		if !ok {
			return false
		}
		bit := 0
		switch string(k) {
		case "id":
			bit, p.cur = keyID, "id"
			ok = p.stringValue(&ev.ID)
		case "key":
			bit, p.cur = keyKey, "key"
			ok = p.stringValue(&ev.Key)
		case "ts":
			bit, p.cur = keyTS, "ts"
			ok = p.stringValue(&ev.TS)
		case "label":
			bit, p.cur = keyLabel, "label"
			ok = p.label(ev)
		case "features":
			bit, p.cur = keyFeatures, "features"
			ok = p.features(ev)
		case "x":
			bit, p.cur = keyX, "x"
			ok = p.dense(ev)
		case "text":
			bit, p.cur = keyText, "text"
			ok = p.text(ev)
		default:
			p.cur = ""
			if p.other < 0 {
				p.other = at
			}
			ok = p.skip(1)
		}
		if !ok {
			return false
		}
		if seen&bit != 0 {
			p.semantic(ReasonDuplicate, p.cur, errors.New("key appears twice"))
		}
		seen |= bit
		p.cur = ""
		more, ok := p.next('}')
		if !more {
			if ok {
				p.noFeatures(ev, seen)
			}
			return ok
		}
	}
}

// noFeatures records ReasonEmpty when seen, the keys of ev, holds none of
// features, x and text, unless ev is a label event (settings.labelEv).
func (p *jsonParser) noFeatures(ev *Event, seen int) {
	if seen&(keyFeatures|keyX|keyText) != 0 {
		return
	}
	if p.s.labelEv && ev.Labeled && len(ev.ID) > 0 {
		ev.LabelOnly = true
		return
	}
	if p.other < 0 {
		p.semantic(ReasonEmpty, "", errNoFeatures)
		return
	}
	// Name the first other key, and the event key it is nearest to.
	end := p.i
	p.i = p.other
	k, _ := p.key(&p.kbuf)
	p.i = end
	msg := fmt.Sprintf("no features, x or text: a record without features is neither learned nor predicted (a label on its own, or a misspelled key: %q", clip(k))
	if near := Nearest(string(k), eventKeys); near != "" {
		msg += fmt.Sprintf(", did you mean %q?", near)
	} else {
		msg += fmt.Sprintf(" is none of %s", strings.Join(eventKeys, ", "))
	}
	p.semantic(ReasonEmpty, "", errors.New(msg+")"))
}

var errNoFeatures = errors.New("no features, x or text: a record without features is neither learned nor predicted (a label on its own, or a misspelled key)")

// eventKeys are the keys of a JSON event, for naming the one a misspelled
// key was meant to be.
var eventKeys = []string{"id", "key", "ts", "label", "features", "x", "text"}

// knownKey consumes the string at p.i if it is one of the event's keys
// written without escapes, the common case, and returns its contents (as
// str would). Otherwise it consumes nothing and returns false.
func (p *jsonParser) knownKey() ([]byte, bool) {
	d, i := p.data, p.i+1
	if i >= len(d) || d[i-1] != '"' {
		return nil, false
	}
	var w string
	switch d[i] {
	case 'f':
		w = `features"`
	case 'l':
		w = `label"`
	case 'i':
		w = `id"`
	case 'k':
		w = `key"`
	case 't':
		w = `ts"`
		if i+1 < len(d) && d[i+1] == 'e' {
			w = `text"`
		}
	case 'x':
		w = `x"`
	default:
		return nil, false
	}
	if len(d)-i < len(w) || string(d[i:i+len(w)]) != w {
		return nil, false
	}
	p.i = i + len(w)
	return d[i : i+len(w)-1], true
}

// stringValue parses a string (copied into *dst) or null.
func (p *jsonParser) stringValue(dst *[]byte) bool {
	switch p.peek() {
	case '"':
		s, ok := p.str(&p.vbuf)
		*dst = append((*dst)[:0], s...)
		return ok
	case 'n':
		return p.literal("null")
	}
	p.semantic(ReasonType, p.cur, errors.New("want a string"))
	return p.skip(1)
}

// label parses the label: a string, number, boolean or null.
func (p *jsonParser) label(ev *Event) bool {
	var text []byte
	switch c := p.peek(); {
	case c == '"':
		s, ok := p.str(&p.vbuf)
		if !ok {
			return false
		}
		text = s
	case c == 't':
		if !p.literal("true") {
			return false
		}
		text = p.data[p.i-4 : p.i]
	case c == 'f':
		if !p.literal("false") {
			return false
		}
		text = p.data[p.i-5 : p.i]
	case c == 'n':
		return p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		s, ok := p.number()
		if !ok {
			return false
		}
		text = s
	default:
		p.semantic(ReasonType, "label", errors.New("want a number, string, boolean or null"))
		return p.skip(1)
	}
	y, ok := p.s.labels.parse(text)
	if !ok {
		p.semantic(ReasonLabel, "label", p.s.labels.unknown(text))
		return true
	}
	ev.Labeled, ev.Label = true, y
	return true
}

// features parses the `features` object.
func (p *jsonParser) features(ev *Event) bool {
	switch p.peek() {
	case 'n':
		return p.literal("null")
	case '{':
	default:
		p.semantic(ReasonType, "features", errors.New("want an object"))
		return p.skip(1)
	}
	p.i++
	p.ws()
	if p.peek() == '}' {
		p.i++
		return true
	}
	mask := p.s.mask
	x := &ev.X
	d := p.data
	cache := &p.slots
	link := &cache.head // where to record the entry of this feature's name
	for {
		if p.i >= len(d) || d[p.i] != '"' {
			return p.syntax(ReasonMalformed, "expected a string key")
		}
		// The name and its slot: the key predicted by the cache if the
		// input matches it, else scanned and looked up.
		var name []byte
		var slot uint32
		var ent uint16
		raw := true // name is the input's bytes, no escapes
		if pred := *link; pred != 0 {
			if e := &cache.ents[pred-1]; e.match(d, p.i+1) {
				j := p.i + 1 + int(e.n)
				name, slot, ent = d[p.i+1:j-1], e.slot, pred
				p.i = j
			}
		}
		if ent == 0 {
			start := p.i
			var ok bool
			if name, ok = p.str(&p.kbuf); !ok {
				return false
			}
			// Escapes make the contents shorter than the input.
			raw = p.i-start-2 == len(name)
			slot, ent = cache.lookup(name, raw, mask)
			if *link != ent {
				*link = ent
			}
		}
		link = &cache.dead
		if ent != 0 {
			link = &cache.ents[ent-1].next
		}
		if j := p.i; j+1 < len(d) && d[j] == ':' && d[j+1] > ' ' {
			p.i = j + 1 // the common case: no space
		} else if !p.colon() {
			return false
		}
		var c byte
		if p.i < len(d) {
			c = d[p.i]
		}
		switch {
		case c == '-' || '0' <= c && c <= '9':
			start := p.i
			v, st, ok := p.num()
			if !ok {
				return false
			}
			if st != numOK {
				if p.sem == "" {
					p.semantic(ReasonNonFinite, "features."+string(name), fmt.Errorf("%s overflows float64", clip(d[start:p.i])))
				}
				break
			}
			if math.Abs(v) > p.s.maxAbs {
				if p.sem == "" {
					p.semantic(ReasonRange, "features."+string(name), errRange(d[start:p.i], p.s.maxAbs))
				}
				break
			}
			x.Idx = append(x.Idx, slot)
			x.Val = append(x.Val, v)
		case c == '"':
			start := p.i
			val, ok := p.str(&p.vbuf)
			if !ok {
				return false
			}
			cat := append(append(append(p.cbuf[:0], name...), '='), val...)
			p.cbuf = cat
			catSlot, _ := cache.lookup(cat, raw && p.i-start-2 == len(val), mask)
			x.Idx = append(x.Idx, catSlot)
			x.Val = append(x.Val, 1)
		case c == 't':
			if !p.literal("true") {
				return false
			}
			x.Idx = append(x.Idx, slot)
			x.Val = append(x.Val, 1)
		case c == 'f':
			if !p.literal("false") {
				return false
			}
			x.Idx = append(x.Idx, slot)
			x.Val = append(x.Val, 0)
		case c == 'n':
			if !p.literal("null") {
				return false
			}
		default:
			if p.sem == "" {
				p.semantic(ReasonType, "features."+string(name), errors.New("want a number, string, boolean or null"))
			}
			if !p.skip(2) {
				return false
			}
		}
		// The separator: ',' or '}', usually without space around.
		j := p.i
		if j < len(d) && d[j] == ',' {
			p.i = j + 1
			p.ws()
			continue
		}
		more, ok := p.next('}')
		if !more {
			return ok
		}
	}
}

// dense parses the `x` array.
func (p *jsonParser) dense(ev *Event) bool {
	switch p.peek() {
	case 'n':
		return p.literal("null")
	case '[':
	default:
		p.semantic(ReasonType, "x", errors.New("want an array of numbers"))
		return p.skip(1)
	}
	p.i++
	p.ws()
	n := 0
	if p.peek() == ']' {
		p.i++
	} else {
		mask := p.s.mask
		x := &ev.X
		for more := true; more; n++ {
			if c := p.peek(); c == '-' || '0' <= c && c <= '9' {
				start := p.i
				v, st, ok := p.num()
				if !ok {
					return false
				}
				switch {
				case st != numOK:
					if p.sem == "" {
						p.semantic(ReasonNonFinite, fmt.Sprintf("x[%d]", n), fmt.Errorf("%s overflows float64", clip(p.data[start:p.i])))
					}
				case math.Abs(v) > p.s.maxAbs:
					if p.sem == "" {
						p.semantic(ReasonRange, fmt.Sprintf("x[%d]", n), errRange(p.data[start:p.i], p.s.maxAbs))
					}
				default:
					x.Idx = append(x.Idx, uint32(n)&mask)
					x.Val = append(x.Val, v)
				}
			} else {
				if p.sem == "" {
					p.semantic(ReasonType, fmt.Sprintf("x[%d]", n), errors.New("want a number"))
				}
				if !p.skip(2) {
					return false
				}
			}
			var ok bool
			if more, ok = p.next(']'); !ok {
				return false
			}
		}
	}
	if p.s.dense > 0 && n != p.s.dense {
		p.semantic(ReasonLength, "x", fmt.Errorf("length %d, want %d", n, p.s.dense))
	}
	return true
}

// text parses the `text` string.
func (p *jsonParser) text(ev *Event) bool {
	switch p.peek() {
	case 'n':
		return p.literal("null")
	case '"':
		s, ok := p.str(&p.vbuf)
		if ok {
			p.tok.add(&ev.X, s, p.s.ngrams, p.s.mask)
		}
		return ok
	}
	p.semantic(ReasonType, "text", errors.New("want a string"))
	return p.skip(1)
}
