// Package onlinetest is a conformance suite for online.Learner
// implementations, in the spirit of testing/fstest.TestFS and River's
// check_estimator: every learner in streamlearn runs through Run.
//
// Run checks, on streams the caller provides:
//
//   - determinism: two learners fed one stream make bit-identical
//     predictions and end with identical MarshalBinary bytes;
//   - checkpoints: MarshalBinary mid-stream, UnmarshalBinary into a fresh
//     learner, continue both: identical predictions and final bytes, and
//     the restored learner re-marshals to the same bytes;
//   - truncated or empty encodings are rejected with an error, not a panic;
//   - an empty vector and never-before-seen slots give a finite score and a
//     label of ±1, and can be learned from;
//   - every label is +1 or -1, every Loss is finite and ≥ 0;
//   - a Guaranteed learner reports non-negative, non-NaN bounds (RegretBound
//     may be NaN, as the contract allows) and identical guarantees on
//     identical histories;
//   - Predict is pure: called twice, it returns the same prediction, and
//     the state's encoding is the same before and after;
//   - delayed labels: predictions served several rounds before their
//     labels are learned, in order, give two learners the same predictions
//     and final bytes, and a learner restored from a checkpoint taken while
//     labels were pending learns them to the same bytes (nothing Learn
//     needs is kept outside the encoding);
//   - a learner that is an online.Rounder gives from Round the predictions,
//     losses, guarantees and final state that Predict, Loss and
//     Learn(x, Predict(x), y) give, bit for bit, whether every round or
//     every other round is played by Round;
//   - Predict followed by Learn, and Round, allocate nothing in steady
//     state (testing.AllocsPerRun == 0).
//
// The package depends on the standard library and online only.
package onlinetest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/testmode"
)

// Example is one labeled round of a stream: X, then label Y (±1).
type Example struct {
	X online.Vector
	Y int8
}

// RandomVector returns a random canonical sparse vector over 2^bits slots
// with nnz distinct slots (fewer if the space is smaller), strictly
// increasing Idx and values uniform in [-1, 1). It allocates its result.
func RandomVector(r *rand.Rand, bits uint, nnz int) online.Vector {
	var x online.Vector
	AppendRandomVector(&x, r, bits, nnz)
	return x
}

// AppendRandomVector overwrites dst with a random canonical sparse vector
// like RandomVector, reusing dst's slices.
func AppendRandomVector(dst *online.Vector, r *rand.Rand, bits uint, nnz int) {
	size := uint64(1) << bits
	if uint64(nnz) > size {
		nnz = int(size)
	}
	dst.Idx = dst.Idx[:0]
	dst.Val = dst.Val[:0]
	if uint64(nnz)*2 > size {
		// Dense regime: pick each slot with the right probability by
		// selection sampling (Knuth's Algorithm S), already in order.
		need := uint64(nnz)
		for i := uint64(0); i < size && need > 0; i++ {
			if r.Uint64N(size-i) < need {
				dst.Idx = append(dst.Idx, uint32(i))
				need--
			}
		}
	} else {
		for len(dst.Idx) < nnz {
			i := uint32(r.Uint64N(size))
			if !slices.Contains(dst.Idx, i) {
				dst.Idx = append(dst.Idx, i)
			}
		}
		slices.Sort(dst.Idx)
	}
	for range dst.Idx {
		dst.Val = append(dst.Val, 2*r.Float64()-1)
	}
}

// LinearStream returns a stream generator for Run: n examples of random
// sparse vectors with nnz non-zeros over 2^bits slots, labeled by the sign
// of a fixed random linear function of the seed (ties +1), with a fraction
// noise of labels flipped. Equal seeds give equal streams.
func LinearStream(bits uint, n, nnz int, noise float64) func(seed uint64) []Example {
	return func(seed uint64) []Example {
		r := rand.New(rand.NewPCG(seed, 0x6f6e6c696e657465))
		u := make([]float64, 1<<bits)
		for i := range u {
			u[i] = r.NormFloat64()
		}
		out := make([]Example, n)
		for k := range out {
			x := RandomVector(r, bits, nnz)
			y := online.Positive
			if x.Dot(u) < 0 {
				y = online.Negative
			}
			if r.Float64() < noise {
				y = -y
			}
			out[k] = Example{X: x, Y: y}
		}
		return out
	}
}

