package online

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/codec"
)

// TestSpaceVectors: a vector in a Space's numbers writes the bytes of the
// dense vector it stands for, whatever the order the slots were met in
// and the stride; reads back to the same values; and its norm2 has the
// bits of the dense vector's.
func TestSpaceVectors(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 500 {
		bits := uint(1 + r.IntN(10))
		stride := []int{1, 2, 4}[r.IntN(3)]
		bias := r.IntN(2)
		n := (1<<bits + bias) * stride
		s, err := NewSpace(bits)
		if err != nil {
			t.Fatal(err)
		}
		dense := make([]float64, n)
		var w []float64
		for range r.IntN(2 << bits) {
			slot := uint32(r.IntN(1<<bits + bias)) // the bias's slot too
			k := int(s.number(slot))
			w = fit(w, (k+1)*stride)
			for j := range stride {
				v := math.Ldexp(r.Float64()-0.5, r.IntN(40)-20)
				if r.IntN(4) == 0 {
					v = 0
				}
				w[k*stride+j], dense[int(slot)*stride+j] = v, v
			}
		}
		var want, got codec.Encoder
		want.SparseF64s(dense)
		s.writeVector(&got, n, w, stride)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("trial %d: bits %d stride %d: wrote\n%x\nwant\n%x", trial, bits, stride, got.Bytes(), want.Bytes())
		}
		if stride == 1 {
			if a, b := s.norm2(w, n), norm2(dense); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("trial %d: norm2 %v, dense %v", trial, a, b)
			}
			if d := s.dense(w, n); !equalBits(d, dense) {
				t.Fatalf("trial %d: dense %v, want %v", trial, d, dense)
			}
		}
		// Read into a new space: the slots are numbered in another order.
		s2, _ := NewSpace(bits)
		dec := codec.NewDecoder(want.Bytes())
		w2 := s2.readVector(dec, sparseVersion, n, stride)
		if err := dec.Finish(); err != nil {
			t.Fatal(err)
		}
		var again codec.Encoder
		s2.writeVector(&again, n, w2, stride)
		if !bytes.Equal(again.Bytes(), want.Bytes()) {
			t.Fatalf("trial %d: read and written again differs", trial)
		}
		// And from the dense encoding of version 1.
		var v1 codec.Encoder
		v1.F64s(dense)
		s3, _ := NewSpace(bits)
		dec = codec.NewDecoder(v1.Bytes())
		w3 := s3.readVector(dec, denseVersion, n, stride)
		var again3 codec.Encoder
		s3.writeVector(&again3, n, w3, stride)
		if err := dec.Finish(); err != nil || !bytes.Equal(again3.Bytes(), want.Bytes()) {
			t.Fatalf("trial %d: read from version 1 (%v) and written again differs", trial, err)
		}
	}
}

func equalBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestSpaceMap: Map numbers the slots in the order met, keeps the
// entries' order and values, and numbers a slot once.
func TestSpaceMap(t *testing.T) {
	s, _ := NewSpace(8)
	var x Vector
	s.Map(&x, Vector{Idx: []uint32{7, 3, 200}, Val: []float64{1, 2, 3}})
	if want := []uint32{1, 2, 3}; !slices.Equal(x.Idx, want) || x.Val[2] != 3 {
		t.Fatalf("first map: %v %v", x.Idx, x.Val)
	}
	s.Map(&x, Vector{Idx: []uint32{3, 9, 200}, Val: []float64{4, 5, 6}})
	if want := []uint32{2, 4, 3}; !slices.Equal(x.Idx, want) {
		t.Fatalf("second map: %v", x.Idx)
	}
	if s.Len() != 5 || s.number(256) != 0 {
		t.Fatalf("len %d, the bias's number %d", s.Len(), s.number(256))
	}
	// Many slots, through the table's growth: each keeps its number.
	big, _ := NewSpace(MaxBits)
	r := rand.New(rand.NewPCG(7, 8))
	want := map[uint32]uint32{1 << MaxBits: 0}
	for range 20000 {
		slot := uint32(r.IntN(1 << MaxBits))
		n := big.number(slot)
		if m, ok := want[slot]; ok && m != n {
			t.Fatalf("slot %d: number %d, was %d", slot, n, m)
		}
		want[slot] = n
	}
	for slot, n := range want {
		if m, ok := big.index.find(slot); !ok || m != n || big.slots[n] != slot {
			t.Fatalf("slot %d: found %d %v, want %d", slot, m, ok, n)
		}
	}
	if big.Len() != len(want) {
		t.Fatalf("%d numbers for %d slots", big.Len(), len(want))
	}
}

// TestSpaceRefusesOutOfRange: a slot at or past 2^bits panics in Map, as
// it does in a dense learner, rather than being learned and then dropped
// by the encoding (the bias's slot, 2^bits, included: it is numbered 0).
func TestSpaceRefusesOutOfRange(t *testing.T) {
	const bits = 4
	for _, slot := range []uint32{1 << bits, 1<<bits + 3, 1 << 31} {
		s, _ := NewSpace(bits)
		var x Vector
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("slot %d of 2^%d: no panic", slot, bits)
				}
			}()
			s.Map(&x, Vector{Idx: []uint32{slot}, Val: []float64{1}})
		}()
		if s.Len() != 1 {
			t.Errorf("slot %d: the space numbered it", slot)
		}
	}
}

// TestMulticlassWidePositions: a multiclass Perceptron whose encoding
// would have positions past 2^32 (class·(2^bits+1) + slot) is refused,
// sparse or dense: its state could not be decoded. One just below the
// limit encodes and decodes.
func TestMulticlassWidePositions(t *testing.T) {
	const bits = 28
	s, _ := NewSpace(bits)
	if _, err := NewSparseMulticlassPerceptron(s, 18, MulticlassPerceptronConfig{}); err == nil {
		t.Error("18 classes at bits 28: no error")
	}
	if _, err := NewMulticlassPerceptron(bits, 18, MulticlassPerceptronConfig{}); err == nil {
		t.Error("dense, 18 classes at bits 28: no error")
	}
	const k = 15 // 15·(2^28+1) < 2^32
	p, err := NewSparseMulticlassPerceptron(s, k, MulticlassPerceptronConfig{})
	if err != nil {
		t.Fatal(err)
	}
	x := Vector{Idx: []uint32{1<<bits - 1}, Val: []float64{1}}
	var local Vector
	s.Map(&local, x)
	p.Learn(local, p.Predict(local), k-1)
	before := p.Predict(local)
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSpace(bits)
	q, _ := NewSparseMulticlassPerceptron(s2, k, MulticlassPerceptronConfig{})
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatalf("the model's own state does not decode: %v", err)
	}
	s2.Map(&local, x)
	if after := q.Predict(local); after != before {
		t.Fatalf("live predicts %+v, decoded %+v", before, after)
	}
}
