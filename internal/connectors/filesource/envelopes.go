package filesource

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/streamlearn/streamlearn/internal/connectors"
)

// Envelopes is the source `replay --envelope` runs the service on: files
// written by `record --envelope`, one {"partition","offset","key","value"}
// object a line, read one after the other. Each record keeps its
// partition, offset and key, so the service keeps a model per partition
// and decodes each value as it decoded the broker's record: a replay of a
// recording is the live run, partition by partition. A value recorded as
// a JSON string (a record that was not JSON: a TSV or LIBSVM line) is
// that string. With a partition filter, the other partitions' records are
// skipped. A line that is not an envelope stops the replay with an error
// naming it.
type Envelopes struct {
	names     []string
	stdin     io.Reader
	partition int32 // -1: every partition
	maxBytes  int

	next int
	f    io.Closer
	sc   *bufio.Scanner
	line int64
	name string
	buf  []byte
	dec  []byte // a base64 value decoded by parse
}

// NewEnvelopes returns a source of the envelope files names ("-" is
// stdin), of partition only when partition ≥ 0; a line longer than
// maxBytes is an error.
func NewEnvelopes(names []string, stdin io.Reader, partition int32, maxBytes int) *Envelopes {
	return &Envelopes{names: names, stdin: stdin, partition: partition, maxBytes: maxBytes}
}

// Fetch returns the next record of the partition.
func (e *Envelopes) Fetch(ctx context.Context) (connectors.Record, error) {
	for {
		if err := ctx.Err(); err != nil {
			return connectors.Record{}, err
		}
		if e.sc == nil {
			if e.next == len(e.names) {
				return connectors.Record{}, connectors.ErrEndOfInput
			}
			if err := e.open(e.names[e.next]); err != nil {
				return connectors.Record{}, err
			}
			e.next++
		}
		if !e.sc.Scan() {
			err := e.sc.Err()
			e.closeFile()
			if err != nil {
				return connectors.Record{}, fmt.Errorf("%s: line %d: %w", e.name, e.line+1, err)
			}
			continue
		}
		e.line++
		line := e.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		env, ok := e.parse(line)
		if !ok {
			var err error
			if env, err = parseEnvelopeJSON(line); err != nil {
				return connectors.Record{}, fmt.Errorf("%s: line %d is not a record of `record --envelope` ({\"partition\",\"offset\",\"key\",\"value\" or \"value_base64\"})", e.name, e.line)
			}
		}
		if e.partition >= 0 && env.partition != e.partition {
			continue
		}
		value := env.value
		r := connectors.Record{Key: env.key, Partition: env.partition, Offset: env.offset, Lag: -1}
		if max := e.maxBytes; max > 0 && len(value) > max {
			// As a broker source hands over an oversized record: its start,
			// and its size, for the decoder to reject.
			r.Size, value = len(value), value[:max+1]
		}
		e.buf = append(e.buf[:0], value...)
		r.Value = e.buf
		return r, nil
	}
}

func (e *Envelopes) open(name string) error {
	var in io.Reader
	if name == "-" {
		in, e.name = e.stdin, "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		in, e.f, e.name = f, f, name
	}
	e.sc = bufio.NewScanner(in)
	// A line holds its value as JSON or as base64 (4/3 of its bytes) beside
	// a few fields: twice the record limit is room for any record the
	// broker could hold; a longer one is reported as oversized above.
	e.sc.Buffer(make([]byte, 0, 64<<10), 2*max(e.maxBytes, 1<<20)+64<<10)
	e.line = 0
	return nil
}

func (e *Envelopes) closeFile() {
	e.sc = nil
	if e.f != nil {
		e.f.Close()
		e.f = nil
	}
}

// Commit does nothing: files are read from their start.
func (e *Envelopes) Commit(context.Context, connectors.Record) error { return nil }

// Name returns "envelopes:" and the names, comma-separated.
func (e *Envelopes) Name() string { return "envelopes:" + strings.Join(e.names, ",") }

// Close closes the file being read.
func (e *Envelopes) Close() error {
	e.closeFile()
	return nil
}

var _ connectors.Source = (*Envelopes)(nil)
