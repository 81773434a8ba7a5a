package connectors

import "github.com/streamlearn/streamlearn/internal/config"

// Start says where a source begins a partition its consumer has no
// position for yet (see config.Start); the zero value is StartEarliest.
type Start = config.Start

// A StartKind is a kind of Start.
type StartKind = config.StartKind

const (
	StartEarliest = config.StartEarliest
	StartLatest   = config.StartLatest
	StartOffset   = config.StartOffset
	StartTime     = config.StartTime
)

// ParseStart parses "earliest", "latest", "offset:N" or "time:RFC3339"
// (config.ParseStart).
func ParseStart(s string) (Start, error) { return config.ParseStart(s) }
