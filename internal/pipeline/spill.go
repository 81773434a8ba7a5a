package pipeline

import (
	"fmt"
	"os"
	"slices"
)

// A spill holds the encodings of the models a Keyed evicted, by key.
// The bytes Get returns are the caller's; those Put is given are the
// spill's (the caller does not modify them after).
type spill interface {
	Put(key string, b []byte) error
	Get(key string) ([]byte, bool, error)
	// Ref returns an immutable reference to key's encoding as of now,
	// which stays readable after later Puts and Deletes (serving copies
	// hold them).
	Ref(key string) (StateRef, bool)
	Delete(key string)
	Has(key string) bool
	Len() int
	// Bytes is the size of the encodings held, keys included.
	Bytes() int64
	// Each calls f with every key, in no order.
	Each(f func(key string))
}

// StateRef is a reference to a model's encoding, resident or spilled.
type StateRef struct {
	b   []byte   // in memory
	f   *os.File // else in f at [off, off+n)
	off int64
	n   int
}

// Bytes returns the encoding.
func (r StateRef) Bytes() ([]byte, error) {
	if r.f == nil {
		return r.b, nil
	}
	b := make([]byte, r.n)
	if _, err := r.f.ReadAt(b, r.off); err != nil {
		return nil, fmt.Errorf("pipeline: keyed: reading an evicted model: %w", err)
	}
	return b, nil
}

// memSpill keeps the encodings in memory.
type memSpill map[string][]byte

func (m memSpill) Put(key string, b []byte) error { m[key] = b; return nil }
func (m memSpill) Get(key string) ([]byte, bool, error) {
	b, ok := m[key]
	return b, ok, nil
}
func (m memSpill) Ref(key string) (StateRef, bool) {
	b, ok := m[key]
	return StateRef{b: b}, ok
}
func (m memSpill) Delete(key string)   { delete(m, key) }
func (m memSpill) Has(key string) bool { _, ok := m[key]; return ok }
func (m memSpill) Len() int            { return len(m) }
func (m memSpill) Bytes() int64        { return spillBytes(m) }
func (m memSpill) Each(f func(key string)) {
	for key := range m {
		f(key)
	}
}

// fileSpill keeps the encodings in a file of their own, appended to, and
// only an index in memory: the heap holds a few dozen bytes per evicted
// key. The encodings are appended through a buffer of spillBuffer bytes,
// one write a buffer rather than one an eviction; those not yet written
// are read from it. The file is removed as soon as it is made (Unix): it is gone with
// the process, and only the checkpoints hold the models durably. When
// the file holds more dead bytes than live ones (and at least
// compactAfter), the live encodings are copied to a new file; the old one
// is closed by the garbage collector once no StateRef holds it.
type fileSpill struct {
	dir string
	f   *os.File
	end int64
	// buf holds the bytes of [end-len(buf), end), not yet written to f.
	buf   []byte
	index map[string]span
	live  int64 // bytes of the encodings indexed, keys included
	dead  int64
	// compactions counts the compactions; compactErr is the last
	// failure of one.
	compactions int
	compactErr  error
}

type span struct {
	off int64
	n   int
}

// spillBuffer is the size of a fileSpill's buffer of encodings.
const spillBuffer = 1 << 20

// compactAfter is the least dead bytes a fileSpill compacts (a variable
// for tests).
var compactAfter int64 = 4 << 20

func newFileSpill(dir string) (*fileSpill, error) {
	s := &fileSpill{dir: dir, index: map[string]span{}}
	f, err := s.create()
	if err != nil {
		return nil, err
	}
	s.f = f
	return s, nil
}

