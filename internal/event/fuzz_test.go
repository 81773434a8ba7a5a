package event

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/online"
)

// checkErr fails t unless err is an *Error with a known Reason.
func checkErr(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if !slices.Contains(Reasons(), e.Reason) {
		t.Fatalf("unknown reason %q in %v", e.Reason, err)
	}
	return e
}

// checkEvent fails t unless ev is a valid decoded event: canonical, every
// value within ±maxAbs (0: DefaultMaxAbs), labeled with ±1 or unlabeled.
func checkEvent(t *testing.T, ev *Event, mask uint32, maxAbs float64) {
	t.Helper()
	checkCanonical(t, ev.X, mask)
	if maxAbs == 0 {
		maxAbs = DefaultMaxAbs
	}
	for _, v := range ev.X.Val {
		if math.Abs(v) > maxAbs {
			t.Fatalf("value %v beyond the limit %v accepted", v, maxAbs)
		}
	}
	if ev.Labeled != (ev.Label == online.Positive || ev.Label == online.Negative) || !ev.Labeled && ev.Label != 0 {
		t.Fatalf("labeled %v label %d", ev.Labeled, ev.Label)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		string(jsonEvent40),
		`{"id":"a","label":"spam","features":{"a":1,"b":"c","d":null,"e":true},"x":[1,2.5e-3,-0],"text":"Hello wörld"}`,
		`{"label":1e400}`, `{"x":[1e400]}`, `{"a":[[[[[]]]]]}`, `{"id":"\ud83d\ude00\u00e9\n"}`,
		`{"features":{"a":1e308,"a":1e308}}`, "{\"id\":\"\xff\"}", `[1]`, `{"label":1,"label":1}`,
		`{"x":[01]}`, `{"text":"a b a b c"}`, ` {} `, `{"features":{"7":1,"x":{}}}`,
		// Hostile records: huge finite values (alone and summed), NaN as
		// a string, deep nesting, invalid UTF-8 in names and text, wrong
		// label and feature types, a truncated record, a lone number of
		// many digits.
		`{"features":{"a":1e308},"label":1}`, `{"x":[-1e308,1e200]}`, `{"features":{"a":6e15,"a":6e15}}`,
		`{"x":[9007199254740991,-9007199254740991]}`, `{"x":["NaN"],"label":"NaN"}`, `{"label":1e999}`,
		`{"a":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`,
		"{\"features\":{\"\xc3\x28\":1}}", "{\"text\":\"ok \xf0\x28\x8c\xbc\"}", `{"label":{"v":1}}`,
		`{"features":{"v":[1]},"x":[true]}`, `{"features":{"v":0.5},"lab`, ``, `{"features":{"v":1` + strings.Repeat("0", 400) + `}}`,
		`{"text":"a a a a a a a a a a"}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, bits uint8) {
		cfg := Config{Bits: uint(bits%online.MaxBits) + 1, NGrams: int(bits%3) + 1,
			Positive: []string{"spam"}, Negative: []string{"ham"}, Dense: int(bits % 4)}
		if bits%5 == 1 {
			cfg.MaxAbs = 4 // small enough for word counts and sums to exceed it
		}
		d, err := NewDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// A decoder with warm caches (the features of another event, then
		// of this one) decodes exactly as a fresh one.
		w, _ := NewDecoder(cfg)
		var wev Event
		w.Decode(jsonEvent40, &wev)
		checkFresh(t, w, cfg, data, &wev)
		checkFresh(t, w, cfg, data, &wev)
		var ev Event
		err = d.Decode(data, &ev)
		// Differential check of the JSON syntax against encoding/json
		// (which accepts invalid UTF-8, and nests deeper).
		valid := json.Valid(data)
		if err != nil {
			e := checkErr(t, err)
			if e.Reason == ReasonMalformed && valid {
				t.Fatalf("valid JSON reported malformed: %v", err)
			}
			if e.Reason != ReasonMalformed && e.Reason != ReasonUTF8 && e.Reason != ReasonDepth &&
				e.Reason != ReasonOversized && !valid {
				t.Fatalf("invalid JSON reported as %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("invalid JSON accepted: %q", data)
		}
		if !utf8.Valid(data) {
			t.Fatalf("invalid UTF-8 accepted: %q", data)
		}
		checkEvent(t, &ev, online.Mask(cfg.Bits), cfg.MaxAbs)
		// Decoding again into the used Event gives the same result.
		x := online.Vector{Idx: slices.Clone(ev.X.Idx), Val: slices.Clone(ev.X.Val)}
		if err := d.Decode(data, &ev); err != nil || !sameVector(ev.X, x) {
			t.Fatalf("second decode differs: %v", err)
		}
	})
}

// fuzzReader reads all of data with cfg and checks every result.
func fuzzReader(t *testing.T, data []byte, cfg Config) {
	r, err := NewReader(bytesReader(data), "fuzz", cfg)
	if err != nil {
		return // configuration or header errors
	}
	mask := online.Mask(cmp(cfg.Bits, DefaultBits))
	var ev Event
	for n := 0; n <= len(data)+1; n++ {
		err := r.Next(&ev)
		if err == io.EOF {
			if r.Next(&ev) != io.EOF {
				t.Fatal("Next after io.EOF is not io.EOF")
			}
			return
		}
		if len(r.Raw()) > r.s.maxBytes {
			t.Fatalf("Raw has %d bytes, limit %d", len(r.Raw()), r.s.maxBytes)
		}
		if err != nil {
			if e := checkErr(t, err); e.Offset < 1 || e.Source != "fuzz" {
				t.Fatalf("error without position: %v", err)
			}
			continue
		}
		checkEvent(t, &ev, mask, cfg.MaxAbs)
	}
	t.Fatal("more records than lines")
}

func cmp(a, b uint) uint {
	if a == 0 {
		return b
	}
	return a
}

func readerSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(16))
	}
}

func readerCfg(format Format, knob uint8) Config {
	cfg := Config{Format: format, Positive: []string{"spam"}, Negative: []string{"ham"}, NGrams: int(knob%2) + 1}
	if knob >= 8 {
		cfg.MaxBytes = int(knob) // tiny limits exercise oversized records
	}
	if knob%5 == 1 {
		cfg.MaxAbs = 4 // small enough for values, word counts and sums to exceed it
	}
	return cfg
}

func FuzzReaderLIBSVM(f *testing.F) {
	readerSeeds(f, a9aLines, "+1 3:1 11:0.5 \r\n\n-1\n1.0 7:9.86E-02 2:0.0 # c\n0 qid:3 1:1\n2 1:1\n1 1:x\n1 4:inf\n-1.0\t1:2\t1:3",
		"1 1:1e308 1:1e308\n", "-1 4294967295:1 4294967296:2 00007:3\n", "1 1:6e15 1:6e15\n-1 2:-1e200\n1 3:nan\n+1 1:3 1:3\n")
	f.Fuzz(func(t *testing.T, data []byte, knob uint8) { fuzzReader(t, data, readerCfg(LIBSVM, knob)) })
}

func FuzzReaderCSV(f *testing.F) {
	readerSeeds(f, elecCSV+elecRows, "a,b,label,c\n1.5,,1,red\n\n\" 2 \",\"x\"\"y\",0,\"multi\nline\"\n1,2,1\n1,inf,1,3\n1,a\"b,1,3\n\"1\"x,2,1,3\n1,\xff,1,3\n0,-0,,\r\n1,2,1,\"open\n",
		"x,x\n1,2\n", "\"a\nb\",label\n1,0\n", "a,b,label\n1e308,0,1\n-1e200,5,0\nNaN,1,1\n3,3,1\n")
	f.Fuzz(func(t *testing.T, data []byte, knob uint8) { fuzzReader(t, data, readerCfg(CSV, knob)) })
}

func FuzzReaderTSV(f *testing.F) {
	readerSeeds(f, smsRows, "ham\tGo until jurong point\nspam\tFREE \"win\"\r\n\njunk\ttext\nno tab\nham\t\xff\n\t:)\n", "spam\tno no no no no no\n")
	f.Fuzz(func(t *testing.T, data []byte, knob uint8) { fuzzReader(t, data, readerCfg(TSV, knob)) })
}

func FuzzReaderJSONL(f *testing.F) {
	readerSeeds(f, string(jsonEvent40)+"\n", "{\"label\":1,\"x\":[2]}\n  \n{\"label\":1,\"x\":[\"a\"]}\n{\"label\":\n{\"label\":0}",
		"{\"label\":1,\"x\":[1e308]}\n{\"label\":0,\"features\":{\"a\":-1e200}}\n{\"label\":1,\"x\":[3,4]}\n")
	f.Fuzz(func(t *testing.T, data []byte, knob uint8) { fuzzReader(t, data, readerCfg(JSONL, knob)) })
}

// FuzzReaderInfer reads with the format inferred (and gzip detected).
func FuzzReaderInfer(f *testing.F) {
	readerSeeds(f, a9aLines, elecCSV+elecRows, smsRows, "{}\n", "\x1f\x8b")
	f.Fuzz(func(t *testing.T, data []byte, knob uint8) { fuzzReader(t, data, readerCfg("", knob)) })
}

// FuzzParseFloat: parseFloat agrees with strconv.ParseFloat bit for bit on
// every input of its grammar.
func FuzzParseFloat(f *testing.F) {
	for _, s := range []string{"1", "-0", "0.1", "9.86899159742946E-02", "1e22", "1e23", "123456789012345678901",
		".5", "5.", "+1", "1e400", "1e-400", "inf", "-Infinity", "nan", "0x1p3", "1_0", "", "-", "1e", "4.9e-324",
		"9007199254740993", "0.000000000000000000001234"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, st := parseFloat([]byte(s))
		want, err := strconv.ParseFloat(s, 64)
		switch st {
		case numOK:
			if err != nil || math.Float64bits(v) != math.Float64bits(want) {
				t.Fatalf("parseFloat(%q) = %v, ParseFloat = %v, %v", s, v, want, err)
			}
		case numNonFinite:
			if !math.IsInf(want, 0) && !math.IsNaN(want) && !isInfNaN([]byte(s)) { // ParseFloat rejects "+nan"
				t.Fatalf("parseFloat(%q) nonfinite, ParseFloat = %v, %v", s, want, err)
			}
		case numSyntax:
			if err == nil && !math.IsInf(want, 0) && !math.IsNaN(want) {
				for _, c := range s { // ParseFloat accepts hex and underscores; we do not
					if c == 'x' || c == 'X' || c == '_' || c == 'p' || c == 'P' {
						return
					}
				}
				t.Fatalf("parseFloat(%q) syntax error, ParseFloat = %v", s, want)
			}
		}
	})
}

// FuzzJSONNumber: the JSON scanner's fused number parser (num) accepts
// what number accepts, ends where it ends and agrees with parseFloat bit
// for bit.
func FuzzJSONNumber(f *testing.F) {
	for _, s := range []string{"1", "-0", "0.1", "42", "-1.5", "0.000123", "123456789012345", "1234567890123456",
		"0.1234567890123456789", "1e22", "1.5E+3", "0.0000000000000000000000001", "1e400", "01", "-", "1.", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a, b jsonParser
		a.data, b.data = []byte(s), []byte(s)
		tok, ok1 := a.number()
		v, st, ok2 := b.num()
		if ok1 != ok2 || a.i != b.i || a.fail != b.fail || a.failMsg != b.failMsg {
			t.Fatalf("%q: number %v at %d (%s), num %v at %d (%s)", s, ok1, a.i, a.failMsg, ok2, b.i, b.failMsg)
		}
		if !ok1 {
			return
		}
		w, wst := parseFloat(tok)
		if st != wst || st == numOK && math.Float64bits(v) != math.Float64bits(w) {
			t.Fatalf("num(%q) = %v, %v; parseFloat = %v, %v", s, v, st, w, wst)
		}
	})
}
