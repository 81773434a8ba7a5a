package filesource

import (
	"context"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/event"
)

// A Framed source reads inputs that say their own format (files of JSONL,
// LIBSVM, CSV or TSV records): the workers decode its records with the
// decoder of the input they come from, rather than with the JSON decoder
// of broker records.
type Framed interface {
	connectors.Source
	// Input returns the number of the input the record Fetch returned
	// last comes from: it changes when Fetch moves to the next input.
	Input() int
	// Decoder returns a new decoder of that input's records.
	Decoder() *event.RecordDecoder
}

// Files is the source `replay` runs the service on: files read one after
// the other as one partition, each in its own format (the configured one,
// or the one inferred from its name and first line; CSV with its header),
// gzip-compressed or not, through event.Reader's bounded record reader.
// Offsets are the line where a record starts in its file. "-" is standard
// input. Commit does nothing; Fetch returns ErrEndOfInput after the last
// file.
type Files struct {
	names []string
	cfg   event.Config
	stdin io.Reader

	next  int // index in names of the next file to open
	f     io.Closer
	r     *event.Reader
	input int
	count int // records fetched, for the cancellation check

	// read counts the bytes read from the files so far (compressed ones
	// as they are on disk); total is their size, -1 when unknown (stdin).
	read  atomic.Int64
	total int64

	// waited is the time spent in reads of standard input and other
	// inputs that are not regular files (pipes), which block until their
	// writer writes: waiting, not learning (Blocked).
	waited time.Duration
}

var (
	_ Framed                = (*Files)(nil)
	_ connectors.Progresser = (*Files)(nil)
)

// NewFiles returns a source of names, decoded with cfg; stdin is read for
// "-".
func NewFiles(names []string, cfg event.Config, stdin io.Reader) *Files {
	fs := &Files{names: names, cfg: cfg, stdin: stdin}
	for _, n := range names {
		st, err := os.Stat(n)
		if n == "-" || err != nil || !st.Mode().IsRegular() {
			fs.total = -1
			break
		}
		fs.total += st.Size()
	}
	return fs
}

// Progress returns the bytes read from the files so far and their total
// size (-1 when unknown: standard input, a pipe); safe to call from any
// goroutine.
func (fs *Files) Progress() (read, total int64) { return fs.read.Load(), fs.total }

// counting counts what is read through it into n.
type counting struct {
	r io.Reader
	n *atomic.Int64
}

func (c counting) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// timed adds the time spent in its reads to *d: one clock reading before
// and one after a read of up to the record reader's buffer, none per
// record.
type timed struct {
	r io.Reader
	d *time.Duration
}

func (t timed) Read(p []byte) (int, error) {
	start := time.Now()
	k, err := t.r.Read(p)
	*t.d += time.Since(start)
	return k, err
}

// Blocked returns the total time Fetch spent reading standard input and
// pipes: waiting for their writer, not learning. It reads no clock, so a
// caller may call it at every one of its own clock readings; like Fetch,
// it is for the goroutine that fetches.
func (fs *Files) Blocked() time.Duration { return fs.waited }

// Fetch returns the next record.
func (fs *Files) Fetch(ctx context.Context) (connectors.Record, error) {
	if fs.count++; fs.count&0xfff == 0 {
		if err := ctx.Err(); err != nil {
			return connectors.Record{}, err
		}
	}
	for {
		if fs.r == nil {
			if fs.next == len(fs.names) {
				return connectors.Record{}, connectors.ErrEndOfInput
			}
			if err := fs.open(fs.names[fs.next]); err != nil {
				return connectors.Record{}, err
			}
			fs.next++
		}
		raw, line, size, err := fs.r.NextRecord()
		if err == io.EOF {
			if err := fs.closeFile(); err != nil {
				return connectors.Record{}, err
			}
			continue
		}
		if err != nil {
			return connectors.Record{}, err
		}
		return connectors.Record{Value: raw, Offset: line, Lag: -1, Size: size}, nil
	}
}

func (fs *Files) open(name string) error {
	var in io.Reader
	if name == "-" {
		in, name = timed{fs.stdin, &fs.waited}, "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		in, fs.f = counting{f, &fs.read}, f
		if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
			in = timed{in, &fs.waited} // a named pipe, /dev/stdin
		}
	}
	r, err := event.NewReader(in, name, fs.cfg)
	if err != nil {
		fs.closeFile()
		return err
	}
	fs.r = r
	fs.input++
	return nil
}

func (fs *Files) closeFile() error {
	fs.r = nil
	if fs.f == nil {
		return nil
	}
	err := fs.f.Close()
	fs.f = nil
	return err
}

// Input returns the number of the file being read, from 1.
func (fs *Files) Input() int { return fs.input }

// Decoder returns a decoder of the records of the file being read.
func (fs *Files) Decoder() *event.RecordDecoder { return fs.r.Decoder() }

// Commit does nothing: files are read from their start.
func (fs *Files) Commit(context.Context, connectors.Record) error { return nil }

// Name returns "file:" and the names, comma-separated.
func (fs *Files) Name() string { return "file:" + strings.Join(fs.names, ",") }

// Close closes the file being read.
func (fs *Files) Close() error { return fs.closeFile() }
