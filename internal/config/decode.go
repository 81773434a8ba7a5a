package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/event"
	"github.com/streamlearn/streamlearn/internal/learners"
)

var errEOF = errors.New("EOF")

// yamlError rewrites yaml.v3's "yaml: line N: msg" and "yaml: unmarshal
// errors:\n  line N: msg" into one line "file:N: msg".
func yamlError(name string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.TrimSpace(msg)
	if first, _, ok := strings.Cut(msg, "\n"); ok {
		msg = first
	}
	e := &Error{File: name, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, m, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				e.Line, e.Msg = n, m
			}
		}
	}
	return e
}

// keyAtLine returns the path of the key whose scalar value starts on line
// ("features.bits", "learners[0].eta") and is value, or "" when there is
// none, or more than one.
func keyAtLine(n *yaml.Node, line int, value, path string) string {
	var found []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Line == line && v.Kind == yaml.ScalarNode && v.Value == value {
					found = append(found, join(path, k.Value))
				}
				walk(v, join(path, k.Value))
			}
		case yaml.SequenceNode:
			for i, e := range n.Content {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(n, path)
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// MaxExpandedNodes bounds the nodes of a configuration, as written and
// with its aliases expanded (each alias counted as the nodes of its
// anchor): past it Parse refuses the file at once, as Kubernetes refuses
// YAML that expands past its limits, rather than walk and decode a tree
// exponential in the number of anchors. Its error says which of the two
// it is: the file's own nodes, or its aliases.
const MaxExpandedNodes = 100_000

// nodes returns the nodes of n as written, an alias counting one, or a
// number past MaxExpandedNodes when there are more.
func nodes(n *yaml.Node) int {
	total := 1
	for _, c := range n.Content {
		total += nodes(c)
		if total > MaxExpandedNodes {
			break
		}
	}
	return total
}

// expandedSize returns the nodes of n with its aliases expanded, in time
// linear in the nodes of the file: sizes holds each node's once known (-1
// while it is being counted, so that an anchor containing itself, which
// selfAlias reports, is not followed again). It stops counting past
// MaxExpandedNodes.
func expandedSize(n *yaml.Node, sizes map[*yaml.Node]int) int {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1
		}
		n = n.Alias
	}
	if s, ok := sizes[n]; ok {
		return max(s, 0)
	}
	sizes[n] = -1
	total := 1
	for _, c := range n.Content {
		total += expandedSize(c, sizes)
		if total > MaxExpandedNodes {
			break
		}
	}
	sizes[n] = total
	return total
}

// selfAlias returns an alias inside the node it refers to (`&w {weak: *w}`),
// or nil; active holds the nodes being walked.
func selfAlias(n *yaml.Node, active map[*yaml.Node]bool) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		if active[n.Alias] {
			return n
		}
		n = n.Alias
	}
	active[n] = true
	defer delete(active, n)
	for _, c := range n.Content {
		if a := selfAlias(c, active); a != nil {
			return a
		}
	}
	return nil
}

// mappingPairs returns the key and value nodes of a mapping, with YAML
// merge keys (`<<: *base`, `<<: [*a, *b]`) expanded: merged pairs first,
// the mapping's own after, so that a key given twice counts as the last.
func mappingPairs(n *yaml.Node) []*yaml.Node {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var merged, own []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag != "!!merge" {
			own = append(own, k, v)
			continue
		}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if v.Kind == yaml.SequenceNode {
			for _, e := range v.Content {
				merged = append(merged, mappingPairs(e)...)
			}
		} else {
			merged = append(merged, mappingPairs(v)...)
		}
	}
	return append(merged, own...)
}

