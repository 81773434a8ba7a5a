package filesource

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
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
// naming it. Read by FetchBatch, the source hands over the records of
// each partition in batches of their own, the base64 of their values
// decoded by the goroutine that learns them (Batch.Records), which then
// finds a value that is not base64.
type Envelopes struct {
	names     []string
	stdin     io.Reader
	partition int32 // -1: every partition
	maxBytes  int

	// Fetch's and FetchBatch's: the batch whose records Fetch returns,
	// and the next one's index; started once the reader runs; batched
	// when FetchBatch started it; err, the input's end FetchBatch met.
	cur     *Batch
	i       int
	started bool
	batched bool
	closed  bool
	err     error
	// batches carries the reader's batches to Fetch, in order; free
	// brings them back; quit stops the reader, which closes done.
	batches, free chan *Batch
	quit, done    chan struct{}

	// The reader goroutine's (read): the batches it fills (one of
	// every partition when batched, else one of all), in the order they
	// were begun, and the records in them; the files' state.
	parts   []*Batch
	pending int
	next    int
	f       io.Closer
	sc      *bufio.Scanner
	stdinIn bool // sc reads stdin: a read may wait for its writer
	line    int64
	name    string
	dec     []byte // a base64 value decoded by parse
}

// Batch is records of one partition that Envelopes read ahead and
// FetchBatch returns, in the order of the files. Its records are valid
// until Release. The base64 of its values is decoded by Records, on the
// goroutine that calls it (the one that learns them), not by the reader.
type Batch struct {
	e     *Envelopes
	part  int32
	spans []envSpan // the records as read: their keys and values in buf
	recs  []connectors.Record
	buf   []byte
	dec   []byte // the values decoded from base64 (Records)
	name  string // the file the records come from
	// decLen is the room the base64 values take decoded; 0 once decoded
	// (or when none is).
	decLen int
	// err, after the last of the records, ends the input
	// (ErrEndOfInput, or what made the reader stop); bad is Records'
	// error.
	err, bad error
}

// envSpan is a record as the reader read it: its position, where its
// key and value are in its batch's buf and, of a value still in base64
// (b64), also its line (from lineStart to the value's end and `"}`) and
// the line's number.
type envSpan struct {
	partition    int32
	b64          bool
	offset, line int64
	key, keyEnd  int
	value, end   int
	lineStart    int
}

// Read-ahead: a batch ends at envBatchRecords records or envBatchBytes of
// keys and values (of lines, for FetchBatch), and at most envBatches are
// between the reader and Fetch. Every batch begun is handed over before
// a read of stdin (a pipe, whose writer may pause), when a file ends,
// and, for FetchBatch, once envPending records wait in the batches of
// the partitions.
const (
	envBatchRecords = 256
	envBatchBytes   = 256 << 10
	envBatches      = 4
	envPending      = 4 * envBatchRecords
)

// NewEnvelopes returns a source of the envelope files names ("-" is
// stdin), of partition only when partition ≥ 0; a line longer than
// maxBytes is an error.
func NewEnvelopes(names []string, stdin io.Reader, partition int32, maxBytes int) *Envelopes {
	return &Envelopes{names: names, stdin: stdin, partition: partition, maxBytes: maxBytes}
}

// errMixed is a Fetch after FetchBatch, or the other way around.
var errMixed = errors.New("filesource: envelopes: Fetch and FetchBatch on one source")

// Fetch returns the next record of the partition. The records are read
// and parsed ahead, on a goroutine of the source's own (a few batches of
// them), so that the goroutine that fetches only takes them: a replay of
// a recording of several partitions then has a core for its workers
// beside the reading. Fetch waits for the reader until ctx is done. A
// source is read by Fetch or by FetchBatch, not both.
func (e *Envelopes) Fetch(ctx context.Context) (connectors.Record, error) {
	if err := ctx.Err(); err != nil {
		return connectors.Record{}, err
	}
	if e.batched {
		return connectors.Record{}, errMixed
	}
	for e.cur == nil || e.i == len(e.cur.recs) {
		if e.cur != nil {
			if e.cur.err != nil {
				return connectors.Record{}, e.cur.err
			}
			e.cur.Release()
			e.cur = nil
		}
		if !e.started {
			e.start()
		}
		var err error
		if e.cur, err = e.receive(ctx); err != nil {
			return connectors.Record{}, err
		}
		e.i = 0
	}
	e.i++
	return e.cur.recs[e.i-1], nil
}

