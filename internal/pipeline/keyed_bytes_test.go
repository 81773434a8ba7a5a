package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// residentSum is the Footprint of k's resident models, summed now.
func residentSum(k *Keyed) int64 {
	var sum int64
	for _, m := range k.resident {
		sum += int64(m.p.Footprint())
	}
	return sum
}

// TestKeyedBytesAfterEncode: ResidentBytes is the resident models'
// Footprint "as of their last use"; a MarshalBinary (a checkpoint, a
// serving copy) in between must not make the count drift from what the
// models hold once they are used again.
func TestKeyedBytesAfterEncode(t *testing.T) {
	c := mustConfig(t, "features: {bits: 18, scale: standard}\n"+sparseMore)
	lines := withKeys(wordStream(600, false, 3), func(i int) uint64 { return uint64(i % 5) })
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

// TestKeyedBytesAfterReject: a Reject is a use of its key's model
// (it may learn the events it lets expire, which maps their vectors into
// the model's space: a new Space when the model was evicted and decoded
// again); ResidentBytes must count what the model holds after it.
func TestKeyedBytesAfterReject(t *testing.T) {
	c := mustConfig(t, "features: {bits: 16}\nlabels: {delayed: true, wait: 1, default_label: \"0\"}\n"+sparseMore)
	dec := mustDecoder(t, c)
	k, err := NewKeyed(c, KeyedOptions{MaxBytes: 1}) // one resident model
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	process := func(line string) {
		if err := dec.Decode([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := k.Process(&ev); err != nil {
			t.Fatal(err)
		}
	}
	// Key a's model waits for labels of events of features it has no
	// weight for; key b's event evicts it.
	var feats []string
	for i := range 64 {
		feats = append(feats, fmt.Sprintf(`"f%d":1`, i))
	}
	process(`{"id":"m1","key":"a","features":{` + strings.Join(feats, ",") + `}}`)
	process(`{"id":"m2","key":"b","features":{"g":1}}`)
	if k.Resident() != 1 {
		t.Fatalf("%d resident", k.Resident())
	}
	err = dec.Decode([]byte(`{"key":"a","features":{"v":0.5},"label":"maybe"}`), &ev)
	de, ok := err.(*event.Error)
	if !ok {
		t.Fatalf("decode: %v", err)
	}
	for range 3 {
		if err := k.Reject(ev.Key, de.Reason); err != nil {
			t.Fatal(err)
		}
	}
	if sum := residentSum(k); sum != k.ResidentBytes() {
		t.Fatalf("after a Reject that learned an expired event: resident %d bytes, counted %d", sum, k.ResidentBytes())
	}
}
