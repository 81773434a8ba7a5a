package event

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/streamlearn/streamlearn/internal/online"
)

// result is what one Next call gave.
type result struct {
	line   int64  // Error.Offset, 0 for a good record
	reason Reason // "" for a good record
	field  string
	label  int8 // 0 when unlabeled
	x      online.Vector
	raw    string
}

// readAll reads name/in with cfg and returns every result.
func readAll(t *testing.T, name, in string, cfg Config) []result {
	t.Helper()
	r, err := NewReader(strings.NewReader(in), name, cfg)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []result
	var ev Event
	for {
		err := r.Next(&ev)
		if err == io.EOF {
			return out
		}
		res := result{raw: string(r.Raw())}
		var e *Error
		switch {
		case errors.As(err, &e):
			if e.Source != name {
				t.Errorf("Source %q, want %q", e.Source, name)
			}
			if !strings.Contains(e.Error(), name+":") {
				t.Errorf("message %q does not name the source", e.Error())
			}
			res.line, res.reason, res.field = e.Offset, e.Reason, e.Field
		case err != nil:
			t.Fatalf("Next: %v", err)
		default:
			checkCanonical(t, ev.X, online.Mask(max(cfg.Bits, DefaultBits)))
			if ev.Labeled {
				res.label = ev.Label
			}
			res.x = online.Vector{Idx: append([]uint32(nil), ev.X.Idx...), Val: append([]float64(nil), ev.X.Val...)}
		}
		out = append(out, res)
	}
}

func checkResults(t *testing.T, got, want []result) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d:\n%+v", len(got), len(want), got)
	}
	for k := range want {
		g, w := got[k], want[k]
		if g.line != w.line || g.reason != w.reason || g.field != w.field || g.label != w.label ||
			(w.raw != "" && g.raw != w.raw) || (w.reason == "" && !sameVector(g.x, w.x)) {
			t.Errorf("result %d = %+v\nwant %+v", k, g, w)
		}
	}
}

func TestLIBSVM(t *testing.T) {
	in := "+1 3:1 11:0.5 \r\n" + // CRLF, trailing space
		"\n" + // empty line
		"-1\n" + // no features
		"1.0 7:9.86E-02 2:0.0 # comment\n" + // Fortran exponent, explicit zero, unsorted
		"# comment line\n" +
		"0 qid:3 1:1\n" +
		"2 1:1\n" + // line 7: label
		"1 1:x\n" + // line 8: value
		"1 a:1\n" + // line 9: index
		"1 1:1 2\n" + // line 10: token
		"1 4:inf\n" + // line 11: nonfinite
		"1 5:1e400\n" + // line 12
		"-1.0\t1:2\t1:3" // tabs, duplicates summed, no final newline
	got := readAll(t, "data.svm", in, Config{})
	checkResults(t, got, []result{
		{label: 1, x: vec(entry{3, 1}, entry{11, 0.5}), raw: "+1 3:1 11:0.5 "},
		{label: -1},
		{label: 1, x: vec(entry{7, 9.86e-2}, entry{2, 0})},
		{label: -1, x: vec(entry{1, 1})},
		{line: 7, reason: ReasonLabel, field: "label", raw: "2 1:1"},
		{line: 8, reason: ReasonMalformed, field: "1"},
		{line: 9, reason: ReasonMalformed},
		{line: 10, reason: ReasonMalformed},
		{line: 11, reason: ReasonNonFinite, field: "4"},
		{line: 12, reason: ReasonNonFinite, field: "5"},
		{label: -1, x: vec(entry{1, 5})},
	})
	// Configured label strings, and indices beyond the space wrap.
	got = readAll(t, "x.libsvm", "spam 262147:1\nham 1:1\n", Config{Positive: []string{"spam"}, Negative: []string{"ham"}})
	checkResults(t, got, []result{{label: 1, x: vec(entry{3, 1})}, {label: -1, x: vec(entry{1, 1})}})
}

