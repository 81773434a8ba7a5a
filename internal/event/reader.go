package event

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/streamlearn/streamlearn/internal/online"
)

// bom is the UTF-8 byte order mark, dropped from the start of an input.
const bom = "\xef\xbb\xbf"

// A Reader reads events from a file stream of records in one of the
// formats: JSONL, LIBSVM, CSV or TSV, gzip-compressed or not. It allocates
// nothing per record in steady state. A Reader is not safe for concurrent
// use.
type Reader struct {
	name   string
	s      settings
	format Format
	lr     lineReader
	p      jsonParser // JSON records, and the tokenizer and canonicalizer of all formats
	raw    []byte
	rawNo  int64  // line where the record last returned starts
	rec    []byte // a CSV record spanning lines
	fatal  error

	pending  bool // the first line was read by NewReader and not yet returned
	pendLine []byte
	pendOver bool
	pendNo   int64

	cols       []csvColumn // CSV columns
	labelCol   int         // CSV label column
	fbuf, cbuf []byte      // CSV unescaped field, categorical name
}

// csvColumn is a CSV column: its name, the slot of its numeric values and
// the "name=" prefix of its categorical values.
type csvColumn struct {
	name   string
	slot   uint32
	prefix []byte
}

// NewReader returns a Reader of the records in r; name names the input in
// errors and guides format inference. Gzip input (magic bytes 1f 8b) is
// decompressed transparently. When cfg.Format is empty the format is
// inferred by InferFormat from name and the first non-empty line. For CSV
// NewReader reads the header. Errors are configuration errors, an
// unreadable gzip header, a format that cannot be inferred, or a CSV
// header without the configured label column.
func NewReader(r io.Reader, name string, cfg Config) (*Reader, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, 4096)
	src := io.Reader(br)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("event: %s: %w", name, err)
		}
		src = zr
	}
	rd := &Reader{name: name, s: s, format: s.format, lr: lineReader{src: src, max: s.maxBytes}}
	rd.p.s = s
	// Read the first non-empty line; it stays pending for Next.
	for {
		line, over, err := rd.lr.readLine()
		if err == io.EOF {
			return rd, nil // empty input: Next returns io.EOF
		}
		if err != nil {
			return nil, fmt.Errorf("event: read %s: %w", name, err)
		}
		if rd.lr.line == 1 {
			line = bytes.TrimPrefix(line, []byte(bom))
		}
		if len(line) == 0 && !over {
			continue
		}
		rd.pending, rd.pendLine, rd.pendOver, rd.pendNo = true, line, over, rd.lr.line
		break
	}
	if rd.format == "" {
		f, err := InferFormat(name, rd.pendLine)
		if err != nil {
			return nil, err
		}
		rd.format = f
	}
	if rd.format == CSV {
		if err := rd.header(cfg.LabelColumn); err != nil {
			return nil, err
		}
	}
	return rd, nil
}

// Format returns the format of the input, inferred or configured; empty
// for an empty input whose format was not configured.
func (r *Reader) Format() Format { return r.format }

// Name returns the source name given to NewReader.
func (r *Reader) Name() string { return r.name }

// Offset returns the line where the record last returned by Next starts.
func (r *Reader) Offset() int64 { return r.rawNo }

// Raw returns the bytes of the record last returned by Next, valid until
// the next call: the line without its terminator, CSV records spanning
// lines joined by "\n", and of an oversized record only its first MaxBytes
// bytes. Dead-letter sinks store it.
func (r *Reader) Raw() []byte { return r.raw }

// Next reads the next record into ev, overwriting it. It returns io.EOF at
// the end of the input; an *Error for a bad record, after which the next
// call goes on with the following record; any other error is a read error
// (a truncated gzip stream, an I/O error) that ends the stream and is
// returned again by every later call. Empty lines are skipped. Next is
// NextRecord and Decode.
func (r *Reader) Next(ev *Event) error {
	raw, no, size, err := r.NextRecord()
	if err != nil {
		return err
	}
	if err := r.decode(raw, size, ev); err != nil {
		err.Source, err.Offset = r.name, no
		return err
	}
	return nil
}