// Seeds are the stream seeds Run uses: the first alone by default, all
// of them with STREAMLEARN_FULL=1 (testmode).
var Seeds = []uint64{1, 2, 3}

// seeds returns the seeds of this run (see Seeds).
func seeds() []uint64 { return Seeds[:testmode.Reps(1, len(Seeds))] }

// Run runs the conformance suite on the learners newLearner makes, over the
// streams stream(seed) for each of Seeds (see there), as subtests of t named name.
// newLearner must return a fresh learner in its initial state, identically
// configured on every call. Streams should have a few hundred rounds and
// vectors no larger than the learner's space.
func Run(t *testing.T, name string, newLearner func() online.Learner, stream func(seed uint64) []Example) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		for _, seed := range seeds() {
			ex := stream(seed)
			if len(ex) < 2 {
				t.Fatalf("stream(%d) has %d examples; need at least 2", seed, len(ex))
			}
			for k, e := range ex {
				if e.Y != online.Positive && e.Y != online.Negative {
					t.Fatalf("stream(%d)[%d]: label %d is not ±1", seed, k, e.Y)
				}
				if err := checkCanonical(e.X); err != nil {
					t.Fatalf("stream(%d)[%d]: %v", seed, k, err)
				}
			}
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Run("Determinism", func(t *testing.T) { testDeterminism(t, newLearner, ex) })
				t.Run("Checkpoint", func(t *testing.T) { testCheckpoint(t, newLearner, ex) })
				t.Run("BadEncoding", func(t *testing.T) { testBadEncoding(t, newLearner, ex) })
				t.Run("EmptyAndUnseen", func(t *testing.T) { testEmptyAndUnseen(t, newLearner, ex) })
				t.Run("Pure", func(t *testing.T) { testPure(t, newLearner, ex) })
				t.Run("Delayed", func(t *testing.T) { testDelayed(t, newLearner, ex) })
				t.Run("Round", func(t *testing.T) { testRound(t, newLearner, ex) })
				t.Run("Allocs", func(t *testing.T) { testAllocs(t, newLearner, ex) })
			})
		}
	})
}

func checkCanonical(x online.Vector) error {
	if len(x.Idx) != len(x.Val) {
		return fmt.Errorf("vector has %d indices and %d values", len(x.Idx), len(x.Val))
	}
	for k := 1; k < len(x.Idx); k++ {
		if x.Idx[k] <= x.Idx[k-1] {
			return fmt.Errorf("vector not canonical: Idx[%d]=%d after %d", k, x.Idx[k], x.Idx[k-1])
		}
	}
	for k, v := range x.Val {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("vector value %d is %v", k, v)
		}
	}
	return nil
}

// round is one recorded round of a run.
type round struct {
	p    online.Prediction
	loss float64
	g    online.Guarantee
}

// play runs l over ex, checking each round's invariants, and records it.
// It copies each vector before handing it over and scribbles on the copy
// afterwards, so a learner that retains x is caught by determinism checks.
func play(t *testing.T, l online.Learner, ex []Example, start int) []round {
	t.Helper()
	return playRounds(t, l, ex, start, nil)
}

// playRounds is play with the rounds k (of ex) for which fused(k) is true
// played by l's Round; l must be an online.Rounder if fused is not nil.
func playRounds(t *testing.T, l online.Learner, ex []Example, start int, fused func(k int) bool) []round {
	t.Helper()
	var buf online.Vector
	out := make([]round, 0, len(ex))
	var mono monotone
	for k, e := range ex {
		buf.Idx = append(buf.Idx[:0], e.X.Idx...)
		buf.Val = append(buf.Val[:0], e.X.Val...)
		var p online.Prediction
		var loss float64
		if fused != nil && fused(k) {
			p, loss = l.(online.Rounder).Round(buf, e.Y)
		} else {
			p = l.Predict(buf)
			loss = l.Loss(p, e.Y)
		}
		checkPrediction(t, p, start+k)
		checkLoss(t, loss, start+k)
		for _, y := range []int8{online.Positive, online.Negative} {
			checkLoss(t, l.Loss(p, y), start+k)
		}
		if fused == nil || !fused(k) {
			l.Learn(buf, p, e.Y)
		}
		for i := range buf.Val {
			buf.Val[i] = math.NaN()
			buf.Idx[i] = ^uint32(0)
		}
		r := round{p: p, loss: loss}
		if gl, ok := l.(online.Guaranteed); ok {
			r.g = gl.Guarantee()
			checkGuarantee(t, r.g, start+k)
			mono.check(t, l, r.g, start+k)
		}
		out = append(out, r)
	}
	return out
}

