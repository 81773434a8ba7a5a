package filesource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// envelopeLines are lines of recordings: the forms `record --envelope`
// writes, which parse must take, then forms only encoding/json reads and
// lines that are not envelopes, which it must leave to parseEnvelopeJSON.
var envelopeLines = []struct {
	line string
	fast bool
}{
	{`{"partition":0,"offset":7,"key":"k","value":{"features":{"v":1},"label":1}}`, true},
	{`{"partition":3,"offset":9223372036854775807,"value_base64":"c3BhbQloaSD/IHRoZXJl"}`, true},
	{`{"partition":-1,"offset":-0,"key":"","value_base64":""}`, true},
	{`{"partition":2147483647,"offset":0,"key":"tenant 7","value":"{\"x\":[1,0],\"label\":1}"}`, true},
	{`{"partition":0,"offset":1,"value":[1,2,{"a":"}"}]}`, true},
	{`{"partition":0,"offset":1,"value":1}`, true},
	{`{"partition":1,"offset":10,"key":"k","value_base64":"MTIzNDU2Nzg5MGFiY2RlZg=="}`, true},
	// encoding/json's alone
	{`{"offset":7,"partition":0,"value":{}}`, false},
	{`{"partition": 0,"offset":7,"value":{}}`, false},
	{`{"partition":0,"offset":7,"key":"a\"b","value":{}}`, false},
	{`{"partition":0,"offset":7,"key":"\u00e9","value":{}}`, false},
	{`{"partition":0,"offset":7,"key":"é","value":{}}`, false},
	{`{"partition":0,"offset":7,"value": {}}`, false},
	{`{"partition":0,"offset":7,"value":{} }`, false},
	{`{"partition":0,"offset":7,"value":{}} `, false},
	{`{"partition":0,"offset":7,"value":null,"value_base64":"YQ=="}`, false},
	{`{"partition":0,"offset":7,"value":{},"extra":1}`, false},
	{`{"partition":0,"offset":7,"value_base64":"YQ==","extra":"x"}`, false},
	{`{"partition":0,"offset":7,"value_base64":"YQ\u003d="}`, false},
	{`{"Partition":0,"offset":7,"value":{}}`, false},
	// not envelopes
	{`{"partition":0,"offset":7}`, false},
	{`{"partition":0,"offset":7,"value":{},"value_base64":"YQ=="}`, false},
	{`{"partition":0,"offset":7,"value_base64":"YQ==","value":{}}`, false},
	{`{"partition":0,"offset":7,"value":{"a":1}}}`, false},
	{`{"partition":0,"offset":7,"value":{"a":}}`, false},
	{`{"partition":0,"offset":7,"value_base64":"not base64!"}`, false},
	{`{"partition":0,"offset":7,"value_base64":"YQ="}`, false},
	{`{"partition":01,"offset":7,"value":{}}`, false},
	{`{"partition":1.5,"offset":7,"value":{}}`, false},
	{`{"partition":1e2,"offset":7,"value":{}}`, false},
	{`{"partition":2147483648,"offset":7,"value":{}}`, false},
	{`{"partition":0,"offset":9223372036854775808,"value":{}}`, false},
	{`{"partition":-,"offset":7,"value":{}}`, false},
	{`{"partition":0,"offset":7,"key":"k,"value":{}}`, false},
	{`{"partition":0,"offset":7,"value":{}`, false},
	{`{"partition":0,"offset":7,"value":}`, false},
	{`{"partition":0,"offset":7,"value_base64":"YQ==}`, false},
	{"{\"partition\":0,\"offset\":7,\"value_base64\":\"YQ\r==\"}", false},
	{"{\"partition\":0,\"offset\":7,\"key\":\"a\tb\",\"value\":{}}", false},
	{`{"partition":0,"offset":-9223372036854775808,"value":{}}`, true},
	{`{"partition":-2147483648,"offset":1000000000000000000,"value":{}}`, true},
	{`{"partition":-2147483649,"offset":7,"value":{}}`, false},
	{`{"partition":0,"offset":-9223372036854775809,"value":{}}`, false},
	{`{"partition":0,"offset":99999999999999999999,"value":{}}`, false},
	{`[1,2]`, false},
}

