package codec

import (
	"bytes"
	"errors"
	"math"
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
