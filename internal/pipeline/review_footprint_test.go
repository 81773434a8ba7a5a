package pipeline

import (
	"fmt"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// residentSum is the Footprint of k's resident models, summed now.
func residentSum(k *Keyed) int64 {
	var sum int64
	for e := k.lru.Front(); e != nil; e = e.Next() {
		sum += int64(e.Value.(*keyedModel).p.Footprint())
	}
	return sum
}

// TestReviewFootprintAfterEncode: ResidentBytes is the resident models'
// Footprint "as of their last use"; a MarshalBinary (a checkpoint, a
// serving copy) in between must not make the count drift from what the
// models hold once they are used again.
func TestReviewFootprintAfterEncode(t *testing.T) {
	c := mustConfig(t, "features: {bits: 18, scale: standard}\n"+sparseMore)
	lines := wordStream(600, false, 3)
	for i, line := range lines {
		lines[i] = append(fmt.Appendf(nil, `{"key":"u-%d",`, i%5), line[1:]...)
	}
	k, err := NewKeyed(c, KeyedOptions{MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	dec := mustDecoder(t, c)
	var ev event.Event
	feed := func(lines [][]byte) {
		for _, line := range lines {
			if err := dec.Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := k.Process(&ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(lines)
	if sum := residentSum(k); sum != k.ResidentBytes() {
		t.Fatalf("before any encoding: resident %d bytes, counted %d", sum, k.ResidentBytes())
	}
	if _, err := k.ServingStates(nil); err != nil {
		t.Fatal(err)
	}
	// Every key's model used again, on events whose features it has met.
	feed(lines[len(lines)-5:])
	if sum := residentSum(k); sum != k.ResidentBytes() {
		t.Fatalf("after an encoding and a use of every model: resident %d bytes, counted %d (drift %d)", sum, k.ResidentBytes(), sum-k.ResidentBytes())
	}
}
