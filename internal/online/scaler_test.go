package online_test

import (
	"bytes"
	"encoding"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamlearn/streamlearn/internal/codec"
	"github.com/streamlearn/streamlearn/internal/online"
	"github.com/streamlearn/streamlearn/internal/online/onlinetest"
)

// TestScalerStandardMatchesTwoPass: after a stream of sparse vectors, each
// slot's running mean and population variance equal the two-pass values
// over the values present at that slot, and each transformed value uses
// the two-pass statistics over every event so far, its own included, a
// missing feature counting as 0.
func TestScalerStandardMatchesTwoPass(t *testing.T) {
	const bits = 6
	r := rand.New(rand.NewPCG(11, 11))
	sc, err := online.NewScaler(bits, online.ScaleStandard)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([][]float64, 1<<bits)
	var z online.Vector
	for events := 1; events <= 3000; events++ {
		x := onlinetest.RandomVector(r, bits, 1+r.IntN(10))
		for k := range x.Val {
			x.Val[k] = 100 + 5*x.Val[k] // offset: exposes naive Σx² formulas
		}
		sc.Transform(&z, x)
		for k, i := range x.Idx {
			seen[i] = append(seen[i], x.Val[k])
			m, v := twoPass(append(slices.Clone(seen[i]), make([]float64, events-len(seen[i]))...))
			want := 0.0
			if v > 0 {
				want = (x.Val[k] - m) / math.Sqrt(v)
			}
			if z.Idx[k] != i || math.Abs(z.Val[k]-want) > 1e-9*(1+math.Abs(want)) {
				t.Fatalf("slot %d: transformed %v, want %v", i, z.Val[k], want)
			}
		}
	}
	for i, vals := range seen {
		n, m, v := sc.Stats(uint32(i))
		wm, wv := twoPass(vals)
		if n != uint64(len(vals)) || math.Abs(m-wm) > 1e-12*math.Abs(wm)+1e-12 || math.Abs(v-wv) > 1e-9*wv+1e-12 {
			t.Errorf("slot %d: n=%d mean=%v var=%v, want %d %v %v", i, n, m, v, len(vals), wm, wv)
		}
	}
}

func twoPass(v []float64) (mean, variance float64) {
	if len(v) == 0 {
		return 0, 0
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v))
}

func TestScalerKinds(t *testing.T) {
	x := online.Vector{Idx: []uint32{1, 5}, Val: []float64{3, -4}}
	var z online.Vector
	l2, _ := online.NewScaler(3, online.ScaleL2)
	l2.Transform(&z, x)
	if z.Val[0] != 0.6 || z.Val[1] != -0.8 || x.Val[0] != 3 {
		t.Errorf("l2: %v (input %v)", z, x)
	}
	l2.Transform(&z, online.Vector{})
	if z.Len() != 0 {
		t.Errorf("l2 of empty: %v", z)
	}
	none, _ := online.NewScaler(3, "")
	none.Transform(&z, x)
	if none.Kind() != online.ScaleNone || z.Val[0] != 3 || z.Val[1] != -4 || z.Idx[1] != 5 {
		t.Errorf("none: %v", z)
	}
	st, _ := online.NewScaler(3, online.ScaleStandard)
	st.Transform(&z, x)
	if z.Val[0] != 0 || z.Val[1] != 0 {
		t.Errorf("standard, first observation: %v, want zeros (sd 0)", z)
	}
	if _, err := online.NewScaler(3, "minmax"); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := online.NewScaler(online.MaxBits+1, online.ScaleNone); err == nil {
		t.Error("bits beyond MaxBits accepted")
	}
}

func TestScalerMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	a, _ := online.NewScaler(8, online.ScaleStandard)
	var z online.Vector
	xs := make([]online.Vector, 400)
	for k := range xs {
		xs[k] = onlinetest.RandomVector(r, 8, 12)
	}
	for _, x := range xs[:200] {
		a.Transform(&z, x)
	}
	snap, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := online.NewScaler(8, online.ScaleStandard)
	b.Transform(&z, xs[300]) // state to be replaced
	if err := b.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	var za, zb online.Vector
	for _, x := range xs[200:] {
		a.Transform(&za, x)
		b.Transform(&zb, x)
		for k := range za.Val {
			if math.Float64bits(za.Val[k]) != math.Float64bits(zb.Val[k]) {
				t.Fatal("restored scaler transforms differently")
			}
		}
	}
	ba, _ := a.MarshalBinary()
	bb, _ := b.MarshalBinary()
	if !bytes.Equal(ba, bb) {
		t.Error("final encodings differ")
	}
	for _, n := range []int{0, 4, len(snap) / 2, len(snap) - 1} {
		if err := b.UnmarshalBinary(snap[:n]); err == nil {
			t.Errorf("accepted %d of %d bytes", n, len(snap))
		}
	}
	l2, _ := online.NewScaler(8, online.ScaleL2)
	if err := l2.UnmarshalBinary(snap); err == nil {
		t.Error("l2 scaler accepted a standard encoding")
	}
}

func TestScalerAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	x := onlinetest.RandomVector(r, 18, 40)
	for _, kind := range []string{online.ScaleNone, online.ScaleStandard, online.ScaleL2} {
		sc, _ := online.NewScaler(18, kind)
		var z online.Vector
		sc.Transform(&z, x)
		if n := testing.AllocsPerRun(100, func() { sc.Transform(&z, x) }); n != 0 {
			t.Errorf("%s: Transform allocates %v times", kind, n)
		}
	}
}

