package event

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// decodeFull decodes data with a new Decoder: in full, as no shape is
// learnt before a first record.
func decodeFull(t testing.TB, cfg Config, data []byte) (Event, error) {
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	return ev, d.Decode(data, &ev)
}

// sameDecoding fails t unless two decodings of a record agree: the same
// error (but for the record's number) or the same event, bit for bit.
func sameDecoding(t testing.TB, what string, ev1 Event, err1 error, ev2 Event, err2 error) {
	t.Helper()
	var e1, e2 *Error
	if errors.As(err1, &e1) != errors.As(err2, &e2) || (err1 == nil) != (err2 == nil) {
		t.Fatalf("%s: error %v, in full %v", what, err1, err2)
	}
	if err1 != nil {
		if e1.Reason != e2.Reason || e1.Field != e2.Field || e1.Err.Error() != e2.Err.Error() {
			t.Fatalf("%s: error %v, in full %v", what, err1, err2)
		}
		return
	}
	bits := func(v []float64) []uint64 {
		out := make([]uint64, len(v))
		for i, f := range v {
			out[i] = math.Float64bits(f)
		}
		return out
	}
	if string(ev1.ID) != string(ev2.ID) || string(ev1.Key) != string(ev2.Key) || string(ev1.TS) != string(ev2.TS) ||
		ev1.Labeled != ev2.Labeled || ev1.Label != ev2.Label || ev1.LabelOnly != ev2.LabelOnly ||
		!slices.Equal(ev1.X.Idx, ev2.X.Idx) || !slices.Equal(bits(ev1.X.Val), bits(ev2.X.Val)) {
		t.Fatalf("%s: event %+v, in full %+v", what, ev1, ev2)
	}
}

// afterShape decodes first (twice) and then next with one Decoder, and
// next in full with another, checks the two decodings of next agree, and
// reports whether the first Decoder decoded next by its shape.
func afterShape(t testing.TB, cfg Config, first, next []byte) bool {
	t.Helper()
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	d.Decode(first, &ev)
	d.Decode(first, &ev)
	hits := d.p.shape.hits
	err1 := d.Decode(next, &ev)
	ev2, err2 := decodeFull(t, cfg, next)
	sameDecoding(t, fmt.Sprintf("%s after %s", next, first), ev, err1, ev2, err2)
	return d.p.shape.hits > hits
}

