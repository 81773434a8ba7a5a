package pipeline

import (
	"container/list"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The lru gives the models in the order a list moved to the front at
// each use gives them, through adds, uses and evictions of the oldest
// (slots freed and given again, the uses of earlier ones dropped many
// times over).
func TestKeyedLRU(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l lru
	var ref list.List // of *keyedModel, most recent first
	at := map[*keyedModel]*list.Element{}
	var models []*keyedModel // resident
	drops := 0
	for i := range 200000 {
		switch r := rng.IntN(100); {
		case r < 10 || ref.Len() == 0:
			m := &keyedModel{}
			l.add(m)
			at[m] = ref.PushFront(m)
			models = append(models, m)
		case r < 17:
			want := ref.Back().Value.(*keyedModel)
			if got := l.oldest(); got != want {
				t.Fatalf("op %d: oldest is slot %d, want slot %d", i, got.slot, want.slot)
			}
			l.remove(want.slot)
			ref.Remove(at[want])
			delete(at, want)
			for j, m := range models {
				if m == want {
					models[j] = models[len(models)-1]
					models = models[:len(models)-1]
					break
				}
			}
		default:
			// Mostly a few hot models, as keys are.
			m := models[min(len(models)-1, int(rng.ExpFloat64()*3))]
			if rng.IntN(4) == 0 {
				m = models[rng.IntN(len(models))]
			}
			before := len(l.uses) - l.head
			l.use(m.slot)
			if len(l.uses)-l.head < before {
				drops++
			}
			ref.MoveToFront(at[m])
		}
		if l.n != ref.Len() {
			t.Fatalf("op %d: %d models, want %d", i, l.n, ref.Len())
		}
	}
	if drops < 10 || len(l.uses)-l.head > 2*l.n+65 || len(l.models) > 3*ref.Len() {
		t.Errorf("%d drops of earlier uses, %d uses held and %d slots for %d models", drops, len(l.uses)-l.head, len(l.models), ref.Len())
	}
	for e := ref.Back(); e != nil; e = ref.Back() {
		want := e.Value.(*keyedModel)
		if got := l.oldest(); got != want {
			t.Fatalf("draining: oldest is slot %d, want slot %d", got.slot, want.slot)
		}
		l.remove(want.slot)
		ref.Remove(e)
	}
	if l.oldest() != nil || l.n != 0 {
		t.Errorf("drained: %d models left", l.n)
	}
}

// keyedLines returns n events of keys user-first … user-(first+n-1),
// one each, of three features.
func keyedLines(first, n int) [][]byte {
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"key":"user-%d","features":{"v":0.5,"w":0.25,"t%d":1},"label":%d}`, first+i, i%50, i%2)
	}
	return lines
}

// TestKeyedUsesDropped: the order of use drops the entries behind its
// head: a Keyed that evicts on every new key (one resident model) holds
// a few entries of use, not one for every use since it was made.
func TestKeyedUsesDropped(t *testing.T) {
	c := mustConfig(t, "features: {bits: 16}\nlearners:\n  - {name: p, algorithm: perceptron}\n")
	k, err := NewKeyed(c, KeyedOptions{MaxBytes: 1, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	feedKeyed(t, k, mustDecoder(t, c), keyedLines(0, 10000))
	if k.Resident() != 1 || cap(k.lru.uses) > 1024 {
		t.Errorf("10,000 uses, %d resident: %d entries of use held (%d behind the head)", k.Resident(), cap(k.lru.uses), k.lru.head)
	}
}
