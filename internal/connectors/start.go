package connectors

import "github.com/streamlearn/streamlearn/internal/connectors/settings"

// Start says where a source begins a partition its consumer has no
// position for yet (see settings.Start); the zero value is StartEarliest.
type Start = settings.Start

// A StartKind is a kind of Start.
type StartKind = settings.StartKind

const (
	StartEarliest = settings.StartEarliest
	StartLatest   = settings.StartLatest
	StartOffset   = settings.StartOffset
	StartTime     = settings.StartTime
)

// ParseStart parses "earliest", "latest", "offset:N" or "time:RFC3339"
// (settings.ParseStart).
func ParseStart(s string) (Start, error) { return settings.ParseStart(s) }
