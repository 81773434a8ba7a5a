package filesource

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
)

// envelope is one line of a recording, read: the record's position, its
// key and its value's bytes.
type envelope struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
}

// errNotEnvelope: a line that json.Unmarshal reads but that is not an
// envelope (no partition or offset, neither or both values).
var errNotEnvelope = errors.New("not an envelope")

// parseEnvelopeJSON reads line with encoding/json: every envelope, in any
// form JSON allows (fields in any order, spaces, escapes, unknown fields).
func parseEnvelopeJSON(line []byte) (envelope, error) {
	var env struct {
		Partition   *int32          `json:"partition"`
		Offset      *int64          `json:"offset"`
		Key         string          `json:"key"`
		Value       json.RawMessage `json:"value"`
		ValueBase64 []byte          `json:"value_base64"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return envelope{}, err
	}
	if env.Partition == nil || env.Offset == nil || (env.Value == nil) == (env.ValueBase64 == nil) {
		return envelope{}, errNotEnvelope
	}
	value := []byte(env.Value) // a JSON record, as the broker held it
	if env.ValueBase64 != nil {
		value = env.ValueBase64 // any other record's bytes
	}
	return envelope{partition: *env.Partition, offset: *env.Offset, key: []byte(env.Key), value: value}, nil
}

// parse reads line when it has the form `record --envelope` writes
// ({"partition":P,"offset":O[,"key":"K"],"value":V} or
// ...,"value_base64":"B64"}, no spaces, a key without escapes), the
// common case, without encoding/json, which the loop of a replay spent
// most of its time in: ok is false for any other line, which
// parseEnvelopeJSON then reads. What it returns for a line it takes is
// what parseEnvelopeJSON returns for it (TestEnvelopeParseAsJSON,
// FuzzEnvelopeParse). The key aliases line; a base64 value is decoded
// into e.dec.
func (e *Envelopes) parse(line []byte) (env envelope, ok bool) {
	env, b64, ok := frame(line)
	if !ok || !b64 {
		return env, ok
	}
	if env.value, ok = e.decode(env.value); !ok {
		return envelope{}, false
	}
	return env, true
}

// decode decodes b64, the base64 of a value, into e.dec, which it
// returns; ok is false when b64 is not base64.
func (e *Envelopes) decode(b64 []byte) ([]byte, bool) {
	if want := base64.StdEncoding.DecodedLen(len(b64)); cap(e.dec) < want {
		e.dec = make([]byte, want)
	}
	n, err := base64.StdEncoding.Decode(e.dec[:cap(e.dec)], b64)
	return e.dec[:n], err == nil
}

// frame is parse but for the decoding of a base64 value: b64 says that
// env.value is the base64 of the value, still to be decoded (the record
// is an envelope only if it decodes, as parse says). The key and the
// value alias line.
func frame(line []byte) (env envelope, b64 bool, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"partition":`))
	if !ok {
		return envelope{}, false, false
	}
	var n int64
	if n, rest, ok = cutInt(rest, 32); !ok {
		return envelope{}, false, false
	}
	env.partition = int32(n)
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"offset":`)); !ok {
		return envelope{}, false, false
	}
	if env.offset, rest, ok = cutInt(rest, 64); !ok {
		return envelope{}, false, false
	}
	env.key = rest[:0]
	if k, found := bytes.CutPrefix(rest, []byte(`,"key":"`)); found {
		end := bytes.IndexByte(k, '"')
		if end < 0 || !plainString(k[:end]) {
			return envelope{}, false, false
		}
		env.key, rest = k[:end], k[end+1:]
	}
	if len(rest) == 0 || rest[len(rest)-1] != '}' {
		return envelope{}, false, false
	}
	rest = rest[:len(rest)-1]
	if v, found := bytes.CutPrefix(rest, []byte(`,"value_base64":"`)); found {
		// The string is v up to its one quote, the line's last byte
		// before the brace. Decode takes only base64's alphabet, so a
		// backslash (an escape) or a control byte fails it, but for the
		// '\r' it skips, which JSON does not allow raw in a string.
		if len(v) == 0 || bytes.IndexByte(v, '"') != len(v)-1 || bytes.IndexByte(v, '\r') >= 0 {
			return envelope{}, false, false
		}
		env.value = v[:len(v)-1]
		return env, true, true
	}
	v, found := bytes.CutPrefix(rest, []byte(`,"value":`))
	// The value runs to the line's last '}': a line with more after it
	// is not valid JSON there. null, and a value with spaces around it,
	// are left to encoding/json, which reads them its own way.
	if !found || len(v) == 0 || v[0] == 'n' || isSpace(v[0]) || isSpace(v[len(v)-1]) || !json.Valid(v) {
		return envelope{}, false, false
	}
	env.value = v
	return env, false, true
}

// cutInt reads the JSON integer that b starts with and that fits in bits
// bits, and returns it and what follows it; ok is false when b does not
// start with one (a fraction or an exponent, a leading zero, or out of
// range: left to encoding/json).
func cutInt(b []byte, bits int) (n int64, rest []byte, ok bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := i
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		n = n*10 + int64(d) // wraps past 18 digits: strconv reads those
	}
	if i == digits || (b[digits] == '0' && i > digits+1) {
		return 0, nil, false
	}
	if i-digits > 18 { // may not fit: let strconv say
		n, err := strconv.ParseInt(string(b[:i]), 10, bits)
		return n, b[i:], err == nil
	}
	if digits == 1 {
		n = -n
	}
	if bits < 64 && (n < -1<<(bits-1) || n >= 1<<(bits-1)) {
		return 0, nil, false
	}
	return n, b[i:], true
}

// plainString reports whether s, the inside of a JSON string, is printable
// ASCII without escapes: its bytes are then the string's.
func plainString(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
