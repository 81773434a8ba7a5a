package event

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// jsonEvent40 is a JSON event with 40 named features and a short text.
var jsonEvent40 = func() []byte {
	var b strings.Builder
	b.WriteString(`{"id":"m-1042","key":"tenant-7","ts":"2026-11-22T10:00:00Z","label":1,"features":{`)
	for i := range 40 {
		if i > 0 {
			b.WriteByte(',')
		}
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `"feature_%d":%d`, i, i)
		case 1:
			fmt.Fprintf(&b, `"feature_%d":0.%d5`, i, i)
		case 2:
			fmt.Fprintf(&b, `"feature_%d":true`, i)
		case 3:
			fmt.Fprintf(&b, `"feature_%d":"v%d"`, i, i%3)
		}
	}
	b.WriteString(`},"text":"WIN a FREE prize now, reply \"YES\" to claim"}`)
	return []byte(b.String())
}()

// a9aLines are LIBSVM lines shaped like a9a's (14 binary features).
const a9aLines = "-1 3:1 11:1 14:1 19:1 39:1 42:1 55:1 64:1 67:1 73:1 75:1 76:1 80:1 83:1 \n" +
	"+1 5:1 7:1 14:1 19:1 39:1 40:1 51:1 63:1 67:1 73:1 74:1 76:1 78:1 83:1 \n"

const elecCSV = "period,nswprice,nswdemand,vicprice,vicdemand,transfer,class\n"
const elecRows = "0.021277,0.051699,0.415055,0.003467,0.422915,0.414912,1\n" +
	"0.042553,0.051489,0.385004,0.003467,0.422915,0.414912,0\n"

const smsRows = "ham\tGo until jurong point, crazy.. Available only in bugis n great world la e buffet... Cine there got amore wat...\n" +
	"spam\tFree entry in 2 a wkly comp to win FA Cup final tkts 21st May 2005. Text FA to 87121 to receive entry question(std txt rate)T&C's apply\n"

// loop is an endless input: header once, then rows forever.
type loop struct {
	head, rows []byte
	off        int
}

func (l *loop) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(l.head) > 0 {
			k := copy(p[n:], l.head)
			l.head = l.head[k:]
			n += k
			continue
		}
		k := copy(p[n:], l.rows[l.off:])
		l.off = (l.off + k) % len(l.rows)
		n += k
	}
	return n, nil
}