// TestShapeAsFull: a record decoded by the shape of the one before
// decodes to what it decodes to in full — its event or its error — when
// the shape fits (same keys in the same order, other values) and when it
// does not (other keys, other types, escapes, spaces, faults of every
// kind); and the shape is used where it fits.
func TestShapeAsFull(t *testing.T) {
	base := `{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`
	fits := []string{
		base,
		`{"id":"m-123456","key":"t","ts":"","label":0,"features":{"len":-7,"has_url":0,"caps":1.5e3,"flag":false,"off":true,"gone":3}}`,
		`{"id":"m-2","key":"tenant-3","ts":"x","label":-1,"features":{"len":1e5,"has_url":-0,"caps":0.000001,"flag":null,"off":null,"gone":null}}`,
		`{"id":"m-3","key":"tenant-3","ts":"2026","label":1,"features":{"len":1234567.890123456789,"has_url":1,"caps":0.1,"flag":1,"off":2,"gone":false}}`,
	}
	for _, next := range fits {
		if !afterShape(t, Config{}, []byte(base), []byte(next)) {
			t.Errorf("%s after %s: not decoded by the shape", next, base)
		}
	}
	misfits := []string{
		`{"id":"m-\u0031","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"mé","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":"1","features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":7,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":1e400,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":1e300,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":"a","has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":[1],"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":01,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":tru,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}} `,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}x`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null,"more":1}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42, "has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null},"label":1}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":6e15,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null},"x":[1]}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}` + "\n",
		`{"id":"m-1\n","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null}}`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":42,"has_url":1,"caps":0.25,"flag":true,"off":false,"gone":null`,
		`{"id":"m-1","key":"tenant-3","ts":"2026-11-22T10:00:00Z","label":1,"features":{"len":`,
		`{"id":"m-1`,
		``,
	}
	for _, next := range misfits {
		if afterShape(t, Config{}, []byte(base), []byte(next)) {
			t.Errorf("%s after %s: decoded by the shape", next, base)
		}
	}
	// Records whose shape is not learnt, followed by one of the base shape.
	for _, first := range []string{
		`{"id":"m-1","label":1,"features":{"a":"b"}}`, `{"id":"m-1","label":1,"features":{"a":1},"text":"t"}`,
		`{"id":"m-1","label":1,"x":[1,2]}`, `{"id":null,"label":1,"features":{"a":1}}`, `{"label":true,"features":{"a":1}}`,
		`{"label":1,"features":{}}`, `{"features":{"a":1}, "label":1}`, `{"id":"m-1","label":1}`, `{"features":{"a":1},"other":2}`,
	} {
		d, _ := NewDecoder(Config{LabelEvents: true})
		var ev Event
		d.Decode([]byte(first), &ev)
		if d.p.shape.use {
			t.Errorf("%s: shape learnt", first)
		}
		afterShape(t, Config{LabelEvents: true}, []byte(first), []byte(base))
	}
	// Other settings: a label set of words, a small hash space, a low limit.
	cfg := Config{Classes: []string{"spam", "ham"}, Bits: 4, MaxAbs: 100}
	first := `{"id":"a","label":"spam","features":{"a":1,"b":2.5,"c":true}}`
	for _, next := range []string{
		`{"id":"b","label":"ham","features":{"a":3,"b":-2.5,"c":false}}`,
		`{"id":"b","label":"eggs","features":{"a":3,"b":-2.5,"c":false}}`,
		`{"id":"b","label":"ham","features":{"a":300,"b":-2.5,"c":false}}`,
		`{"id":"b","label":"ham","features":{"a":60,"b":60,"c":false}}`,
	} {
		afterShape(t, cfg, []byte(first), []byte(next))
	}
}

// TestShapeStream: the events BenchmarkDecodeJSONStream decodes, one
// Decoder for all of them, decode as each does in full, and all but the
// first by the shape.
func TestShapeStream(t *testing.T) {
	d, _ := NewDecoder(Config{})
	var ev Event
	for i, data := range jsonStream {
		err := d.Decode(data, &ev)
		ev2, err2 := decodeFull(t, Config{}, data)
		sameDecoding(t, string(data), ev, err, ev2, err2)
		if i > 0 && d.p.shape.hits != uint64(i) {
			t.Fatalf("record %d: %d decoded by the shape, want %d", i, d.p.shape.hits, i)
		}
	}
}

// TestShapeLearning: a stream whose layout changes every record learns
// its shape ever more rarely (records 1, 2, 4, 8, ... and every
// shapeLearnEvery-th since the last fit), and learns again at once when a
// record fits.
func TestShapeLearning(t *testing.T) {
	d, _ := NewDecoder(Config{})
	var ev Event
	learnt := 0
	for i := range 3000 {
		rec := fmt.Appendf(nil, `{"features":{"f%d":1}}`, i)
		d.Decode(rec, &ev)
		if d.p.shape.use && string(d.p.shape.lits) == fmt.Sprintf(`{"features":{"f%d":}}`, i) {
			learnt++
		}
	}
	// Records 1, 2, 4, ..., 2048 since the last fit: 12 (the multiples of
	// shapeLearnEvery below 3000 are among them), each tried once, on the
	// record after it.
	if want := 12; learnt != want {
		t.Errorf("learnt %d shapes in 3000 records of changing layout, want %d", learnt, want)
	}
	if want := uint64(12); d.p.shape.misfits != want {
		t.Errorf("tried a shape on %d records of changing layout, want %d", d.p.shape.misfits, want)
	}
	// A stream of one layout with an odd record: the odd one's shape is
	// learnt, and the stream's at the next record, shaped from the one after.
	d, _ = NewDecoder(Config{})
	hits := []uint64{0, 1, 1, 1, 2, 3, 4}
	for i, h := range hits {
		rec := fmt.Appendf(nil, `{"label":1,"features":{"a":%d}}`, i)
		if i == 2 {
			rec = []byte(`{"label":1,"features":{"b":1}}`)
		}
		d.Decode(rec, &ev)
		if d.p.shape.hits != h {
			t.Fatalf("record %d (%s): %d shaped, want %d", i, rec, d.p.shape.hits, h)
		}
	}
}