func checkPrediction(t *testing.T, p online.Prediction, k int) {
	t.Helper()
	if p.Label != online.Positive && p.Label != online.Negative {
		t.Fatalf("round %d: predicted label %d, want ±1", k, p.Label)
	}
	if math.IsNaN(p.Score) || math.IsInf(p.Score, 0) {
		t.Fatalf("round %d: score %v is not finite", k, p.Score)
	}
}

func checkLoss(t *testing.T, loss float64, k int) {
	t.Helper()
	if !(loss >= 0) || math.IsInf(loss, 0) {
		t.Fatalf("round %d: loss %v, want finite and ≥ 0", k, loss)
	}
}

// monotone checks a Monotone guarantee's promise: Value and
// ComparatorLoss never decrease from one round to the next, and, for a
// learner whose theorem covers delays, nor as the delay grows (at the
// delays in monotoneDelays).
type monotone struct {
	prev [1 + len(monotoneDelays)]online.Guarantee
	ok   bool
}

var monotoneDelays = [...]uint64{0, 1, 7, 100}

func (m *monotone) check(t *testing.T, l online.Learner, g online.Guarantee, k int) {
	t.Helper()
	if !g.Monotone {
		m.ok = false
		return
	}
	now := [len(m.prev)]online.Guarantee{g}
	if dg, ok := l.(online.DelayGuaranteed); ok {
		for i, d := range monotoneDelays {
			gd, covered := dg.DelayedGuarantee(d)
			if !covered {
				break
			}
			now[1+i] = gd
			if i > 0 && (gd.Value < now[i].Value || gd.ComparatorLoss < now[i].ComparatorLoss) {
				t.Fatalf("round %d: Monotone guarantee decreases with the delay: %d → %+v, %d → %+v", k, monotoneDelays[i-1], now[i], d, gd)
			}
		}
	}
	if m.ok {
		for i := range now {
			if now[i].Kind != m.prev[i].Kind || now[i].Value < m.prev[i].Value || now[i].ComparatorLoss < m.prev[i].ComparatorLoss {
				t.Fatalf("round %d: Monotone guarantee decreases: %+v, then %+v", k, m.prev[i], now[i])
			}
		}
	}
	m.prev, m.ok = now, true
}

func checkGuarantee(t *testing.T, g online.Guarantee, k int) {
	t.Helper()
	if g.Kind != online.NoBound && (math.IsNaN(g.Value) || g.Value < 0) {
		t.Fatalf("round %d: %s bound %v, want ≥ 0", k, g.Kind, g.Value)
	}
	if math.IsNaN(g.ComparatorLoss) || g.ComparatorLoss < 0 {
		t.Fatalf("round %d: comparator loss %v, want ≥ 0", k, g.ComparatorLoss)
	}
	if g.RegretBound < 0 {
		t.Fatalf("round %d: regret bound %v, want ≥ 0 or NaN", k, g.RegretBound)
	}
	if g.CertificateKind != "" && (math.IsNaN(g.Certificate) || g.Certificate < 0) {
		t.Fatalf("round %d: certificate %s = %v, want ≥ 0", k, g.CertificateKind, g.Certificate)
	}
}

func same(a, b []round) (int, string) {
	for k := range a {
		x, y := a[k], b[k]
		if x.p.Label != y.p.Label || math.Float64bits(x.p.Score) != math.Float64bits(y.p.Score) {
			return k, fmt.Sprintf("prediction %+v vs %+v", x.p, y.p)
		}
		if math.Float64bits(x.loss) != math.Float64bits(y.loss) {
			return k, fmt.Sprintf("loss %v vs %v", x.loss, y.loss)
		}
		if !SameGuarantee(x.g, y.g) {
			return k, fmt.Sprintf("guarantee %+v vs %+v", x.g, y.g)
		}
	}
	return -1, ""
}

