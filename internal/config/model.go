package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamlearn/streamlearn/internal/learners"
)

// ModelSections are the sections of a configuration that define a model
// — how records are decoded, how events become vectors, the learners,
// which of them answers for the filter, and the labels — in the order
// ModelYAML writes them. A model file carries them (ModelYAML); the
// other sections (source, sinks, http, checkpoint, models) say where a
// model runs, and are not a model's.
var ModelSections = []string{"input", "features", "learners", "answer", "labels"}

// servingSections are the ModelSections that choose what a model
// answers, not what it learns: ModelDifference does not compare them, so
// a configuration given with a model file may answer with another of
// its learners.
var servingSections = []string{"answer"}

// ModelYAML returns the model sections of c (ModelSections) as a
// configuration file: Parse reads it back into a configuration of the
// same model (the same input, features, learners and labels, every
// default filled in as in c), whose other sections are their defaults.
// It holds no secret and no address. Keys at their zero value are left
// out, as a file that does not set them reads the same; equal model
// sections give equal bytes.
func (c *Config) ModelYAML() ([]byte, error) {
	doc, err := c.modelNode()
	if err != nil {
		return nil, err
	}
	doc.HeadComment = "The model sections of the configuration that made this model (streamlearn)."
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("config: the model sections: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: the model sections: %w", err)
	}
	return b.Bytes(), nil
}

// UseModelOf sets c's model sections (ModelSections) to m's, leaving
// where c runs (its other sections) as they are.
func (c *Config) UseModelOf(m *Config) {
	c.Input, c.Features, c.Learners, c.Answer, c.Labels = m.Input, m.Features, m.Learners, m.Answer, m.Labels
}

// ModelDifference names the first difference between the model sections
// of a and b (ModelSections, in their order, then key by key), as
// "learners[1] (ada).eta: 0.5 in A, 0.1 in B" with nameA and nameB for
// A and B; "" when they are the same. Which learner answers (answer) is
// not compared: it changes what is served, not the model.
func ModelDifference(a, b *Config, nameA, nameB string) (string, error) {
	na, err := a.modelNode(servingSections...)
	if err != nil {
		return "", err
	}
	nb, err := b.modelNode(servingSections...)
	if err != nil {
		return "", err
	}
	return firstDifference(na, nb, "", nameA, nameB), nil
}

// modelNode returns c's model sections but those of skip as a YAML
// mapping, each section and key present only when not at its zero value.
func (c *Config) modelNode(skip ...string) (*yaml.Node, error) {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	v := reflect.ValueOf(c).Elem()
	for _, name := range ModelSections {
		if slices.Contains(skip, name) {
			continue
		}
		f, ok := fieldByTag(v, name)
		if !ok {
			return nil, fmt.Errorf("config: no section %s", name) // a programming error: ModelSections is this file's
		}
		n, err := valueNode(f)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", name, err)
		}
		if n != nil {
			doc.Content = append(doc.Content, scalar(name), n)
		}
	}
	return doc, nil
}

