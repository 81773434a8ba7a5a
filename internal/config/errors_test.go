package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestEveryError: a file with many errors gets them all, each naming its
// line and key, sorted by line, and none that an earlier one explains: a
// misspelled algorithm's keys are not checked, a misspelled path is not
// also missing, a value of the wrong type is not also out of range (nor
// hides the other sinks), and a misspelled sink key is matched against
// its kind's keys alone.
func TestEveryError(t *testing.T) {
	const file = `features:
  bits: 40
  scale: wide
learners:
  - {name: a, algorithm: perceptorn, bias: true, eta: 0.5, margin: x, class: y, radius: 3}
  - {name: b, algorithm: ogd, loss: hnge, eta: fast}
  - {name: a, algorithm: perceptron}
labels:
  delayd: true
sinks:
  dead_letters: {kind: file, pth: bad.jsonl}
  reports: {kind: file, path: r.jsonl, topci: x, every: -1}
  predictions: nope
checkpoint:
  own_wait: -1s
models: {by: key, max_bytes: 0}
`
	_, err := Parse("config.yaml", []byte(file))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v (%T), want Errors", err, err)
	}
	want := []string{
		"config.yaml:2: features.bits: 40 is outside 1..24",
		`config.yaml:3: features.scale: "wide" is not one of none, standard, l2`,
		`config.yaml:5: learners[0].algorithm: "perceptorn" is not one of adaboost-ol, adagrad, consistent, halving, kernel-perceptron, last-label, majority, multiclass-perceptron, ogd, pegasos, perceptron, soa, weighted-majority: did you mean perceptron?`,
		"config.yaml:6: learners[1].eta: cannot unmarshal !!str `fast` into float64",
		`config.yaml:6: learners[1].loss: unknown loss "hnge" (want hinge, logistic or squared)`,
		`config.yaml:7: learners[2].name: "a" is also the name of learners[0]`,
		"config.yaml:9: labels.delayd: unknown key: did you mean delayed? (known keys here: default_label, delayed, max_pending, wait)",
		"config.yaml:11: sinks.dead_letters.pth: unknown key: did you mean path? (a file sink's keys: every, interval, kind, path)",
		"config.yaml:12: sinks.reports.topci: unknown key (a file sink's keys: every, interval, kind, path)",
		"config.yaml:12: sinks.reports.every: must not be negative",
		"config.yaml:13: sinks.predictions: want a mapping of keys, a sink's kind and where it writes: {kind: file, path: FILE}, or a broker's",
		"config.yaml:15: checkpoint.own_wait: must not be negative",
		"config.yaml:16: models.max_bytes: 0 is no bound: leave the key out for the default, 536870912 (512 MiB), or give the bytes of models per key a partition keeps resident (there is no unbounded setting)",
	}
	got := strings.Split(err.Error(), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if len(es) != len(want) {
		t.Errorf("%d errors, want %d", len(es), len(want))
	}
	var first *Error
	if !errors.As(err, &first) || first.Line != 2 || first.Key != "features.bits" {
		t.Errorf("errors.As(*Error) = %+v, want the first, features.bits at line 2", first)
	}
}

// TestTypeErrorsOfOneLine: values of the wrong type at two keys of one
// line (a learner written as one flow mapping, as the examples write
// them) are two errors, each naming its key; the same value refused by
// the key check and by the decoder is one.
func TestTypeErrorsOfOneLine(t *testing.T) {
	const file = `learners:
  - {name: a, algorithm: adagrad, eta: fast, bias: maybe}
  - {name: w, algorithm: weighted-majority, experts: a}
sinks: {reports: {kind: file, path: r.jsonl, every: x}, predictions: {kind: file, path: p.jsonl, every: y}}
`
	_, err := Parse("config.yaml", []byte(file))
	want := []string{
		"config.yaml:2: learners[0].eta: cannot unmarshal !!str `fast` into float64",
		"config.yaml:2: learners[0].bias: cannot unmarshal !!str `maybe` into bool",
		`config.yaml:3: learners[1].experts: want a list of strings, got a single value "a"`,
		"config.yaml:4: sinks.reports.every: cannot unmarshal !!str `x` into int",
		"config.yaml:4: sinks.predictions.every: cannot unmarshal !!str `y` into int",
	}
	if err == nil || !slices.Equal(strings.Split(err.Error(), "\n"), want) {
		t.Errorf("errors:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// TestSinkKeysOfItsKind: each kind's keys, which an unknown key of a sink
// is matched against, are keys of a sink.
func TestSinkKeysOfItsKind(t *testing.T) {
	fields := yamlFields(reflect.TypeFor[Sink]())
	for kind, keys := range sinkKeys {
		for _, k := range keys {
			if _, ok := fields[k]; !ok {
				t.Errorf("sinkKeys[%s]: %s is no key of a sink", kind, k)
			}
		}
	}
	for k := range fields {
		if !slices.ContainsFunc(slices.Collect(func(yield func([]string) bool) {
			for _, ks := range sinkKeys {
				if !yield(ks) {
					return
				}
			}
		}), func(ks []string) bool { return slices.Contains(ks, k) }) {
			t.Errorf("sink key %s is a key of no kind", k)
		}
	}
}