func endlessReader(tb testing.TB, name, head, rows string, cfg Config) *Reader {
	r, err := NewReader(&loop{head: []byte(head), rows: []byte(rows)}, name, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

var smsCfg = Config{Positive: []string{"spam"}, Negative: []string{"ham"}}

func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	d, err := NewDecoder(Config{NGrams: 2})
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	if err := d.Decode(jsonEvent40, &ev); err != nil || ev.X.Len() < 40 {
		t.Fatalf("Decode: %v, %d features", err, ev.X.Len())
	}
	if n := testing.AllocsPerRun(1000, func() { d.Decode(jsonEvent40, &ev) }); n != 0 {
		t.Errorf("Decode: %v allocs per event, want 0", n)
	}
	escaped := []byte(`{"id":"a\"b","features":{"n\u00e9":1,"c":"d\ne"},"skip":{"x":[1,"\u00e9",{"y":-1.5e-3}]},"ignored":{"a":[true,null]},"text":"caf\u00e9 \ud83d\ude00"}`)
	if err := d.Decode(escaped, &ev); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { d.Decode(escaped, &ev) }); n != 0 {
		t.Errorf("Decode with escapes: %v allocs per event, want 0", n)
	}
	for _, tt := range []struct{ name, head, rows string }{
		{"a9a.libsvm", "", a9aLines},
		{"elec.csv", elecCSV, elecRows},
		{"sms.tsv", "", smsRows},
		{"ev.jsonl", "", string(jsonEvent40) + "\n"},
	} {
		r := endlessReader(t, tt.name, tt.head, tt.rows, smsCfg)
		for range 100 { // warm up the buffers
			if err := r.Next(&ev); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(1000, func() { r.Next(&ev) }); n != 0 {
			t.Errorf("%s: Reader.Next: %v allocs per record, want 0", tt.name, n)
		}
	}
}

func BenchmarkDecodeJSON40(b *testing.B) {
	d, _ := NewDecoder(Config{})
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(jsonEvent40)))
	for b.Loop() {
		if err := d.Decode(jsonEvent40, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

func benchReader(b *testing.B, name, head, rows string, cfg Config) {
	r := endlessReader(b, name, head, rows, cfg)
	var ev Event
	lines := int64(strings.Count(rows, "\n"))
	b.ReportAllocs()
	b.SetBytes(int64(len(rows)) / lines)
	for b.Loop() {
		if err := r.Next(&ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReaderLIBSVM(b *testing.B) { benchReader(b, "a9a.libsvm", "", a9aLines, Config{}) }
func BenchmarkReaderCSV(b *testing.B)    { benchReader(b, "elec.csv", elecCSV, elecRows, Config{}) }
func BenchmarkReaderTSV(b *testing.B)    { benchReader(b, "sms.tsv", "", smsRows, smsCfg) }
func BenchmarkReaderJSONL(b *testing.B) {
	benchReader(b, "ev.jsonl", "", string(jsonEvent40)+"\n", Config{})
}

// BenchmarkReaderGzip reads a gzip-compressed a9a-like file.
func BenchmarkReaderGzipLIBSVM(b *testing.B) {
	var raw bytes.Buffer
	for raw.Len() < 4<<20 {
		raw.WriteString(a9aLines)
	}
	var gz bytes.Buffer
	zw := gzipWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(raw.Len()))
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(gz.Bytes()), "a9a.gz", Config{Format: LIBSVM})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if err := r.Next(&ev); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// jsonEvent10 is the typical event: a few string fields, a label and ~10
// named features (numbers, flags and categorical-looking names).
var jsonEvent10 = []byte(`{"id":"m-1042","key":"tenant-7","ts":"2026-11-22T10:00:00Z","label":1,` +
	`"features":{"len":42,"has_url":1,"sender=bulk.example":1,"n_links":3,"caps_ratio":0.25,` +
	`"hour":10,"weekday":6,"score":-1.5,"lang=en":1,"reply":0}}`)

func BenchmarkDecodeJSON10(b *testing.B) {
	d, _ := NewDecoder(Config{})
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(jsonEvent10)))
	for b.Loop() {
		if err := d.Decode(jsonEvent10, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeJSONLabel(b *testing.B) {
	d, _ := NewDecoder(Config{LabelEvents: true})
	line := []byte(`{"id":"m-123456","key":"tenant-3","label":1}`)
	var ev Event
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(line, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// jsonStream is 4,096 events of the shape BenchmarkCPUPerEvent
// (internal/service) sends: id, key, ts, label and ten named features,
// each with its own values, so that the decoding of numbers and strings
// of varying length is not learned by the branch predictor as it is on
// one repeated record.
var jsonStream = func() [][]byte {
	r := rand.New(rand.NewPCG(10, 10))
	out := make([][]byte, 4096)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id":"m-%d","key":"tenant-%d","ts":"2026-11-22T10:00:00Z","label":%d,"features":{"len":%d,"has_url":%d,"sender=bulk.example":1,"caps":%.3f,"digits":%d,"exclaim":%d,"hour":%d,"reply":%d,"lang=en":1,"score":%.4f}}`,
			i, r.IntN(10), r.IntN(2), r.IntN(200), r.IntN(2), r.Float64(), r.IntN(20), r.IntN(5), r.IntN(24), r.IntN(2), r.Float64())
	}
	return out
}()

// BenchmarkDecodeJSONStream decodes jsonStream's events in turn.
func BenchmarkDecodeJSONStream(b *testing.B) {
	d, _ := NewDecoder(Config{})
	var ev Event
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := d.Decode(jsonStream[i%len(jsonStream)], &ev); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// jsonLayouts are streams of jsonStream's events whose layout changes:
// "changing" renames a feature in the middle of every event, so that each
// has a layout of its own and a shape tried on it fails two thirds in;
// "mixed" follows every two events of jsonStream's layout with one of
// another (a label event), so that each layout's shape is learnt and
// dropped again every three events; "labels" has a label event in place
// of an event at random, three times in ten, as a stream of label events
// may.
var jsonLayouts = map[string][][]byte{
	"labels": func() [][]byte {
		r := rand.New(rand.NewPCG(3, 10))
		out := make([][]byte, len(jsonStream))
		for i, rec := range jsonStream {
			out[i] = rec
			if r.IntN(10) < 3 {
				out[i] = fmt.Appendf(nil, `{"id":"m-%d","label":%d}`, r.IntN(i+1), i&1)
			}
		}
		return out
	}(),
	"changing": func() [][]byte {
		out := make([][]byte, len(jsonStream))
		for i, rec := range jsonStream {
			out[i] = bytes.Replace(rec, []byte(`"hour"`), fmt.Appendf(nil, `"hour%d"`, i), 1)
		}
		return out
	}(),
	"mixed": func() [][]byte {
		out := make([][]byte, len(jsonStream))
		for i, rec := range jsonStream {
			out[i] = rec
			if i%3 == 2 {
				out[i] = fmt.Appendf(nil, `{"id":"m-%d","label":%d}`, i-1, i&1)
			}
		}
		return out
	}(),
}

// BenchmarkDecodeJSONLayouts decodes the streams of jsonLayouts as
// BenchmarkDecodeJSONStream does ("shaped"), and with no shape ever tried
// ("full"), to show what the shape's learning and tries cost where
// layouts change.
func BenchmarkDecodeJSONLayouts(b *testing.B) {
	for _, name := range []string{"changing", "mixed", "labels"} {
		recs := jsonLayouts[name]
		for _, mode := range []string{"full", "shaped"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				d, _ := NewDecoder(Config{LabelEvents: true})
				var ev Event
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if mode == "full" {
						d.p.shape.use = false
					}
					if err := d.Decode(recs[i%len(recs)], &ev); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
