package connectors

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// FileDeadLetters appends dead letters to a JSONL file, one object per bad
// record: {"source", "offset", "reason", "error", "raw"} where raw holds
// the original bytes as a string, or "raw_base64" holds them when they are
// not valid UTF-8. The file is created on the first dead letter, so a clean
// stream leaves none behind. It is not safe for concurrent use.
type FileDeadLetters struct {
	path string
	f    *os.File
	w    *bufio.Writer
}

var _ pipeline.DeadLetters = (*FileDeadLetters)(nil)

// NewFileDeadLetters returns a sink appending to path.
func NewFileDeadLetters(path string) *FileDeadLetters {
	return &FileDeadLetters{path: path}
}

type deadLetterJSON struct {
	Source    string `json:"source"`
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
	Error     string `json:"error"`
	Raw       string `json:"raw,omitempty"`
	RawBase64 string `json:"raw_base64,omitempty"`
}

// DeadLetter writes one dead letter.
func (s *FileDeadLetters) DeadLetter(d pipeline.DeadLetter) error {
	j := deadLetterJSON{Source: d.Source, Offset: d.Offset, Reason: string(d.Reason), Error: d.Err}
	if utf8.Valid(d.Raw) {
		j.Raw = string(d.Raw)
	} else {
		j.RawBase64 = base64.StdEncoding.EncodeToString(d.Raw)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		s.f, s.w = f, bufio.NewWriter(f)
	}
	_, err = s.w.Write(b)
	return err
}

// Close flushes and closes the file.
func (s *FileDeadLetters) Close() error {
	if s.f == nil {
		return nil
	}
	ferr := s.w.Flush()
	if err := s.f.Close(); ferr == nil {
		ferr = err
	}
	return ferr
}
