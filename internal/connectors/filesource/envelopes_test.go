package filesource

import (
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// TestEnvelopesValues: an envelope's value comes back as the bytes the
// broker held: JSON as is (a JSON string stays a string, quotes and all),
// anything else from base64 (bytes that are not UTF-8 included); a value
// over the record limit comes back as an oversized record, its start and
// its size; the other partitions are skipped.
func TestEnvelopesValues(t *testing.T) {
	lines := `{"partition":0,"offset":7,"key":"k","value":{"features":{"v":1},"label":1}}
{"partition":0,"offset":8,"value":"{\"x\":[1,0],\"label\":1}"}
{"partition":1,"offset":3,"value":{"a":1}}
{"partition":0,"offset":9,"value_base64":"c3BhbQloaSD/IHRoZXJl"}
{"partition":0,"offset":10,"value_base64":"MTIzNDU2Nzg5MGFiY2RlZg=="}
`
	const limit = 20
	e := NewEnvelopes([]string{"-"}, strings.NewReader(lines), 0, limit)
	for i, w := range []struct {
		value  string
		offset int64
	}{
		{`{"features":{"v":1},"label":1}`, 7},
		{`"{\"x\":[1,0],\"label\":1}"`, 8},
		{"spam\thi \xff there", 9},
		{"1234567890abcdef", 10},
	} {
		r, err := e.Fetch(t.Context())
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		value, size := w.value, 0
		if len(value) > limit {
			value, size = value[:limit+1], len(value)
		}
		if string(r.Value) != value || r.Offset != w.offset || r.Size != size || r.Partition != 0 {
			t.Errorf("record %d: %q offset %d size %d, want %q %d %d", i, r.Value, r.Offset, r.Size, value, w.offset, size)
		}
	}
	if _, err := e.Fetch(t.Context()); err != connectors.ErrEndOfInput {
		t.Errorf("after the last record: %v", err)
	}
}
