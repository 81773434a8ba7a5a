package connectors

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// FileSink appends one message per line to a file, created on the first
// message so a sink that never fires leaves no file behind; an existing
// file is appended to, never truncated. Keys are not written. Flush
// fsyncs. It is safe for concurrent use.
type FileSink struct {
	path string
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	// lines counts the lines published; synced, those an fsync that
	// succeeded covered. syncErr is the first fsync's failure: after it
	// the kernel may have dropped the lines and marked them clean, and a
	// later fsync's success proves nothing, so every wait fails after it.
	lines, synced uint64
	syncErr       error
}

var (
	_ Sink        = (*FileSink)(nil)
	_ BarrierSink = (*FileSink)(nil)
)

// NewFileSink returns a sink appending to path.
func NewFileSink(path string) *FileSink { return &FileSink{path: path} }

// Publish appends value and a newline.
func (s *FileSink) Publish(_ context.Context, _, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	if _, err := s.w.Write(value); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	if err := s.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	s.lines++
	return nil
}

// Flush writes buffered lines to the file and makes them durable
// (fsync): what a commit of the positions they come from waits for.
func (s *FileSink) Flush(ctx context.Context) error { return s.Barrier()(ctx) }

// Barrier writes the buffered lines to the file and returns a function
// that makes them durable (fsync) without holding up the lines published
// meanwhile (BarrierSink). Once an fsync failed, every wait fails.
func (s *FileSink) Barrier() func(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.syncErr; err != nil {
		return func(context.Context) error { return err }
	}
	target := s.lines
	if s.synced >= target {
		return func(context.Context) error { return nil }
	}
	if err := s.w.Flush(); err != nil {
		err = fmt.Errorf("file sink %s: %w", s.path, err)
		return func(context.Context) error { return err }
	}
	f := s.f
	return func(context.Context) error {
		err := f.Sync()
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil && s.syncErr == nil {
			s.syncErr = fmt.Errorf("file sink %s: fsync: %w", s.path, err)
		}
		if s.syncErr != nil {
			return s.syncErr
		}
		s.synced = max(s.synced, target)
		return nil
	}
}

// Close flushes and closes the file.
func (s *FileSink) Close() error {
	err := s.Flush(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		err = errors.Join(err, s.f.Close())
		s.f, s.w = nil, nil
	}
	return err
}

// FileSource reads a JSONL file, one record per line, for `run` with
// source.kind file. Offsets are line numbers; Commit does nothing (a file
// is replayed from its start). It ends with ErrEndOfInput at the end of
// the file, unless Follow: then it waits for lines appended to it, as a
// stream, until its context ends (a line without its end is taken once
// the end is written), or until the file is truncated or its path names
// another file (rotation): Fetch then returns an error. Blank lines
// (nothing but spaces, tabs and carriage returns) are no records, as for
// `replay` (event.Reader), so that both count the same records.
//
// A line longer than MaxBytes is delivered as its first MaxBytes+1 bytes
// (the decoder, whose limit is the same, rejects it as oversized) and the
// rest of it is read and dropped: a file with a line of any length costs at
// most MaxBytes of memory.
type FileSource struct {
	// MaxBytes bounds a record (input.max_bytes); 0 means 1 MiB.
	MaxBytes int
	// Follow waits at the end of the file for more lines.
	Follow bool
	// NoRecord reports a line (without its end) that holds no record, which
	// Fetch skips; nil: a blank line (spaces, tabs, carriage returns).
	NoRecord func([]byte) bool

	path string
	f    *os.File
	r    *bufio.Reader
	line int64
	read int64 // bytes read from f
	buf  []byte
}

var _ Source = (*FileSource)(nil)

// NewFileSource opens path.
func NewFileSource(path string) (*FileSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	return &FileSource{path: path, f: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
}

// followPoll is how often a following file source looks for new lines.
const followPoll = 100 * time.Millisecond

// Fetch returns the next line that is not blank.
func (s *FileSource) Fetch(ctx context.Context) (Record, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
		s.buf = s.buf[:0]
		keep := s.MaxBytes + 1
		if s.MaxBytes <= 0 {
			keep = 1<<20 + 1
		}
		size := 0        // the line's length, its end included
		var tail [2]byte // its last two bytes
		cut := false     // bytes of it were dropped
		for {
			chunk, err := s.r.ReadSlice('\n')
			size += len(chunk)
			s.read += int64(len(chunk))
			for _, c := range chunk[max(0, len(chunk)-2):] {
				tail[0], tail[1] = tail[1], c
			}
			room := keep - len(s.buf)
			cut = cut || len(chunk) > room
			if room > 0 {
				s.buf = append(s.buf, chunk[:min(len(chunk), room)]...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF && s.Follow {
				// Wait for the writer: more of this line, or more lines.
				if err := s.sameFile(); err != nil {
					return Record{}, err
				}
				t := time.NewTimer(followPoll)
				select {
				case <-ctx.Done():
					t.Stop()
					return Record{}, ctx.Err()
				case <-t.C:
				}
				continue
			}
			if err == io.EOF && len(s.buf) > 0 {
				break
			}
			if err == io.EOF {
				return Record{}, ErrEndOfInput
			}
			if err != nil {
				return Record{}, fmt.Errorf("file source %s: %w", s.path, err)
			}
			break
		}
		s.line++
		v := s.buf
		for len(v) > 0 && (v[len(v)-1] == '\n' || v[len(v)-1] == '\r') {
			v = v[:len(v)-1]
		}
		if s.NoRecord != nil && !cut && s.NoRecord(v) || s.NoRecord == nil && blankLine(v) {
			continue
		}
		r := Record{Value: v, Offset: s.line, Lag: -1}
		// The record's length is the line's without its end; more than
		// Value holds when the line was cut.
		if tail[1] == '\n' {
			size--
			if tail[0] == '\r' {
				size--
			}
		}
		if cut && size > len(v) {
			r.Size = size
		}
		return r, nil
	}
}

// sameFile returns an error when the file a following source reads was
// truncated below what it read, or its path now names another file (a log
// rotation): its lines would no longer be numbered as the ones learned
// (positions, checkpoints), so the source stops rather than read on. A
// path removed and not (yet) replaced is no error: the open file is read
// on.
func (s *FileSource) sameFile() error {
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("file source %s: %w", s.path, err)
	}
	if fi.Size() < s.read {
		return fmt.Errorf("file source %s: the file was truncated to %d bytes after %d were read (line %d): its lines no longer follow the ones learned; a new file is read from its first line by a new run (with checkpoints, move them aside first: their positions are the old file's lines)",
			s.path, fi.Size(), s.read, s.line)
	}
	if now, err := os.Stat(s.path); err == nil && !os.SameFile(fi, now) {
		return fmt.Errorf("file source %s: the path names another file now (rotated or replaced) after line %d of the one read: its lines are not the ones learned; a new file is read from its first line by a new run (with checkpoints, move them aside first: their positions are the old file's lines)",
			s.path, s.line)
	}
	return nil
}

// Commit does nothing: files are not acknowledged.
func (s *FileSource) Commit(context.Context, Record) error { return nil }

// Name returns "file:PATH".
func (s *FileSource) Name() string { return "file:" + s.path }

// LineOffsets reports true: a record's offset is its line number, and
// messages name it as file:line (Lined).
func (s *FileSource) LineOffsets() bool { return true }

// Close closes the file.
func (s *FileSource) Close() error { return s.f.Close() }

// blankLine reports whether b holds only spaces, tabs and carriage returns
// (event.Reader's rule for JSONL).
func blankLine(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
