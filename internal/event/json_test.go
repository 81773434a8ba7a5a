package event

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

var mask18 = online.Mask(DefaultBits)

// entry is one expected (slot, value) pair.
type entry struct {
	slot uint32
	val  float64
}

func named(name string, v float64) entry { return entry{online.Slot(name, mask18), v} }
func word(tok string, v float64) entry   { return entry{online.TextSlot(tok, mask18), v} }

// vec builds the canonical vector of entries (summing equal slots).
func vec(es ...entry) online.Vector {
	var x online.Vector
	for _, e := range es {
		x.Idx = append(x.Idx, e.slot)
		x.Val = append(x.Val, e.val)
	}
	var c canonicalizer
	c.canonicalize(&x, DefaultMaxAbs)
	return x
}

func sameVector(a, b online.Vector) bool {
	if len(a.Idx) != len(b.Idx) || len(a.Val) != len(b.Val) {
		return false
	}
	for k := range a.Idx {
		if a.Idx[k] != b.Idx[k] || math.Float64bits(a.Val[k]) != math.Float64bits(b.Val[k]) {
			return false
		}
	}
	return true
}

func TestDecodeValid(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		in      string
		labeled bool
		label   int8
		id      string
		x       online.Vector
	}{
		{name: "design example", in: `{"id": "m-1042", "key": "tenant-7", "ts": "2026-11-22T10:00:00Z",
			"label": 1, "features": {"len": 42, "has_url": 1, "sender=bulk.example": 1},
			"x": [0.12, 0.5, 0.0], "text": "WIN a FREE prize now"}`,
			labeled: true, label: 1, id: "m-1042",
			x: vec(named("len", 42), named("has_url", 1), named("sender=bulk.example", 1),
				entry{0, 0.12}, entry{1, 0.5}, entry{2, 0},
				word("win", 1), word("a", 1), word("free", 1), word("prize", 1), word("now", 1))},
		{name: "empty features", in: `{"features":{}}`},
		{name: "whitespace around", in: " \t\r\n{ \"features\" : { } }\n "},
		{name: "label 0", in: `{"label":0,"features":{}}`, labeled: true, label: -1},
		{name: "label -1", in: `{"label":-1,"features":{}}`, labeled: true, label: -1},
		{name: "label 1.0", in: `{"label":1.0,"features":{}}`, labeled: true, label: 1},
		{name: "label 1e0", in: `{"label":1e0,"features":{}}`, labeled: true, label: 1},
		{name: "label -0", in: `{"label":-0,"features":{}}`, labeled: true, label: -1},
		{name: "label true", in: `{"label":true,"features":{}}`, labeled: true, label: 1},
		{name: "label false", in: `{"label":false,"features":{}}`, labeled: true, label: -1},
		{name: "label null", in: `{"label":null,"features":{}}`},
		{name: "label string 1", in: `{"label":"1","features":{}}`, labeled: true, label: 1},
		{name: "label string numeric", in: `{"label":"-1.00","features":{}}`, labeled: true, label: -1},
		{name: "label configured", cfg: Config{Positive: []string{"spam"}, Negative: []string{"ham"}},
			in: `{"label":"spam","features":{}}`, labeled: true, label: 1},
		{name: "label escaped", cfg: Config{Negative: []string{"ham"}}, in: `{"label":"h\u0061m","features":{}}`, labeled: true, label: -1},
		{name: "label configured overrides default", cfg: Config{Positive: []string{"0"}},
			in: `{"label":0,"features":{}}`, labeled: true, label: 1},
		{name: "bool and categorical features", in: `{"features":{"a":true,"b":false,"c":"x","d":null}}`,
			x: vec(named("a", 1), named("b", 0), named("c=x", 1))},
		{name: "escaped names", in: `{"features":{"l\u00e9n":1,"\ud83d\ude00":2,"tab\t":3}}`,
			x: vec(named("lén", 1), named("😀", 2), named("tab\t", 3))},
		{name: "escaped key", in: `{"l\u0061bel":1,"\u0069d":"a\"b","features":{}}`, labeled: true, label: 1, id: `a"b`},
		{name: "lone surrogate", in: `{"id":"\ud800x","features":{}}`, id: "\uFFFDx"},
		{name: "decimal names are indices", in: `{"features":{"7":2},"x":[0,0,0,0,0,0,0,3]}`,
			x: vec(entry{7, 5}, entry{0, 0}, entry{1, 0}, entry{2, 0}, entry{3, 0}, entry{4, 0}, entry{5, 0}, entry{6, 0})},
		{name: "dense length ok", cfg: Config{Dense: 2}, in: `{"x":[1,2]}`, x: vec(entry{0, 1}, entry{1, 2})},
		{name: "dense absent ok", cfg: Config{Dense: 2}, in: `{"x":null}`},
		{name: "duplicates summed", in: `{"features":{"a":1,"a":2.5}}`, x: vec(named("a", 3.5))},
		{name: "repeated words counted", in: `{"text":"Spam, spam SPAM! and ham"}`,
			x: vec(word("spam", 3), word("and", 1), word("ham", 1))},
		{name: "bigrams", cfg: Config{NGrams: 2}, in: `{"text":"WIN a FREE prize"}`,
			x: vec(word("win", 1), word("a", 1), word("free", 1), word("prize", 1),
				word("win a", 1), word("a free", 1), word("free prize", 1))},
		{name: "unicode text", in: `{"text":"Ünïcode ÆØÅ 42x"}`, x: vec(word("ünïcode", 1), word("æøå", 1), word("42x", 1))},
		{name: "unknown keys skipped", in: `{"meta":{"a":[1,{"b":null}],"c":"\u00e9"},"n":-1.5e-3,"t":true,"label":1,"features":{}}`,
			labeled: true, label: 1},
		{name: "underflow is zero", in: `{"features":{"a":1e-400}}`, x: vec(named("a", 0))},
		{name: "bits", cfg: Config{Bits: 4}, in: `{"x":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,9]}`,
			x: func() online.Vector {
				x := online.Vector{Idx: []uint32{0}, Val: []float64{9}}
				for i := 1; i < 16; i++ {
					x.Idx = append(x.Idx, uint32(i))
					x.Val = append(x.Val, 0)
				}
				return x
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDecoder(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ev := Event{ID: []byte("stale"), Labeled: true, Label: 1}
			if err := d.Decode([]byte(tt.in), &ev); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if ev.Labeled != tt.labeled || ev.Label != tt.label || string(ev.ID) != tt.id {
				t.Errorf("labeled %v label %d id %q, want %v %d %q", ev.Labeled, ev.Label, ev.ID, tt.labeled, tt.label, tt.id)
			}
			if !sameVector(ev.X, tt.x) {
				t.Errorf("X = %v\nwant %v", ev.X, tt.x)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	tests := []struct {
		name   string
		cfg    Config
		in     string
		reason Reason
		field  string
	}{
		{"empty", Config{}, ``, ReasonMalformed, ""},
		{"truncated", Config{}, `{"label":1`, ReasonMalformed, ""},
		{"trailing comma", Config{}, `{"label":1,}`, ReasonMalformed, ""},
		{"two objects", Config{}, `{}{}`, ReasonMalformed, ""},
		{"single quotes", Config{}, `{'a':1}`, ReasonMalformed, ""},
		{"leading zero", Config{}, `{"x":[01]}`, ReasonMalformed, "x"},
		{"bare dot", Config{}, `{"x":[1.]}`, ReasonMalformed, "x"},
		{"NaN literal", Config{}, `{"features":{"a":NaN}}`, ReasonMalformed, "features"},
		{"control char", Config{}, "{\"id\":\"a\nb\"}", ReasonMalformed, "id"},
		{"bad escape", Config{}, `{"id":"\x"}`, ReasonMalformed, "id"},
		{"short unicode escape", Config{}, `{"id":"\u12"}`, ReasonMalformed, "id"},
		{"bad literal", Config{}, `{"label":tru}`, ReasonMalformed, "label"},
		{"type beats nothing but malformed wins", Config{}, `{"id":1,"x":[}`, ReasonMalformed, "x"},
		{"not an object", Config{}, `[1,2]`, ReasonType, ""},
		{"id number", Config{}, `{"id":1042}`, ReasonType, "id"},
		{"features array", Config{}, `{"features":[1]}`, ReasonType, "features"},
		{"feature object", Config{}, `{"features":{"a":{"b":1}}}`, ReasonType, "features.a"},
		{"x string", Config{}, `{"x":[1,"2"]}`, ReasonType, "x[1]"},
		{"x object", Config{}, `{"x":{"0":1}}`, ReasonType, "x"},
		{"text number", Config{}, `{"text":5}`, ReasonType, "text"},
		{"label array", Config{}, `{"label":[1]}`, ReasonType, "label"},
		{"nonfinite feature", Config{}, `{"features":{"a":1e400}}`, ReasonNonFinite, "features.a"},
		{"nonfinite x", Config{}, `{"x":[0,-1e999]}`, ReasonNonFinite, "x[1]"},
		{"huge feature", Config{}, `{"features":{"a":1e308}}`, ReasonRange, "features.a"},
		{"huge negative x", Config{}, `{"x":[0,-1e308]}`, ReasonRange, "x[1]"},
		{"just past the limit", Config{}, `{"x":[9007199254740993]}`, ReasonRange, "x[0]"},
		{"configured limit", Config{MaxAbs: 10}, `{"features":{"a":-10.5}}`, ReasonRange, "features.a"},
		{"collision beyond the limit", Config{}, `{"features":{"a":6e15,"a":6e15}}`, ReasonRange, ""},
		{"text counts beyond the limit", Config{MaxAbs: 2}, `{"text":"a a a"}`, ReasonRange, ""},
		{"the first fault wins", Config{}, `{"x":[1e308,1e999]}`, ReasonRange, "x[0]"},
		{"label 2", Config{}, `{"label":2}`, ReasonLabel, "label"},
		{"label 0.5", Config{}, `{"label":0.5}`, ReasonLabel, "label"},
		{"label unknown string", Config{}, `{"label":"spam"}`, ReasonLabel, "label"},
		{"label case sensitive", Config{}, `{"label":"True"}`, ReasonLabel, "label"},
		{"label 1e400", Config{}, `{"label":1e400}`, ReasonLabel, "label"},
		{"dense length", Config{Dense: 3}, `{"x":[1,2]}`, ReasonLength, "x"},
		{"oversized", Config{MaxBytes: 26}, `{"label": 1 ,"features":{} }`, ReasonOversized, ""},
		{"depth", Config{}, `{"a":` + deep + `}`, ReasonDepth, ""},
		{"depth ok", Config{}, `{"a":` + deep[1:len(deep)-1] + `,"label":2}`, ReasonLabel, "label"},
		{"utf8 in value", Config{}, "{\"id\":\"\xff\"}", ReasonUTF8, "id"},
		{"utf8 in key", Config{}, "{\"\xc3\":1}", ReasonUTF8, ""},
		{"utf8 surrogate bytes", Config{}, "{\"text\":\"\xed\xa0\x80\"}", ReasonUTF8, "text"},
		{"utf8 in escaped string", Config{}, "{\"id\":\"\\n\xff\"}", ReasonUTF8, "id"},
		{"duplicate label", Config{}, `{"label":1,"label":0}`, ReasonDuplicate, "label"},
		{"empty object", Config{}, `{}`, ReasonEmpty, ""},
		{"label only", Config{}, `{"id":"m42","label":1}`, ReasonEmpty, ""},
		{"misspelled features", Config{}, `{"feature":{"a":1},"label":1}`, ReasonEmpty, ""},
		{"empty and malformed", Config{}, `{"label":1,}`, ReasonMalformed, ""},
		{"duplicate features", Config{}, `{"features":{},"features":{}}`, ReasonDuplicate, "features"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDecoder(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			d.Source = "events"
			var ev Event
			err = d.Decode([]byte(`{"label":1,"features":{}}`), &ev) // record 1
			if err != nil {
				t.Fatal(err)
			}
			err = d.Decode([]byte(tt.in), &ev) // record 2
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%q) = %v, want *Error", tt.in, err)
			}
			if e.Reason != tt.reason || e.Field != tt.field || e.Source != "events" || e.Offset != 2 {
				t.Errorf("Decode(%q) = %q (reason %q field %q offset %d), want reason %q field %q offset 2",
					tt.in, err, e.Reason, e.Field, e.Offset, tt.reason, tt.field)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "event: events:2: ") || strings.Contains(msg, "\n") ||
				(tt.field != "" && !strings.Contains(msg, `field "`+tt.field+`"`)) {
				t.Errorf("message %q does not name source, offset and field", msg)
			}
			if !slices.Contains(Reasons(), e.Reason) {
				t.Errorf("unknown reason %q", e.Reason)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Source: "a9a", Offset: 17, Field: "3", Reason: ReasonNonFinite, Err: errors.New("boom")}
	if got, want := e.Error(), `event: a9a:17: field "3": nonfinite: boom`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Offset: 4, Reason: ReasonMalformed}
	if got, want := e.Error(), `event: record 4: malformed`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Unwrap(&Error{Err: errLeaf}) != errLeaf {
		t.Error("Unwrap does not return Err")
	}
}

var errLeaf = errors.New("leaf")

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Bits: online.MaxBits + 1},
		{NGrams: -1},
		{NGrams: MaxNGrams + 1},
		{Dense: -1},
		{MaxBytes: -1},
		{Format: "xml"},
		{Positive: []string{"a"}, Negative: []string{"a"}},
		{Positive: []string{""}},
	} {
		if _, err := NewDecoder(cfg); err == nil {
			t.Errorf("NewDecoder(%+v) succeeded", cfg)
		}
	}
}

// TestFeatureOrder: shuffling the keys of `features` (and mixing in
// colliding names) gives a bit-identical vector.
func TestFeatureOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []string
	for i := range 60 {
		keys = append(keys, `"f`+string(rune('a'+i%26))+strings.Repeat("x", i/26)+`":`+
			[]string{"0.1", "1e-17", "-3.3", "7", "0.3333333333333333", "true", `"cat"`}[i%7])
	}
	// Names colliding in a 2^4 space make many duplicates, summed in a
	// canonical order.
	for _, bits := range []uint{4, 18} {
		d, _ := NewDecoder(Config{Bits: bits})
		var want online.Vector
		for trial := range 50 {
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			var ev Event
			if err := d.Decode([]byte(`{"features":{`+strings.Join(keys, ",")+`},"text":"b a b"}`), &ev); err != nil {
				t.Fatal(err)
			}
			checkCanonical(t, ev.X, online.Mask(bits))
			if trial == 0 {
				want = online.Vector{Idx: slices.Clone(ev.X.Idx), Val: slices.Clone(ev.X.Val)}
				continue
			}
			if !sameVector(ev.X, want) {
				t.Fatalf("bits %d: order changed the vector:\n%v\n%v", bits, ev.X, want)
			}
		}
	}
}