// FuzzShape: a record decoded after another (whose shape may have been
// learnt) decodes as it does in full.
func FuzzShape(f *testing.F) {
	base := `{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":42,"b":0.5,"c":true,"d":null}}`
	for _, s := range []string{
		base, `{"id":"m-22","key":"kk","ts":"","label":-1,"features":{"a":-1e3,"b":1,"c":false,"d":7}}`,
		`{"id":"m\"","key":"k","ts":"t","label":1,"features":{"a":42,"b":0.5,"c":true,"d":null}}`,
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":4e999,"b":0.5,"c":true,"d":null}}`,
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":42,"b":0.5,"c":true,"d":null}} `,
		`{"label":"1","features":{"a":1}}`,
	} {
		f.Add(base, s)
		f.Add(s, base)
	}
	f.Fuzz(func(t *testing.T, first, next string) {
		afterShape(t, Config{}, []byte(first), []byte(next))
		afterShape(t, Config{LabelEvents: true, MaxAbs: 1000}, []byte(first), []byte(next))
	})
}

// TestShapeOrder: a shaped record of a value for each feature is put in
// canonical form by the shape's order when the features' slots are
// distinct, and by canonicalize when two collide (here, in a space of two
// slots) or a value is null; a one-digit value beyond MaxAbs is the full
// parse's range fault. Each decodes as in full, and by the shape.
func TestShapeOrder(t *testing.T) {
	for _, tt := range []struct {
		cfg         Config
		first, next string
		perm        bool
	}{
		{Config{}, `{"label":1,"features":{"z":1,"y":2,"x":3.5,"w":-4}}`, `{"label":1,"features":{"z":9,"y":0,"x":-3.5,"w":17}}`, true},
		{Config{}, `{"label":1,"features":{"z":1,"y":2,"x":3.5,"w":-4}}`, `{"label":1,"features":{"z":9,"y":null,"x":-3.5,"w":17}}`, true},
		{Config{Bits: 1}, `{"label":1,"features":{"z":1,"y":2,"x":3.5,"w":-4}}`, `{"label":1,"features":{"z":9,"y":5,"x":-3.5,"w":17}}`, false},
		{Config{}, `{"label":1,"features":{"a":1,"a":2}}`, `{"label":1,"features":{"a":3,"a":-2}}`, false},
		{Config{MaxAbs: 5}, `{"label":1,"features":{"z":1,"y":2}}`, `{"label":1,"features":{"z":1,"y":7}}`, true},
	} {
		d, _ := NewDecoder(tt.cfg)
		var ev Event
		d.Decode([]byte(tt.first), &ev)
		if got := d.p.shape.ordered; !d.p.shape.use || got != tt.perm {
			t.Errorf("%s: shape learnt %v, in slot order %v, want true, %v", tt.first, d.p.shape.use, got, tt.perm)
		}
		fits := tt.cfg.MaxAbs == 0
		if got := afterShape(t, tt.cfg, []byte(tt.first), []byte(tt.next)); got != fits {
			t.Errorf("%s after %s: shaped %v, want %v", tt.next, tt.first, got, fits)
		}
	}
}

