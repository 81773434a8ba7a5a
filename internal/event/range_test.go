package event

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Config.MaxAbs defaults to DefaultMaxAbs and must lie in [1, MaxMaxAbs].
func TestMaxAbsConfig(t *testing.T) {
	for _, tt := range []struct {
		maxAbs float64
		ok     bool
	}{
		{0, true}, {1, true}, {1e6, true}, {MaxMaxAbs, true},
		{0.5, false}, {-1, false}, {math.NaN(), false}, {math.Inf(1), false}, {1e101, false},
	} {
		_, err := NewDecoder(Config{MaxAbs: tt.maxAbs})
		if (err == nil) != tt.ok {
			t.Errorf("MaxAbs %v: error %v, want ok %v", tt.maxAbs, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "max abs value") {
			t.Errorf("MaxAbs %v: error %q does not name the setting", tt.maxAbs, err)
		}
	}
	// ±DefaultMaxAbs is accepted, the next float64 is not.
	d, _ := NewDecoder(Config{})
	var ev Event
	if err := d.Decode([]byte(`{"x":[9007199254740991,-9007199254740991]}`), &ev); err != nil {
		t.Errorf("±(2^53-1): %v", err)
	}
	if err := d.Decode([]byte(`{"x":[9007199254740992]}`), &ev); reasonOf(err) != ReasonRange {
		t.Errorf("2^53: %v, want range", err)
	}
}

func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Every format rejects a value beyond MaxAbs, and a sum of colliding
// values beyond it, with ReasonRange, naming the field when there is one.
func TestRangeInFiles(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		cfg      Config
		field    string // "" for a sum
	}{
		{"libsvm value", "1 1:0.5 3:1e308\n", Config{Format: LIBSVM}, "3"},
		{"libsvm negative", "-1 7:-2e16\n", Config{Format: LIBSVM}, "7"},
		{"libsvm sum", "1 3:6e15 3:6e15\n", Config{Format: LIBSVM}, ""},
		{"csv value", "a,b,label\n1,1e200,1\n", Config{Format: CSV}, "b"},
		{"csv configured", "a,b,label\n1,-11,1\n", Config{Format: CSV, MaxAbs: 10}, "b"},
		{"tsv word counts", "spam\tno no no\n", Config{Format: TSV, MaxAbs: 2, Positive: []string{"spam"}}, ""},
		{"jsonl value", "{\"label\":1,\"features\":{\"a\":1e300}}\n", Config{Format: JSONL}, "features.a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tt.in), "in", tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var ev Event
			err = r.Next(&ev)
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonRange || e.Field != tt.field {
				t.Fatalf("Next = %v, want range at field %q", err, tt.field)
			}
			if !strings.Contains(err.Error(), "in magnitude") {
				t.Errorf("message %q does not say why", err)
			}
		})
	}
	// At the limit is fine, in every format.
	for _, tt := range []struct{ name, in string }{
		{"libsvm", "1 1:9007199254740991 2:-9007199254740991\n"},
		{"csv", "a,label\n-9007199254740991,1\n"},
		{"jsonl", "{\"label\":1,\"x\":[9007199254740991]}\n"},
	} {
		r, err := NewReader(strings.NewReader(tt.in), "in."+tt.name, Config{})
		if err != nil {
			t.Fatal(err)
		}
		var ev Event
		if err := r.Next(&ev); err != nil {
			t.Errorf("%s at the limit: %v", tt.name, err)
		}
	}
}

// An error quotes at most a few dozen bytes of its record however long the
// record is: the message of a megabyte label or feature name is one short
// line (logs, dead letters, HTTP answers).
func TestErrorsQuoteLittle(t *testing.T) {
	long := strings.Repeat("é", 300_000) // 600 kB of valid UTF-8
	digits := strings.Repeat("9", 400_000)
	for _, tt := range []struct {
		name, in string
		cfg      Config
		reason   Reason
	}{
		{"label", `{"label":"` + long + `"}`, Config{}, ReasonLabel},
		{"feature name", `{"features":{"` + long + `":[1]}}`, Config{}, ReasonType},
		{"feature name, range", `{"features":{"` + long + `":1e300}}`, Config{}, ReasonRange},
		{"many digits", `{"x":[` + digits + `]}`, Config{}, ReasonNonFinite},
		{"many digits and a fraction", `{"x":[` + digits + `.5]}`, Config{}, ReasonNonFinite},
		{"long number in range check", `{"x":[1` + strings.Repeat("0", 200) + `]}`, Config{}, ReasonRange},
	} {
		d, err := NewDecoder(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		var ev Event
		err = d.Decode([]byte(tt.in), &ev)
		if reasonOf(err) != tt.reason {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.reason)
			continue
		}
		if msg := err.Error(); len(msg) > 400 || strings.Contains(msg, "\n") {
			t.Errorf("%s: message of %d bytes: %.200q", tt.name, len(msg), msg)
		}
	}
	for _, in := range []string{"1 " + digits + ":x\n", "1 1:" + digits + "x\n", long + " 1:1\n", "1 " + long + "\n"} {
		r, err := NewReader(strings.NewReader(in), "in.libsvm", Config{})
		if err != nil {
			t.Fatal(err)
		}
		var ev Event
		if err := r.Next(&ev); err == nil || len(err.Error()) > 400 {
			t.Errorf("libsvm %.40q...: error %.200v (%d bytes)", in, err, len(err.Error()))
		}
	}
}

func TestClip(t *testing.T) {
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	s := strings.Repeat("a", maxQuoted-1) + "é" + "tail"
	got := clip(s)
	if got != strings.Repeat("a", maxQuoted-1)+"..." {
		t.Errorf("clip cuts inside a rune or keeps too much: %q", got)
	}
}