func TestCSV(t *testing.T) {
	in := "a,b,label,c\n" +
		"1.5,,1,red\n" + // line 2: numeric, missing, categorical
		"\n" +
		`" 2 ","x""y",0,"multi` + "\n" + `line"` + "\n" + // line 4-5: quoted, escaped quote, newline
		"1,2,1\n" + // line 6: too few fields
		"1,2,1,3,4\n" + // line 7: too many
		"1,2,maybe,3\n" + // line 8: label
		"1,inf,1,3\n" + // line 9: nonfinite
		"1,a\"b,1,3\n" + // line 10: bare quote
		"\"1\"x,2,1,3\n" + // line 11: junk after quote
		"1,\xff,1,3\n" + // line 12: utf8
		"0,-0,,\r\n" + // line 13: unlabeled, zeros kept, CRLF
		"1,2,1,\"open\n" // line 14: unterminated quote at EOF
	got := readAll(t, "t.csv", in, Config{})
	checkResults(t, got, []result{
		{label: 1, x: vec(named("a", 1.5), named("c=red", 1)), raw: "1.5,,1,red"},
		{label: -1, x: vec(named("a", 2), named(`b=x"y`, 1), named("c=multi\nline", 1)), raw: "\" 2 \",\"x\"\"y\",0,\"multi\nline\""},
		{line: 6, reason: ReasonLength},
		{line: 7, reason: ReasonLength},
		{line: 8, reason: ReasonLabel, field: "label"},
		{line: 9, reason: ReasonNonFinite, field: "b"},
		{line: 10, reason: ReasonMalformed, field: "b"},
		{line: 11, reason: ReasonMalformed, field: "a"},
		{line: 12, reason: ReasonUTF8, field: "b"},
		{x: vec(named("a", 0), named("b", math.Copysign(0, -1)))},
		{line: 14, reason: ReasonMalformed, field: "c"},
	})
	// Label column: configured, else last.
	got = readAll(t, "t.csv", "x,y,cls\n1,2,1\n", Config{LabelColumn: "x"})
	checkResults(t, got, []result{{label: 1, x: vec(named("y", 2), named("cls", 1))}})
	got = readAll(t, "t.csv", "x,cls\n3,0\n", Config{})
	checkResults(t, got, []result{{label: -1, x: vec(named("x", 3))}})
	for _, hdr := range []string{"x,y\n", "x,x,label\n", "x,\"y\n"} {
		if _, err := NewReader(strings.NewReader(hdr), "h.csv", Config{LabelColumn: "z"}); err == nil {
			t.Errorf("header %q: NewReader succeeded", hdr)
		}
	}
}

func TestTSV(t *testing.T) {
	cfg := Config{Positive: []string{"spam"}, Negative: []string{"ham"}}
	in := "ham\tGo until jurong point, crazy..\n" +
		"spam\tFREE entry: \"win\" FREE\r\n" +
		"\n" +
		"junk\ttext\n" + // line 4
		"no tab here\n" + // line 5
		"ham\t\xff\n" + // line 6
		"\t:)\n" // unlabeled, no tokens
	got := readAll(t, "SMSSpamCollection", in, cfg)
	checkResults(t, got, []result{
		{label: -1, x: vec(word("go", 1), word("until", 1), word("jurong", 1), word("point", 1), word("crazy", 1))},
		{label: 1, x: vec(word("free", 2), word("entry", 1), word("win", 1))},
		{line: 4, reason: ReasonLabel, field: "label"},
		{line: 5, reason: ReasonMalformed},
		{line: 6, reason: ReasonUTF8, field: "text"},
		{},
	})
}

func TestJSONL(t *testing.T) {
	in := "\xef\xbb\xbf{\"label\":1,\"x\":[2]}\n" + // BOM
		"  \n" +
		"{\"label\":1,\"x\":[\"a\"]}\n" + // line 3
		"{\"label\":\n" + // line 4
		"{\"label\":0,\"x\":[]}" // no final newline
	got := readAll(t, "ev.ndjson", in, Config{})
	checkResults(t, got, []result{
		{label: 1, x: vec(entry{0, 2})},
		{line: 3, reason: ReasonType, field: "x[0]"},
		{line: 4, reason: ReasonMalformed, field: "label"},
		{label: -1},
	})
}

