package pipeline

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// TestFootprintBoostKernel: TestFootprint's contract (Footprint within
// -10%/+30% of the heap a sparse pipeline holds) for AdaBoost.OL over
// sparse weak learners (configuration.md's example: 10 AdaGrads), whose
// arrays grow with the space as any sparse learner's: boost.OL is no
// online.Sizer, so Footprint counts its fixed part alone and
// models.max_bytes does not bound it.
func TestFootprintBoostKernel(t *testing.T) {
	for _, l := range []string{
		"  - {name: boost, algorithm: adaboost-ol, weak_learners: 10, weak: {algorithm: adagrad, bias: true}}\n",
		"  - {name: boost, algorithm: adaboost-ol, weak_learners: 3, weak: {algorithm: perceptron, bias: true}}\n",
		"  - {name: kp, algorithm: kernel-perceptron}\n",
	} {
		t.Run(l[10:15], func(t *testing.T) { footprintOf(t, l) })
	}
}

// TestFootprintDelayed: the same contract with delayed labels: a
// model's events waiting for their labels (up to labels.max_pending of
// them, each its raw and scaled vectors and predictions) are no part of
// Footprint.
func TestFootprintDelayed(t *testing.T) {
	footprintOfHead(t, "features: {bits: 18, scale: standard}\nlabels: {delayed: true, wait: 1000}\n", "  - {name: pct, algorithm: perceptron, bias: true}\n", true)
}

func footprintOf(t *testing.T, learners string) {
	footprintOfHead(t, "features: {bits: 18}\n", learners, false)
}

func footprintOfHead(t *testing.T, head, learners string, waiting bool) {
	c := mustConfig(t, head+"learners:\n"+learners)
	b := NewBuilder(c).Sparse()
	dec := mustDecoder(t, c)
	const n, events = 500, 60
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
	heap := float64(after.HeapAlloc-before.HeapAlloc) / n
	est := float64(foot) / n
	t.Logf("heap %.0f B a pipeline, Footprint %.0f B, %d numbers", heap, est, ps[0].space.Len())
	if est < 0.9*heap || est > 1.3*heap {
		t.Errorf("Footprint %.0f B for %.0f B of heap", est, heap)
	}
	runtime.KeepAlive(ps)
}