// NextRecord returns the next record of the input without decoding it:
// its bytes (valid until the next call; Raw returns them too), the line
// where it starts, and, when it is longer than MaxBytes and raw holds only
// its first MaxBytes bytes, its length (0 otherwise). It skips what Next
// skips (empty lines, LIBSVM comment lines) and returns what Next returns
// at the end of the input and on a read error. A record is a line, or for
// CSV, lines joined while a quoted field goes on.
func (r *Reader) NextRecord() (raw []byte, line int64, size int, err error) {
	for {
		if r.fatal != nil {
			return nil, 0, 0, r.fatal
		}
		raw, over, no, err := r.line()
		if err != nil {
			if err != io.EOF {
				r.fatal = fmt.Errorf("event: read %s: %w", r.name, err)
				return nil, 0, 0, r.fatal
			}
			r.raw = nil
			return nil, 0, 0, io.EOF
		}
		r.raw, r.rawNo = raw, no
		if over {
			return raw, no, max(r.lr.size, len(raw)+1), nil
		}
		switch r.format {
		case JSONL:
			if blank(raw) {
				continue
			}
		case LIBSVM:
			if libsvmEmpty(raw) {
				continue
			}
		case TSV:
			if len(raw) == 0 {
				continue
			}
		case CSV:
			if len(raw) == 0 {
				continue
			}
			rec, over, err := r.csvRecord(raw)
			if err != nil {
				r.fatal = err
				return nil, 0, 0, err
			}
			r.raw = rec
			if over {
				return rec, no, len(rec) + 1, nil
			}
			return rec, no, 0, nil
		}
		return raw, no, 0, nil
	}
}

// Decoder returns a decoder of the records of r's input, as NextRecord
// returns them, for another goroutine: it shares nothing r changes (a
// CSV header's columns, read by NewReader, are only read). Its Decode
// errors name the input as r does.
func (r *Reader) Decoder() *RecordDecoder {
	d := &Reader{name: r.name, s: r.s, format: r.format, cols: r.cols, labelCol: r.labelCol}
	d.p.s = r.s
	return &RecordDecoder{r: d}
}

// A RecordDecoder decodes the records of one input, one at a time; see
// Reader.Decoder. It is not safe for concurrent use.
type RecordDecoder struct {
	r *Reader
}

// Name returns the name of the input.
func (d *RecordDecoder) Name() string { return d.r.name }

// Decode decodes raw, a record as NextRecord returns it, and size, the
// length NextRecord said (0 unless raw holds only the start of a longer
// record: then the record is rejected as oversized). It returns an *Error
// for a bad record, with the input's name as its Source and no Offset.
func (d *RecordDecoder) Decode(raw []byte, size int, ev *Event) error {
	if e := d.r.decode(raw, size, ev); e != nil {
		e.Source = d.r.name
		return e
	}
	return nil
}

// decode decodes one record of r's format.
func (r *Reader) decode(raw []byte, size int, ev *Event) *Error {
	if size > len(raw) {
		ev.reset()
		return &Error{Reason: ReasonOversized, Err: fmt.Errorf("record exceeds the limit of %d bytes", r.s.maxBytes)}
	}
	switch r.format {
	case JSONL:
		return r.p.decode(raw, ev)
	case LIBSVM:
		skip, e := r.libsvm(raw, ev)
		if skip {
			return &Error{Reason: ReasonMalformed, Err: errors.New("no record: an empty or comment line")}
		}
		return e
	case TSV:
		return r.tsv(raw, ev)
	default:
		return r.csv(raw, ev)
	}
}

// line returns the next physical line and its number.
func (r *Reader) line() ([]byte, bool, int64, error) {
	if r.pending {
		r.pending = false
		return r.pendLine, r.pendOver, r.pendNo, nil
	}
	line, over, err := r.lr.readLine()
	return line, over, r.lr.line, err
}