// FetchBatch returns the next records of one partition (at most a few
// hundred, in the order of the files), read ahead as Fetch's are, or the
// error that ends the input (ErrEndOfInput at its end), after every
// record before it, at this call and every one after. The records of
// different partitions come in different batches, each in its
// partition's order; the order of two partitions' records is not the
// files'. The caller gives each batch back (Release) once it is done
// with its records. FetchBatch waits for the reader until ctx is done. A
// source is read by Fetch or by FetchBatch, not both.
func (e *Envelopes) FetchBatch(ctx context.Context) (connectors.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !e.started {
		e.batched = true
		e.start()
	}
	switch {
	case !e.batched:
		return nil, errMixed
	case e.err != nil:
		return nil, e.err
	}
	b, err := e.receive(ctx)
	if err != nil {
		return nil, err
	}
	if b.err != nil { // a batch of its own, without records
		e.err = b.err
		b.Release()
		return nil, e.err
	}
	return b, nil
}

// receive returns the reader's next batch, waiting until ctx is done.
func (e *Envelopes) receive(ctx context.Context) (*Batch, error) {
	select {
	case b := <-e.batches:
		return b, nil
	default:
		select {
		case b := <-e.batches:
			return b, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Partition returns the partition of the batch's records.
func (b *Batch) Partition() int32 { return b.part }

// Len returns the number of the batch's records.
func (b *Batch) Len() int { return len(b.spans) }

// Last returns the batch's last record without its key and value (its
// partition, offset and lag: a position).
func (b *Batch) Last() connectors.Record {
	s := &b.spans[len(b.spans)-1]
	return connectors.Record{Partition: s.partition, Offset: s.offset, Lag: -1}
}

// Records returns the batch's records, in order, their values decoded
// (the first call decodes the base64 ones). A value whose base64 does
// not decode makes its line not an envelope: Records then returns the
// records before it, and the error that names the line, which Fetch
// would have returned after them.
func (b *Batch) Records() ([]connectors.Record, error) {
	if b.decLen > 0 {
		b.dec = slices.Grow(b.dec[:0], b.decLen)
		b.decLen = 0
	}
	b.recs = slices.Grow(b.recs, len(b.spans)-len(b.recs))
	for i := len(b.recs); i < len(b.spans); i++ {
		s := &b.spans[i]
		r := connectors.Record{Partition: s.partition, Offset: s.offset, Lag: -1, Key: b.buf[s.key:s.keyEnd:s.keyEnd]}
		value := b.buf[s.value:s.end:s.end]
		if s.b64 {
			start := len(b.dec)
			if n, err := base64.StdEncoding.Decode(b.dec[start:cap(b.dec)], value); err == nil {
				b.dec = b.dec[:start+n]
				value = b.dec[start : start+n : start+n]
			} else {
				// As the reader does with a line parse leaves (the line
				// ends with the value's quote and a brace).
				env, err := parseEnvelopeJSON(b.buf[s.lineStart : s.end+2])
				if err != nil {
					b.spans, b.bad = b.spans[:i], b.e.notEnvelope(b.name, s.line)
					break
				}
				value = env.value
			}
		}
		if max := b.e.maxBytes; max > 0 && len(value) > max {
			// As a broker source hands over an oversized record: its start,
			// and its size, for the decoder to reject.
			r.Size, value = len(value), value[:max+1]
		}
		r.Value = value
		b.recs = append(b.recs, r)
	}
	return b.recs, b.bad
}

// Release gives the batch back to its source, which reads into it again:
// its records are not valid after.
func (b *Batch) Release() {
	clear(b.recs)
	b.recs, b.spans, b.buf, b.dec, b.decLen, b.err, b.bad = b.recs[:0], b.spans[:0], b.buf[:0], b.dec[:0], 0, nil, nil
	select {
	case b.e.free <- b:
	default: // enough kept
	}
}

// notEnvelope is the error of line of file name, which is not an
// envelope.
func (e *Envelopes) notEnvelope(name string, line int64) error {
	return fmt.Errorf("%s: line %d is not a record of `record --envelope` ({\"partition\",\"offset\",\"key\",\"value\" or \"value_base64\"})", name, line)
}

// start starts the reader.
func (e *Envelopes) start() {
	e.started = true
	e.batches = make(chan *Batch, envBatches)
	// Room for every batch a replay has at once: in the reader, between
	// it and Fetch and, handed over as they are, in the workers' queues.
	e.free = make(chan *Batch, 64)
	e.quit, e.done = make(chan struct{}), make(chan struct{})
	go e.read()
}

// read reads the files until the input ends, it fails or Close stops
// it, and hands over the batches it fills, then the error that ended
// the input.
func (e *Envelopes) read() {
	defer close(e.done)
	defer e.closeFile()
	err := e.fill()
	if errors.Is(err, errStopped) {
		return
	}
	if !e.batched && len(e.parts) > 0 {
		// Fetch's: on the last batch, after its records.
		e.parts[0].err = err
		e.handAll()
		return
	}
	if !e.handAll() {
		return
	}
	b := e.take(-1)
	b.err = err
	e.hand(b)
}

// take returns an emptied batch of partition (a recycled one, or a new
// one).
func (e *Envelopes) take(partition int32) *Batch {
	var b *Batch
	select {
	case b = <-e.free:
	default:
		b = &Batch{e: e, spans: make([]envSpan, 0, envBatchRecords), buf: make([]byte, 0, 64<<10)}
	}
	b.part, b.name = partition, e.name
	return b
}

// hand hands b over to Fetch; false once Close stopped the reader.
func (e *Envelopes) hand(b *Batch) bool {
	if !e.batched {
		b.Records() // Fetch's values are decoded already (parse): nothing fails
	}
	select {
	case e.batches <- b:
		return true
	case <-e.quit:
		return false
	}
}

// handAll hands over every batch being filled; false once Close stopped
// the reader.
func (e *Envelopes) handAll() bool {
	for i, b := range e.parts {
		if !e.hand(b) {
			clear(e.parts)
			e.parts = e.parts[:0]
			return false
		}
		e.parts[i] = nil
	}
	e.parts, e.pending = e.parts[:0], 0
	return true
}

// batchOf returns the batch the reader fills with a record of
// partition: Fetch's one batch, or the partition's.
func (e *Envelopes) batchOf(partition int32) *Batch {
	for _, b := range e.parts {
		if b.part == partition || !e.batched {
			return b
		}
	}
	b := e.take(partition)
	e.parts = append(e.parts, b)
	return b
}

// due hands over b, a batch being filled, when it is full (and, for
// FetchBatch, every batch once envPending records wait); false once
// Close stopped the reader.
func (e *Envelopes) due(b *Batch) bool {
	if e.pending++; len(b.spans) < envBatchRecords && len(b.buf) < envBatchBytes {
		if e.pending < envPending || !e.batched {
			return true
		}
		return e.handAll()
	}
	i := slices.Index(e.parts, b)
	e.parts = slices.Delete(e.parts, i, i+1)
	e.pending -= len(b.spans)
	return e.hand(b)
}

// errStopped is the read of a reader Close stopped.
var errStopped = errors.New("the source was closed")

// aheadReader is a file as read reads it: a read of stdin, which may
// wait for its writer (a pipe), comes after the records read before are
// handed over.
type aheadReader struct {
	e *Envelopes
	r io.Reader
}

func (a aheadReader) Read(p []byte) (int, error) {
	if e := a.e; e.stdinIn && !e.handAll() {
		return 0, errStopped
	}
	return a.r.Read(p)
}

// fill reads records into the batches until the input ends (its error:
// ErrEndOfInput then) or Close stops the reader (errStopped), handing
// over the batches that are due.
func (e *Envelopes) fill() error {
	for {
		if e.sc == nil {
			// What was read of a file is handed over when it ends: a batch
			// names the one file its records come from.
			if !e.handAll() {
				return errStopped
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
			if errors.Is(err, errStopped) {
				return err
			}
			if err != nil {
				err = fmt.Errorf("%s: line %d: %w", e.name, e.line+1, err)
				e.closeFile()
				return err
			}
			e.closeFile()
			continue
		}
		e.line++
		line := e.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var env envelope
		var b64, ok bool
		if e.batched {
			env, b64, ok = frame(line) // the base64 is decoded by Records
		} else {
			env, ok = e.parse(line)
		}
		if !ok {
			var err error
			if env, err = parseEnvelopeJSON(line); err != nil {
				return e.notEnvelope(e.name, e.line)
			}
		}
		if e.partition >= 0 && env.partition != e.partition {
			continue
		}
		b := e.batchOf(env.partition)
		s := envSpan{partition: env.partition, b64: b64, offset: env.offset, line: e.line, key: len(b.buf)}
		if b64 {
			// The line, whose key and base64 value are in it.
			s.lineStart = len(b.buf)
			b.buf = append(b.buf, line...)
			s.key += cap(line) - cap(env.key)
			s.keyEnd = s.key + len(env.key)
			s.value = s.lineStart + cap(line) - cap(env.value)
			s.end = s.value + len(env.value)
			b.decLen += base64.StdEncoding.DecodedLen(len(env.value))
		} else {
			b.buf = append(b.buf, env.key...)
			s.keyEnd, s.value = len(b.buf), len(b.buf)
			b.buf = append(b.buf, env.value...)
			s.end = len(b.buf)
		}
		b.spans = append(b.spans, s)
		if !e.due(b) {
			return errStopped
		}
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
	e.sc, e.stdinIn = bufio.NewScanner(aheadReader{e, in}), name == "-"
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
