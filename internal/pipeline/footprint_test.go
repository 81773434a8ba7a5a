package pipeline

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// TestFootprint: a sparse pipeline's Footprint is within -10% and +30%
// of the heap it holds, measured over 2000 pipelines of the default
// learners and of four learners, empty, after a few events and after
// many.
func TestFootprint(t *testing.T) {
	for _, learners := range []string{
		"  - {name: pct, algorithm: perceptron, bias: true}\n  - {name: ada, algorithm: adagrad, bias: true, normalized: false}\n",
		"  - {name: pct, algorithm: perceptron, average: true}\n  - {name: ada, algorithm: adagrad}\n  - {name: log, algorithm: adagrad, loss: logistic}\n  - {name: last, algorithm: last-label}\n",
	} {
		for _, events := range []int{0, 5, 60} {
			footprintWithin(t, "features: {bits: 18}\n", learners, 2000, events, false)
		}
	}
}

// TestFootprintBoostKernel: TestFootprint's contract for AdaBoost.OL
// over sparse weak learners (configuration.md's example: 10 AdaGrads),
// whose arrays grow with the space, and for the kernel Perceptron's
// support vectors: both are online.Sizers.
func TestFootprintBoostKernel(t *testing.T) {
	for _, l := range []string{
		"  - {name: boost, algorithm: adaboost-ol, weak_learners: 10, weak: {algorithm: adagrad, bias: true}}\n",
		"  - {name: boost, algorithm: adaboost-ol, weak_learners: 3, weak: {algorithm: perceptron, bias: true}}\n",
		"  - {name: kp, algorithm: kernel-perceptron}\n",
	} {
		t.Run(l[10:15], func(t *testing.T) { footprintWithin(t, "features: {bits: 18}\n", l, 500, 60, false) })
	}
}

// TestFootprintDelayed: the same contract with delayed labels: a model's
// events waiting for their labels (up to labels.max_pending of them,
// each its raw and scaled vectors and predictions) are part of its
// Footprint.
func TestFootprintDelayed(t *testing.T) {
	footprintWithin(t, "features: {bits: 18, scale: standard}\nlabels: {delayed: true, wait: 1000}\n", "  - {name: pct, algorithm: perceptron, bias: true}\n", 500, 60, true)
}

// footprintWithin builds n sparse pipelines of head and learners, gives
// each events events (4 features of its own, 8 of 500 shared; labeled,
// or waiting for their labels), and fails t unless their Footprint is
// within -10% and +30% of the heap they hold.
func footprintWithin(t *testing.T, head, learners string, n, events int, waiting bool) {
	t.Helper()
	c := mustConfig(t, head+"learners:\n"+learners)
	b := NewBuilder(c).Sparse()
	dec := mustDecoder(t, c)
	ps := make([]*Pipeline, n)
	var ev event.Event
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ps {
		p, err := b.New()
		if err != nil {
			t.Fatal(err)
		}
		for j := range events {
			line := fmt.Appendf(nil, `{"features":{"k%d_%d":0.5,"k%d_%d":0.25,"k%d_%d":1,"k%d_%d":0.5`, i, j%5, i, j%7, i, j%3, i, j%11)
			for f := range 8 {
				line = fmt.Appendf(line, `,"w%d":0.1`, (i*7+j*13+f*31)%500)
			}
			if waiting {
				line = fmt.Appendf(line, `},"id":"e%d"}`, j)
			} else {
				line = fmt.Appendf(line, `},"label":%d}`, (i+j)%2)
			}
			if err := dec.Decode(line, &ev); err != nil {
				t.Fatal(err)
			}
			p.Process(&ev)
		}
		ps[i] = p
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	foot := 0
	for _, p := range ps {
		foot += p.Footprint()
	}
	heap := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	est := float64(foot) / float64(n)
	t.Logf("%d learners, %d events: heap %.0f B a pipeline, Footprint %.0f B", len(ps[0].nodes), events, heap, est)
	if est < 0.9*heap || est > 1.3*heap {
		t.Errorf("%d learners, %d events: Footprint %.0f B for %.0f B of heap", len(ps[0].nodes), events, est, heap)
	}
	runtime.KeepAlive(ps)
}

// TestKeyedMaxBytes: models per key bounded in bytes keep the resident
// models' Footprint under the bound after every event (but the model in
// use), count it exactly, and learn exactly what unbounded ones learn.
func TestKeyedMaxBytes(t *testing.T) {
	c := mustConfig(t, "features: {bits: 18}\n"+sparseLearners)
	lines := withKeys(wordStream(3000, false, 3), func(i int) uint64 { return uint64(i % 97) })
	const bound = 320 << 10
	bounded, err := NewKeyed(c, KeyedOptions{MaxBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	free, err := NewKeyed(c, KeyedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dec := mustDecoder(t, c)
	var ev event.Event
	for i, line := range lines {
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		for _, k := range []*Keyed{bounded, free} {
			if _, _, _, err := k.Process(&ev); err != nil {
				t.Fatal(err)
			}
		}
		if sum := residentSum(bounded); sum != bounded.ResidentBytes() || sum > bound && bounded.Resident() > 1 {
			t.Fatalf("event %d: %d resident models of %d bytes, counted %d, bound %d", i, bounded.Resident(), sum, bounded.ResidentBytes(), bound)
		}
	}
	if bounded.Evicted() == 0 || free.Evicted() != 0 {
		t.Fatalf("evictions: %d bounded, %d unbounded", bounded.Evicted(), free.Evicted())
	}
	if !bytes.Equal(mustMarshal(t, bounded), mustMarshal(t, free)) {
		t.Fatal("the bounded models per key differ from the unbounded ones")
	}
	t.Logf("%d keys, %d resident of %d bytes, %d evictions", bounded.Len(), bounded.Resident(), bounded.ResidentBytes(), bounded.Evicted())
}
