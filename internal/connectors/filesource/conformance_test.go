package filesource_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/connectors/filesource"
	"github.com/streamlearn/streamlearn/internal/connectors/sourcetest"
	"github.com/streamlearn/streamlearn/internal/event"
)

// TestSourceConformance runs the source conformance suite against Files
// (a JSONL file, whose offsets are its lines) and Envelopes (a recording
// of partition 0 from offset 0, each value in base64, as `record
// --envelope` writes a record that is not JSON).
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, "files", sourcetest.Harness{
		FirstOffset: 1,
		New: func(t *testing.T, values [][]byte) sourcetest.Stream {
			var data []byte
			for _, v := range values {
				data = append(append(data, v...), '\n')
			}
			path := write(t, "stream.jsonl", data)
			return sourcetest.Stream{Open: func(t *testing.T, _ bool) connectors.Source {
				s := filesource.NewFiles([]string{path}, event.Config{}, nil)
				t.Cleanup(func() { s.Close() })
				return s
			}}
		},
	})

	sourcetest.Run(t, "envelopes", sourcetest.Harness{
		New: func(t *testing.T, values [][]byte) sourcetest.Stream {
			var data []byte
			for i, v := range values {
				data = fmt.Appendf(data, `{"partition":0,"offset":%d,"value_base64":%q}`+"\n", i, base64.StdEncoding.EncodeToString(v))
			}
			path := write(t, "stream.envelopes", data)
			return sourcetest.Stream{Open: func(t *testing.T, _ bool) connectors.Source {
				s := filesource.NewEnvelopes([]string{path}, nil, -1, 1<<20)
				t.Cleanup(func() { s.Close() })
				return s
			}}
		},
	})
}

// write writes data to a new file name in a temporary directory and
// returns its path.
func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
