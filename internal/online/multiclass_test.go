package online_test

import (
	"bytes"
	"encoding"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// separable returns n examples of k classes over dense vectors of dim
// slots, labeled by the class vectors u (Σ_c ‖u_c‖² = 1) with multiclass
// margin at least gamma (examples closer to a boundary are dropped), and
// R² = max ‖x‖².
func separable(seed uint64, n, k, dim int, gamma float64) (xs []online.Vector, ys []int8, r2 float64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	u := make([][]float64, k)
	var norm float64
	for c := range u {
		u[c] = make([]float64, dim)
		for i := range u[c] {
			u[c][i] = rng.NormFloat64()
			norm += u[c][i] * u[c][i]
		}
	}
	for c := range u {
		for i := range u[c] {
			u[c][i] /= math.Sqrt(norm)
		}
	}
	for len(xs) < n {
		x := online.Vector{}
		for i := range dim {
			x.Idx = append(x.Idx, uint32(i))
			x.Val = append(x.Val, 2*rng.Float64()-1)
		}
		scores := make([]float64, k)
		best := 0
		for c := range u {
			for i, v := range x.Val {
				scores[c] += u[c][i] * v
			}
			if scores[c] > scores[best] {
				best = c
			}
		}
		ok := true
		for c := range scores {
			if c != best && scores[best]-scores[c] < gamma {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var n2 float64
		for _, v := range x.Val {
			n2 += v * v
		}
		r2 = max(r2, n2)
		xs, ys = append(xs, x), append(ys, int8(best))
	}
	return xs, ys, r2
}

// The multiclass Perceptron on a stream separable with multiclass margin
// γ makes at most 2R²/γ² mistakes, its published bound, which never
// breaks; its certificate never falls below γ (no separator has a larger
// margin than it says); it stops making mistakes; and it counts rounds
// and mistakes per class.
func TestMulticlassPerceptronBound(t *testing.T) {
	const k, gamma = 4, 0.05
	xs, ys, r2 := separable(1, 20000, k, 8, gamma)
	p, err := online.NewMulticlassPerceptron(4, k, online.MulticlassPerceptronConfig{Margin: gamma})
	if err != nil {
		t.Fatal(err)
	}
	var mistakes, early, late int
	for i, x := range xs {
		pr := p.Predict(x)
		if pr.Label < 0 || int(pr.Label) >= k {
			t.Fatalf("round %d: class %d", i, pr.Label)
		}
		if pr.Label != ys[i] {
			mistakes++
			switch {
			case i < 5000:
				early++
			case i >= len(xs)-5000:
				late++
			}
		}
		p.Learn(x, pr, ys[i])
		if g := p.Guarantee(); g.Violations != 0 || float64(mistakes) > g.Value {
			t.Fatalf("round %d: %d mistakes, bound %v, %d violations", i, mistakes, g.Value, g.Violations)
		}
	}
	g := p.Guarantee()
	bound := 2 * r2 / (gamma * gamma)
	if g.Kind != online.MistakeBound || math.Abs(g.Value-bound) > 1e-9*bound || g.Certificate < gamma {
		t.Errorf("guarantee %+v: want mistakes ≤ %v and a certificate ≥ γ = %v", g, bound, gamma)
	}
	if mistakes == 0 || late*5 > early {
		t.Errorf("%d mistakes, %d in the first 5,000 rounds, %d in the last: want fewer and fewer", mistakes, early, late)
	}
	rounds, perClass := p.ClassCounts()
	var sr, sm uint64
	for c := range rounds {
		sr, sm = sr+rounds[c], sm+perClass[c]
	}
	if sr != uint64(len(xs)) || sm != uint64(mistakes) {
		t.Errorf("per class: %d rounds %d mistakes in all, want %d and %d", sr, sm, len(xs), mistakes)
	}
	t.Logf("%d mistakes of %d rounds (%d in the first 5,000, %d in the last); bound 2R²/γ² = %.0f; certificate %.4f ≥ γ = %v", mistakes, len(xs), early, late, bound, g.Certificate, gamma)
}

// A multiclass learner restored from its encoding goes on exactly; a
// damaged encoding, or one of another number of classes, is refused and
// leaves the learner as it was.
func TestMulticlassEncoding(t *testing.T) {
	const k = 3
	xs, ys, _ := separable(2, 600, k, 6, 0.01)
	builders := map[string]func(k int) online.Learner{
		"multiclass-perceptron": func(k int) online.Learner {
			p, err := online.NewMulticlassPerceptron(3, k, online.MulticlassPerceptronConfig{Bias: true})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		"one-vs-rest": func(k int) online.Learner {
			ls := make([]online.Learner, k)
			for c := range ls {
				var err error
				if ls[c], err = online.NewAdaGrad(3, online.AdaGradConfig{Bias: true}); err != nil {
					t.Fatal(err)
				}
			}
			o, err := online.NewOneVsRest(ls)
			if err != nil {
				t.Fatal(err)
			}
			return o
		},
	}
	for name, build := range builders {
		t.Run(name, func(t *testing.T) {
			whole, cut := build(k), build(k)
			for i, x := range xs {
				if i == 300 {
					b, err := cut.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					cut = build(k)
					if err := cut.UnmarshalBinary(b); err != nil {
						t.Fatal(err)
					}
					again, _ := cut.MarshalBinary()
					if !bytes.Equal(again, b) {
						t.Fatal("a restored learner encodes differently")
					}
				}
				for _, l := range []online.Learner{whole, cut} {
					l.Learn(x, l.Predict(x), ys[i])
				}
			}
			a, _ := whole.MarshalBinary()
			b, _ := cut.MarshalBinary()
			if !bytes.Equal(a, b) {
				t.Error("restored at round 300 and run on: not the uninterrupted learner")
			}
			for i := 0; i < len(a); i += len(a)/7 + 1 {
				bad := bytes.Clone(a)
				bad[i] ^= 0x40
				if err := cut.UnmarshalBinary(bad); err == nil {
					if got, _ := cut.MarshalBinary(); !bytes.Equal(got, bad) {
						t.Errorf("byte %d damaged: restored, yet encodes otherwise", i)
					}
					cut.UnmarshalBinary(a)
				} else if got, _ := cut.MarshalBinary(); !bytes.Equal(got, a) {
					t.Errorf("byte %d damaged: refused, but the learner changed", i)
				}
			}
			if err := build(k + 1).UnmarshalBinary(a); err == nil {
				t.Error("an encoding of 3 classes restored into a learner of 4")
			}
		})
	}
}

// One versus the rest: class c's learner is exactly a binary learner
// taught +1 on c's rounds and −1 on the others; when every class's
// learner is right the class predicted is the label; the mistake bound
// is the sum of the learners' and holds.
func TestOneVsRest(t *testing.T) {
	const k, gamma = 3, 0.05
	xs, ys, _ := separable(3, 5000, k, 6, gamma)
	cfg := online.PerceptronConfig{Margin: 0.02}
	mk := func() *online.Perceptron {
		p, err := online.NewPerceptron(3, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ls := make([]online.Learner, k)
	alone := make([]*online.Perceptron, k)
	for c := range ls {
		ls[c], alone[c] = mk(), mk()
	}
	o, err := online.NewOneVsRest(ls)
	if err != nil {
		t.Fatal(err)
	}
	var mistakes int
	for i, x := range xs {
		pr := o.Predict(x)
		right := true
		for c, a := range alone {
			yc := online.Negative
			if c == int(ys[i]) {
				yc = online.Positive
			}
			ap := a.Predict(x)
			right = right && ap.Label == yc
			a.Learn(x, ap, yc)
		}
		if right && pr.Label != ys[i] {
			t.Fatalf("round %d: every class's learner right, class %d predicted, label %d", i, pr.Label, ys[i])
		}
		if pr.Label != ys[i] {
			mistakes++
		}
		o.Learn(x, pr, ys[i])
	}
	for c, l := range o.Learners() {
		a, _ := alone[c].MarshalBinary()
		b, _ := l.MarshalBinary()
		if !bytes.Equal(a, b) {
			t.Errorf("class %d: not the binary learner of its labels", c)
		}
	}
	g := o.Guarantee()
	var sum float64
	for _, a := range alone {
		sum += a.Guarantee().Value
	}
	if g.Kind != online.MistakeBound || g.Value != sum || float64(mistakes) > g.Value {
		t.Errorf("guarantee %+v, %d mistakes: want mistakes ≤ the learners' bounds' sum %v", g, mistakes, sum)
	}
}

// TestSparseMulticlassPerceptron: a MulticlassPerceptron over a Space is
// the dense one bit for bit, on a small space and on a wide one with a
// few slots touched: fed the same rounds of hashed vectors (the sparse
// one the vectors mapped by its Space), they serve the same classes and
// scores, count the same, give the same guarantees, and encode (and
// freeze) to the same bytes; every 50 rounds each is replaced by the
// other kind decoded from its encoding (a sparse one over a new Space,
// which numbers the slots in another order), and a Predict of unseen
// slots leaves the sparse encoding as it was.
func TestSparseMulticlassPerceptron(t *testing.T) {
	for _, bits := range []uint{4, 8, 18} {
		for _, cfg := range []online.MulticlassPerceptronConfig{{}, {Bias: true}, {Bias: true, Margin: 0.05}} {
			for _, k := range []int{2, 5} {
				t.Run(fmt.Sprintf("bits=%d/%+v/k=%d", bits, cfg, k), func(t *testing.T) {
					testSparseMulticlass(t, bits, k, cfg)
				})
			}
		}
	}
}

func testSparseMulticlass(t *testing.T, bits uint, k int, cfg online.MulticlassPerceptronConfig) {
	dense := func() *online.MulticlassPerceptron {
		p, err := online.NewMulticlassPerceptron(bits, k, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sparse := func() (*online.MulticlassPerceptron, *online.Space) {
		s, err := online.NewSpace(bits)
		if err != nil {
			t.Fatal(err)
		}
		p, err := online.NewSparseMulticlassPerceptron(s, k, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if p.Space() != s {
			t.Fatal("Space() is not the space the learner was made over")
		}
		return p, s
	}
	encode := func(l encoding.BinaryMarshaler) []byte { return encoded(t, l) }
	r := rand.New(rand.NewPCG(uint64(bits), uint64(k)))
	// Class c's score of a slot: a fixed pseudo-random weight.
	u := func(c int, slot uint32) float64 {
		return float64(rand.NewPCG(uint64(c), uint64(slot)).Uint64()>>11)/(1<<53) - 0.5
	}
	d := dense()
	s, sp := sparse()
	var mx online.Vector
	var seen []uint32
	for round := range 400 {
		x := onlinetest.RandomVector(r, bits, 12)
		// Entries out of slot order: sums run in the vector's order.
		r.Shuffle(x.Len(), func(i, j int) {
			x.Idx[i], x.Idx[j] = x.Idx[j], x.Idx[i]
			x.Val[i], x.Val[j] = x.Val[j], x.Val[i]
		})
		y, best := int8(0), math.Inf(-1)
		for c := range k {
			var score float64
			for i, slot := range x.Idx {
				score += u(c, slot) * x.Val[i]
			}
			if score > best {
				y, best = int8(c), score
			}
		}
		if r.IntN(10) == 0 {
			y = int8(r.IntN(k))
		}
		seen = append(seen, x.Idx...)
		sp.Map(&mx, x)
		pd, ps := d.Predict(x), s.Predict(mx)
		if pd.Label != ps.Label || math.Float64bits(pd.Score) != math.Float64bits(ps.Score) {
			t.Fatalf("round %d: dense %+v, sparse %+v", round, pd, ps)
		}
		d.Learn(x, pd, y)
		s.Learn(mx, ps, y)
		if gd, gs := d.Guarantee(), s.Guarantee(); !onlinetest.SameGuarantee(gd, gs) {
			t.Fatalf("round %d: guarantees differ: dense %+v, sparse %+v", round, gd, gs)
		}
		if round%50 != 49 {
			continue
		}
		rd, md := d.ClassCounts()
		rs, ms := s.ClassCounts()
		if !slices.Equal(rd, rs) || !slices.Equal(md, ms) {
			t.Fatalf("round %d: class counts differ: dense %v %v, sparse %v %v", round, rd, md, rs, ms)
		}
		bd, bs := encode(d), encode(s)
		if !bytes.Equal(bd, bs) {
			t.Fatalf("round %d: encodings differ:\ndense  %x\nsparse %x", round, bd, bs)
		}
		if f := encode(online.Freeze(s, nil)); !bytes.Equal(f, bs) {
			t.Fatalf("round %d: a sparse learner's Freeze encodes otherwise", round)
		}
		// A Predict of slots never seen numbers them and changes nothing.
		var unseen online.Vector
		for slot := uint32(0); slot < 1<<bits && unseen.Len() < 3; slot++ {
			if !slices.Contains(seen, slot) {
				unseen.Idx, unseen.Val = append(unseen.Idx, slot), append(unseen.Val, 1)
			}
		}
		sp.Map(&mx, unseen)
		s.Predict(mx)
		if b := encode(s); !bytes.Equal(b, bs) {
			t.Fatalf("round %d: a Predict of unseen slots changed the encoding", round)
		}
		// Each kind decodes the other's encoding, and goes on.
		d = dense()
		s, sp = sparse()
		decodeEachOther(t, fmt.Sprintf("round %d", round), d, s, bd, bs)
	}
	if _, m := d.ClassCounts(); slices.Max(m) == 0 {
		t.Fatal("no mistakes: the stream tested no update")
	}
}

// encoded returns m's encoding, failing t on an error.
func encoded(t *testing.T, m encoding.BinaryMarshaler) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// codable is a state that encodes and decodes itself.
type codable interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// decodeEachOther checks that the fresh dense state decodes bs, the
// encoding of its sparse counterpart, and the fresh sparse state bd, the
// dense one's, which it encodes again to bd; at says where in the stream.
func decodeEachOther(t *testing.T, at string, dense, sparse codable, bd, bs []byte) {
	t.Helper()
	if err := dense.UnmarshalBinary(bs); err != nil {
		t.Fatalf("%s: a dense state decoding a sparse one's encoding: %v", at, err)
	}
	if err := sparse.UnmarshalBinary(bd); err != nil {
		t.Fatalf("%s: a sparse state decoding a dense one's encoding: %v", at, err)
	}
	if b := encoded(t, sparse); !bytes.Equal(b, bd) {
		t.Fatalf("%s: a sparse state encodes the dense encoding it decoded differently", at)
	}
}
