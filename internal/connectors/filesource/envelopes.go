package filesource

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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

	// Fetch's: the batch whose records it returns, and the next one's
	// index; started once the reader runs.
	cur     *envBatch
	i       int
	started bool
	closed  bool
	// batches carries the reader's batches to Fetch, in order; free
	// brings them back; quit stops the reader, which closes done.
	batches, free chan *envBatch
	quit, done    chan struct{}

	// The reader goroutine's (read): the batch it fills, the files'
	// state.
	fb   *envBatch
	next int
	f    io.Closer
	sc   *bufio.Scanner
	line int64
	name string
	dec  []byte // a base64 value decoded by parse
}

// envBatch is records the reader read ahead: their keys and values are
// in buf. err, after the last of them, ends the input (ErrEndOfInput, or
// what made the reader stop).
type envBatch struct {
	recs  []connectors.Record
	spans []envSpan // of recs' keys and values in buf, while it grows
	buf   []byte
	err   error
}

type envSpan struct{ key, value, end int }

// Read-ahead: a batch ends at envBatchRecords records or envBatchBytes of
// keys and values, and at most envBatches are between the reader and
// Fetch. A batch is handed over before any read of the file too (every
// 64 KiB of a file; at once when stdin, a pipe, has nothing more yet),
// and when a file ends.
const (
	envBatchRecords = 256
	envBatchBytes   = 256 << 10
	envBatches      = 4
)

// NewEnvelopes returns a source of the envelope files names ("-" is
// stdin), of partition only when partition ≥ 0; a line longer than
// maxBytes is an error.
func NewEnvelopes(names []string, stdin io.Reader, partition int32, maxBytes int) *Envelopes {
	return &Envelopes{names: names, stdin: stdin, partition: partition, maxBytes: maxBytes}
}

// Fetch returns the next record of the partition. The records are read
// and parsed ahead, on a goroutine of the source's own (a few batches of
// them), so that the goroutine that fetches only takes them: a replay of
// a recording of several partitions then has a core for its workers
// beside the reading. Fetch waits for the reader until ctx is done.
func (e *Envelopes) Fetch(ctx context.Context) (connectors.Record, error) {
	if err := ctx.Err(); err != nil {
		return connectors.Record{}, err
	}
	for e.cur == nil || e.i == len(e.cur.recs) {
		if e.cur != nil {
			if e.cur.err != nil {
				return connectors.Record{}, e.cur.err
			}
			e.free <- e.cur // never blocks: it holds every batch
			e.cur = nil
		}
		if !e.started {
			e.start()
		}
		select {
		case e.cur = <-e.batches:
		default:
			select {
			case e.cur = <-e.batches:
			case <-ctx.Done():
				return connectors.Record{}, ctx.Err()
			}
		}
		e.i = 0
	}
	e.i++
	return e.cur.recs[e.i-1], nil
}

// start starts the reader.
func (e *Envelopes) start() {
	e.started = true
	e.batches = make(chan *envBatch, envBatches)
	e.free = make(chan *envBatch, envBatches+1)
	for range envBatches + 1 {
		e.free <- &envBatch{buf: make([]byte, 0, 64<<10)}
	}
	e.quit, e.done = make(chan struct{}), make(chan struct{})
	go e.read()
}

// read fills batches from the files until the input ends, it fails or
// Close stops it.
func (e *Envelopes) read() {
	defer close(e.done)
	defer e.closeFile()
	if !e.take() {
		return
	}
	for {
		err := e.fill()
		if e.fb == nil { // stopped by Close in a read (aheadReader)
			return
		}
		e.fb.err = err
		if !e.hand() || err != nil || !e.take() {
			return
		}
	}
}

// take makes an emptied batch the one read fills; false once Close
// stopped the reader.
func (e *Envelopes) take() bool {
	select {
	case e.fb = <-e.free:
		e.fb.recs, e.fb.spans, e.fb.buf = e.fb.recs[:0], e.fb.spans[:0], e.fb.buf[:0]
		return true
	case <-e.quit:
		return false
	}
}

// hand hands the batch read fills over to Fetch; false once Close
// stopped the reader.
func (e *Envelopes) hand() bool {
	b := e.fb
	for i, s := range b.spans {
		b.recs[i].Key, b.recs[i].Value = b.buf[s.key:s.value:s.value], b.buf[s.value:s.end:s.end]
	}
	e.fb = nil
	select {
	case e.batches <- b:
		return true
	case <-e.quit:
		return false
	}
}

// errStopped is the read of a reader Close stopped.
var errStopped = errors.New("the source was closed")

// aheadReader is a file as read reads it: a read that may wait for its
// writer (a pipe) comes after the records read before are handed over.
type aheadReader struct {
	e *Envelopes
	r io.Reader
}

func (a aheadReader) Read(p []byte) (int, error) {
	if e := a.e; len(e.fb.recs) > 0 && (!e.hand() || !e.take()) {
		return 0, errStopped
	}
	return a.r.Read(p)
}

// fill reads records into read's batch until it is full or a file ends;
// its error ends the input.
func (e *Envelopes) fill() error {
	for len(e.fb.recs) < envBatchRecords && len(e.fb.buf) < envBatchBytes {
		if e.sc == nil {
			if len(e.fb.recs) > 0 {
				return nil // the next file is opened for the next batch
			}
			if e.next == len(e.names) {
				return connectors.ErrEndOfInput
			}
			if err := e.open(e.names[e.next]); err != nil {
				return err
			}
			e.next++
		}
		if !e.sc.Scan() {
			err := e.sc.Err()
			e.closeFile()
			if err != nil {
				return fmt.Errorf("%s: line %d: %w", e.name, e.line+1, err)
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
				return fmt.Errorf("%s: line %d is not a record of `record --envelope` ({\"partition\",\"offset\",\"key\",\"value\" or \"value_base64\"})", e.name, e.line)
			}
		}
		if e.partition >= 0 && env.partition != e.partition {
			continue
		}
		value := env.value
		r := connectors.Record{Partition: env.partition, Offset: env.offset, Lag: -1}
		if max := e.maxBytes; max > 0 && len(value) > max {
			// As a broker source hands over an oversized record: its start,
			// and its size, for the decoder to reject.
			r.Size, value = len(value), value[:max+1]
		}
		b := e.fb
		s := envSpan{key: len(b.buf)}
		b.buf = append(b.buf, env.key...)
		s.value = len(b.buf)
		b.buf = append(b.buf, value...)
		s.end = len(b.buf)
		b.recs, b.spans = append(b.recs, r), append(b.spans, s)
	}
	return nil
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
	e.sc = bufio.NewScanner(aheadReader{e, in})
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

// Close stops the reader and closes the file it reads; a reader blocked
// on stdin (a pipe whose writer waits) is left to end with its input or
// the process.
func (e *Envelopes) Close() error {
	if !e.started || e.closed {
		return nil
	}
	e.closed = true
	close(e.quit)
	if !slices.Contains(e.names, "-") {
		<-e.done
	}
	return nil
}

var _ connectors.Source = (*Envelopes)(nil)
