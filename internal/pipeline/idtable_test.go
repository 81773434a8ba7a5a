package pipeline

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/streamlearn/streamlearn/internal/testmode"
)

// idTable against a Go map under random sets and deletes, with keys that
// share their low bits (long probe runs, deletes in the middle of them).
func TestIDTable(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	rng := rand.New(rand.NewPCG(1, 2))
	// 50,000 steps per spread (STREAMLEARN_FULL=1: 200,000): the 3,000
	// keys fill the table to its steady ~2,000 within a few thousand. Every
	// key is compared every 997 steps and at each of the last 100
	// (STREAMLEARN_FULL=1: 1,000): those whole-table checks, with the
	// long probe runs of spread 64, are most of the test's time.
	steps, tail := testmode.Reps(50000, 200000), testmode.Reps(100, 1000)
	for _, spread := range []uint64{1 << 40, 1 << 10, 64} {
		var tab idTable
		ref := map[uint64]int32{}
		for step := range steps {
			k := idHash(uint64(rng.IntN(3000)) * spread)
			switch rng.IntN(3) {
			case 0, 1:
				v := int32(step)
				tab.set(k, v)
				ref[k] = v
			case 2:
				tab.del(k)
				delete(ref, k)
			}
			if step%997 == 0 || step >= steps-tail {
				if tab.n != len(ref) {
					t.Fatalf("spread %d step %d: %d keys, want %d", spread, step, tab.n, len(ref))
				}
				for k, v := range ref {
					if got, ok := tab.get(k); !ok || got != v {
						t.Fatalf("spread %d step %d: key %d = %d %v, want %d", spread, step, k, got, ok, v)
					}
				}
			}
			if _, ok := tab.get(k); ok != (ref[k] != 0 || func() bool { _, ok := ref[k]; return ok }()) {
				t.Fatalf("spread %d step %d: key %d present %v", spread, step, k, ok)
			}
		}
	}
}

// chainIndex against a map of ids, with hashes that collide all the time
// (3 values): long chains, removals of their first, middle and last slots,
// slots reused with other ids.
func TestChainIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var c chainIndex
	ref := map[string]int32{} // id → slot
	hash := func(id string) uint64 { return idHash(uint64(len(id) % 3)) }
	var free []int32
	next := int32(0)
	for step := range 50000 {
		id := fmt.Sprintf("id-%d", rng.IntN(400))
		i, first := c.find([]byte(id), hash(id))
		if want, ok := ref[id]; ok != (i >= 0) || ok && want != i {
			t.Fatalf("step %d: find %q = %d, want %d (%v)", step, id, i, want, ok)
		}
		if first != c.head(hash(id)) {
			t.Fatalf("step %d: first %d, head %d", step, first, c.head(hash(id)))
		}
		if i >= 0 {
			c.remove(i, first)
			delete(ref, id)
			free = append(free, i)
			continue
		}
		slot := next
		if len(free) > 0 {
			slot, free = free[len(free)-1], free[:len(free)-1]
		} else {
			next++
		}
		c.add(slot, []byte(id), hash(id), first)
		ref[id] = slot
	}
	for id, i := range ref {
		if got, _ := c.find([]byte(id), hash(id)); got != i {
			t.Fatalf("end: find %q = %d, want %d", id, got, i)
		}
	}
}
