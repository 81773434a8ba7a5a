package codec

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	var e Encoder
	e.RawString("AB")
	e.U8(7)
	e.U32(0x01020304)
	e.U64(0x0102030405060708)
	e.F64(1)
	e.Bool(true)
	e.Bool(false)
	e.String("hi")
	e.F64s([]float64{-2})
	e.Raw([]byte{9, 9})
	want := []byte{
		'A', 'B', 7,
		4, 3, 2, 1,
		8, 7, 6, 5, 4, 3, 2, 1,
		0, 0, 0, 0, 0, 0, 0xf0, 0x3f,
		1, 0,
		2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i',
		1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0,
		9, 9,
	}
	if got := e.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("bytes\n got %x\nwant %x", got, want)
	}
	if got := NewEncoder(100).Bytes(); len(got) != 0 || cap(got) != 100 {
		t.Fatalf("NewEncoder(100): len %d cap %d", len(got), cap(got))
	}
}

func TestRoundTrip(t *testing.T) {
	nan := math.Float64frombits(0x7ff8000000000abc)
	e := NewEncoder(0)
	e.U8(0xfe)
	e.U32(math.MaxUint32)
	e.U64(math.MaxUint64)
	e.F64(nan)
	e.Bool(true)
	e.String("standard")
	e.F64s([]float64{1.5, math.Inf(-1), 0})
	e.Raw([]byte("xyz"))
	e.Blob([]byte("blob"))
	e.Blob(nil)

	d := NewDecoder(e.Bytes())
	if v := d.U8(); v != 0xfe {
		t.Errorf("U8 %d", v)
	}
	if v := d.U32(); v != math.MaxUint32 {
		t.Errorf("U32 %d", v)
	}
	if v := d.U64(); v != math.MaxUint64 {
		t.Errorf("U64 %d", v)
	}
	if v := d.F64(); math.Float64bits(v) != math.Float64bits(nan) {
		t.Errorf("F64 bits %x", math.Float64bits(v))
	}
	if !d.Bool() {
		t.Error("Bool false")
	}
	if s := d.String(16); s != "standard" {
		t.Errorf("String %q", s)
	}
	v := make([]float64, 3)
	d.F64sInto(v)
	if v[0] != 1.5 || !math.IsInf(v[1], -1) || v[2] != 0 {
		t.Errorf("F64sInto %v", v)
	}
	if d.Len() != 3+12+8 {
		t.Errorf("Len %d, want 23", d.Len())
	}
	if p := d.Take(3); string(p) != "xyz" {
		t.Errorf("Take %q", p)
	}
	if p := d.Blob(); string(p) != "blob" {
		t.Errorf("Blob %q", p)
	}
	if p := d.Blob(); p == nil || len(p) != 0 {
		t.Errorf("empty Blob %q (nil %v)", p, p == nil)
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestStickyErrors(t *testing.T) {
	d := NewDecoder([]byte{1, 2, 3})
	if v := d.U32(); v != 0 || !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("short U32: %d, %v", v, d.Err())
	}
	if v := d.U8(); v != 0 || d.Len() != 0 {
		t.Fatalf("read after error: %d, len %d", v, d.Len())
	}
	d.Fail("later")
	if err := d.Finish(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Finish: %v, want the first error", err)
	}

	cases := []struct {
		name string
		b    []byte
		read func(*Decoder)
		want string
	}{
		{"trailing", []byte{1, 2}, func(d *Decoder) { d.U8() }, "1 trailing bytes"},
		{"bool", []byte{2}, func(d *Decoder) { d.Bool() }, "bad boolean"},
		{"string max", []byte{5, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 'e'},
			func(d *Decoder) { d.String(4) }, "string of 5 bytes"},
		{"string huge", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			func(d *Decoder) { d.String(1 << 20) }, "string of 18446744073709551615 bytes"},
		{"vector length", []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			func(d *Decoder) { d.F64sInto(make([]float64, 2)) }, "vector of 1 values, want 2"},
		{"blob past the end", []byte{3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'},
			func(d *Decoder) { d.Blob() }, "truncated"},
		{"blob huge", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			func(d *Decoder) { d.Blob() }, "truncated"},
		{"fail", nil, func(d *Decoder) { d.Fail("bad %s", "thing"); d.Fail("second") }, "bad thing"},
	}
	for _, c := range cases {
		d := NewDecoder(c.b)
		c.read(d)
		if err := d.Finish(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestSparseF64s(t *testing.T) {
	nan := math.Float64frombits(0x7ff8000000000abc)
	negZero := math.Copysign(0, -1)
	for _, v := range [][]float64{
		nil,
		{0, 0, 0},
		{1, 2},
		{0, 1, 0, 0, 2, 3, 0},
		{negZero, 0, nan, math.Inf(1), 0},
	} {
		var e Encoder
		e.SparseF64s(v)
		got := make([]float64, len(v))
		d := NewDecoder(e.Bytes())
		d.SparseF64sInto(got)
		if err := d.Finish(); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		for i := range v {
			if math.Float64bits(got[i]) != math.Float64bits(v[i]) {
				t.Fatalf("%v: got %v", v, got)
			}
		}
		// Never more than 8 bytes beyond the dense layout.
		var dense Encoder
		dense.F64s(v)
		if len(e.Bytes()) > len(dense.Bytes())+8 {
			t.Errorf("%v: %d bytes, dense %d", v, len(e.Bytes()), len(dense.Bytes()))
		}
	}
	// The layout: 5 values, 1 zero, a run of 1, 2 zeros, a run of 1, 1
	// trailing zero.
	var e Encoder
	e.SparseF64s([]float64{0, 1, 0, 0, -2})
	want := []byte{
		5, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,
		2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0,
	}
	if !bytes.Equal(e.Bytes(), want) {
		t.Fatalf("bytes\n got %x\nwant %x", e.Bytes(), want)
	}
}

// TestSparseEntries: the entries of a vector, its nonzero values and any
// zeros beside them, encode to the bytes of the dense vector, and
// SparseF64sEach reads back exactly its nonzero values.
func TestSparseEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	negZero := math.Copysign(0, -1)
	for trial := range 2000 {
		n := r.IntN(40)
		v := make([]float64, n)
		var pos []int
		var vals []float64
		for i := range v {
			switch r.IntN(6) {
			case 0, 1:
				v[i] = float64(r.IntN(5)) - 2 // zeros too
			case 2:
				v[i] = negZero
			}
			// Every nonzero value is an entry; so are some zeros.
			if math.Float64bits(v[i]) != 0 || r.IntN(3) == 0 {
				pos, vals = append(pos, i), append(vals, v[i])
			}
		}
		var dense, sparse Encoder
		dense.SparseF64s(v)
		sparse.SparseEntries(n, pos, vals)
		if !bytes.Equal(sparse.Bytes(), dense.Bytes()) {
			t.Fatalf("trial %d: %v at %v\n got %x\nwant %x", trial, vals, pos, sparse.Bytes(), dense.Bytes())
		}
		got := make([]float64, n)
		var last = -1
		d := NewDecoder(sparse.Bytes())
		d.SparseF64sEach(n, func(i int, x float64) {
			if i <= last || math.Float64bits(x) == 0 {
				t.Fatalf("trial %d: value %v at %d after %d", trial, x, i, last)
			}
			got[i], last = x, i
		})
		if err := d.Finish(); err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if math.Float64bits(got[i]) != math.Float64bits(v[i]) {
				t.Fatalf("trial %d: read %v, want %v", trial, got, v)
			}
		}
	}
}

func TestSparseF64sRejects(t *testing.T) {
	run := func(gap, count uint32, vals ...float64) []byte {
		var e Encoder
		e.U32(gap)
		e.U32(count)
		for _, v := range vals {
			e.F64(v)
		}
		return e.Bytes()
	}
	header := func(n uint64, runs ...[]byte) []byte {
		var e Encoder
		e.U64(n)
		for _, r := range runs {
			e.Raw(r)
		}
		return e.Bytes()
	}
	cases := []struct {
		name string
		b    []byte
		n    int
		want string
	}{
		{"length", header(3), 2, "vector of 3 values, want 2"},
		{"past the end", header(2, run(1, 2, 1, 2)), 2, "run of 2 values after 1 zeros"},
		{"empty run", header(2, run(0, 0), run(0, 2, 1, 2)), 2, "not canonical"},
		{"split run", header(2, run(0, 1, 1), run(0, 1, 2)), 2, "not canonical"},
		{"zero in a run", header(2, run(0, 2, 1, 0)), 2, "zero inside a run at 1"},
		{"truncated", header(2, run(0, 2, 1)), 2, "truncated"},
		{"unfinished", header(2, run(0, 1, 1)), 2, "truncated"},
	}
	for _, c := range cases {
		d := NewDecoder(c.b)
		d.SparseF64sInto(make([]float64, c.n))
		if err := d.Finish(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzSparseF64s: whatever SparseF64sInto accepts, SparseF64s writes
// back byte for byte (one encoding per vector), and nothing panics.
func FuzzSparseF64s(f *testing.F) {
	var e Encoder
	e.SparseF64s([]float64{0, 1, 0, 0, -2, 0})
	f.Add(e.Bytes()[8:], uint8(6))
	f.Fuzz(func(t *testing.T, runs []byte, n uint8) {
		var in Encoder
		in.U64(uint64(n))
		in.Raw(runs)
		v := make([]float64, n)
		d := NewDecoder(in.Bytes())
		d.SparseF64sInto(v)
		if d.Finish() != nil {
			return
		}
		var out Encoder
		out.SparseF64s(v)
		if !bytes.Equal(out.Bytes(), in.Bytes()) {
			t.Fatalf("accepted %x, which encodes as %x", in.Bytes(), out.Bytes())
		}
	})
}

// BenchmarkSparseF64s encodes a model's weights at the default 2^18
// slots: "sparse" with 124 learned (a9a's features and a bias), "dense"
// with every slot learned.
func BenchmarkSparseF64s(b *testing.B) {
	for _, c := range []struct {
		name string
		step int
	}{{"sparse", 1 << 18 / 124}, {"dense", 1}} {
		v := make([]float64, 1<<18)
		for i := 0; i < len(v); i += c.step {
			v[i] = float64(i) + 0.5
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			e := NewEncoder(8 * len(v))
			for b.Loop() {
				e.b = e.b[:0]
				e.SparseF64s(v)
			}
			b.SetBytes(8 * int64(len(v)))
		})
	}
}
