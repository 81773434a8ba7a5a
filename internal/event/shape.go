package event

import (
	"math"
	"slices"

	"github.com/streamlearn/streamlearn/internal/online"
)

// A shape is the layout of a JSON event the parser decoded in full: its
// bytes with the values cut out (the literals: keys, quotes, colons,
// commas, braces) and, between them, what each value is. The events of a
// stream are written by one producer, key for key in the same order, so
// the next event usually has the same layout: jsonParser.shaped then
// decodes it by comparing each literal with the input and parsing only
// the values, without looking keys up, dispatching on them, or predicting
// feature names one at a time.
//
// A shape is learnt only from a record that decoded without fault (and is
// learnable: see learnShape), and it accepts only a record it decodes to
// what the full parser would: every literal byte for byte, strings
// without escapes or non-ASCII bytes, numbers by the parser's own num and
// number, each feature's slot that of its literal name. On anything else
// shaped gives up and the record is decoded in full from its first byte,
// so the shape changes how fast a record is decoded, never its result or
// its error.
type shape struct {
	use    bool   // steps hold a shape
	misses uint32 // records decoded in full since the last shaped one
	// keep: a shape dropped at the first miss after a fit was learnt
	// back at the next learning (the stream's odd records come alone),
	// so at the first miss after a fit the shape is now kept and nothing
	// learnt; dropped holds the literals of the shape so dropped.
	keep    bool
	dropped []byte
	hits    uint64 // records shaped (for the tests)
	misfits uint64 // records the shape was tried on and did not fit (for the tests)
	lits    []byte
	steps   []shapeStep

	// When the features' slots are distinct (ordered), a record with a
	// value for each (no null) is canonical once sorted by slot: perm[k]
	// is where its k-th feature goes, sorted the slots in order; keys and
	// vals are scratch space.
	ordered bool
	perm    []int32
	sorted  []uint32
	keys    []uint64
	vals    []float64
}

// sort puts x, a value for each of the shape's features in their order,
// in canonical form: sorted by slot, as canonicalize would, without sums
// (the slots are distinct).
func (t *shape) sort(x *online.Vector) {
	vals := append(t.vals[:0], x.Val...)
	t.vals = vals
	for k, v := range vals {
		x.Val[t.perm[k]] = v
	}
	copy(x.Idx, t.sorted)
}

// learnOrder sets ordered, perm and sorted for the feature slots of the
// shape's steps, sorting them packed with their positions (slot<<32 |
// position) in reused space.
func (t *shape) learnOrder() {
	t.keys = t.keys[:0]
	for _, s := range t.steps {
		if s.kind == shapeFeature {
			t.keys = append(t.keys, uint64(s.slot)<<32|uint64(len(t.keys)))
		}
	}
	slices.Sort(t.keys)
	n := len(t.keys)
	t.perm = slices.Grow(t.perm[:0], n)[:n]
	t.sorted = slices.Grow(t.sorted[:0], n)[:n]
	t.ordered = true
	for at, key := range t.keys {
		t.perm[uint32(key)] = int32(at)
		t.sorted[at] = uint32(key >> 32)
		if at > 0 && t.sorted[at] == t.sorted[at-1] {
			t.ordered = false
		}
	}
}

// A shapeStep is the literal lits[lo:hi] and then a value of kind (for
// shapeFeature, of feature slot); shapeEnd ends the record after its literal.
type shapeStep struct {
	lo, hi uint32
	slot   uint32
	kind   uint8
}

// Kinds of shape values.
const (
	shapeID       = iota // the id string (its opening quote in the literal, the closing one in the next)
	shapeKey             // the key string
	shapeTS              // the ts string
	shapeLabelNum        // a label written as a number
	shapeLabelStr        // a label written as a string
	shapeFeature         // a feature's number, true, false or null
	shapeEnd             // no value: the record ends
)

// shapeLearnEvery: a shape that does not fit a record is dropped, and the
// parser learns the shape of the records it decodes in full when their
// count since the last fit is a power of two or a multiple of
// shapeLearnEvery: a stream whose records keep one layout but for a few
// learns it back at the next record, and one of ever changing layouts
// costs a learning and a try of the shape rarely. Once a shape dropped at
// the first miss after a fit is learnt back at the next learning, the
// first miss after a fit neither drops the shape nor learns: a stream of
// one layout with odd records that come alone (label events among
// events) then costs a failed try per odd record, not one or two
// learnings and a record decoded in full, and one that changes layout
// for good a record more.
const shapeLearnEvery = 1024

