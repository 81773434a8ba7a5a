package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/streamlearn/streamlearn/internal/pipeline"
)

// minAccuracy is `replay --min-accuracy NAME=VALUE`, repeatable and
// comma-separated: the accuracy each named learner must reach.
type minAccuracy map[string]float64

func (m minAccuracy) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%g", name, m[name]))
	}
	return strings.Join(parts, ",")
}

func (m minAccuracy) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		name, v, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return fmt.Errorf("%q: want NAME=ACCURACY", part)
		}
		a, err := strconv.ParseFloat(v, 64)
		if err != nil || !(a >= 0 && a <= 1) {
			return fmt.Errorf("%q: the accuracy is a number from 0 to 1", part)
		}
		m[name] = a
	}
	return nil
}

// gate is what `replay` checks of a report: each learner's accuracy
// against its minimum, and, with failOnViolation, that no published
// bound was broken.
type gate struct {
	min             minAccuracy
	failOnViolation bool
	learners        []string // the configured learners, which min may name
}

// failures returns, per learner of r in order, what it failed (nil when
// it passed), and an error when a learner named in the minimums is not in
// the report.
func (g gate) failures(r pipeline.Report) ([][]string, error) {
	out := make([][]string, len(r.Learners))
	for i, l := range r.Learners {
		if want, ok := g.min[l.Name]; ok && l.Rounds == 0 {
			out[i] = append(out[i], fmt.Sprintf("no round scored on a real label: no accuracy to hold to %g", want))
		} else if ok && !(l.Accuracy >= want) {
			out[i] = append(out[i], fmt.Sprintf("accuracy %.4f is below %g", l.Accuracy, want))
		}
		if !g.failOnViolation {
			continue
		}
		if b := l.Bound; b != nil && b.Assumes == "" && !b.Holds {
			out[i] = append(out[i], fmt.Sprintf("%s bound %.4g exceeded (%s)", b.Kind, b.Value, b.Status.Text()))
		}
		if l.BoundViolations > 0 {
			out[i] = append(out[i], fmt.Sprintf("%d bound violations", l.BoundViolations))
		}
	}
	names := g.learners
	if names == nil {
		for _, l := range r.Learners {
			names = append(names, l.Name)
		}
	}
	for name := range g.min {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("--min-accuracy: no learner %q (the learners: %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// check returns an error saying every failure, or nil.
func (g gate) check(r pipeline.Report, fails [][]string) error {
	var msgs []string
	for i, f := range fails {
		if len(f) > 0 {
			msgs = append(msgs, r.Learners[i].Name+": "+strings.Join(f, ", "))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// JUnit XML, the report format CI systems read: one test case per
// learner.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"` // seconds, a decimal
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name       string          `xml:"name,attr"`
	Classname  string          `xml:"classname,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Failure    *junitFailure   `xml:"failure"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes r and its failures as JUnit XML to path, the suite
// named after the replayed files.
func writeJUnit(path, suite string, r pipeline.Report, fails [][]string) error {
	s := junitSuite{Name: suite, Tests: len(r.Learners), Time: strconv.FormatFloat(r.Seconds, 'f', 6, 64)}
	for i, l := range r.Learners {
		c := junitCase{Name: l.Name, Classname: "streamlearn.replay." + l.Algorithm, Properties: []junitProperty{
			{"rounds", strconv.FormatUint(l.Rounds, 10)},
			{"mistakes", strconv.FormatUint(l.Mistakes, 10)},
			{"accuracy", strconv.FormatFloat(l.Accuracy, 'g', -1, 64)}, // NaN: no round scored on a real label
			{"state_sha256", l.StateSHA256},
		}}
		if d := l.DefaultLabeled; d != nil {
			c.Properties = append(c.Properties, junitProperty{"default_labeled_rounds", strconv.FormatUint(d.Rounds, 10)},
				junitProperty{"default_labeled_mistakes", strconv.FormatUint(d.Mistakes, 10)})
		}
		if b := l.Bound; b != nil {
			c.Properties = append(c.Properties, junitProperty{"bound", fmt.Sprintf("%s <= %g, holds: %v, status: %s", b.Kind, b.Value, b.Holds, b.Status)})
		}
		if len(fails[i]) > 0 {
			s.Failures++
			c.Failure = &junitFailure{Message: strings.Join(fails[i], "; "), Text: strings.Join(fails[i], "\n")}
		}
		s.Cases = append(s.Cases, c)
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{s}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}
