package event

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Format names an input format.
type Format string

// The input formats. The empty Format means "infer" (see InferFormat).
const (
	JSONL  Format = "jsonl"
	LIBSVM Format = "libsvm"
	CSV    Format = "csv"
	TSV    Format = "tsv"
)

// Defaults and limits of Config.
const (
	// DefaultBits is the default hashed space, 2^18 slots (the config
	// file's features.bits default).
	DefaultBits = 18
	// DefaultNGrams: text yields single words unless configured otherwise.
	DefaultNGrams = 1
	// MaxNGrams bounds Config.NGrams: a token of a message then yields at
	// most 8 features.
	MaxNGrams = 8
	// DefaultMaxBytes is the largest record accepted by default, 1 MiB,
	// the default largest Kafka message (message.max.bytes) and NATS
	// payload (max_payload).
	DefaultMaxBytes = 1 << 20
	// MaxDepth is the deepest JSON nesting of arrays and objects accepted;
	// deeper input is rejected with ReasonDepth. An event needs 2.
	MaxDepth = 64
	// DefaultMaxAbs is the largest feature magnitude accepted by default,
	// 2^53 − 1 = 9007199254740991: the largest integer every float64 (and
	// so every JSON parser) represents exactly, the bound RFC 8259 §6 and
	// I-JSON (RFC 7493 §2.2) give for interoperable numbers. Counts, sizes,
	// prices in cents and Unix times in milliseconds or microseconds fit;
	// a value past it has lost integer precision on its way here, and is
	// far more likely garbage or an attack (1e308) than a measurement.
	// Every data set of the tests (../shared/data, testdata) stays below
	// 1e4. Users who know their features' range should set a tighter one.
	DefaultMaxAbs = 1<<53 - 1
	// MaxMaxAbs bounds Config.MaxAbs, so that no accepted stream can
	// overflow a learner. With |x_i| ≤ 1e100, at most 2^28 distinct slots
	// (online.MaxBits) and at most 2^64 rounds, the largest quantity a
	// learner computes — the averaged Perceptron's Σ_i u_i·x_i, where u_i
	// sums at most 2^64 updates weighted by round numbers below 2^64, so
	// |u_i| ≤ 2^128·1e100 — stays below 2^28·2^128·1e200 ≈ 1e247, far
	// from the float64 limit 1.8e308. Perceptron weights (|w_i| ≤
	// 2^64·1e100), scores, squared norms (≤ 2^28·1e200), the l2 scaler and
	// the standard scaler's statistics (products of differences, at most
	// 4e200) are finite too. (OGD bounds its own steps; see online.OGD.)
	MaxMaxAbs = 1e100
)

// Config says how records become events. The zero Config is valid: every
// zero field gets the documented default. A Config is read by NewDecoder
// and NewReader and not retained.
type Config struct {
	// Bits: features hash into 2^Bits slots. Default DefaultBits, at most
	// online.MaxBits.
	Bits uint
	// NGrams: text yields the n-grams for n = 1..NGrams. Default 1 (words
	// only), at most MaxNGrams.
	NGrams int
	// Positive lists label strings meaning +1, in addition to the
	// defaults "1", "+1", "1.0", "true".
	Positive []string
	// Negative lists label strings meaning -1, in addition to the
	// defaults "0", "-1", "-1.0", "false". A string configured in one set
	// is removed from the other's defaults; a string in both Positive and
	// Negative is an error.
	Negative []string
	// Classes, when not empty, makes labels classes (multiclass): a
	// label is the name of one of them, exactly, and Event.Label is its
	// index. Positive, Negative and the defaults do not apply. At most
	// MaxClasses.
	Classes []string
	// Dense, when > 0, is the required length of a JSON `x` array.
	Dense int
	// MaxBytes is the largest record accepted, in bytes (excluding the
	// line terminator). Default DefaultMaxBytes. Larger records are
	// rejected with ReasonOversized without being buffered.
	MaxBytes int
	// MaxAbs is the largest magnitude of a feature value accepted: a
	// record with a value v (after summing colliding slots) such that
	// |v| > MaxAbs is rejected with ReasonRange. Default DefaultMaxAbs;
	// it must lie in [1, MaxMaxAbs] (booleans, categorical features and
	// words have value 1).
	MaxAbs float64
	// LabelColumn is the CSV label column. Default: "label" if the header
	// has it, else the last column.
	LabelColumn string
	// Format of a Reader's input; "" infers it (InferFormat). A Decoder
	// reads JSON when it is empty, and LIBSVM or TSV records.
	Format Format
	// LabelEvents (delayed labels): a JSON record with an id and a label
	// and none of features, x and text is the label of an earlier event
	// (Event.LabelOnly), not ReasonEmpty.
	LabelEvents bool
}