// TestCanonicalizeSums: sums of colliding values are taken in ascending
// order whatever the input order (1e16 + 1 + 1 differs from 1 + 1 + 1e16).
func TestCanonicalizeSums(t *testing.T) {
	var c canonicalizer
	for _, n := range []int{3, smallSort + 10} {
		vals := []float64{1e16, 1, 1}
		for len(vals) < n {
			vals = append(vals, 1)
		}
		var want float64
		for _, v := range slices.Sorted(slices.Values(vals)) {
			want += v
		}
		for _, order := range [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}} {
			x := online.Vector{}
			for k := range vals {
				j := k
				if k < 3 {
					j = order[k]
				}
				x.Idx = append(x.Idx, 5)
				x.Val = append(x.Val, vals[j])
			}
			x.Idx = append(x.Idx, 1)
			x.Val = append(x.Val, 2)
			c.canonicalize(&x, DefaultMaxAbs)
			if len(x.Idx) != 2 || x.Idx[0] != 1 || x.Idx[1] != 5 || x.Val[1] != want {
				t.Errorf("n %d order %v: %v, want [1 5] [2 %v]", n, order, x, want)
			}
		}
	}
}

// TestDecodeNamesOtherKey: a record without features, x or text names its
// first key that is none of the event's, and the event key it is nearest
// to when it is a slip of one; the reason stays ReasonEmpty, the field
// empty, so dead letters keep their reason code.
func TestDecodeNamesOtherKey(t *testing.T) {
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, detail string }{
		{`{"featurs":{"a":1},"label":1}`, `empty: no features, x or text: a record without features is neither learned nor predicted (a label on its own, or a misspelled key: "featurs", did you mean "features"?)`},
		{`{"label":1,"txet":"hi"}`, `(a label on its own, or a misspelled key: "txet", did you mean "text"?)`},
		{`{"message":"hi","tetx":"hi"}`, `(a label on its own, or a misspelled key: "message" is none of id, key, ts, label, features, x, text)`},
		{`{"f\u0065atures ":{"a":1}}`, `a misspelled key: "features ", did you mean "features"?`},
		{`{"id":"m42","label":1}`, `(a label on its own, or a misspelled key)`},
	} {
		var ev Event
		err := d.Decode([]byte(c.in), &ev)
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonEmpty || e.Field != "" || !strings.Contains(e.Detail(), c.detail) {
			t.Errorf("Decode(%s) = %v, want reason empty with %q", c.in, err, c.detail)
		}
	}
	var ev Event
	if err := d.Decode([]byte(`{"message":"hi","text":"hi"}`), &ev); err != nil {
		t.Errorf("an extra key beside text: %v", err)
	}
}
