package filesource

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestEnvelopesReadAhead: the records read ahead come in the file's
// order, each key and value its own, across many batches, then the
// error of a line that is not an envelope, after the records before it,
// at every Fetch; a Fetch waiting for stdin whose writer pauses returns
// when its context ends, and the records come when the writer goes on;
// Close stops the reader in the middle of a file.
func TestEnvelopesReadAhead(t *testing.T) {
	const n = 3 * envBatchRecords * envBatches
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"partition":%d,"offset":%d,"key":"k%d","value_base64":"%s"}`+"\n", i%4, i, i, base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "+1 %d:1", i)))
	}
	path := filepath.Join(t.TempDir(), "rec.envelopes")
	if err := os.WriteFile(path, []byte(lines.String()+"not an envelope\n"+`{"partition":0,"offset":0,"value":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEnvelopes([]string{path}, nil, -1, 1<<20)
	for i := range n {
		r, err := e.Fetch(t.Context())
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if r.Partition != int32(i%4) || r.Offset != int64(i) || string(r.Key) != fmt.Sprint("k", i) || string(r.Value) != fmt.Sprintf("+1 %d:1", i) || r.Lag != -1 {
			t.Fatalf("record %d: partition %d offset %d key %q value %q lag %d", i, r.Partition, r.Offset, r.Key, r.Value, r.Lag)
		}
	}
	for range 2 {
		if _, err := e.Fetch(t.Context()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d is not a record", n+1)) {
			t.Fatalf("after the records: %v, want line %d named", err, n+1)
		}
	}
	e.Close()

	e = NewEnvelopes([]string{path}, nil, 2, 1<<20)
	if r, err := e.Fetch(t.Context()); err != nil || r.Offset != 2 {
		t.Fatalf("partition 2's first record: offset %d, %v", r.Offset, err)
	}
	e.Close() // the reader stops with most of the file unread
	select {
	case <-e.done:
	default:
		t.Error("Close returned with the reader running")
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	e = NewEnvelopes([]string{"-"}, pr, -1, 1<<20)
	defer e.Close()
	go fmt.Fprintln(pw, `{"partition":0,"offset":1,"value":{"a":1}}`)
	if r, err := e.Fetch(t.Context()); err != nil || r.Offset != 1 {
		t.Fatalf("the first record of stdin: offset %d, %v", r.Offset, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.Fetch(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stdin paused: %v, want the context's deadline", err)
	}
	go func() {
		fmt.Fprintln(pw, `{"partition":0,"offset":2,"value":{"a":2}}`)
		pw.Close()
	}()
	if r, err := e.Fetch(t.Context()); err != nil || r.Offset != 2 || string(r.Value) != `{"a":2}` {
		t.Fatalf("the record after the pause: offset %d %q, %v", r.Offset, r.Value, err)
	}
	if _, err := e.Fetch(t.Context()); err != connectors.ErrEndOfInput {
		t.Fatalf("at stdin's end: %v", err)
	}
}

// TestEnvelopesFetchBatch: FetchBatch hands each partition's records in
// batches of that partition alone, at most envBatchRecords each, in the
// partition's order and as Fetch returns them (keys, values decoded from
// base64 by Records, an escaped base64 read by encoding/json, an
// oversized value cut); a value that is not base64 ends its partition's
// records with the error naming its line; the input's end comes after
// every record, at every call; Fetch on the same source is refused.
func TestEnvelopesFetchBatch(t *testing.T) {
	const n = 5 * envBatchRecords * envBatches
	const bad = n / 2 // partition 2's: not base64
	var lines strings.Builder
	for i := range n {
		value := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "+1 %d:1", i))
		switch {
		case i == bad:
			value = "not base64!"
		case i%97 == 0:
			value = strings.Replace(value, "=", `\u003d`, 1) // encoding/json's
		case i%101 == 0:
			value = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 100)))
		}
		fmt.Fprintf(&lines, `{"partition":%d,"offset":%d,"key":"k%d","value_base64":"%s"}`+"\n", i%4, i, i, value)
	}
	path := filepath.Join(t.TempDir(), "rec.envelopes")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		offset int64
		key    string
		value  string
		size   int
	}
	// What Fetch returns, by partition, up to the bad line.
	want := map[int32][]rec{}
	e := NewEnvelopes([]string{path}, nil, -1, 64)
	for {
		r, err := e.Fetch(t.Context())
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("line %d is not a record", bad+1)) {
				t.Fatalf("Fetch: %v, want line %d named", err, bad+1)
			}
			break
		}
		want[r.Partition] = append(want[r.Partition], rec{r.Offset, string(r.Key), string(r.Value), r.Size})
	}
	if _, err := e.FetchBatch(t.Context()); err == nil {
		t.Error("FetchBatch after Fetch: no error")
	}
	e.Close()

	e = NewEnvelopes([]string{path}, nil, -1, 64)
	defer e.Close()
	got := map[int32][]rec{}
	var badErr error
	for {
		b, err := e.FetchBatch(t.Context())
		if err == connectors.ErrEndOfInput {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last, size := b.Last(), b.Len()
		if size == 0 || size > envBatchRecords {
			t.Fatalf("a batch of %d records", size)
		}
		recs, err := b.Records()
		if err != nil {
			if b.Partition() != bad%4 || badErr != nil {
				t.Fatalf("partition %d: %v", b.Partition(), err)
			}
			badErr = err
		} else if len(recs) != size || recs[len(recs)-1].Offset != last.Offset {
			t.Fatalf("%d records, the last at offset %d, Len %d, Last at %d", len(recs), recs[len(recs)-1].Offset, size, last.Offset)
		}
		for _, r := range recs {
			if r.Partition != b.Partition() || r.Lag != -1 {
				t.Fatalf("partition %d's batch: a record of partition %d, lag %d", b.Partition(), r.Partition, r.Lag)
			}
			if badErr != nil && r.Partition == bad%4 && r.Offset > bad {
				continue // after the bad record: the service has stopped there
			}
			got[r.Partition] = append(got[r.Partition], rec{r.Offset, string(r.Key), string(r.Value), r.Size})
		}
		b.Release()
	}
	if badErr == nil || !strings.Contains(badErr.Error(), fmt.Sprintf("rec.envelopes: line %d is not a record", bad+1)) {
		t.Errorf("the bad value: %v, want its line %d named", badErr, bad+1)
	}
	for p := range int32(4) {
		g, w := got[p], want[p]
		if p != bad%4 {
			g = g[:len(w)] // Fetch stopped at the bad line; FetchBatch read on
		}
		if len(g) != len(w) {
			t.Fatalf("partition %d: %d records, Fetch %d", p, len(g), len(w))
		}
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("partition %d, record %d: %+v, Fetch %+v", p, i, g[i], w[i])
			}
		}
	}
	if want[1][0].size != 0 || !strings.HasPrefix(want[1][25].value, "xxx") || want[1][25].size != 100 {
		t.Errorf("the oversized record: %+v, the first %+v", want[1][25], want[1][0])
	}
	for range 2 {
		if _, err := e.FetchBatch(t.Context()); err != connectors.ErrEndOfInput {
			t.Errorf("after the end: %v", err)
		}
	}
	if _, err := e.Fetch(t.Context()); err == nil {
		t.Error("Fetch after FetchBatch: no error")
	}

	// stdin whose writer pauses: the records of every partition read
	// before the pause come, in batches of their own.
	pr, pw := io.Pipe()
	defer pw.Close()
	e = NewEnvelopes([]string{"-"}, pr, -1, 1<<20)
	defer e.Close()
	go fmt.Fprint(pw, `{"partition":0,"offset":1,"value":{"a":1}}`+"\n"+`{"partition":1,"offset":5,"value_base64":"YQ=="}`+"\n"+`{"partition":0,"offset":2,"value":{"a":2}}`+"\n")
	seen := map[int32][]int64{}
	for range 2 {
		b, err := e.FetchBatch(t.Context())
		if err != nil {
			t.Fatalf("stdin: %v", err)
		}
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[r.Partition] = append(seen[r.Partition], r.Offset)
		}
		b.Release()
	}
	if fmt.Sprint(seen) != "map[0:[1 2] 1:[5]]" {
		t.Errorf("stdin before its pause: %v, want partition 0's offsets 1 and 2, partition 1's 5", seen)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.FetchBatch(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stdin paused: %v, want the context's deadline", err)
	}
	pw.Close()
	if _, err := e.FetchBatch(t.Context()); err != connectors.ErrEndOfInput {
		t.Fatalf("at stdin's end: %v", err)
	}
}