// settings is a validated Config with defaults applied.
type settings struct {
	bits     uint
	mask     uint32
	ngrams   int
	dense    int
	maxBytes int
	maxAbs   float64
	labelCol string
	format   Format
	labels   labelSet
	labelEv  bool
}

func (c Config) settings() (settings, error) {
	s := settings{
		bits: c.Bits, ngrams: c.NGrams, dense: c.Dense, maxBytes: c.MaxBytes, maxAbs: c.MaxAbs,
		labelCol: c.LabelColumn, format: c.Format, labelEv: c.LabelEvents,
	}
	if s.bits == 0 {
		s.bits = DefaultBits
	}
	if s.bits > online.MaxBits {
		return s, fmt.Errorf("event: bits %d exceeds the maximum %d", c.Bits, online.MaxBits)
	}
	s.mask = online.Mask(s.bits)
	if s.ngrams == 0 {
		s.ngrams = DefaultNGrams
	}
	if s.ngrams < 0 || s.ngrams > MaxNGrams {
		return s, fmt.Errorf("event: ngrams %d outside 1..%d", c.NGrams, MaxNGrams)
	}
	if s.dense < 0 {
		return s, fmt.Errorf("event: dense length %d is negative", c.Dense)
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.maxBytes < 0 {
		return s, fmt.Errorf("event: max bytes %d is negative", c.MaxBytes)
	}
	if s.maxAbs == 0 {
		s.maxAbs = DefaultMaxAbs
	}
	if !(s.maxAbs >= 1 && s.maxAbs <= MaxMaxAbs) { // NaN too
		return s, fmt.Errorf("event: max abs value %g outside [1, %g]", c.MaxAbs, float64(MaxMaxAbs))
	}
	switch s.format {
	case "", JSONL, LIBSVM, CSV, TSV:
	default:
		return s, fmt.Errorf("event: unknown format %q (want jsonl, libsvm, csv or tsv)", c.Format)
	}
	var err error
	if len(c.Classes) > 0 {
		s.labels, err = newClassSet(c.Classes)
	} else {
		s.labels, err = newLabelSet(c.Positive, c.Negative)
	}
	return s, err
}

// MaxClasses is the most classes a multiclass configuration has: a class
// is an int8 label.
const MaxClasses = 127

// newClassSet returns the labels of classes: each name is its index.
func newClassSet(classes []string) (labelSet, error) {
	if len(classes) < 2 || len(classes) > MaxClasses {
		return labelSet{}, fmt.Errorf("event: %d classes: want 2 to %d", len(classes), MaxClasses)
	}
	s := labelSet{m: make(map[string]int8, len(classes)), classes: true}
	for i, c := range classes {
		if c == "" {
			return labelSet{}, errors.New("event: an empty class name (an empty label means unlabeled)")
		}
		if _, ok := s.m[c]; ok {
			return labelSet{}, fmt.Errorf("event: class %q twice", c)
		}
		s.m[c] = int8(i)
	}
	s.want = "(classes: " + listLabels(classes) + ")"
	return s, nil
}

// Default label strings.
var (
	defaultPositive = []string{"1", "+1", "1.0", "true"}
	defaultNegative = []string{"0", "-1", "-1.0", "false"}
)

// labelSet maps label strings to labels.
type labelSet struct {
	m map[string]int8
	// short caches parse of the common one- and two-byte labels "0",
	// "1", "-1", "+1" (index shortLabel): 0 means not a label.
	short [4]int8
	// classes: m has the class names, the only labels (newClassSet).
	classes bool
	// want lists the labels accepted, for the error of one that is not:
	// "(+1: 1, true, spam; -1: 0, -1, false, ham)" or "(classes: a, b)".
	want string
}

// maxListed is the most label strings an error lists per label.
const maxListed = 8

// listLabels writes names, at most maxListed of them, each clipped, as
// "a, b, c" (", …" when there are more).
func listLabels(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == maxListed {
			b.WriteString("…")
			break
		}
		b.WriteString(clip(n))
	}
	return b.String()
}

