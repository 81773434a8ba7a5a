package online

import (
	"testing"
)

// TestReviewSpaceOutOfRange: a dense learner panics on an index ≥ 2^bits
// (its doc); over a Space, Map numbers such a slot and the learner learns
// a weight for it that MarshalBinary drops (the slot is past the dense
// vector), so the model decoded from its state predicts otherwise than
// the live one: a replay is not the live run. Map should refuse it.
func TestReviewSpaceOutOfRange(t *testing.T) {
	const bits = 4
	for _, idx := range []uint32{1 << bits, 1<<bits + 3} {
		sp, err := NewSpace(bits)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewSparsePerceptron(sp, PerceptronConfig{})
		if err != nil {
			t.Fatal(err)
		}
		x := Vector{Idx: []uint32{idx}, Val: []float64{1}}
		var local Vector
		panicked := func() (ok bool) {
			defer func() { ok = recover() != nil }()
			sp.Map(&local, x)
			p.Round(local, 1) // a mistake at 0: w[idx's number] = 1
			return false
		}()
		if panicked {
			continue // refused, as the dense one does
		}
		before := p.Predict(local)
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		sp2, _ := NewSpace(bits)
		q, _ := NewSparsePerceptron(sp2, PerceptronConfig{})
		if err := q.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		var local2 Vector
		sp2.Map(&local2, x)
		if after := q.Predict(local2); after != before {
			t.Errorf("index %d (bits %d): live predicts %+v, decoded %+v: the state lost what the model learned", idx, bits, before, after)
		}
	}
}

// TestReviewMulticlassWidePositions: over a Space a MulticlassPerceptron
// of 18 classes at bits 28 is cheap to hold, but its encoding's positions
// (class·(2^bits+1) + slot) pass 2^32, and SparseEntries writes the runs'
// gaps as 32-bit: the state does not decode to the model.
func TestReviewMulticlassWidePositions(t *testing.T) {
	const bits, k = 28, 18
	sp, err := NewSpace(bits)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewSparseMulticlassPerceptron(sp, k, MulticlassPerceptronConfig{})
	if err != nil {
		t.Fatal(err)
	}
	x := Vector{Idx: []uint32{1<<bits - 1}, Val: []float64{1}}
	var local Vector
	sp.Map(&local, x)
	p.Learn(local, p.Predict(local), k-1) // w_17 += x, w_0 -= x
	before := p.Predict(local)
	t.Logf("before %+v", before)
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	sp2, _ := NewSpace(bits)
	q, _ := NewSparseMulticlassPerceptron(sp2, k, MulticlassPerceptronConfig{})
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatalf("the model's own state does not decode: %v", err)
	}
	var local2 Vector
	sp2.Map(&local2, x)
	if after := q.Predict(local2); after != before {
		t.Fatalf("live predicts %+v, decoded %+v", before, after)
	}
}