// SameGuarantee reports whether a and b are the same guarantee, bit for
// bit, any NaN matching any NaN.
func SameGuarantee(a, b online.Guarantee) bool {
	eq := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || (math.IsNaN(x) && math.IsNaN(y))
	}
	return a.Kind == b.Kind && eq(a.Value, b.Value) && a.Comparator == b.Comparator &&
		eq(a.ComparatorLoss, b.ComparatorLoss) && eq(a.RegretBound, b.RegretBound) &&
		a.CertificateKind == b.CertificateKind && eq(a.Certificate, b.Certificate) &&
		a.Violations == b.Violations
}

func marshal(t *testing.T, l online.Learner) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

func testDeterminism(t *testing.T, newLearner func() online.Learner, ex []Example) {
	a, b := newLearner(), newLearner()
	if !bytes.Equal(marshal(t, a), marshal(t, b)) {
		t.Fatal("two fresh learners marshal to different bytes")
	}
	ra, rb := play(t, a, ex, 0), play(t, b, ex, 0)
	if k, d := same(ra, rb); k >= 0 {
		t.Fatalf("two runs over one stream differ at round %d: %s", k, d)
	}
	ba, bb := marshal(t, a), marshal(t, b)
	if !bytes.Equal(ba, bb) {
		t.Fatal("two runs over one stream end with different MarshalBinary bytes")
	}
	if !bytes.Equal(ba, marshal(t, a)) {
		t.Fatal("MarshalBinary twice gives different bytes")
	}
}

func testCheckpoint(t *testing.T, newLearner func() online.Learner, ex []Example) {
	for _, cut := range []int{0, len(ex) / 3, len(ex) - 1} {
		ref := newLearner()
		full := play(t, ref, ex, 0)

		a := newLearner()
		play(t, a, ex[:cut], 0)
		snap := marshal(t, a)
		b := newLearner()
		// Make b's state differ from a fresh one before restoring, so an
		// UnmarshalBinary that merges instead of replacing is caught.
		play(t, b, ex[len(ex)/2:], 0)
		if err := b.UnmarshalBinary(slices.Clone(snap)); err != nil {
			t.Fatalf("cut %d: UnmarshalBinary(MarshalBinary()): %v", cut, err)
		}
		if !bytes.Equal(marshal(t, b), snap) {
			t.Fatalf("cut %d: restored learner marshals to different bytes", cut)
		}
		if ga, ok := a.(online.Guaranteed); ok {
			if gb := b.(online.Guaranteed).Guarantee(); !SameGuarantee(ga.Guarantee(), gb) {
				t.Fatalf("cut %d: restored guarantee %+v, want %+v", cut, gb, ga.Guarantee())
			}
		}
		ra := play(t, a, ex[cut:], cut)
		rb := play(t, b, ex[cut:], cut)
		if k, d := same(ra, rb); k >= 0 {
			t.Fatalf("cut %d: restored learner differs at round %d: %s", cut, cut+k, d)
		}
		if k, d := same(full[cut:], ra); k >= 0 {
			t.Fatalf("cut %d: continued learner differs from an uninterrupted run at round %d: %s", cut, cut+k, d)
		}
		if !bytes.Equal(marshal(t, a), marshal(t, b)) || !bytes.Equal(marshal(t, a), marshal(t, ref)) {
			t.Fatalf("cut %d: final bytes differ after a checkpoint round trip", cut)
		}
	}
}

func testBadEncoding(t *testing.T, newLearner func() online.Learner, ex []Example) {
	a := newLearner()
	play(t, a, ex, 0)
	snap := marshal(t, a)
	for _, n := range []int{0, 1, len(snap) / 2, len(snap) - 1} {
		if n >= len(snap) || n < 0 {
			continue
		}
		b := newLearner()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("UnmarshalBinary of %d of %d bytes panicked: %v", n, len(snap), r)
				}
			}()
			if err := b.UnmarshalBinary(slices.Clone(snap[:n])); err == nil {
				t.Errorf("UnmarshalBinary accepted the first %d of %d bytes", n, len(snap))
			}
		}()
	}
	b := newLearner()
	if err := b.UnmarshalBinary(append(slices.Clone(snap), 0)); err == nil {
		t.Errorf("UnmarshalBinary accepted trailing garbage")
	}
}