// unknown is the error of label text b that s does not accept: it quotes
// b and lists the labels s accepts.
func (s *labelSet) unknown(b []byte) error {
	return fmt.Errorf("%q is not a configured label %s", clip(b), s.want)
}

// shortLabels are the label texts cached in labelSet.short.
var shortLabels = [4]string{"0", "1", "-1", "+1"}

// shortLabel returns the index of b in shortLabels, or -1.
func shortLabel(b []byte) int {
	switch len(b) {
	case 1:
		switch b[0] {
		case '0':
			return 0
		case '1':
			return 1
		}
	case 2:
		if b[1] == '1' {
			switch b[0] {
			case '-':
				return 2
			case '+':
				return 3
			}
		}
	}
	return -1
}

func newLabelSet(pos, neg []string) (labelSet, error) {
	s := labelSet{m: make(map[string]int8)}
	for _, v := range defaultPositive {
		s.m[v] = online.Positive
	}
	for _, v := range defaultNegative {
		s.m[v] = online.Negative
	}
	user := make(map[string]int8)
	for _, set := range []struct {
		names []string
		y     int8
	}{{pos, online.Positive}, {neg, online.Negative}} {
		for _, v := range set.names {
			if v == "" {
				return labelSet{}, errors.New("event: empty label string (an empty label means unlabeled)")
			}
			if y, ok := user[v]; ok && y != set.y {
				return labelSet{}, fmt.Errorf("event: label %q is both positive and negative", v)
			}
			user[v] = set.y
			s.m[v] = set.y
		}
	}
	for k, v := range shortLabels {
		if y, ok := s.lookup([]byte(v)); ok {
			s.short[k] = y
		}
	}
	// The error lists the usual spellings (1, 0, -1, true, false, not
	// 1.0 or +1) and the configured ones, each under the label it means.
	var names [2][]string // +1, -1
	for _, v := range append([]string{"1", "true", "0", "-1", "false"}, append(append([]string(nil), pos...), neg...)...) {
		y, ok := s.parse([]byte(v))
		if !ok {
			continue
		}
		k := 0
		if y == online.Negative {
			k = 1
		}
		if !slices.Contains(names[k], v) {
			names[k] = append(names[k], v)
		}
	}
	s.want = "(+1: " + listLabels(names[0]) + "; -1: " + listLabels(names[1]) + ")"
	return s, nil
}

// parse maps the label text b to a label: first by the configured sets,
// then numerically (1 is +1; 0 and -1 are -1). It does not allocate.
func (s *labelSet) parse(b []byte) (int8, bool) {
	if s.classes {
		y, ok := s.m[string(b)]
		return y, ok
	}
	if k := shortLabel(b); k >= 0 {
		y := s.short[k]
		return y, y != 0
	}
	return s.lookup(b)
}

func (s *labelSet) lookup(b []byte) (int8, bool) {
	if y, ok := s.m[string(b)]; ok {
		return y, true
	}
	v, st := parseFloat(b)
	if st != numOK {
		return 0, false
	}
	switch v {
	case 1:
		return online.Positive, true
	case 0, -1:
		return online.Negative, true
	}
	return 0, false
}

// ParseLabel returns the label the text means in a record decoded with c:
// 1, 0, -1, true, false, or one of c.Positive and c.Negative.
func (c Config) ParseLabel(text string) (int8, error) {
	if len(c.Classes) > 0 {
		s, err := newClassSet(c.Classes)
		if err != nil {
			return 0, err
		}
		if y, ok := s.parse([]byte(text)); ok {
			return y, nil
		}
		return 0, fmt.Errorf("label %q: want one of the classes %q", text, c.Classes)
	}
	s, err := newLabelSet(c.Positive, c.Negative)
	if err != nil {
		return 0, err
	}
	y, ok := s.parse([]byte(text))
	if !ok {
		return 0, fmt.Errorf("label %q: want 1, 0, -1, true, false or a configured positive or negative value", text)
	}
	return y, nil
}
