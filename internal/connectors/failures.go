package connectors

import (
	"errors"
	"fmt"
)

// failures are a sink's delivery failures not yet reported, each with the
// number of its first message in publish order, so that a barrier's wait
// reports those of the messages before it and only those: a failure of a
// later message is the later wait's, whose commit it must stop. Callers
// hold the sink's lock.
type failures struct {
	list []failure // ascending seq, mostly: failures arrive about in order
}

type failure struct {
	seq uint64
	err error
}

// add records err, a failure of messages from number seq.
func (f *failures) add(seq uint64, err error) {
	f.list = append(f.list, failure{seq, err})
}

// before returns (and forgets) the failures of messages numbered below
// target: the first one's error, with how many more there were.
func (f *failures) before(target uint64) error {
	var first error
	n := 0
	kept := f.list[:0]
	for _, x := range f.list {
		if x.seq >= target {
			kept = append(kept, x)
			continue
		}
		if first == nil {
			first = x.err
		}
		n++
	}
	clear(f.list[len(kept):])
	f.list = kept
	switch {
	case n == 0:
		return nil
	case n == 1:
		return first
	}
	return fmt.Errorf("%w (and %d more failures)", first, n-1)
}

// any returns (and forgets) every failure: Close's.
func (f *failures) any() error {
	errs := make([]error, 0, min(len(f.list), 8))
	for i, x := range f.list {
		if i < 8 {
			errs = append(errs, x.err)
		}
	}
	f.list = nil
	return errors.Join(errs...)
}
