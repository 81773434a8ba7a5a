package online

import "testing"

func TestMurmur3(t *testing.T) {
	// Reference values of MurmurHash3_x86_32 from Appleby's SMHasher and the
	// test vectors widely republished with it (e.g. the Go package
	// github.com/spaolacci/murmur3 and Python's mmh3).
	for _, tc := range []struct {
		in   string
		seed uint32
		want uint32
	}{
		{"", 0, 0},
		{"", 1, 0x514E28B7},
		{"", 0xffffffff, 0x81F16F39},
		{"\x00\x00\x00\x00", 0, 0x2362F9DE},
		{"aaaa", 0x9747b28c, 0x5A97808A},
		{"aaa", 0x9747b28c, 0x283E0130},
		{"aa", 0x9747b28c, 0x5D211726},
		{"a", 0x9747b28c, 0x7FA09EA6},
		{"abcd", 0x9747b28c, 0xF0478627},
		{"Hello, world!", 0x9747b28c, 0x24884CBA},
		{"The quick brown fox jumps over the lazy dog", 0x9747b28c, 0x2FA826CD},
	} {
		if got := Murmur3(tc.in, tc.seed); got != tc.want {
			t.Errorf("Murmur3(%q, %#x) = %#x, want %#x", tc.in, tc.seed, got, tc.want)
		}
		if got := Murmur3([]byte(tc.in), tc.seed); got != tc.want {
			t.Errorf("Murmur3([]byte(%q), %#x) = %#x, want %#x", tc.in, tc.seed, got, tc.want)
		}
	}
}

func TestSlot(t *testing.T) {
	m := Mask(18)
	for _, tc := range []struct {
		name string
		want uint32
	}{
		{"7", 7},
		{"0", 0},
		{"262144", 0},     // 2^18 wraps
		{"4294967295", m}, // largest uint32
		{"4294967296", Murmur3("4294967296", 0) & m}, // too large: hashed
		{"-1", Murmur3("-1", 0) & m},
		{"+1", Murmur3("+1", 0) & m},
		{"len", Murmur3("len", 0) & m},
		{"", Murmur3("", 0) & m},
	} {
		if got := Slot(tc.name, m); got != tc.want {
			t.Errorf("Slot(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
	if Slot("len", m) == TextSlot("len", m) {
		t.Errorf("text token and named feature %q share a slot", "len")
	}
	if a := testing.AllocsPerRun(100, func() { Slot([]byte("sender=bulk.example"), m) }); a != 0 {
		t.Errorf("Slot allocates %v times", a)
	}
}
