package service

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/connectors"
	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// DeadLetterMaxRaw is how many bytes of a bad record a dead letter keeps:
// 128 KiB, all of any event of realistic size (a few kB). It bounds a
// dead letter's size so that the sink takes it whatever the record was:
// JSON escaping makes at most 6 bytes of one (a control character becomes
// \u00XX) and event errors quote at most a few dozen bytes of the record,
// so a dead letter stays under 800 KiB, within the 1 MiB Kafka
// (message.max.bytes) and NATS (max_payload) accept by default. A sink
// refusing a dead letter would stop the stream on bad input, which the
// design forbids; and a record dead-lettered as "oversized" can be any
// size its transport allows.
const DeadLetterMaxRaw = 128 << 10

// DeadLetters publishes dead letters to a sink, one JSON object per bad
// record: {"source", "partition", "offset", "key", "reason", "error", "raw"}
// where key (absent when the record had none; "key_base64" when it is not
// valid UTF-8) is the record's key, which the dead letter keeps as its own
// (a Kafka key) too, and raw holds
// the original bytes as a string, or "raw_base64" holds them when they are
// not valid UTF-8. A record longer than DeadLetterMaxRaw keeps only its
// first DeadLetterMaxRaw bytes, less up to 3 so as not to cut a UTF-8
// sequence, and the dead letter then also has "raw_truncated": true and
// "raw_size", the record's length in bytes.
type DeadLetters struct {
	Sink connectors.Sink
	// IDSource, when not empty, stands for the source in the identities
	// of the dead letters (OutputID): the source's name and this run's
	// (see Service.idSource).
	IDSource string
}

var _ pipeline.DeadLetters = (*DeadLetters)(nil)

type deadLetterJSON struct {
	Source       string `json:"source"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	Key          string `json:"key,omitempty"`
	KeyBase64    string `json:"key_base64,omitempty"`
	Reason       string `json:"reason"`
	Error        string `json:"error"`
	Raw          string `json:"raw,omitempty"`
	RawBase64    string `json:"raw_base64,omitempty"`
	RawTruncated bool   `json:"raw_truncated,omitempty"`
	RawSize      int    `json:"raw_size,omitempty"`
}

// DeadLetter publishes one dead letter.
func (s *DeadLetters) DeadLetter(d pipeline.DeadLetter) error {
	return s.publish(context.Background(), d)
}

// publish publishes one dead letter; ctx bounds a sink that blocks.
func (s *DeadLetters) publish(ctx context.Context, d pipeline.DeadLetter) error {
	j := deadLetterJSON{Source: d.Source, Partition: d.Partition, Offset: d.Offset, Reason: string(d.Reason), Error: d.Err}
	if utf8.Valid(d.Key) {
		j.Key = string(d.Key)
	} else {
		j.KeyBase64 = base64.StdEncoding.EncodeToString(d.Key)
	}
	raw := d.Raw
	if d.Size > len(raw) { // the source kept only its start
		j.RawTruncated, j.RawSize = true, d.Size
	}
	if len(raw) > DeadLetterMaxRaw {
		j.RawTruncated, j.RawSize = true, max(len(raw), d.Size)
		// Cut before a rune's first byte, so that text stays valid UTF-8.
		k := DeadLetterMaxRaw
		for k > DeadLetterMaxRaw-utf8.UTFMax && !utf8.RuneStart(raw[k]) {
			k--
		}
		raw = raw[:k]
	}
	if utf8.Valid(raw) {
		j.Raw = string(raw)
	} else {
		j.RawBase64 = base64.StdEncoding.EncodeToString(raw)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if is, ok := s.Sink.(connectors.IDSink); ok {
		return is.PublishID(ctx, OutputID(cmp.Or(s.IDSource, d.Source), d.Partition, d.Offset, "dead-letter"), d.Key, b)
	}
	return s.Sink.Publish(ctx, d.Key, b)
}

// OutputID is the identity of an output: the record it comes from
// (source, partition, offset) and its kind ("prediction",
// "dead-letter"), as in "kafka:events/3/1041/prediction". A sink that
// deduplicates (connectors.IDSink: JetStream's Nats-Msg-Id) stores the
// outputs a crash repeats once. A source whose offsets begin again at
// every run (core NATS) is named with the run's start, as in
// "nats:events@1764189000000000000/0/12/prediction": its offsets do not
// identify a record across runs, and the outputs of another run's
// records must not be taken for repeats.
func OutputID(source string, partition int32, offset int64, kind string) string {
	b := make([]byte, 0, len(source)+len(kind)+32)
	b = append(b, source...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, offset, 10)
	b = append(b, '/')
	b = append(b, kind...)
	return string(b)
}