// unseen returns up to n slots that no vector of ex uses, within the range
// of slots ex uses (so inside the learner's space).
func unseen(ex []Example, n int) []uint32 {
	var max uint32
	used := map[uint32]bool{}
	for _, e := range ex {
		for _, i := range e.X.Idx {
			used[i] = true
			max = maxU(max, i)
		}
	}
	var out []uint32
	for i := uint32(0); i <= max && len(out) < n; i++ {
		if !used[i] {
			out = append(out, i)
		}
	}
	return out
}

func maxU(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}

func testEmptyAndUnseen(t *testing.T, newLearner func() online.Learner, ex []Example) {
	slots := unseen(ex, 3)
	fresh := online.Vector{Idx: slots, Val: make([]float64, len(slots))}
	for k := range fresh.Val {
		fresh.Val[k] = 0.5 + float64(k)
	}
	for _, trained := range []bool{false, true} {
		l := newLearner()
		if trained {
			play(t, l, ex, 0)
		}
		cases := []Example{
			{online.Vector{}, online.Positive},
			{online.Vector{}, online.Negative},
			{online.Vector{Idx: []uint32{}, Val: []float64{}}, online.Positive},
			{fresh, online.Negative},
			{fresh, online.Positive},
			{ex[0].X, ex[0].Y},
		}
		play(t, l, cases, len(ex))
		// The learner still behaves after those rounds.
		play(t, l, ex[:min(len(ex), 10)], len(ex)+len(cases))
	}
}

func testRound(t *testing.T, newLearner func() online.Learner, ex []Example) {
	if _, ok := newLearner().(online.Rounder); !ok {
		t.Skip("not an online.Rounder")
	}
	ref := newLearner()
	want := play(t, ref, ex, 0)
	for _, tc := range []struct {
		name  string
		fused func(k int) bool
	}{
		{"every round", func(int) bool { return true }},
		{"every other round", func(k int) bool { return k%2 == 0 }},
	} {
		l := newLearner()
		got := playRounds(t, l, ex, 0, tc.fused)
		if k, d := same(want, got); k >= 0 {
			t.Fatalf("Round on %s: round %d differs from Predict, Loss, Learn: %s", tc.name, k, d)
		}
		if !bytes.Equal(marshal(t, ref), marshal(t, l)) {
			t.Fatalf("Round on %s: final MarshalBinary bytes differ from Predict, Loss, Learn's", tc.name)
		}
	}
}

// testPure checks that Predict changes nothing: on the first rounds and on
// every 16th, the encoding before and after two Predict calls, and the
// two predictions, are the same; and the learner, which also predicts the
// next example before it learns each round's label, ends with the bytes
// of one that does not (Learn uses the prediction it is given, not the
// last one made).
func testPure(t *testing.T, newLearner func() online.Learner, ex []Example) {
	l, ref := newLearner(), newLearner()
	for k, e := range ex {
		before := []byte(nil)
		if k < 32 || k%16 == 0 {
			before = marshal(t, l)
		}
		p := l.Predict(e.X)
		if again := l.Predict(e.X); !samePrediction(p, again) {
			t.Fatalf("round %d: Predict gave %+v, then %+v on the same state", k, p, again)
		}
		if before != nil && !bytes.Equal(before, marshal(t, l)) {
			t.Fatalf("round %d: Predict changed the learner's encoding", k)
		}
		if k+1 < len(ex) {
			l.Predict(ex[k+1].X)
		}
		l.Learn(e.X, p, e.Y)
		if want := ref.Predict(e.X); !samePrediction(p, want) {
			t.Fatalf("round %d: predicted %+v after predicting an extra example each round, want %+v", k, p, want)
		}
		ref.Learn(e.X, p, e.Y)
	}
	if !bytes.Equal(marshal(t, l), marshal(t, ref)) {
		t.Fatal("predicting an extra example before each Learn changed the final MarshalBinary bytes")
	}
}

func samePrediction(a, b online.Prediction) bool {
	return a.Label == b.Label && math.Float64bits(a.Score) == math.Float64bits(b.Score) && a.Advice == b.Advice
}

