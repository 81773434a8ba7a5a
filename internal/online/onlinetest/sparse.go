package onlinetest

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// Sparse checks that the learners sparse makes over a Space are the
// learner dense makes, bit for bit, on the streams stream(seed) over
// 2^bits slots, as subtests of t named name: fed the same rounds (the
// sparse one the vectors mapped by its Space) — every third played by
// Round when the learners have it, every third predicted and learned at
// once, every third learned two rounds after its prediction — they make
// the same predictions, losses and guarantees (and delayed guarantees),
// and encode to the same bytes; every 50 rounds each is replaced by the
// other kind decoded from its encoding (a dense encoding into a sparse
// learner over a new Space, and back), and a Predict of a sparse learner
// on unseen slots leaves its encoding as it was. newSparse must return a
// fresh learner over s, configured as dense's.
func Sparse(t *testing.T, name string, bits uint, dense func() online.Learner, newSparse func(s *online.Space) online.Learner, stream func(seed uint64) []Example) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		for _, seed := range seeds() {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				testSparse(t, bits, dense, newSparse, stream(seed))
			})
		}
	})
}

func testSparse(t *testing.T, bits uint, newDense func() online.Learner, newSparse func(s *online.Space) online.Learner, ex []Example) {
	space := func() *online.Space {
		s, err := online.NewSpace(bits)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	d := newDense()
	sp := space()
	s := newSparse(sp)
	var x online.Vector
	mapped := func(v online.Vector) online.Vector {
		sp.Map(&x, v)
		return x
	}
	type pending struct {
		k      int
		dp, sp online.Prediction
	}
	var wait []pending
	learnWaiting := func(k int) {
		for len(wait) > 0 && (k < 0 || wait[0].k <= k-2) {
			w := wait[0]
			wait = wait[1:]
			d.Learn(ex[w.k].X, w.dp, ex[w.k].Y)
			s.Learn(mapped(ex[w.k].X), w.sp, ex[w.k].Y)
		}
	}
	dr, isRounder := d.(online.Rounder)
	for k, e := range ex {
		var pd, ps online.Prediction
		var ld, ls float64
		switch {
		case k%3 == 0 && isRounder:
			pd, ld = dr.Round(e.X, e.Y)
			ps, ls = s.(online.Rounder).Round(mapped(e.X), e.Y)
		case k%3 == 2:
			pd, ps = d.Predict(e.X), s.Predict(mapped(e.X))
			ld, ls = d.Loss(pd, e.Y), s.Loss(ps, e.Y)
			wait = append(wait, pending{k, pd, ps})
		default:
			pd, ps = d.Predict(e.X), s.Predict(mapped(e.X))
			ld, ls = d.Loss(pd, e.Y), s.Loss(ps, e.Y)
			d.Learn(e.X, pd, e.Y)
			s.Learn(mapped(e.X), ps, e.Y)
		}
		learnWaiting(k)
		if pd != ps || math.Float64bits(ld) != math.Float64bits(ls) {
			t.Fatalf("round %d: dense %+v loss %v, sparse %+v loss %v", k, pd, ld, ps, ls)
		}
		if g, ok := d.(online.DelayGuaranteed); ok {
			gd, okd := g.DelayedGuarantee(2)
			gs, oks := s.(online.DelayGuaranteed).DelayedGuarantee(2)
			if okd != oks || !SameGuarantee(gd, gs) || !SameGuarantee(g.Guarantee(), s.(online.Guaranteed).Guarantee()) {
				t.Fatalf("round %d: guarantees differ: dense %+v %+v, sparse %+v %+v", k, g.Guarantee(), gd, s.(online.Guaranteed).Guarantee(), gs)
			}
		} else if g, ok := d.(online.Guaranteed); ok && !SameGuarantee(g.Guarantee(), s.(online.Guaranteed).Guarantee()) {
			t.Fatalf("round %d: guarantees differ: dense %+v, sparse %+v", k, g.Guarantee(), s.(online.Guaranteed).Guarantee())
		}
		if k%50 != 49 {
			continue
		}
		bd, bs := marshal(t, d), marshal(t, s)
		if !bytes.Equal(bd, bs) {
			t.Fatalf("round %d: encodings differ:\ndense  %x\nsparse %x", k, bd, bs)
		}
		// A Predict of unseen slots numbers them, and changes no state.
		slots := unseen(ex, 3)
		unseenX := online.Vector{Idx: slots, Val: []float64{1, -1, 0.5}[:len(slots)]}
		s.Predict(mapped(unseenX))
		if b := marshal(t, s); !bytes.Equal(b, bs) {
			t.Fatalf("round %d: a Predict of unseen slots changed the encoding", k)
		}
		// Each kind decodes the other's encoding, and goes on.
		d, sp = newDense(), space()
		s = newSparse(sp)
		if err := d.UnmarshalBinary(bs); err != nil {
			t.Fatalf("round %d: a dense learner decoding a sparse one's encoding: %v", k, err)
		}
		if err := s.UnmarshalBinary(bd); err != nil {
			t.Fatalf("round %d: a sparse learner decoding a dense one's encoding: %v", k, err)
		}
		dr, _ = d.(online.Rounder)
		if b := marshal(t, s); !bytes.Equal(b, bd) {
			t.Fatalf("round %d: a sparse learner encodes the dense encoding it decoded differently", k)
		}
	}
	learnWaiting(-1)
	if bd, bs := marshal(t, d), marshal(t, s); !bytes.Equal(bd, bs) {
		t.Fatalf("end: encodings differ:\ndense  %x\nsparse %x", bd, bs)
	}
}