// fieldByTag returns the field of struct v whose yaml key is name.
func fieldByTag(v reflect.Value, name string) (reflect.Value, bool) {
	for i := range v.NumField() {
		if yamlName(v.Type().Field(i)) == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// yamlName is the key of a struct field: its yaml tag's name, "" for one
// not in YAML.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// valueNode returns v as a YAML node; nil when v is its type's zero value
// (a nil pointer, but not a pointer to a zero value: a *bool false is
// not an unset one), or a struct whose every key is.
func valueNode(v reflect.Value) (*yaml.Node, error) {
	if v.IsZero() {
		return nil, nil
	}
	switch l := v.Interface().(type) {
	case Learner:
		return learnerNode(l)
	case learners.Spec: // adaboost-ol's weak: its keys have no yaml tags
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		n.Content = append(n.Content, scalar("algorithm"), scalar(l.Algorithm))
		return n, appendParams(n, l.Params)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.Elem().Kind() == reflect.Struct || v.Elem().Kind() == reflect.Pointer {
			return valueNode(v.Elem())
		}
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		if err := appendFields(n, v); err != nil {
			return nil, err
		}
		if len(n.Content) == 0 {
			return nil, nil
		}
		return n, nil
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			e, err := valueNode(v.Index(i))
			if err != nil {
				return nil, err
			}
			if e == nil { // a zero element keeps its place
				e = new(yaml.Node)
				if err := e.Encode(v.Index(i).Interface()); err != nil {
					return nil, err
				}
			}
			n.Content = append(n.Content, e)
		}
		return n, nil
	}
	n := new(yaml.Node)
	if err := n.Encode(v.Interface()); err != nil {
		return nil, err
	}
	return n, nil
}

// appendFields appends to the mapping n the keys of struct v not at their
// zero value, in the struct's order.
func appendFields(n *yaml.Node, v reflect.Value) error {
	for i := range v.NumField() {
		name := yamlName(v.Type().Field(i))
		if name == "" {
			continue
		}
		f, err := valueNode(v.Field(i))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if f != nil {
			n.Content = append(n.Content, scalar(name), f)
		}
	}
	return nil
}

// learnerNode returns a learner as one flow mapping: its name, algorithm,
// calibrate when set, then its algorithm's keys.
func learnerNode(l Learner) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	n.Content = append(n.Content, scalar("name"), scalar(l.Name), scalar("algorithm"), scalar(l.Algorithm))
	if l.Calibrate {
		n.Content = append(n.Content, scalar("calibrate"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	if err := appendParams(n, l.Params); err != nil {
		return nil, fmt.Errorf("learner %s: %w", l.Name, err)
	}
	return n, nil
}

// appendParams appends to the mapping n the keys of an algorithm's
// parameters (a pointer to its parameter struct; nil for none) not at
// their zero value.
func appendParams(n *yaml.Node, params any) error {
	if params == nil {
		return nil
	}
	p := reflect.ValueOf(params)
	for p.Kind() == reflect.Pointer && !p.IsNil() {
		p = p.Elem()
	}
	if p.Kind() != reflect.Struct {
		return nil
	}
	return appendFields(n, p)
}

// scalar is a string scalar node, quoted when YAML would read it as
// something else.
func scalar(s string) *yaml.Node {
	n := new(yaml.Node)
	n.SetString(s)
	return n
}

// firstDifference names the first difference between the nodes a and b
// of valueNode at path (nil for a key absent), as ModelDifference says.
func firstDifference(a, b *yaml.Node, path, nameA, nameB string) string {
	switch {
	case a == nil && b == nil:
		return ""
	case a != nil && b != nil && a.Kind == yaml.MappingNode && b.Kind == yaml.MappingNode:
		var keys []string // a's, then those only b has
		for _, n := range [2]*yaml.Node{a, b} {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i].Value; !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			if d := firstDifference(mapValue(a, k), mapValue(b, k), join(path, k), nameA, nameB); d != "" {
				return d
			}
		}
		return ""
	case a != nil && b != nil && a.Kind == yaml.SequenceNode && b.Kind == yaml.SequenceNode:
		for i := range max(len(a.Content), len(b.Content)) {
			var x, y *yaml.Node
			if i < len(a.Content) {
				x = a.Content[i]
			}
			if i < len(b.Content) {
				y = b.Content[i]
			}
			at := fmt.Sprintf("%s[%d]", path, i)
			if name := learnerName(x, y); name != "" {
				at += " (" + name + ")"
			}
			if d := firstDifference(x, y, at, nameA, nameB); d != "" {
				return d
			}
		}
		return ""
	}
	ta, tb := nodeText(a), nodeText(b)
	if ta == tb {
		return ""
	}
	return fmt.Sprintf("%s: %s in %s, %s in %s", path, ta, nameA, tb, nameB)
}

// mapValue returns the value of key k in mapping n, nil when absent.
func mapValue(n *yaml.Node, k string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i+1]
		}
	}
	return nil
}

// learnerName is the name of the learner x or y (a learners entry), ""
// when neither is one.
func learnerName(x, y *yaml.Node) string {
	for _, n := range [2]*yaml.Node{x, y} {
		if n != nil && n.Kind == yaml.MappingNode {
			if v := mapValue(n, "name"); v != nil {
				return v.Value
			}
		}
	}
	return ""
}

// nodeText is n as one line of YAML, "unset" for nil.
func nodeText(n *yaml.Node) string {
	if n == nil {
		return "unset"
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	c := *n
	c.Style |= yaml.FlowStyle
	b, err := yaml.Marshal(&c)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