func TestOversized(t *testing.T) {
	long := strings.Repeat("1:1 ", 40)               // 160 bytes
	in := "1 2:1\n-1 " + long + "\n0 3:1\n1 " + long // last line oversized, no newline
	got := readAll(t, "o.svm", in, Config{MaxBytes: 50})
	checkResults(t, got, []result{
		{label: 1, x: vec(entry{2, 1})},
		{line: 2, reason: ReasonOversized, raw: ("-1 " + long)[:50]},
		{label: -1, x: vec(entry{3, 1})},
		{line: 4, reason: ReasonOversized, raw: ("1 " + long)[:50]},
	})
	// Lines far longer than the read buffer are dropped without growing it.
	huge := "-1 " + strings.Repeat("7:1 ", 100000) // 400 kB
	r, err := NewReader(iotest.OneByteReader(strings.NewReader("1 1:1\n"+huge+"\n1 2:1\n")), "o.svm", Config{MaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	var e *Error
	if err := r.Next(&ev); err != nil {
		t.Fatal(err)
	}
	if err := r.Next(&ev); !errors.As(err, &e) || e.Reason != ReasonOversized || e.Offset != 2 || len(r.Raw()) != 1000 {
		t.Fatalf("Next = %v, raw %d bytes; want oversized at line 2 with 1000 raw bytes", err, len(r.Raw()))
	}
	if err := r.Next(&ev); err != nil || ev.X.Idx[0] != 2 {
		t.Fatalf("Next after oversized = %v %v", err, ev.X)
	}
	if len(r.lr.buf) > minBuffer {
		t.Errorf("buffer grew to %d bytes", len(r.lr.buf))
	}
	// A multi-line CSV record over the limit is dropped up to its end.
	in = "a,label\n\"" + strings.Repeat("x\n", 40) + "\",1\n2,0\n"
	got = readAll(t, "o.csv", in, Config{MaxBytes: 30})
	checkResults(t, got, []result{{line: 2, reason: ReasonOversized}, {label: -1, x: vec(named("a", 2))}})
}

func TestGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, "ham\thello world\nspam\twin\n")
	zw.Close()
	whole := buf.Bytes()
	r, err := NewReader(bytes.NewReader(whole), "sms.gz", Config{Positive: []string{"spam"}, Negative: []string{"ham"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Format() != TSV {
		t.Errorf("format %q, want tsv", r.Format())
	}
	var ev Event
	n := 0
	for r.Next(&ev) == nil {
		n++
	}
	if n != 2 {
		t.Errorf("%d records, want 2", n)
	}
	// A truncated stream is a read error, not an *Error, and it sticks.
	r, err = NewReader(bytes.NewReader(whole[:len(whole)-10]), "x.tsv.gz", Config{})
	if err != nil {
		t.Fatal(err)
	}
	for err = r.Next(&ev); err == nil || errors.As(err, new(*Error)); err = r.Next(&ev) {
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(r.Next(&ev), io.ErrUnexpectedEOF) {
		t.Errorf("truncated gzip: %v, want a sticky io.ErrUnexpectedEOF", err)
	}
}

func TestInferFormat(t *testing.T) {
	tests := []struct {
		name, line string
		want       Format
	}{
		{"events.jsonl", "", JSONL},
		{"EVENTS.NDJSON.GZ", "", JSONL},
		{"a.json", "1 2:3", JSONL},
		{"a.csv.gz", "", CSV},
		{"a.tsv", "", TSV},
		{"a.svmlight", "", LIBSVM},
		{"a.libsvm", "", LIBSVM},
		{"a.svm", "", LIBSVM},
		{"a9a", "-1 3:1 11:1 14:1 ", LIBSVM},
		{"w8a", "-1 ", LIBSVM},
		{"reuters.trn", "-1 116:9.86899159742946E-02 564:0.16", LIBSVM},
		{"tabbed", "+1\t3:1\t4:0.5", LIBSVM},
		{"SMSSpamCollection", "ham\tGo until jurong point", TSV},
		{"data", "period,nswprice,class", CSV},
		{"stream", `  {"label":1}`, JSONL},
		{"bom", "\xef\xbb\xbf{}", JSONL},
	}
	for _, tt := range tests {
		got, err := InferFormat(tt.name, []byte(tt.line))
		if err != nil || got != tt.want {
			t.Errorf("InferFormat(%q, %q) = %q, %v; want %q", tt.name, tt.line, got, err, tt.want)
		}
	}
	for _, line := range []string{"", "hello world", "spam", "1 a:b"} {
		if f, err := InferFormat("mystery", []byte(line)); err == nil || !strings.Contains(err.Error(), "mystery") {
			t.Errorf("InferFormat(mystery, %q) = %q, %v; want an error naming the file", line, f, err)
		}
	}
	// An empty input with an unknown name is no error: there is nothing to read.
	r, err := NewReader(strings.NewReader("\n\n"), "mystery", Config{})
	if err != nil || r.Next(&Event{}) != io.EOF {
		t.Errorf("empty input: %v", err)
	}
	if _, err := NewReader(strings.NewReader("hello\n"), "mystery", Config{}); err == nil {
		t.Error("uninferable input: no error")
	}
}

// TestDecoderLineFormats: a Decoder with input.format libsvm or tsv decodes
// a stream's records (one line each, a trailing newline or not) into the
// events a Reader makes of the same lines, bit for bit, and reports the
// same faults; csv, which needs its file's header, is refused.
func TestDecoderLineFormats(t *testing.T) {
	for _, tc := range []struct {
		format Format
		lines  []string
	}{
		{LIBSVM, []string{"+1 3:1 11:0.5", "-1 7:2e3 qid:4", "0 1:x", "+1 3:1 3:2", "", "# comment", "1 2:1e400"}},
		{TSV, []string{"spam\tWIN a prize now, WIN", "ham\tsee you at 5", "maybe\thello", "no tab here", "\tunlabeled text", "ham\t\xff"}},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			cfg := Config{Format: tc.format, Positive: []string{"spam"}, Negative: []string{"ham"}, NGrams: 2}
			d, err := NewDecoder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			d.Source = "kafka:events"
			var ev Event
			for k, line := range tc.lines {
				want := readAll(t, "x", line+"\n", cfg)
				for _, rec := range []string{line, line + "\n", line + "\r\n"} {
					err := d.Decode([]byte(rec), &ev)
					var e *Error
					switch {
					case len(want) == 0: // a line the Reader skips: a dead letter here
						if !errors.As(err, &e) || e.Reason != ReasonMalformed {
							t.Errorf("line %d %q: %v, want a malformed record", k, rec, err)
						}
					case want[0].reason != "":
						if !errors.As(err, &e) || e.Reason != want[0].reason || e.Field != want[0].field || e.Source != "kafka:events" {
							t.Errorf("line %d %q: %v, want %s", k, rec, err, want[0].reason)
						}
					case err != nil:
						t.Errorf("line %d %q: %v", k, rec, err)
					default:
						var label int8
						if ev.Labeled {
							label = ev.Label
						}
						if label != want[0].label || !sameVector(ev.X, want[0].x) {
							t.Errorf("line %d %q: label %d x %v, want %d %v", k, rec, label, ev.X, want[0].label, want[0].x)
						}
					}
				}
			}
		})
	}
	if _, err := NewDecoder(Config{Format: CSV}); err == nil || !strings.Contains(err.Error(), "no header line") {
		t.Errorf("csv decoder: %v", err)
	}
}

// TestDecoderLimitAndNoRecord: a LIBSVM or TSV record over max_bytes is
// oversized, as the Reader makes it; NoRecord skips the lines a Reader
// skips in each format.
func TestDecoderLimitAndNoRecord(t *testing.T) {
	for _, f := range []Format{LIBSVM, TSV} {
		d, err := NewDecoder(Config{Format: f, MaxBytes: 16})
		if err != nil {
			t.Fatal(err)
		}
		var ev Event
		var e *Error
		if err := d.Decode([]byte("1\t1:1 2:1 3:1 4:1 5:1"), &ev); !errors.As(err, &e) || e.Reason != ReasonOversized {
			t.Errorf("%s: a 21-byte record with a 16-byte limit: %v", f, err)
		}
	}
	for _, tc := range []struct {
		format Format
		line   string
		want   bool
	}{
		{LIBSVM, "# a comment", true}, {LIBSVM, "  ", true}, {LIBSVM, "+1 3:1 # tail", false},
		{TSV, "", true}, {TSV, "\r", true}, {TSV, "   ", false}, {JSONL, " \t\r", true}, {"", "", true}, {JSONL, "{}", false},
	} {
		if got := NoRecord(tc.format, []byte(tc.line)); got != tc.want {
			t.Errorf("NoRecord(%s, %q) = %v, want %v", tc.format, tc.line, got, tc.want)
		}
		if tc.format == "" {
			continue
		}
		n := len(readAll(t, "x", tc.line+"\n", Config{Format: tc.format}))
		if (n == 0) != tc.want {
			t.Errorf("%s %q: the Reader gives %d results, NoRecord says %v", tc.format, tc.line, n, tc.want)
		}
	}
}