// testDelayed serves the predictions of delay rounds before learning the
// oldest one's label, as a stream whose labels come later would: two
// learners agree prediction for prediction and byte for byte, and one
// restored mid-stream from a checkpoint taken with labels pending learns
// them to the same bytes.
func testDelayed(t *testing.T, newLearner func() online.Learner, ex []Example) {
	const delay = 5
	type pending struct {
		x online.Vector
		p online.Prediction
		y int8
	}
	// run plays ex[from:] on l with q pending; at round stop it returns
	// early with the queue (stop < 0: play to the end and drain).
	run := func(l online.Learner, q []pending, from, stop int) ([]online.Prediction, []pending) {
		var preds []online.Prediction
		for k := from; k < len(ex); k++ {
			if k == stop {
				return preds, q
			}
			p := l.Predict(ex[k].X)
			preds = append(preds, p)
			q = append(q, pending{ex[k].X, p, ex[k].Y})
			if len(q) > delay {
				l.Learn(q[0].x, q[0].p, q[0].y)
				q = q[1:]
			}
		}
		for _, d := range q {
			l.Learn(d.x, d.p, d.y)
		}
		return preds, nil
	}
	a, b := newLearner(), newLearner()
	pa, _ := run(a, nil, 0, -1)
	pb, _ := run(b, nil, 0, -1)
	for k := range pa {
		if !samePrediction(pa[k], pb[k]) {
			t.Fatalf("round %d: delayed labels gave predictions %+v and %+v on two learners", k, pa[k], pb[k])
		}
	}
	final := marshal(t, a)
	if !bytes.Equal(final, marshal(t, b)) {
		t.Fatal("delayed labels: two learners end with different MarshalBinary bytes")
	}
	mid := len(ex) / 2
	c := newLearner()
	_, q := run(c, nil, 0, mid)
	restored := newLearner()
	if err := restored.UnmarshalBinary(marshal(t, c)); err != nil {
		t.Fatalf("UnmarshalBinary with labels pending: %v", err)
	}
	rest, _ := run(restored, q, mid, -1)
	for k, p := range rest {
		if !samePrediction(p, pa[mid+k]) {
			t.Fatalf("round %d after a checkpoint with %d labels pending: predicted %+v, want %+v", mid+k, len(q), p, pa[mid+k])
		}
	}
	if !bytes.Equal(final, marshal(t, restored)) {
		t.Fatalf("a learner restored with %d labels pending ends with different MarshalBinary bytes", len(q))
	}
}

func testAllocs(t *testing.T, newLearner func() online.Learner, ex []Example) {
	l := newLearner()
	play(t, l, ex, 0)
	play(t, l, ex, 0) // steady state: every slot of ex has been touched
	k := 0
	allocs := testing.AllocsPerRun(200, func() {
		e := ex[k%len(ex)]
		k++
		p := l.Predict(e.X)
		l.Learn(e.X, p, e.Y)
		_ = l.Loss(p, e.Y)
	})
	if allocs != 0 {
		t.Errorf("Predict+Learn+Loss allocates %v times per round in steady state, want 0", allocs)
	}
	if r, ok := l.(online.Rounder); ok {
		allocs := testing.AllocsPerRun(200, func() {
			e := ex[k%len(ex)]
			k++
			r.Round(e.X, e.Y)
		})
		if allocs != 0 {
			t.Errorf("Round allocates %v times per round in steady state, want 0", allocs)
		}
	}
}

// Delayed plays n rounds with labels that come late: round k is predicted
// by predict(k) when it arrives, and learned by learn(k, served, d) a
// uniform 0..lag arrivals later (seeded), in the order the labels come
// (rounds due together in arrival order); d is the most rounds learned
// while a round waited for its label, so far: the delay the delayed
// guarantees (online.DelayGuaranteed) are for. It returns the final d.
func Delayed[P any](n, lag int, seed uint64, predict func(k int) P, learn func(k int, served P, d int)) (d int) {
	rng := rand.New(rand.NewPCG(seed, 0xde1a))
	type waiting struct {
		k, due, learnedAt int
		served            P
	}
	var queue []waiting
	learned := 0
	play := func(w waiting) {
		d = max(d, learned-w.learnedAt)
		learn(w.k, w.served, d)
		learned++
	}
	for k := range n {
		queue = append(queue, waiting{k, k + rng.IntN(lag+1), learned, predict(k)})
		rest := queue[:0]
		for _, w := range queue {
			if w.due <= k {
				play(w)
			} else {
				rest = append(rest, w)
			}
		}
		queue = rest
	}
	for _, w := range queue {
		play(w)
	}
	return d
}
