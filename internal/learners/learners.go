// Package learners is the registry of learner algorithms. Each algorithm
// declares, in one file of this package, its name as the configuration
// types it, its parameters (a struct whose yaml tags are its keys), their
// validation, the bound the tracker publishes for it with the theorem, and
// its constructor. The configuration decodes and checks a learner's keys
// through the registry, and the pipeline builds learners with it: adding
// an algorithm is one new file here, its tests and its documentation.
//
// The package imports only the learning core (online, experts, boost,
// codec).
package learners

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Env is what building or checking a learner may need besides its
// parameters.
type Env struct {
	// Name is the learner's name; Prior the names of the learners
	// configured before it, in order.
	Name  string
	Prior []string
	// Built are the learners of Prior, built, in the same order (for New
	// only): a learner over other learners takes its own from them.
	Built []online.Learner
	// Bits is features.bits: the learner's vectors have 2^Bits slots.
	Bits uint
	// Space, when not nil, is the Space (of Bits) of a sparse model: New
	// builds a learner that has a sparse form over it (it then reads
	// vectors in the space's numbers, online.Spaced), the others dense.
	Space *online.Space
	// Classes is the number of classes (input.classes) for a Multiclass
	// algorithm's New; 0 for the binary ones.
	Classes int
}

// An Algorithm is one learner algorithm of the registry.
type Algorithm struct {
	// Name is the algorithm as the configuration names it.
	Name string
	// Summary says what it does, in one line.
	Summary string
	// Bound says what the tracker checks for it and which theorem
	// promises it; empty for an algorithm without a theorem.
	Bound string
	// BoundOf, when not nil, says it for the parameters params (from
	// Params): the branch of Bound that applies to them.
	BoundOf func(params any) string
	// DelayedBoundOf, when not nil, says what the bound becomes for the
	// parameters params when labels come late (labels.delayed), d the
	// most labels learned while an event waited (the report's
	// delay_rounds): the bound the tracker then checks. It returns ""
	// when the theorem says nothing of delays for params; nil means it
	// does for none. Without a delayed form, the tracker reports the
	// bound as assuming immediate labels and checks it no more.
	DelayedBoundOf func(params any) string
	// Params returns new parameters: a pointer to a struct whose yaml
	// tags are the algorithm's keys (besides name and algorithm), its zero
	// value meaning every default.
	Params func() any
	// Validate checks params (from Params); an error's message starts
	// with the key at fault and ": " when there is one ("margin: ...").
	// Nil means every value is valid.
	Validate func(params any, env Env) error
	// New builds the learner.
	New func(params any, env Env) (online.Learner, error)
	// Multiclass says the learner predicts one of env.Classes classes by
	// itself; it needs input.classes. With classes, the other algorithms
	// run one versus the rest (online.OneVsRest).
	Multiclass bool
}

var algorithms = map[string]*Algorithm{}

// Register adds a to the registry. It panics when the name is taken or a
// required field is missing: registration happens in init functions.
func Register(a *Algorithm) {
	switch {
	case a.Name == "" || a.Params == nil || a.New == nil:
		panic("learners: Register needs a name, Params and New")
	case algorithms[a.Name] != nil:
		panic("learners: algorithm " + a.Name + " registered twice")
	}
	algorithms[a.Name] = a
}

// Lookup returns the algorithm named name.
func Lookup(name string) (*Algorithm, bool) {
	a, ok := algorithms[name]
	return a, ok
}

// Names returns the names of the registered algorithms, sorted.
func Names() []string {
	names := make([]string, 0, len(algorithms))
	for n := range algorithms {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Keys returns the configuration keys of a's parameters, in the order of
// their fields, and the Go type of each.
func (a *Algorithm) Keys() ([]string, map[string]reflect.Type) {
	t := reflect.TypeOf(a.Params()).Elem()
	var keys []string
	types := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		keys = append(keys, name)
		types[name] = f.Type
	}
	return keys, types
}

// configured completes a, whose parameters are a learner package's
// configuration T (validated by its own Validate, whose errors start with
// the algorithm's name) and whose learners ctor builds over 2^bits slots.
func configured[T interface{ Validate() error }, L online.Learner](a Algorithm, ctor func(bits uint, cfg T) (L, error)) *Algorithm {
	a.Params = func() any { return new(T) }
	a.Validate = func(p any, _ Env) error {
		c, err := params[T](a.Name, p)
		if err != nil {
			return err
		}
		return trim(a.Name, (*c).Validate())
	}
	a.New = func(p any, env Env) (online.Learner, error) {
		c, err := params[T](a.Name, p)
		if err != nil {
			return nil, err
		}
		return learner(ctor(env.Bits, *c))
	}
	return &a
}

// sparseToo completes a, of configured, with the constructor of its
// learners' sparse form, which New uses when env.Space is set.
func sparseToo[T any, L online.Learner](a *Algorithm, ctor func(s *online.Space, cfg T) (L, error)) *Algorithm {
	dense := a.New
	a.New = func(p any, env Env) (online.Learner, error) {
		if env.Space == nil {
			return dense(p, env)
		}
		c, err := params[T](a.Name, p)
		if err != nil {
			return nil, err
		}
		return learner(ctor(env.Space, *c))
	}
	return a
}

// learner returns l as an online.Learner, or nil (not a typed nil) with
// err.
func learner[T online.Learner](l T, err error) (online.Learner, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// params is Validate's and New's first step: params must be what Params makes.
func params[T any](a string, p any) (*T, error) {
	v, ok := p.(*T)
	if !ok || v == nil {
		return nil, fmt.Errorf("learners: %s: parameters of type %T, want %T", a, p, new(T))
	}
	return v, nil
}

// trim turns a learner package's "alg: key: message" error into
// "key: message".
func trim(alg string, err error) error {
	if err == nil {
		return nil
	}
	if msg, ok := strings.CutPrefix(err.Error(), alg+": "); ok {
		return fmt.Errorf("%s", msg)
	}
	return err
}
