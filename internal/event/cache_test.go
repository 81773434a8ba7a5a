package event

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/testmode"
)

// decoded is what a decode produced, for comparing decoders.
type decoded struct {
	err         string
	id, key, ts string
	labeled     bool
	label       int8
	x           online.Vector
}

func decodeOne(d *Decoder, data []byte, ev *Event) decoded {
	d.n = 0 // the record number is in error messages
	err := d.Decode(data, ev)
	r := decoded{id: string(ev.ID), key: string(ev.Key), ts: string(ev.TS), labeled: ev.Labeled, label: ev.Label,
		x: online.Vector{Idx: slices.Clone(ev.X.Idx), Val: slices.Clone(ev.X.Val)}}
	if err != nil {
		r = decoded{err: err.Error()} // ev is unspecified after an error
	}
	return r
}

func sameDecoded(a, b decoded) bool {
	return a.err == b.err && a.id == b.id && a.key == b.key && a.ts == b.ts && a.labeled == b.labeled &&
		a.label == b.label && sameVector(a.x, b.x)
}

// checkFresh decodes data with d (whatever it decoded before) and with a
// new decoder for cfg, and fails unless the results are identical.
func checkFresh(t *testing.T, d *Decoder, cfg Config, data []byte, ev *Event) decoded {
	t.Helper()
	fresh, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var fev Event
	want := decodeOne(fresh, data, &fev)
	got := decodeOne(d, data, ev)
	if !sameDecoded(got, want) {
		t.Fatalf("record %q:\nwarm decoder  %+v\nfresh decoder %+v", data, got, want)
	}
	return got
}

// TestSlotCacheStream decodes a long random stream whose feature names
// repeat, mix, collide (in the slot cache's hash and in the slot space) and
// vary in order, with errors in between, and checks every record decodes
// exactly as it does with a fresh decoder (empty caches, no reused order).
// 5,000 records per configuration, about 1,400 rare names among them,
// nearly three times what the cache holds (STREAMLEARN_FULL=1: 20,000).
func TestSlotCacheStream(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	rng := rand.New(rand.NewPCG(7, 11))
	// Names: short, decimal, prefixes of one another, around the cache's
	// length limit, colliding in nameHash (same length, first and last
	// eight bytes), non-ASCII, escaped, and "name=value" forms that share
	// a slot with a categorical feature.
	names := []string{"a", "b", "len", "7", "0012", "4294967296", "", "feat", "feat_1", "feat_10",
		"lang=en", "lang", "sender=bulk.example", "sender", "héllo", "名前", "x y", "caps_ratio",
		strings.Repeat("n", cacheNameMax-1), strings.Repeat("n", cacheNameMax), strings.Repeat("n", cacheNameMax+1),
		strings.Repeat("m", 200), `a\"b`, `n\u00e9`, `tab\t`, `\u0061`, `x\\y`}
	for k := range 6 {
		names = append(names, fmt.Sprintf("prefix_8%cmiddle%c_suffix8", 'A'+k, 'a'+k))
	}
	for k := range 1500 { // more than the cache holds: evictions and stale links
		names = append(names, "rare_"+strconv.Itoa(k))
	}
	common := names[:len(names)-1500]
	values := []string{"1", "0", "-1.5", "0.25", "42", "1e3", "-0", "true", "false", "null", `"en"`, `"bulk.example"`,
		`"a\"q"`, `"v1"`, "3.14159", "1e400", "[]", "12345678901234567890"}
	// Schemas: fixed name lists replayed often, in order or not.
	schemas := make([][]string, 8)
	for s := range schemas {
		n := 1 + rng.IntN(40)
		for range n {
			schemas[s] = append(schemas[s], common[rng.IntN(len(common))])
		}
	}
	records := testmode.Reps(5000, 20000)
	for _, cfg := range []Config{{}, {Bits: 4}, {Bits: 1, NGrams: 2}} {
		d, err := NewDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var ev Event
		var b strings.Builder
		ok := 0
		for range records {
			s := schemas[rng.IntN(len(schemas))]
			feats := slices.Clone(s)
			switch rng.IntN(8) {
			case 0:
				rng.Shuffle(len(feats), func(i, j int) { feats[i], feats[j] = feats[j], feats[i] })
			case 1: // drop, insert or duplicate one
				k := rng.IntN(len(feats))
				switch rng.IntN(3) {
				case 0:
					feats = slices.Delete(feats, k, k+1)
				case 1:
					feats = slices.Insert(feats, k, names[rng.IntN(len(names))])
				case 2:
					feats = slices.Insert(feats, k, feats[k])
				}
			case 2:
				for range rng.IntN(5) {
					feats = append(feats, names[rng.IntN(len(names))])
				}
			}
			b.Reset()
			b.WriteString(`{"id":"e","label":1,`)
			if rng.IntN(10) == 0 {
				b.WriteString(`"x":[1,2.5],`)
			}
			b.WriteString(`"features":{`)
			for k, f := range feats {
				if k > 0 {
					b.WriteString([]string{",", ", ", ",\n"}[rng.IntN(3)%2])
				}
				v := values[rng.IntN(6)] // mostly plain numbers
				if rng.IntN(4) == 0 {
					v = values[rng.IntN(len(values))]
				}
				colon := ":"
				if rng.IntN(50) == 0 {
					colon = " : "
				}
				fmt.Fprintf(&b, `"%s"%s%s`, f, colon, v)
			}
			b.WriteString(`}`)
			if rng.IntN(10) == 0 {
				b.WriteString(`,"text":"win a FREE prize, win"`)
			}
			b.WriteString(`}`)
			data := []byte(b.String())
			if rng.IntN(50) == 0 { // malformed: cut short
				data = data[:rng.IntN(len(data))]
			}
			if r := checkFresh(t, d, cfg, data, &ev); r.err == "" {
				ok++
			}
		}
		if ok < records/4 {
			t.Errorf("bits %d: only %d of the records decoded", cfg.Bits, ok)
		}
	}
}