// TestScalerVersion1: a standard scaler's state written before the
// scaler counted events restores, with the largest count of a slot as the
// count of events: a slot present that often scales as before, one present
// less often folds in its zeros.
func TestScalerVersion1(t *testing.T) {
	var e codec.Encoder
	e.RawString("SLSC")
	e.U8(1)
	e.String(online.ScaleStandard)
	e.U64(4) // bits
	e.U64(2) // slots
	for _, s := range []struct {
		i, n       uint64
		mean, vari float64
	}{{1, 10, 2, 1}, {3, 5, 1, 0}} {
		e.U64(s.i)
		e.U64(s.n)
		e.F64(s.mean)
		e.F64(s.vari)
	}
	sc, _ := online.NewScaler(4, online.ScaleStandard)
	if err := sc.UnmarshalBinary(e.Bytes()); err != nil {
		t.Fatal(err)
	}
	if sc.Events() != 10 {
		t.Fatalf("%d events, want 10 (the largest count)", sc.Events())
	}
	var z online.Vector
	sc.Scale(&z, online.Vector{Idx: []uint32{1, 3}, Val: []float64{3, 1}})
	// Slot 1: present in all 10, (3-2)/1. Slot 3: 5 ones in 10 events,
	// mean 0.5, variance 0.25: (1-0.5)/0.5.
	if z.Val[0] != 1 || z.Val[1] != 1 {
		t.Errorf("scaled %v, want [1 1]", z.Val)
	}
	b, _ := sc.MarshalBinary()
	again, _ := online.NewScaler(4, online.ScaleStandard)
	if err := again.UnmarshalBinary(b); err != nil || again.Events() != 10 {
		t.Errorf("re-encoded: %v, %d events", err, again.Events())
	}
}

// TestSparseScaler: a Scaler over a Space is the dense one bit for bit,
// for every kind, on a small space and on a wide one with a few slots
// touched: fed the same hashed vectors — canonical ones through
// Transform, others (out of order, a slot twice) through Observe then
// Scale, some only scaled — they write the same vectors, report the same
// statistics, and encode (and freeze) to the same bytes; every 50 events
// each is replaced by the other kind decoded from its encoding. The
// space is shared with a model that numbered slots of its own first.
func TestSparseScaler(t *testing.T) {
	for _, bits := range []uint{4, 8, 18} {
		for _, kind := range []string{online.ScaleStandard, online.ScaleL2, online.ScaleNone} {
			t.Run(fmt.Sprintf("bits=%d/%s", bits, kind), func(t *testing.T) {
				testSparseScaler(t, bits, kind)
			})
		}
	}
}

func testSparseScaler(t *testing.T, bits uint, kind string) {
	r := rand.New(rand.NewPCG(uint64(bits), 9))
	dense := func() *online.Scaler {
		s, err := online.NewScaler(bits, kind)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sparse := func() *online.Scaler {
		sp, err := online.NewSpace(bits)
		if err != nil {
			t.Fatal(err)
		}
		var x online.Vector
		sp.Map(&x, onlinetest.RandomVector(r, bits, 5)) // the model's slots
		s, err := online.NewSparseScaler(sp, kind)
		if err != nil {
			t.Fatal(err)
		}
		if s.Space() != sp {
			t.Fatal("Space() is not the space the scaler was made over")
		}
		return s
	}
	encode := func(s encoding.BinaryMarshaler) []byte { return encoded(t, s) }
	d, s := dense(), sparse()
	var xd, xs online.Vector
	var seen []uint32
	for event := range 300 {
		x := onlinetest.RandomVector(r, bits, 10)
		for k := range x.Val {
			x.Val[k] = math.Ldexp(x.Val[k], r.IntN(8)-4)
		}
		switch event % 4 {
		case 0, 1:
			d.Transform(&xd, x)
			s.Transform(&xs, x)
		case 2:
			// Out of order, and a slot twice.
			x.Idx, x.Val = append(x.Idx, x.Idx[0]), append(x.Val, 0.5)
			slices.Reverse(x.Idx)
			d.Observe(x)
			s.Observe(x)
			d.Scale(&xd, x)
			s.Scale(&xs, x)
		default:
			// Scaled only, unseen slots included.
			x.Idx[0] = uint32(r.IntN(1 << bits))
			slices.Sort(x.Idx)
			x.Idx = slices.Compact(x.Idx)
			x.Val = x.Val[:len(x.Idx)]
			d.Scale(&xd, x)
			s.Scale(&xs, x)
		}
		seen = append(seen, x.Idx...)
		if !slices.Equal(xd.Idx, xs.Idx) || !slices.EqualFunc(xd.Val, xs.Val, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			t.Fatalf("event %d: dense %v, sparse %v", event, xd, xs)
		}
		for _, i := range append(seen[len(seen)-len(x.Idx):], uint32(r.IntN(1<<bits))) {
			dn, dm, dv := d.Stats(i)
			sn, sm, sv := s.Stats(i)
			if dn != sn || math.Float64bits(dm) != math.Float64bits(sm) || math.Float64bits(dv) != math.Float64bits(sv) {
				t.Fatalf("event %d: slot %d: dense stats %d %v %v, sparse %d %v %v", event, i, dn, dm, dv, sn, sm, sv)
			}
		}
		if event%50 != 49 {
			continue
		}
		bd, bs := encode(d), encode(s)
		if !bytes.Equal(bd, bs) {
			t.Fatalf("event %d: encodings differ:\ndense  %x\nsparse %x", event, bd, bs)
		}
		if f := encode(online.Freeze(s, nil)); !bytes.Equal(f, bs) {
			t.Fatalf("event %d: a sparse scaler's Freeze encodes otherwise", event)
		}
		d, s = dense(), sparse()
		decodeEachOther(t, fmt.Sprintf("event %d", event), d, s, bd, bs)
	}
	if kind == online.ScaleStandard && d.Events() == 0 {
		t.Fatal("no event observed")
	}
}