// miss records that the shape, if any, was tried on a record and did not
// fit it: it is dropped until learnt again, or kept (see shapeLearnEvery).
func (t *shape) miss() {
	if !t.use {
		return
	}
	t.misfits++
	if t.misses == 0 {
		if t.keep {
			return
		}
		t.dropped = append(t.dropped[:0], t.lits...)
	}
	t.use = false
}

// learnNow reports whether the parser learns the shape of the record it
// just decoded in full, without fault, the misses-th since the last fit.
func (t *shape) learnNow() bool {
	m := t.misses
	if t.keep && m == 1 {
		return false
	}
	return m&(m-1) == 0 || m%shapeLearnEvery == 0
}

// shaped decodes p.data into ev (reset) with p's shape, and reports
// whether it could; when not, ev, p.i and p's faults are left in any
// state and the caller decodes the record in full.
func (p *jsonParser) shaped(ev *Event) bool {
	d := p.data
	t := &p.shape
	x := &ev.X
	i := 0
	for k := range t.steps {
		s := &t.steps[k]
		lit := t.lits[s.lo:s.hi]
		if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != string(lit) {
			return false
		}
		i += len(lit)
		switch s.kind {
		case shapeEnd:
			if i != len(d) {
				return false
			}
			if t.ordered && len(x.Idx) == len(t.perm) {
				t.sort(x)
			}
			t.hits++
			return true
		case shapeID, shapeKey, shapeTS:
			j, ok := plainString(d, i)
			if !ok {
				return false
			}
			dst := &ev.ID
			if s.kind == shapeKey {
				dst = &ev.Key
			} else if s.kind == shapeTS {
				dst = &ev.TS
			}
			*dst = append((*dst)[:0], d[i:j]...)
			i = j
		case shapeLabelNum, shapeLabelStr:
			var text []byte
			if s.kind == shapeLabelStr {
				j, ok := plainString(d, i)
				if !ok {
					return false
				}
				text, i = d[i:j], j
			} else {
				if c := at(d, i); c != '-' && (c < '0' || c > '9') {
					return false
				}
				p.i = i
				tok, ok := p.number()
				if !ok {
					return false
				}
				text, i = tok, p.i
			}
			y, ok := p.s.labels.parse(text)
			if !ok {
				return false
			}
			ev.Labeled, ev.Label = true, y
		case shapeFeature:
			switch c := at(d, i); {
			case '0' <= c && c <= '9' && i+1 < len(d) && (d[i+1] == ',' || d[i+1] == '}'):
				// One digit, the commonest value (a count, a flag, a
				// one-hot feature): as num parses it.
				v := float64(c - '0')
				if v > p.s.maxAbs {
					return false
				}
				x.Idx = append(x.Idx, s.slot)
				x.Val = append(x.Val, v)
				i++
			case c == '-' || '0' <= c && c <= '9':
				p.i = i
				v, st, ok := p.num()
				if !ok || st != numOK || math.Abs(v) > p.s.maxAbs {
					return false
				}
				x.Idx = append(x.Idx, s.slot)
				x.Val = append(x.Val, v)
				i = p.i
			case c == 't' && hasWord(d, i, "true"):
				x.Idx = append(x.Idx, s.slot)
				x.Val = append(x.Val, 1)
				i += 4
			case c == 'f' && hasWord(d, i, "false"):
				x.Idx = append(x.Idx, s.slot)
				x.Val = append(x.Val, 0)
				i += 5
			case c == 'n' && hasWord(d, i, "null"):
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

// learnShape learns the shape of p.data, a record p decoded without fault,
// if it is learnable: a JSON object of the keys id, key and ts (strings),
// label (a number or a string) and features (an object of numbers,
// booleans and nulls, at least one feature), each at most once, strings
// without escapes or non-ASCII bytes, no space but after the object.
// Otherwise p has no shape until the next record that is.
func (p *jsonParser) learnShape() {
	d := p.data
	t := &p.shape
	t.use, t.lits, t.steps = false, t.lits[:0], t.steps[:0]
	lo := 0 // the literal before the next value starts at d[lo]
	step := func(i int, kind uint8, slot uint32) {
		n := len(t.lits)
		t.lits = append(t.lits, d[lo:i]...)
		t.steps = append(t.steps, shapeStep{lo: uint32(n), hi: uint32(len(t.lits)), slot: slot, kind: kind})
	}
	// str reads the string value of kind whose contents start at i, and
	// returns where its closing quote is, which starts the next literal.
	str := func(i int, kind uint8) (int, bool) {
		step(i, kind, 0)
		j, ok := plainString(d, i)
		lo = j
		return j, ok
	}
	// sep reads the comma (more true) or closing brace at i, and returns
	// where the next member or value starts.
	sep := func(i int) (int, bool, bool) {
		switch at(d, i) {
		case ',':
			return i + 1, true, true
		case '}':
			return i + 1, false, true
		}
		return i, false, false
	}
	// key reads the key at i and its colon, and returns the key and where
	// its value starts.
	key := func(i int) ([]byte, int, bool) {
		if at(d, i) != '"' {
			return nil, 0, false
		}
		j, ok := plainString(d, i+1)
		if !ok || at(d, j+1) != ':' {
			return nil, 0, false
		}
		return d[i+1 : j], j + 2, true
	}
	if at(d, 0) != '{' {
		return
	}
	i, seen := 1, 0
	for {
		name, next, ok := key(i)
		if !ok {
			return
		}
		i = next
		bit := 0
		switch string(name) {
		case "id", "key", "ts":
			kind, b := uint8(shapeID), keyID
			if name[0] == 'k' {
				kind, b = shapeKey, keyKey
			} else if name[0] == 't' {
				kind, b = shapeTS, keyTS
			}
			bit = b
			if at(d, i) != '"' {
				return
			}
			j, ok := str(i+1, kind)
			if !ok {
				return
			}
			i = j + 1
		case "label":
			bit = keyLabel
			switch c := at(d, i); {
			case c == '"':
				j, ok := str(i+1, shapeLabelStr)
				if !ok {
					return
				}
				i = j + 1
			case c == '-' || '0' <= c && c <= '9':
				step(i, shapeLabelNum, 0)
				p.i = i
				if _, ok := p.number(); !ok {
					return
				}
				i, lo = p.i, p.i
			default:
				return
			}
		case "features":
			bit = keyFeatures
			if at(d, i) != '{' || at(d, i+1) == '}' {
				return
			}
			i++
			for {
				name, next, ok := key(i)
				if !ok {
					return
				}
				i = next
				step(i, shapeFeature, online.Slot(name, p.s.mask))
				switch c := at(d, i); {
				case c == '-' || '0' <= c && c <= '9':
					p.i = i
					if _, ok := p.number(); !ok {
						return
					}
					i = p.i
				case c == 't' && hasWord(d, i, "true"):
					i += 4
				case c == 'f' && hasWord(d, i, "false"):
					i += 5
				case c == 'n' && hasWord(d, i, "null"):
					i += 4
				default:
					return
				}
				lo = i
				var more bool
				if i, more, ok = sep(i); !ok {
					return
				}
				if !more {
					break
				}
			}
		default:
			return
		}
		if seen&bit != 0 {
			return
		}
		seen |= bit
		var more bool
		if i, more, ok = sep(i); !ok {
			return
		}
		if !more {
			break
		}
	}
	if seen&keyFeatures == 0 {
		return
	}
	for ; i < len(d); i++ {
		if c := d[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
	}
	step(i, shapeEnd, 0)
	t.learnOrder()
	t.use = true
	if t.misses == 2 && string(t.lits) == string(t.dropped) {
		t.keep = true
	}
}

// at returns d[i], or 0 past the end of d.
func at(d []byte, i int) byte {
	if i < len(d) {
		return d[i]
	}
	return 0
}

// hasWord reports whether d[i:] starts with word.
func hasWord(d []byte, i int, word string) bool {
	return len(d)-i >= len(word) && string(d[i:i+len(word)]) == word
}

// plainString returns where the string whose contents start at d[i] ends
// (its closing quote), and whether every byte before it stands for
// itself (strSafe): no escape, no control character, no non-ASCII byte.
func plainString(d []byte, i int) (int, bool) {
	j := plainRun(d, i)
	for j < len(d) && strSafe[d[j]] {
		j++
	}
	return j, j < len(d) && d[j] == '"'
}
