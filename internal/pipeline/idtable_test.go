package pipeline

import (
	"math/rand/v2"
	"testing"
)

// idTable against a Go map under random sets and deletes, with keys that
// share their low bits (long probe runs, deletes in the middle of them).
func TestIDTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []uint64{1 << 40, 1 << 10, 64} {
		var tab idTable
		ref := map[uint64]int32{}
		for step := range 200000 {
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
			if step%997 == 0 || step > 199000 {
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
