package connectors

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// FileSink appends one message per line to a regular file. The file is
// opened by Check (run checks its sinks before it opens its source) or by
// the first Publish: opening takes the file's lock, so that one process
// writes it (a second is refused with a *FileInUseError naming the
// holder), and removes a torn tail, the bytes after its last newline that
// a process killed in the middle of a write left (they held no line any
// commit counted on: a commit waits for a barrier, which writes and
// fsyncs whole lines only), so that no line is ever appended to a part of
// one. Lines are written whole: the buffer goes to the file at a line's
// end. An existing file is appended to, never truncated but for its torn
// tail. Keys are not written. Flush fsyncs. It is safe for concurrent use.
// A barrier (and so Flush) checks that the path still names the open file:
// once it was removed or renamed, the barrier fails, and every later one,
// and nothing more is written.
//
// The lock is an exclusive flock(2), released by the kernel when the
// process dies, on the file itself (whatever path names it) and on a lock
// file beside it, ".NAME.lock", which names its holder (FileHolder). Where
// flock(2) does not exist, only the sinks of one process exclude each
// other.
type FileSink struct {
	// Logger receives the warning that a torn tail was removed; nil:
	// slog.Default().
	Logger *slog.Logger
	// RemoveUnused makes Close remove the file when this sink made it
	// and published nothing to it, so that a sink opened at start to be
	// checked (replay's dead letters) leaves no empty file behind; and
	// its lock file, when this sink made that too.
	RemoveUnused bool

	path    string
	mu      sync.Mutex
	f       *os.File
	created bool // the open made the file
	// lockCreated: the open made the lock file too.
	lockCreated bool
	lock        *os.File // the lock file, holding its flock; nil where flock(2) does not exist
	buf         []byte   // whole lines not yet written
	// lines counts the lines published; synced, those an fsync that
	// succeeded covered. syncErr is the first fsync's failure: after it
	// the kernel may have dropped the lines and marked them clean, and a
	// later fsync's success proves nothing, so every wait fails after it.
	// writeErr is the first write's failure: part of a line may be in the
	// file, and nothing is written after it (the next open removes it).
	lines, synced     uint64
	syncErr, writeErr error
}

var (
	_ Sink        = (*FileSink)(nil)
	_ BarrierSink = (*FileSink)(nil)
	_ Checker     = (*FileSink)(nil)
)

// fileSinkBuffer is the size of a file sink's buffer: lines are written
// when it would overflow, a line longer than it in a write of its own.
const fileSinkBuffer = 64 << 10

// NewFileSink returns a sink appending to path. It opens nothing until
// Check or the first Publish.
func NewFileSink(path string) *FileSink { return &FileSink{path: path} }

// FileInUseError is the error of opening a file sink's file that another
// file sink holds, in this process or another.
type FileInUseError struct {
	Path string
	// Holder is what the holder wrote in the lock file (FileHolder), or,
	// for a file a sink of this process holds through another path,
	// this process and that sink's path; empty when it is not known (the
	// file was reached through another path than another process's, or
	// the holder has not written it yet).
	Holder string
	Lock   string // the lock file's path
}

func (e *FileInUseError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "another process (its lock file " + e.Lock + " does not name it: the file may be open through another path)"
	}
	return fmt.Sprintf("file sink %s: in use by %s: two writers appending to one file would interleave their lines; give each process, and each sink, its own path", e.Path, holder)
}

// FileHolder returns the line a file sink names its process with in its
// lock file: its pid, host and start.
func FileHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	return "pid " + strconv.Itoa(os.Getpid()) + " on " + host + " since " + processStart.Format(time.RFC3339)
}

var processStart = time.Now()

// SameFile reports whether the paths a and b name one file: the same file
// when both exist (whatever links lead to it), else the same absolute
// path once cleaned. A file sink given its own input's path would read
// back its lines as input, or append to what is being read.
func SameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

// lockPath returns the path of the lock file of the file sink at path.
func lockPath(path string) string {
	dir, name := filepath.Split(path)
	return filepath.Join(dir, "."+name+".lock")
}

// Check opens the file, as the first Publish would: it takes the lock,
// refusing a file another sink holds, and removes a torn tail. A run
// checks its sinks before it opens its source, so a refusal comes before
// anything is consumed.
func (s *FileSink) Check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open()
}

// open opens the file unless it is open; s.mu is held.
func (s *FileSink) open() error {
	if s.f != nil {
		return nil
	}
	if st, err := os.Stat(s.path); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("file sink %s: not a regular file (%v): a file sink appends to, fsyncs and locks a file", s.path, st.Mode().Type())
	}
	if dir := filepath.Dir(s.path); dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink %s: its folder %s does not exist (a file sink makes its file, not its folder)", s.path, dir)
		}
	}
	_, lockStatErr := os.Lstat(lockPath(s.path))
	lock, err := lockSinkFile(s.path)
	if err != nil {
		return err
	}
	_, statErr := os.Lstat(s.path) // under the lock: no other sink makes it meanwhile
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		unlockSinkFile(lock, s.path)
		return fmt.Errorf("file sink: %w", err)
	}
	created := errors.Is(statErr, os.ErrNotExist)
	lockCreated := created && errors.Is(lockStatErr, os.ErrNotExist)
	fail := func(err error) error {
		f.Close()
		unlockSinkFile(lock, s.path)
		return err
	}
	if st, err := f.Stat(); err != nil {
		return fail(fmt.Errorf("file sink %s: %w", s.path, err))
	} else if !st.Mode().IsRegular() {
		return fail(fmt.Errorf("file sink %s: not a regular file (%v): a file sink appends to, fsyncs and locks a file", s.path, st.Mode().Type()))
	}
	if err := lockOpenFile(f, s.path); err != nil {
		return fail(err)
	}
	torn, err := removeTornTail(f)
	if err != nil {
		unlockOpenFile(f) // it is this sink's lock that is given back
		return fail(fmt.Errorf("file sink %s: removing the torn tail: %w", s.path, err))
	}
	if torn > 0 {
		logger := s.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("file sink: removed a torn last line, the bytes after the file's last newline that a process stopped in the middle of a write left (no commit counted on them)",
			"path", s.path, "bytes", torn)
	}
	s.f, s.lock, s.writeErr, s.created, s.lockCreated = f, lock, nil, created, lockCreated
	return nil
}

