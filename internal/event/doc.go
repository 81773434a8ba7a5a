// Package event decodes input records into events: an optional label and
// a canonical sparse feature vector (online.Vector) over 2^bits hashed
// slots. It reads every input format of streamlearn: JSON event records
// (Kafka record values, NATS messages, JSONL lines), LIBSVM/SVMlight, CSV
// with a header, and SMS-spam style "label<TAB>text", gzip-compressed or
// not. Decoder and Reader allocate nothing per record in steady state and
// never panic on bad input: every bad record is an *Error with a Reason
// from a small fixed set (a metric label), and the stream goes on.
//
// # Feature slots
//
// Feature names are hashed by online.Slot (a decimal name n is slot
// n mod 2^bits, any other name its MurmurHash3) and text n-grams by
// online.TextSlot, so JSON feature "7", dense x[7] and LIBSVM index 7 are
// one feature, and slots survive restarts and machines.
//
// # Canonical vectors
//
// Every decoded vector is canonical: Idx strictly increasing, the values of
// entries with the same slot (repeated names, hash collisions, repeated
// words) summed, every value finite. Entries are summed in ascending order
// of value, so the vector is identical bit for bit whatever order the
// features came in. Explicit zero values are kept as entries (a running
// standardizer counts them); a missing value (JSON null, an empty CSV
// field) is no entry. A sum that overflows is ReasonNonFinite.
//
// # Value range
//
// Every value of a decoded vector has magnitude at most Config.MaxAbs
// (default DefaultMaxAbs, 2^53−1): in every format, a number beyond it
// (1e308, -1e200) is ReasonRange, naming its field, and so are colliding
// values (or word counts) whose sum is beyond it. Finite but huge values
// are not a model's input: w ← w + y·x would overflow a Perceptron's
// weights to ±Inf, and its scores to NaN, after one or two of them.
// MaxMaxAbs, the largest limit allowed, keeps every learner finite.
//
// # Labels
//
// A label is looked up by its text in the configured sets first
// (Config.Positive, Config.Negative, plus the defaults "1", "+1", "1.0",
// "true" → +1 and "0", "-1", "-1.0", "false" → -1; matching is exact and
// case sensitive), then read as a number: 1 is +1, 0 and -1 are -1. Any
// other label (2, 0.5, "maybe") is ReasonLabel. An absent, null or empty
// label means the event is unlabeled (predicted, never learned from).
//
// # JSON events
//
// A record is one JSON object (RFC 8259, validated strictly and in full:
// whitespace around it is allowed, anything else after it is not):
//
//	{"id": "m-1042", "key": "tenant-7", "ts": "2026-11-22T10:00:00Z",
//	  "label": 1,
//	  "features": {"len": 42, "has_url": true, "sender": "bulk.example"},
//	  "x": [0.12, 0.5, 0.0],
//	  "text": "WIN a FREE prize now"}
//
// Its keys:
//
//   - id, key, ts: strings, copied unescaped into Event.ID, Key, TS; null
//     is absent; any other type is ReasonType.
//   - label: a number (its literal text, such as "1" or "-1.0", is the
//     label text), true/false (text "true"/"false"), a string, or null.
//     Arrays and objects are ReasonType.
//   - features: an object of name → value. A number is the value; true is
//     1 and false 0; a string s is the categorical feature "name=s" with
//     value 1; null is a missing value. Arrays and objects are ReasonType.
//     The slot is online.Slot(name), of the unescaped name.
//   - x: an array of numbers; x[i] is the feature named by the decimal i,
//     slot i mod 2^bits. With Config.Dense > 0 an x of another length is
//     ReasonLength (an event without x is accepted). Non-numbers are
//     ReasonType.
//   - text: a string, tokenized as described below.
//   - Other keys are skipped (any valid JSON value). Repeating one of the
//     keys above is ReasonDuplicate. Features of features, x and text are
//     combined into one vector. A record with none of features, x and text
//     (a label on its own, a misspelled key) is ReasonEmpty: a learner
//     would take it for an example whose every feature is zero. An
//     explicit "features": {} is such an example, and accepted.
//
// Numbers follow the JSON grammar and are parsed to the float64 nearest
// (as strconv.ParseFloat); one that overflows (1e400) is ReasonNonFinite.
// NaN and Infinity are not JSON (ReasonMalformed); the string "NaN" is a
// string: in `x` ReasonType, as a label ReasonLabel, as a feature value
// the categorical feature "name=NaN".
// Strings must be valid UTF-8 (else ReasonUTF8); escapes, \uXXXX
// surrogate pairs included, are decoded, and a lone surrogate escape
// becomes U+FFFD (as in encoding/json). Nesting deeper than MaxDepth is
// ReasonDepth; records larger than Config.MaxBytes are ReasonOversized.
// Faults of syntax take precedence: a record that is both of a wrong type
// and malformed is reported as malformed.
//
// A stream's records usually share one layout: the same keys in the same
// order, compact. A Decoder (and a Reader of JSONL) learns the layout of a
// record it decoded without fault when that record has only id, key and ts
// strings, a number or string label and features of numbers, booleans and
// nulls, none with escapes or non-ASCII bytes, and decodes the next record
// by comparing its bytes with the layout's and parsing only its values. A
// record that differs in any byte of the layout, or in a value the layout
// does not take as is, is decoded in full: the layout changes the speed of
// a decoding, never its event or its error.
//
// # Text
//
// Tokens are the maximal runs of Unicode letters and digits
// (unicode.IsLetter, unicode.IsDigit), lower-cased by unicode.ToLower; any
// other character separates them. For n = 1..Config.NGrams every n
// consecutive tokens joined by one space are a feature at
// online.TextSlot(ngram) with value its number of occurrences: with
// NGrams 2, "WIN a FREE prize" gives win, a, free, prize, "win a",
// "a free", "free prize".
//
// # LIBSVM / SVMlight
//
// A line is "label idx:val idx:val ... [# comment]", fields separated by
// spaces or tabs. The label is read as above (so "+1", "1.0", "-1", "0"
// work). idx is a decimal integer (0 is allowed) with slot online.Slot(idx)
// = idx mod 2^bits; val is a decimal number ("9.86E-02", "1", ".5", an
// explicit "0.0" is kept). Indices need not be sorted. "qid:N" tokens are
// skipped. Empty lines, blank lines and comment-only lines are skipped;
// a label with no features is an event with an empty vector; trailing
// spaces and CRLF line ends are fine. A token that is not idx:val, or a
// val that is not a number, is ReasonMalformed; inf and nan are
// ReasonNonFinite.
//
// # CSV
//
// The first record is the header (RFC 4180: fields separated by commas,
// optionally in double quotes, "" for a quote inside quotes, quoted fields
// may span lines). The label column is Config.LabelColumn (an error from
// NewReader if absent), else "label" if present, else the last column.
// Every other column is a feature named by its header; per record a field
// is, after trimming spaces and tabs: empty → missing; a decimal number →
// that value (slot online.Slot(column)); inf or nan → ReasonNonFinite;
// anything else → the categorical feature "column=field" (untrimmed) with
// value 1. A record with another number of fields than the header is
// ReasonLength; a bare or unterminated quote is ReasonMalformed; invalid
// UTF-8 in a categorical field is ReasonUTF8. Empty lines are skipped.
//
// # TSV (SMS spam collection)
//
// A line is "label<TAB>text": the label up to the first tab, the text after
// it (tokenized as above, invalid UTF-8 is ReasonUTF8). A line without a
// tab is ReasonMalformed; empty lines are skipped. Quotes have no meaning.
// For the SMS Spam Collection configure Positive ["spam"], Negative ["ham"].
//
// # Files
//
// NewReader detects gzip by its magic bytes and infers the format (when
// Config.Format is empty) by InferFormat. A UTF-8 byte order mark at the
// start is dropped. Lines end in "\n" or "\r\n". A record longer than
// Config.MaxBytes (excluding its line terminator) is ReasonOversized: the
// Reader keeps only its first MaxBytes bytes (what Raw returns) and drops
// the rest as it reads, then goes on with the next line. (A CSV record
// whose quoted field spans lines is dropped up to the line where the field
// closes; a single physical line over the limit ends its record.)
// Error.Offset is the 1-based line number where the record starts.
package event
