package config

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Errors are every error of one configuration file, sorted by line (an
// error without a line, such as a missing section, first). Parse returns
// them when a file has more than one; one error is returned as its
// *Error. Its Error is one error a line.
type Errors []*Error

// Error returns every error's, a line each.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns each error, for errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// problems collects the errors of one file as the checks find them,
// leaving out the ones an earlier error explains: an error at a key at or
// under one already reported (a value of the wrong type, then its
// validation), or above it (a learner missing the key that was
// misspelled), at a key an unknown key was taken for (`paht`, then "a file
// sink needs a path"), or on the line of a value the decoder refused
// when the key of that value is not known (a zero in its place).
type problems struct {
	list []*Error
	// suggested holds the keys that a did-you-mean named.
	suggested map[string]bool
	// typeLines holds the lines of the values the decoder refused whose
	// keys are not known.
	typeLines map[int]bool
	// doc, when known, gives an error without a line the line of its key.
	doc *yaml.Node
}

func newProblems() *problems {
	return &problems{suggested: map[string]bool{}, typeLines: map[int]bool{}}
}

// add adds err, an *Error or a plain error (kept as its message), unless
// an earlier error explains it; nil is ignored.
func (p *problems) add(err error) {
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Msg: err.Error()}
	}
	if e.Line == 0 && p.doc != nil {
		e.Line = lineOf(p.doc, e.Key)
	}
	if p.explained(e) {
		return
	}
	p.list = append(p.list, e)
}

// explained reports whether an error already added explains e.
func (p *problems) explained(e *Error) bool {
	if e.Key != "" && p.suggested[e.Key] {
		return true
	}
	if e.Line > 0 && p.typeLines[e.Line] {
		return true
	}
	for _, r := range p.list {
		if r.Key == "" || e.Key == "" {
			if r.Key == e.Key && r.Line == e.Line {
				return true
			}
			continue
		}
		if within(e.Key, r.Key) || within(r.Key, e.Key) {
			return true
		}
	}
	return false
}

// within reports whether key is path or a key under it: learners[0].eta
// is within learners[0] and learners, not within learners[0].e.
func within(key, path string) bool {
	return key == path || strings.HasPrefix(key, path+".") || strings.HasPrefix(key, path+"[")
}

// err returns nil, the one error, or every error sorted by line, each
// naming file.
func (p *problems) err(file string) error {
	for _, e := range p.list {
		e.File = file
	}
	slices.SortStableFunc(p.list, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	switch len(p.list) {
	case 0:
		return nil
	case 1:
		return p.list[0]
	}
	return Errors(p.list)
}