// TestShapeAllocs: a stream of one layout with an odd record every few
// (each costs two learnings) allocates nothing per record once warm.
func TestShapeAllocs(t *testing.T) {
	d, _ := NewDecoder(Config{})
	var ev Event
	recs := [][]byte{jsonStream[0], jsonStream[1], []byte(`{"label":1,"features":{"b":1,"a":2}}`), jsonStream[2]}
	i := 0
	next := func() {
		d.Decode(recs[i%len(recs)], &ev)
		i++
	}
	for range 100 {
		next()
	}
	learnt := d.p.shape.misfits
	if n := testing.AllocsPerRun(1, func() {
		for range 1000 {
			next()
		}
	}); n != 0 {
		t.Errorf("%v allocs in 1,000 records, want 0", n)
	}
	if d.p.shape.misfits-learnt < uint64(1000/len(recs)) {
		t.Errorf("%d misfits in 1,000 records, want at least %d", d.p.shape.misfits-learnt, 1000/len(recs))
	}
}

// shapeConfigs are the settings the differential tests decode with: the
// defaults, label events with a limit on values below some one-digit
// ones, a hash space of four slots (collisions), classes (multiclass
// labels, 0 among them), configured positive and negative words, and a
// record limit near the records' sizes.
var shapeConfigs = []Config{
	{},
	{LabelEvents: true, MaxAbs: 4},
	{Bits: 2},
	{Classes: []string{"a", "b", "1", "0"}},
	{Positive: []string{"yes"}, Negative: []string{"no"}},
	{MaxBytes: 96, MaxAbs: 1000},
}

// sequence decodes recs in turn with one Decoder, whose shape learns from
// the records as they come, and with a reference Decoder that never tries
// a shape, and fails t unless each record decodes alike. It returns how
// many records the first decoded by a shape.
func sequence(t testing.TB, cfg Config, recs [][]byte) uint64 {
	t.Helper()
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := NewDecoder(cfg)
	var ev, evRef Event
	for _, rec := range recs {
		err := d.Decode(rec, &ev)
		ref.p.shape.use = false // in full, always
		errRef := ref.Decode(rec, &evRef)
		sameDecoding(t, fmt.Sprintf("%q in %q", rec, recs), ev, err, evRef, errRef)
	}
	return d.p.shape.hits
}

// shapeEdits are the texts TestShapeEdits writes into a record: numbers
// at the edges of the grammar and of float64, other types, escapes,
// non-ASCII, space, and the record's own punctuation.
var shapeEdits = []string{
	"", "0", "-0", "-0.0", "00", "01", "-", "1.", ".5", "1e", "1e+", "1e400", "-1e400", "1e-400", "4.9e-324",
	"1.7976931348623157e308", "0x1", "1E5", "123456789012345678901234567890", "0.1234567890123456789",
	"NaN", "Infinity", "true", "false", "null", "tru", "nul", `"1"`, `""`, `"a"`, `"\u0031"`, `"é"`, "[]", "{}",
	"[1]", `{"a":1}`, " ", "\t", "\n", ",", ":", "}", "{", `"`, `\`, "é", "\xff", "\x00",
}

// TestShapeEdits: a record edited after records of its layout — a value
// replaced by each of shapeEdits, any one byte deleted, doubled or
// replaced by each byte of the edits — decodes, and so do the records of
// the layout after it, as each does in full, under every shapeConfigs.
func TestShapeEdits(t *testing.T) {
	bases := []string{
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":42,"b":0.5,"c":true,"d":null,"e":-3}}`,
		`{"features":{"z":1,"label":2,"id":3,"features":4,"z":5},"label":"b"}`,
		`{"label":"1","features":{"0":1,"1":2,"2":3,"3":4,"4":0}} `,
		`{"label":"no","id":"x","features":{"p":1,"q":0}}`,
	}
	var bytesOf []byte
	for _, e := range shapeEdits {
		bytesOf = append(bytesOf, e...)
	}
	slices.Sort(bytesOf)
	bytesOf = slices.Compact(bytesOf)
	for _, base := range bases {
		var edited []string
		// The values, where the shape of base puts them (learnt with the
		// first settings that label it).
		var d *Decoder
		for _, cfg := range shapeConfigs {
			d, _ = NewDecoder(cfg)
			var ev Event
			if d.Decode([]byte(base), &ev); d.p.shape.use {
				break
			}
		}
		if !d.p.shape.use {
			t.Fatalf("%s: no shape learnt", base)
		}
		at := 0
		for _, s := range d.p.shape.steps {
			at += int(s.hi - s.lo)
			if s.kind == shapeEnd {
				break
			}
			end := at
			for end < len(base) && base[end] != ',' && base[end] != '}' && (s.kind != shapeID && s.kind != shapeKey && s.kind != shapeTS && s.kind != shapeLabelStr || base[end] != '"') {
				end++
			}
			for _, e := range shapeEdits {
				edited = append(edited, base[:at]+e+base[end:])
			}
			at = end
		}
		for i := range len(base) {
			edited = append(edited, base[:i]+base[i+1:], base[:i]+base[i:i+1]+base[i:])
			for _, c := range bytesOf {
				edited = append(edited, base[:i]+string(c)+base[i+1:])
			}
		}
		hits := uint64(0)
		for _, cfg := range shapeConfigs {
			for _, e := range edited {
				hits += sequence(t, cfg, [][]byte{[]byte(base), []byte(base), []byte(e), []byte(base), []byte(base)})
			}
		}
		if hits == 0 {
			t.Errorf("%s: no record decoded by a shape", base)
		}
	}
}