func (s *fileSpill) create() (*os.File, error) {
	f, err := os.CreateTemp(s.dir, "streamlearn-spill-*")
	if err != nil {
		return nil, fmt.Errorf("pipeline: keyed: a file for evicted models: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("pipeline: keyed: a file for evicted models: %w", err)
	}
	return f, nil
}

func (s *fileSpill) Put(key string, b []byte) error {
	if len(s.buf) > 0 && len(s.buf)+len(b) > spillBuffer {
		if err := s.flush(); err != nil {
			return fmt.Errorf("pipeline: keyed: evicting key %q: %w", key, err)
		}
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, spillBuffer)
	}
	s.buf = append(s.buf, b...)
	s.drop(key)
	s.index[key] = span{off: s.end, n: len(b)}
	s.end += int64(len(b))
	s.live += int64(len(key) + len(b))
	if s.dead > s.live && s.dead >= compactAfter {
		// The encoding is stored: a compaction that fails leaves the
		// file as it was (only larger), and the next Put tries again.
		s.compactErr = s.compact()
	}
	return nil
}

func (s *fileSpill) drop(key string) {
	if old, ok := s.index[key]; ok {
		s.live -= int64(len(key) + old.n)
		s.dead += int64(old.n)
		delete(s.index, key)
	}
}

func (s *fileSpill) Ref(key string) (StateRef, bool) {
	sp, ok := s.index[key]
	if start := s.end - int64(len(s.buf)); ok && sp.off >= start {
		// Not written yet: written now, or, when the write fails, a
		// copy (the buffer is reused).
		if err := s.flush(); err != nil {
			return StateRef{b: slices.Clone(s.buf[sp.off-start : sp.off-start+int64(sp.n)])}, true
		}
	}
	return StateRef{f: s.f, off: sp.off, n: sp.n}, ok
}

func (s *fileSpill) Get(key string) ([]byte, bool, error) {
	sp, ok := s.index[key]
	if !ok {
		return nil, false, nil
	}
	if start := s.end - int64(len(s.buf)); sp.off >= start {
		return slices.Clone(s.buf[sp.off-start : sp.off-start+int64(sp.n)]), true, nil
	}
	b, err := StateRef{f: s.f, off: sp.off, n: sp.n}.Bytes()
	return b, true, err
}

// flush writes the buffer to the file.
func (s *fileSpill) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	if _, err := s.f.WriteAt(s.buf, s.end-int64(len(s.buf))); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return nil
}

func (s *fileSpill) Delete(key string)   { s.drop(key) }
func (s *fileSpill) Has(key string) bool { _, ok := s.index[key]; return ok }
func (s *fileSpill) Len() int            { return len(s.index) }
func (s *fileSpill) Bytes() int64        { return s.live }
func (s *fileSpill) Each(f func(key string)) {
	for key := range s.index {
		f(key)
	}
}

// compact copies the live encodings to a new file.
func (s *fileSpill) compact() error {
	if err := s.flush(); err != nil {
		return fmt.Errorf("pipeline: keyed: compacting evicted models: %w", err)
	}
	f, err := s.create()
	if err != nil {
		return err
	}
	fail := func(err error) error {
		f.Close()
		return fmt.Errorf("pipeline: keyed: compacting evicted models: %w", err)
	}
	// The live encodings gathered a buffer at a time: one write each, and
	// the last stays the new file's buffer.
	index := make(map[string]span, len(s.index))
	var end int64
	out := make([]byte, 0, spillBuffer)
	for key, sp := range s.index {
		if len(out) > 0 && len(out)+sp.n > spillBuffer {
			if _, err := f.WriteAt(out, end-int64(len(out))); err != nil {
				return fail(err)
			}
			out = out[:0]
		}
		n := len(out)
		out = slices.Grow(out, sp.n)[:n+sp.n]
		if _, err := s.f.ReadAt(out[n:], sp.off); err != nil {
			return fail(err)
		}
		index[key] = span{off: end, n: sp.n}
		end += int64(sp.n)
	}
	// The old file stays open for the StateRefs that hold it.
	s.f, s.index, s.end, s.buf, s.dead = f, index, end, out, 0
	s.compactions++
	return nil
}
