package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Start says where a source begins a partition that its consumer has no
// position for yet (source.start, `run --start`): a Kafka group that committed no offset for it, a
// JetStream durable that does not exist. Once a position was committed,
// the source resumes from it and Start no longer applies: a service
// restarted with the same Start goes on where it stopped.
//
// The zero value is StartEarliest.
type Start struct {
	Kind StartKind
	// Offset is the position of StartOffset: a Kafka offset (the same on
	// every partition) or a JetStream stream sequence.
	Offset int64
	// Time is the instant of StartTime: the first record stamped at or
	// after it (Kafka's record timestamp, JetStream's message time).
	Time time.Time
}

// A StartKind is a kind of Start.
type StartKind uint8

const (
	StartEarliest StartKind = iota // the first record the partition holds
	StartLatest                    // after the last record it holds when the source opens
	StartOffset                    // at Start.Offset
	StartTime                      // at the first record stamped at or after Start.Time
)

// ParseStart parses "earliest", "latest", "offset:N" (N ≥ 0) or
// "time:T" (T in RFC 3339, such as 2026-11-26T08:00:00Z); the empty
// string is earliest.
func ParseStart(s string) (Start, error) {
	kind, arg, _ := strings.Cut(s, ":")
	switch strings.ToLower(kind) {
	case "", "earliest":
		if arg == "" {
			return Start{}, nil
		}
	case "latest":
		if arg == "" {
			return Start{Kind: StartLatest}, nil
		}
	case "offset":
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return Start{}, fmt.Errorf("%q: the offset must be a whole number ≥ 0", s)
		}
		return Start{Kind: StartOffset, Offset: n}, nil
	case "time":
		t, err := time.Parse(time.RFC3339Nano, arg)
		if err != nil {
			return Start{}, fmt.Errorf("%q: the time must be RFC 3339, such as time:2026-11-26T08:00:00Z", s)
		}
		return Start{Kind: StartTime, Time: t}, nil
	}
	return Start{}, fmt.Errorf("%q: want earliest, latest, offset:N or time:RFC3339", s)
}

// String returns s in the form ParseStart reads.
func (s Start) String() string {
	switch s.Kind {
	case StartLatest:
		return "latest"
	case StartOffset:
		return "offset:" + strconv.FormatInt(s.Offset, 10)
	case StartTime:
		return "time:" + s.Time.Format(time.RFC3339Nano)
	}
	return "earliest"
}