// FuzzShapeStream: any sequence of records (separated by 0x1e) decodes
// record for record as a Decoder that never uses a shape decodes it,
// under each of shapeConfigs.
func FuzzShapeStream(f *testing.F) {
	base := `{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":42,"b":0.5,"c":true,"d":null}}`
	for _, s := range []string{
		`{"id":"m-22","key":"kk","ts":"","label":-1,"features":{"a":-1e3,"b":1,"c":false,"d":7}}`,
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":1e400,"b":0.5,"c":true,"d":null}}`,
		`{"id":"m-1","key":"k","ts":"t","label":"1","features":{"a":42,"b":0.5,"c":true,"d":null}}`,
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":42,"a":0.5,"c":true,"d":null}}`,
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":-0,"b":.5,"c":true,"d":null}}`,
		`{"id":"m-1","key":"k","ts":"t","label":1,"features":{"a":42,"b":0.5,"c":true,"d":null}}` + "\n",
		`{"id":"m-1","label":1}`,
		`{"label":"a","features":{"label":1,"features":2}}`,
	} {
		f.Add(base+"\x1e"+base+"\x1e"+s+"\x1e"+base, uint8(0))
		f.Add(s+"\x1e"+s+"\x1e"+base, uint8(3))
	}
	f.Fuzz(func(t *testing.T, recs string, cfg uint8) {
		var seq [][]byte
		for r := range strings.SplitSeq(recs, "\x1e") {
			seq = append(seq, []byte(r))
		}
		sequence(t, shapeConfigs[int(cfg)%len(shapeConfigs)], seq)
	})
}

// TestShapeOddRecords: in a stream of one layout where every third record
// is a label event, each decodes as in full, and once the label event's
// shape has been learnt in vain the events are decoded by their shape:
// two records in three, the label events tried on it and kept out.
func TestShapeOddRecords(t *testing.T) {
	var recs [][]byte
	for i := range 300 {
		rec := jsonStream[i]
		if i%3 == 2 {
			rec = fmt.Appendf(nil, `{"id":"m-%d","label":%d}`, i-1, i&1)
		}
		recs = append(recs, rec)
	}
	hits := sequence(t, Config{LabelEvents: true}, recs)
	if hits < 195 {
		t.Errorf("%d of 300 records decoded by a shape, want at least 195", hits)
	}
	// A stream that then changes layout for good learns the new one at
	// its second record, and decodes the rest by it.
	other := []byte(`{"label":1,"features":{"b":1}}`)
	if more := sequence(t, Config{LabelEvents: true}, append(recs, slices.Repeat([][]byte{other}, 10)...)) - hits; more < 8 {
		t.Errorf("%d of 10 records of a new layout decoded by a shape, want at least 8", more)
	}
}
