package pipeline

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/event"
)

// TestSparseMatrix: sparse == dense bit for bit over scaling kinds
// × delayed labels × learner sets, with Predict on the pipeline itself
// before each Process, restores across forms, and UnmarshalBinaryReset
// of one learner (predictWaiting's fresh learners) every 300 records.
func TestSparseMatrix(t *testing.T) {
	t.Parallel()
	heads := []string{
		"features: {bits: 12, scale: standard}\nlabels: {delayed: true, wait: 30, max_pending: 1000}\n",
		"features: {bits: 12, scale: l2}\nlabels: {delayed: true, wait: 30, max_pending: 1000}\n",
		"features: {bits: 12}\nlabels: {delayed: true, wait: 30, max_pending: 1000}\n",
	}
	sets := []struct{ name, learners, extra string }{
		{"learners", sparseLearners, "  - {name: extra, algorithm: perceptron, bias: true, average: true}\n"},
		{"more", sparseMore, "  - {name: extra, algorithm: ogd, loss: hinge, bias: true}\n"},
		{"classes", sparseClasses, "  - {name: extra, algorithm: adagrad}\n"},
	}
	for hi, head := range heads {
		for _, set := range sets {
			t.Run(set.name+string(rune('0'+hi)), func(t *testing.T) {
				head := head
				if set.name == "classes" { // several classes take no delayed labels
					head = strings.Replace(head, "labels: {delayed: true, wait: 30, max_pending: 1000}\n", "", 1)
				}
				c := mustConfig(t, head+set.learners)
				c2 := mustConfig(t, head+set.learners+set.extra)
				lines := wordStream(2500, set.name != "classes", uint64(7+hi))
				dec := mustDecoder(t, c)
				b := NewBuilder(c)
				dense, err := b.New()
				if err != nil {
					t.Fatal(err)
				}
				sparse, err := b.Sparse().New()
				if err != nil {
					t.Fatal(err)
				}
				var ev event.Event
				for i, line := range lines {
					if err := dec.Decode(line, &ev); err != nil {
						t.Fatal(err)
					}
					if !ev.LabelOnly {
						pd, rd := dense.Predict(&ev)
						pd = slices.Clone(pd)
						ps, rs := sparse.Predict(&ev)
						if rd != rs || !slices.Equal(pd, ps) {
							t.Fatalf("record %d: Predict: dense %v %q, sparse %v %q", i, pd, rd, ps, rs)
						}
					}
					processBoth(t, i, dense, sparse, &ev)
					if i%300 != 299 {
						continue
					}
					bd, bs := sameState(t, i, dense, sparse)
					if i == 1199 {
						b = NewBuilder(c2)
						if dense, err = b.New(); err != nil {
							t.Fatal(err)
						}
						if sparse, err = b.Sparse().New(); err != nil {
							t.Fatal(err)
						}
						if _, err := dense.UnmarshalBinaryReset(bs, []string{"extra"}); err != nil {
							t.Fatal(err)
						}
						if _, err := sparse.UnmarshalBinaryReset(bd, []string{"extra"}); err != nil {
							t.Fatal(err)
						}
						c = c2
						if !bytes.Equal(mustMarshal(t, dense), mustMarshal(t, sparse)) {
							t.Fatalf("record %d: after UnmarshalBinaryReset the encodings differ", i)
						}
					} else {
						if sparse, err = b.Sparse().Decode(bd); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		}
	}
}
