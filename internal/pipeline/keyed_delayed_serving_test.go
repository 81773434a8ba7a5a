package pipeline

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// TestKeyedDelayedServingExact: models per key with delayed labels and
// a standard scaler, bounded to one resident model in bytes (every other
// key evicted and decoded again into a new Space, with events waiting),
// are the unbounded ones; ServingStates, with Freezes between, always
// gives each key's current encoding; Footprint counted is what is held.
func TestKeyedDelayedServingExact(t *testing.T) {
	for _, learners := range []string{sparseLearners, sparseMore} {
		c := mustConfig(t, "features: {bits: 12, scale: standard}\nlabels: {delayed: true, wait: 30, max_pending: 1000}\n"+learners)
		lines := withKeys(wordStream(3000, true, 5), func(i int) uint64 { return uint64(i * 7 % 11) })
		bounded, err := NewKeyed(c, KeyedOptions{MaxBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		free, err := NewKeyed(c, KeyedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dec := mustDecoder(t, c)
		var ev event.Event
		var prev map[string]StateRef
		for i, line := range lines {
			if err := dec.Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
			var preds [2]string
			for j, k := range []*Keyed{bounded, free} {
				_, p, r, err := k.Process(&ev)
				if err != nil {
					t.Fatal(err)
				}
				preds[j] = fmt.Sprint(p, r)
			}
			if preds[0] != preds[1] {
				t.Fatalf("record %d: bounded %s, free %s", i, preds[0], preds[1])
			}
			if i%97 == 0 {
				if _, err := free.Freeze(nil); err != nil {
					t.Fatal(err)
				}
			}
			if i%50 == 49 {
				if prev, err = free.ServingStates(prev); err != nil {
					t.Fatal(err)
				}
				for key, ref := range prev {
					got, err := ref.Bytes()
					if err != nil {
						t.Fatal(err)
					}
					p, err := free.peek(key)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, mustMarshal(t, p)) {
						t.Fatalf("record %d: key %s: the serving state is stale", i, key)
					}
				}
			}
			if i%500 == 499 {
				b1, err := bounded.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				b2, err := free.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b1, b2) {
					t.Fatalf("record %d: bounded and free differ", i)
				}
			}
		}
		if bounded.Evicted() == 0 {
			t.Fatal("no evictions")
		}
	}
}
