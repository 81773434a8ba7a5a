package filesource_test

import (
	"encoding/base64"
	"fmt"
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
			path := sourcetest.LinesFile(t, "stream.jsonl", values)
			return sourcetest.Stream{Open: func(t *testing.T, _ bool) connectors.Source {
				s := filesource.NewFiles([]string{path}, event.Config{}, nil)
				t.Cleanup(func() { s.Close() })
				return s
			}}
		},
	})

	sourcetest.Run(t, "envelopes", sourcetest.Harness{
		New: func(t *testing.T, values [][]byte) sourcetest.Stream {
			lines := make([][]byte, len(values))
			for i, v := range values {
				lines[i] = fmt.Appendf(nil, `{"partition":0,"offset":%d,"value_base64":%q}`, i, base64.StdEncoding.EncodeToString(v))
			}
			path := sourcetest.LinesFile(t, "stream.envelopes", lines)
			return sourcetest.Stream{Open: func(t *testing.T, _ bool) connectors.Source {
				s := filesource.NewEnvelopes([]string{path}, nil, -1, 1<<20)
				t.Cleanup(func() { s.Close() })
				return s
			}}
		},
	})
}