// InferFormat returns the format of the file name whose first non-empty
// line is firstLine. By extension, ignoring case and a trailing ".gz":
// .jsonl, .ndjson and .json are JSONL; .csv is CSV; .tsv is TSV; .libsvm,
// .svm and .svmlight are LIBSVM. Otherwise by the first line: "{" starts
// JSONL; "label idx:val ..." (or a lone number) is LIBSVM; a tab means
// TSV; a comma means CSV. (LIBSVM is tried before TSV so that LIBSVM with
// tab separators is recognized.) Anything else is an error naming the file.
func InferFormat(name string, firstLine []byte) (Format, error) {
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(name)), ".gz")
	switch filepath.Ext(base) {
	case ".jsonl", ".ndjson", ".json":
		return JSONL, nil
	case ".csv":
		return CSV, nil
	case ".tsv":
		return TSV, nil
	case ".libsvm", ".svm", ".svmlight":
		return LIBSVM, nil
	}
	line := bytes.TrimSpace(bytes.TrimPrefix(firstLine, []byte(bom)))
	switch {
	case len(line) > 0 && line[0] == '{':
		return JSONL, nil
	case looksLIBSVM(line):
		return LIBSVM, nil
	case bytes.IndexByte(line, '\t') >= 0:
		return TSV, nil
	case bytes.IndexByte(line, ',') >= 0:
		return CSV, nil
	}
	return "", fmt.Errorf("event: %s: cannot infer the input format: no known extension, and the first line is not JSON, LIBSVM, TSV or CSV", name)
}

// looksLIBSVM reports whether line has the shape "label idx:val ...".
func looksLIBSVM(line []byte) bool {
	if k := bytes.IndexByte(line, '#'); k >= 0 {
		line = line[:k]
	}
	i := skipBlank(line, 0)
	j := tokenEnd(line, i)
	if i == j {
		return false
	}
	label := line[i:j]
	if bytes.ContainsAny(label, ":,") {
		return false
	}
	n := 0
	for i = skipBlank(line, j); i < len(line); i = skipBlank(line, j) {
		j = tokenEnd(line, i)
		c := bytes.IndexByte(line[i:j], ':')
		if c <= 0 || !allDigits(line[i:i+c]) {
			return false
		}
		if _, st := parseFloat(line[i+c+1 : j]); st == numSyntax {
			return false
		}
		n++
	}
	if n == 0 {
		_, st := parseFloat(label)
		return st == numOK
	}
	return true
}