// removeTornTail truncates f after its last newline (to nothing when it
// has none), fsyncing the truncation, and returns how many bytes went.
func removeTornTail(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	end := size // the length of the whole lines
	buf := make([]byte, 4096)
	for end > 0 {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = end - n + int64(i) + 1
			break
		}
		end -= n
	}
	if end == size {
		return 0, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, err
	}
	return size - end, f.Sync()
}

// Publish appends value and a newline.
func (s *FileSink) Publish(_ context.Context, _, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(); err != nil {
		return err
	}
	if len(s.buf)+len(value)+1 > fileSinkBuffer {
		if err := s.write(); err != nil {
			return err
		}
	}
	if len(value)+1 > fileSinkBuffer {
		// A line of its own, in one write.
		line := make([]byte, 0, len(value)+1)
		s.buf = append(append(line, value...), '\n')
		err := s.write()
		s.buf = nil
		if err != nil {
			return err
		}
	} else {
		if s.buf == nil {
			s.buf = make([]byte, 0, fileSinkBuffer)
		}
		s.buf = append(append(s.buf, value...), '\n')
	}
	s.lines++
	return nil
}

// write writes the buffered lines to the file; s.mu is held. After a
// failure nothing more is written (part of a line may be in the file:
// the next open removes it).
func (s *FileSink) write() error {
	if s.writeErr != nil {
		return s.writeErr
	}
	if len(s.buf) == 0 {
		return nil
	}
	if _, err := s.f.Write(s.buf); err != nil {
		s.writeErr = fmt.Errorf("file sink %s: %w", s.path, err)
		return s.writeErr
	}
	s.buf = s.buf[:0]
	return nil
}

// samePath checks that the sink's path still names its open file, once a
// barrier (not a line): a file removed or renamed (rm, logrotate's mv)
// under the process would take the lines no reader of the path sees, and
// a commit would count on them. After such a change nothing more is
// written, and every barrier fails; s.mu is held.
func (s *FileSink) samePath() error {
	if s.writeErr != nil {
		return s.writeErr
	}
	open, err := s.f.Stat()
	if err != nil {
		s.writeErr = fmt.Errorf("file sink %s: %w", s.path, err)
		return s.writeErr
	}
	now, err := os.Stat(s.path)
	if err == nil && os.SameFile(open, now) {
		return nil
	}
	what := "replaced by another file"
	if errors.Is(err, os.ErrNotExist) {
		what = "removed"
	} else if err != nil {
		what = "unreadable (" + err.Error() + ")"
	}
	lines := strconv.FormatUint(s.lines-s.synced, 10) + " lines published since the last commit are"
	if s.lines-s.synced == 1 {
		lines = "1 line published since the last commit is"
	}
	s.writeErr = fmt.Errorf("file sink %s: %s while the process was writing it: the %s not in the file it names (those written went to the old file); a file sink's file is not rotated under a running process: stop it first",
		s.path, what, lines)
	return s.writeErr
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
	if err := s.samePath(); err != nil {
		return func(context.Context) error { return err }
	}
	if err := s.write(); err != nil {
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

// Close flushes and closes the file, and releases its lock.
func (s *FileSink) Close() error {
	err := s.Flush(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		if s.RemoveUnused && s.created && s.lines == 0 {
			// Removed while the locks are held: no other sink has
			// opened the file, and the next one makes it anew. The lock
			// file goes too when this sink made it: a sink that opened
			// it meanwhile and locks it once released, and one that
			// makes a new one, still exclude each other by the lock of
			// the file itself.
			if open, serr := s.f.Stat(); serr == nil && open.Size() == 0 {
				if now, serr := os.Lstat(s.path); serr == nil && os.SameFile(open, now) {
					err = errors.Join(err, os.Remove(s.path))
					if s.lockCreated && s.lock != nil {
						lp := lockPath(s.path)
						if held, serr := s.lock.Stat(); serr == nil {
							if now, serr := os.Lstat(lp); serr == nil && os.SameFile(held, now) {
								err = errors.Join(err, os.Remove(lp))
							}
						}
					}
				}
			}
		}
		unlockOpenFile(s.f)
		err = errors.Join(err, s.f.Close())
		unlockSinkFile(s.lock, s.path)
		s.f, s.lock, s.buf = nil, nil, nil
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

// Traits reports Lined: a record's offset is its line number, and
// messages name it as file:line.
func (s *FileSource) Traits() Traits { return Traits{Lined: true} }

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

// firstLine returns b up to its first newline, at most 200 bytes.
func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return string(b[:min(len(b), 200)])
}