// checkKeys walks the YAML tree against the Go type and adds to p every
// key that no field takes and every value of the wrong shape; it does not
// walk into a value of the wrong shape.
func checkKeys(p *problems, n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[time.Duration]() {
			return
		}
		if t == reflect.TypeFor[Learner]() {
			return // its keys are its algorithm's: checkLearnerKeys
		}
		if t == reflect.TypeFor[learners.Spec]() {
			if n.Kind != yaml.MappingNode {
				p.add(&Error{Line: n.Line, Key: path, Msg: "want a mapping of keys (algorithm and its keys)"})
				return
			}
			checkAlgorithmKeys(p, n, path)
			return
		}
		if t == reflect.TypeFor[Sink]() && path == "sinks.dead_letters" && n.Kind == yaml.ScalarNode && n.Value == DeadLettersOff {
			return // discarded: Sinks.UnmarshalYAML
		}
		if n.Kind != yaml.MappingNode {
			msg := "want a mapping of keys"
			if t == reflect.TypeFor[Sink]() {
				msg += ", a sink's kind and where it writes: {kind: file, path: FILE}, or a broker's"
				if path == "sinks.dead_letters" {
					msg += ", or " + DeadLettersOff + " to discard them"
				}
			}
			p.add(&Error{Line: n.Line, Key: path, Msg: msg})
			return
		}
		fields := yamlFields(t)
		here, known := "known keys here", slices.Sorted(maps.Keys(fields))
		if t == reflect.TypeFor[Sink]() {
			// A sink of a known kind takes its kind's keys: a slip is
			// matched, and listed, among them alone.
			if kind := valueOf(n, "kind"); sinkKeys[kind] != nil {
				here, known = "a "+kind+" sink's keys", sinkKeys[kind]
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("unknown key (%s: %s)", here, strings.Join(known, ", "))
				near := event.Nearest(k.Value, known)
				if near != "" {
					msg = fmt.Sprintf("unknown key: did you mean %s? (%s: %s)", near, here, strings.Join(known, ", "))
				}
				p.add(&Error{Line: k.Line, Key: join(path, k.Value), Msg: msg})
				if near != "" {
					p.suggested[join(path, near)] = true
				}
				continue
			}
			checkKeys(p, v, ft, join(path, k.Value))
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.add(kindError(n, t, path))
			return
		}
		for i, e := range n.Content {
			checkKeys(p, e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			p.add(kindError(n, t, path))
		}
		// A scalar of the wrong type (`bits: many`) is the decoder's to
		// report; Parse names its key.
	}
}

// valueOf returns the scalar value of key in the mapping n, or "".
func valueOf(n *yaml.Node, key string) string {
	pairs := mappingPairs(n)
	v := ""
	for j := 0; j+1 < len(pairs); j += 2 {
		if pairs[j].Value == key && pairs[j+1].Kind == yaml.ScalarNode {
			v = pairs[j+1].Value
		}
	}
	return v
}

// kindError reports a value of the wrong shape at path (a mapping or a
// list where a single value goes, or the other way round), which the
// decoder would report without its key: "want a list of strings, got a
// mapping".
func kindError(n *yaml.Node, t reflect.Type, path string) *Error {
	got := "a single value " + strconv.Quote(n.Value)
	switch n.Kind {
	case yaml.MappingNode:
		got = "a mapping"
	case yaml.SequenceNode:
		got = "a list"
	}
	want, _ := describe(t)
	return &Error{Line: n.Line, Key: path, Msg: fmt.Sprintf("want %s, got %s", want, got)}
}

// describe names what a value of type t is written as, one and many:
// "a list of strings", "lists of strings".
func describe(t reflect.Type) (one, many string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration (as 5s)", "durations"
	case t.Kind() == reflect.String:
		return "a string", "strings"
	case t.Kind() == reflect.Bool:
		return "true or false", "booleans"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "a whole number", "whole numbers"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number", "numbers"
	case t.Kind() == reflect.Slice:
		_, elems := describe(t.Elem())
		return "a list of " + elems, "lists of " + elems
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "a mapping of keys", "mappings of keys"
	}
	return "a value", "values"
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for k, v := range yamlFields(f.Type) {
				m[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOf finds the line of the key at path ("learners[1].class.points")
// in the document, or of its nearest existing ancestor.
func lineOf(doc *yaml.Node, path string) int {
	line := 0
	n := doc
	for _, part := range splitPath(path) {
		switch {
		case part.index >= 0:
			if n.Kind != yaml.SequenceNode || part.index >= len(n.Content) {
				return line
			}
			n = n.Content[part.index]
			line = n.Line
		default:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part.key {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		}
	}
	return line
}

type pathPart struct {
	key   string
	index int
}

func splitPath(path string) []pathPart {
	var parts []pathPart
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			continue
		}
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			parts = append(parts, pathPart{key: key, index: -1})
		}
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			if n, err := strconv.Atoi(num); err == nil {
				parts = append(parts, pathPart{index: n})
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return parts
}