// blank reports whether b holds only spaces, tabs and carriage returns.
// NoRecord reports whether line (without its end) holds no record in
// format, as a Reader skips it: a blank line (JSONL, and the empty
// format), an empty or comment-only line (LIBSVM), an empty line (TSV,
// CSV). A line source that is not a Reader (run's file source) skips the
// same lines, so that run and replay count the same records.
func NoRecord(format Format, line []byte) bool {
	switch format {
	case LIBSVM:
		return libsvmEmpty(line)
	case TSV, CSV:
		return len(bytes.TrimSuffix(line, []byte("\r"))) == 0
	default:
		return blank(line)
	}
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

func tokenEnd(b []byte, i int) int {
	for i < len(b) && b[i] != ' ' && b[i] != '\t' {
		i++
	}
	return i
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// libsvmEmpty reports whether a LIBSVM line holds no record: blank, or a
// comment.
func libsvmEmpty(line []byte) bool {
	if k := bytes.IndexByte(line, '#'); k >= 0 {
		line = line[:k]
	}
	return skipBlank(line, 0) == len(line)
}

// libsvm parses a LIBSVM line; skip reports a line without a record. Each
// idx:val token is scanned once: the index is accumulated as its digits
// are read and the value parsed in the same pass (floatPrefix); a token of
// any other shape (qid:N, or a malformed one) goes to libsvmToken.
func (r *Reader) libsvm(line []byte, ev *Event) (skip bool, e *Error) {
	ev.reset()
	if k := bytes.IndexByte(line, '#'); k >= 0 {
		line = line[:k]
	}
	i := skipBlank(line, 0)
	if i == len(line) {
		return true, nil
	}
	j := tokenEnd(line, i)
	y, ok := r.s.labels.parse(line[i:j])
	if !ok {
		return false, &Error{Field: "label", Reason: ReasonLabel, Err: r.s.labels.unknown(line[i:j])}
	}
	ev.Labeled, ev.Label = true, y
	mask := r.s.mask
	x := &ev.X
	n := len(line)
	for i = skipBlank(line, j); i < n; i = skipBlank(line, j) {
		// The index: decimal digits, then ':'.
		start := i
		var idx uint64
		for ; i < n; i++ {
			c := line[i] - '0'
			if c > 9 {
				break
			}
			idx = idx*10 + uint64(c) // wraps past 20 digits: then unused
		}
		if i == start || i >= n || line[i] != ':' {
			var e *Error
			if j, e = libsvmToken(line, start); e != nil {
				return false, e
			}
			continue
		}
		var slot uint32
		if nd := i - start; nd <= 10 && idx <= 1<<32-1 {
			slot = uint32(idx) & mask // online.Slot of a decimal name
		} else {
			slot = online.Slot(line[start:i], mask)
		}
		// The value: "1" (binary features) or any number, up to a blank
		// or the end of the line.
		i++
		var v float64
		if i+1 <= n && line[i] == '1' && (i+1 == n || line[i+1] == ' ' || line[i+1] == '\t') {
			v, j = 1, i+1
		} else {
			var k int
			var st numStatus
			v, k, st = floatPrefix(line[i:])
			j = i + k
			if j < n && line[j] != ' ' && line[j] != '\t' || st != numOK {
				j = tokenEnd(line, i)
				val := line[i:j]
				if _, st = parseFloat(val); st == numNonFinite {
					return false, &Error{Field: string(line[start : i-1]), Reason: ReasonNonFinite, Err: fmt.Errorf("value %q is not finite", clip(val))}
				}
				return false, &Error{Field: string(line[start : i-1]), Reason: ReasonMalformed, Err: fmt.Errorf("value %q is not a number", clip(val))}
			}
			if math.Abs(v) > r.s.maxAbs {
				return false, &Error{Field: string(line[start : i-1]), Reason: ReasonRange, Err: errRange(line[i:j], r.s.maxAbs)}
			}
		}
		x.Idx = append(x.Idx, slot)
		x.Val = append(x.Val, v)
	}
	if reason := r.p.canon.canonicalize(x, r.s.maxAbs); reason != "" {
		return false, errSum(reason, r.s.maxAbs)
	}
	return false, nil
}

// libsvmToken handles the LIBSVM token at i that does not start with
// "digits:": a "qid:N" to skip, or an error. It returns the token's end.
func libsvmToken(line []byte, i int) (int, *Error) {
	j := tokenEnd(line, i)
	tok := line[i:j]
	c := bytes.IndexByte(tok, ':')
	if c < 0 {
		return j, &Error{Reason: ReasonMalformed, Err: fmt.Errorf("token %q is not index:value", clip(tok))}
	}
	if idx, val := tok[:c], tok[c+1:]; string(idx) == "qid" && allDigits(val) {
		return j, nil // SVMlight query id
	}
	return j, &Error{Reason: ReasonMalformed, Err: fmt.Errorf("token %q: index is not a decimal integer", clip(tok))}
}

// tsv parses a "label<TAB>text" line.
func (r *Reader) tsv(line []byte, ev *Event) *Error {
	ev.reset()
	k := bytes.IndexByte(line, '\t')
	if k < 0 {
		return &Error{Reason: ReasonMalformed, Err: errors.New("no tab between label and text")}
	}
	if label := bytes.TrimSpace(line[:k]); len(label) > 0 {
		y, ok := r.s.labels.parse(label)
		if !ok {
			return &Error{Field: "label", Reason: ReasonLabel, Err: r.s.labels.unknown(label)}
		}
		ev.Labeled, ev.Label = true, y
	}
	if !r.p.tok.add(&ev.X, line[k+1:], r.s.ngrams, r.s.mask) {
		ev.X.Idx, ev.X.Val = ev.X.Idx[:0], ev.X.Val[:0] // as if rejected before tokenizing
		return &Error{Field: "text", Reason: ReasonUTF8, Err: errors.New("text is not valid UTF-8")}
	}
	// Word counts exceed MaxAbs only when it is set below a line's length.
	if reason := r.p.canon.canonicalize(&ev.X, r.s.maxAbs); reason != "" {
		return errSum(reason, r.s.maxAbs)
	}
	return nil
}
