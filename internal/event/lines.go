package event

import (
	"bytes"
	"io"
)

// minBuffer is the initial read buffer of a Reader.
const minBuffer = 64 << 10

// lineReader splits a stream into lines with one buffer that grows to at
// most MaxBytes plus a little: a longer line is reported as oversized with
// its first max bytes, and the rest of it is read and dropped.
type lineReader struct {
	src  io.Reader
	buf  []byte
	r, w int   // unread bytes: buf[r:w]
	scan int   // bytes of buf[r:w] known to hold no '\n'
	err  error // sticky error from src (io.EOF at the end)
	max  int
	over []byte // first max bytes of the last oversized line
	size int    // the length of the last oversized line, its end excluded
	line int64  // number of the line last returned (1-based)
}

// readLine returns the next line without its "\n" or "\r\n". The slice is
// valid until the next call. A line longer than max is returned truncated
// to max bytes with oversized set. At the end it returns io.EOF, or the
// error of the underlying reader.
func (l *lineReader) readLine() (line []byte, oversized bool, err error) {
	for {
		if i := bytes.IndexByte(l.buf[l.r+l.scan:l.w], '\n'); i >= 0 {
			end := l.r + l.scan + i
			line = l.buf[l.r:end]
			l.r, l.scan = end+1, 0
			return l.ret(line)
		}
		l.scan = l.w - l.r
		if l.w-l.r > l.max+1 { // too long even if it ends in "\r\n"
			l.over = append(l.over[:0], l.buf[l.r:l.r+l.max]...)
			l.size = l.w - l.r
			l.r, l.scan = l.w, 0
			l.size += l.discard()
			l.line++
			return l.over, true, nil
		}
		if l.err != nil {
			if l.r < l.w { // a last line without a terminator
				line = l.buf[l.r:l.w]
				l.r, l.scan = l.w, 0
				return l.ret(line)
			}
			return nil, false, l.err
		}
		l.fill()
	}
}

func (l *lineReader) ret(line []byte) ([]byte, bool, error) {
	l.line++
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > l.max {
		l.size = len(line)
		return line[:l.max], true, nil
	}
	return line, false, nil
}

// fill reads more input, first moving unread bytes to the front of the
// buffer and growing it if it is full.
func (l *lineReader) fill() {
	if l.r > 0 {
		l.w = copy(l.buf, l.buf[l.r:l.w])
		l.r = 0
	}
	if l.w == len(l.buf) {
		n := max(2*len(l.buf), minBuffer)
		n = min(n, max(l.max+2, minBuffer))
		if n > len(l.buf) {
			b := make([]byte, n)
			copy(b, l.buf[:l.w])
			l.buf = b
		}
	}
	for tries := 0; tries < 100; tries++ {
		n, err := l.src.Read(l.buf[l.w:])
		l.w += n
		if err != nil {
			l.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	l.err = io.ErrNoProgress
}

// discard drops input up to and including the next '\n' and returns how
// many bytes it dropped before it (a "\r" before it excluded).
func (l *lineReader) discard() int {
	n := 0
	var last byte
	for {
		if i := bytes.IndexByte(l.buf[l.r:l.w], '\n'); i >= 0 {
			n += i
			if i > 0 {
				last = l.buf[l.r+i-1]
			}
			if last == '\r' {
				n--
			}
			l.r += i + 1
			return n
		}
		n += l.w - l.r
		if l.w > l.r {
			last = l.buf[l.w-1]
		}
		l.r, l.w = 0, 0
		if l.err != nil {
			return n
		}
		l.fill()
	}
}