// TestEnvelopeParseAsJSON: parse takes the lines `record --envelope`
// writes (fast), leaves the others, and returns for every line it takes
// what encoding/json reads from it.
func TestEnvelopeParseAsJSON(t *testing.T) {
	for _, c := range envelopeLines {
		var e Envelopes
		_, ok := e.parse([]byte(c.line))
		if ok != c.fast {
			t.Errorf("%s: parse took it %v, want %v", c.line, ok, c.fast)
		}
		checkEnvelopeParse(t, []byte(c.line))
	}
	// What record writes, from json.Marshal of its envelope.
	type recorded struct {
		Partition   int32           `json:"partition"`
		Offset      int64           `json:"offset"`
		Key         string          `json:"key,omitempty"`
		Value       json.RawMessage `json:"value,omitempty"`
		ValueBase64 []byte          `json:"value_base64,omitempty"`
	}
	for i, r := range []recorded{
		{Partition: 3, Offset: 1 << 40, Key: "tenant-1", Value: json.RawMessage(`{"label":1,"features":{"a<b":2}}`)},
		{Partition: 0, Offset: 0, ValueBase64: []byte("+1 3:1 11:1 14:1\xff")},
		{Partition: 1, Offset: 5, Key: "k", ValueBase64: []byte("-1 5:1 7:1")},
	} {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var e Envelopes
		if _, ok := e.parse(line); !ok {
			t.Errorf("record %d, %s: parse left it to encoding/json", i, line)
		}
		checkEnvelopeParse(t, line)
	}
}

// checkEnvelopeParse fails t when parse takes line and returns other than
// parseEnvelopeJSON does.
func checkEnvelopeParse(t *testing.T, line []byte) {
	t.Helper()
	var e Envelopes
	got, ok := e.parse(line)
	if !ok {
		return
	}
	want, err := parseEnvelopeJSON(line)
	if err != nil {
		t.Fatalf("%s: parse took it, encoding/json: %v", line, err)
	}
	if got.partition != want.partition || got.offset != want.offset || !bytes.Equal(got.key, want.key) || !bytes.Equal(got.value, want.value) {
		t.Fatalf("%s: parse read %d %d %q %q, encoding/json %d %d %q %q", line,
			got.partition, got.offset, got.key, got.value, want.partition, want.offset, want.key, want.value)
	}
}

// FuzzEnvelopeParse: whatever the line, parse takes it only as
// encoding/json reads it.
func FuzzEnvelopeParse(f *testing.F) {
	for _, c := range envelopeLines {
		f.Add([]byte(c.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkEnvelopeParse(t, line) })
}

// BenchmarkEnvelopesFetch: Fetch of a recording's records (LIBSVM lines
// in value_base64, as `record --envelope` writes them, and JSON values):
// the loop's cost per record in `replay --envelope`.
//
//	go test -run '^$' -bench EnvelopesFetch -count 3 ./internal/connectors/filesource/
func BenchmarkEnvelopesFetch(b *testing.B) {
	for _, c := range []struct{ name, line string }{
		{"base64", `{"partition":%d,"offset":%d,"value_base64":"LTEgMzoxIDExOjEgMTQ6MSAxOToxIDM5OjEgNDI6MSA1NToxIDY0OjEgNjc6MSA3MzoxIDc1OjEgNzY6MSA4MDoxIDgzOjE="}`},
		{"json", `{"partition":%d,"offset":%d,"key":"tenant-3","value":{"id":"m-1","key":"tenant-3","label":1,"features":{"len":120,"has_url":1,"caps":0.25,"digits":7}}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			var text []byte
			for i := range 4096 {
				text = fmt.Appendf(text, c.line+"\n", i%4, i)
			}
			b.ReportAllocs()
			var e *Envelopes
			for b.Loop() {
				if e == nil {
					e = NewEnvelopes([]string{"-"}, bytes.NewReader(text), -1, 1<<20)
				}
				if _, err := e.Fetch(b.Context()); err == connectors.ErrEndOfInput {
					e = nil
				} else if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEnvelopeFrame: what the reader of FetchBatch does with each
// line of a recording (frame: partition, offset, key and where the value
// is; its base64 is left to Batch.Records).
//
//	go test -run '^$' -bench EnvelopeFrame ./internal/connectors/filesource/
func BenchmarkEnvelopeFrame(b *testing.B) {
	line := []byte(`{"partition":3,"offset":260487,"key":"","value_base64":"LTEgMzoxIDExOjEgMTQ6MSAxOToxIDM5OjEgNDI6MSA1NToxIDY0OjEgNjc6MSA3MzoxIDc1OjEgNzY6MSA4MDoxIDgzOjE="}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := frame(line); !ok {
			b.Fatal("not framed")
		}
	}
}
