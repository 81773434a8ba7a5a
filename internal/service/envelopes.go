package service

import (
	"bufio"
	"context"
	"encoding/json"
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
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var env struct {
			Partition *int32          `json:"partition"`
			Offset    *int64          `json:"offset"`
			Key       string          `json:"key"`
			Value     json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(line, &env); err != nil || env.Partition == nil || env.Offset == nil || env.Value == nil {
			return connectors.Record{}, fmt.Errorf("%s: line %d is not a record of `record --envelope` ({\"partition\",\"offset\",\"key\",\"value\"})", e.name, e.line)
		}
		if e.partition >= 0 && *env.Partition != e.partition {
			continue
		}
		value := []byte(env.Value)
		if len(value) > 0 && value[0] == '"' {
			var s string
			if err := json.Unmarshal(value, &s); err == nil {
				value = []byte(s)
			}
		}
		e.buf = append(e.buf[:0], value...)
		return connectors.Record{Value: e.buf, Key: []byte(env.Key), Partition: *env.Partition, Offset: *env.Offset, Lag: -1}, nil
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
	e.sc.Buffer(make([]byte, 0, 64<<10), max(e.maxBytes, 64<<10)+1<<10)
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
