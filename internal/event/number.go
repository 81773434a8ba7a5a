package event

import (
	"errors"
	"strconv"
	"unsafe"
)

// numStatus is the outcome of parseFloat.
type numStatus uint8

const (
	numOK        numStatus = iota
	numSyntax              // not a decimal number
	numNonFinite           // inf, nan, or a number that overflows float64
)

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat parses a decimal number, [+-]digits[.digits][(e|E)[+-]digits]
// (digits may be empty on one side of the point, not both), and returns
// exactly what strconv.ParseFloat(s, 64) returns for it. It rejects what
// ParseFloat accepts beyond that grammar (hex floats, underscores), and
// reports inf, infinity and nan (any case, signed) as numNonFinite, as it
// does numbers that overflow. It does not allocate on success.
func parseFloat(b []byte) (float64, numStatus) {
	v, n, st := floatPrefix(b)
	if n != len(b) || st == numSyntax {
		if isInfNaN(b) {
			return 0, numNonFinite
		}
		return 0, numSyntax
	}
	return v, st
}

// floatPrefix parses the longest prefix of b in the grammar of parseFloat
// and returns its value, its length n and its status: parseFloat(b[:n]).
// When b starts with no number at all it returns numSyntax (and an n that
// is not len(b) unless b is a lone sign or empty).
//
// Mantissas below 2^53 with a decimal exponent within ±22 take Clinger's
// fast path: the mantissa and the power of ten are exact float64s, so one
// multiplication or division is the correctly rounded result (strconv
// takes the same path; FuzzParseFloat checks the two agree). Anything else
// goes to strconv.ParseFloat.
func floatPrefix(b []byte) (float64, int, numStatus) {
	n := len(b)
	i := 0
	neg := false
	if n > 0 {
		if c := b[0]; c == '+' || c == '-' {
			neg = c == '-'
			i++
		}
	}
	var mant uint64
	nd, dp := 0, 0
	trunc := false
	d0 := i
	for ; i < n; i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		switch {
		case mant == 0 && c == 0:
		case nd < 19:
			mant = mant*10 + uint64(c)
			nd++
		default:
			trunc = true
			dp++
		}
	}
	digits := i > d0
	if i < n && b[i] == '.' {
		f0 := i + 1
		for i++; i < n; i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			switch {
			case mant == 0 && c == 0:
				dp--
			case nd < 19:
				mant = mant*10 + uint64(c)
				nd++
				dp--
			default:
				trunc = true
			}
		}
		if !digits && i == f0 {
			return 0, i, numSyntax
		}
		digits = true
	}
	if !digits {
		return 0, i, numSyntax
	}
	exp := 0
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		k := i + 1
		eneg := false
		if k < n && (b[k] == '+' || b[k] == '-') {
			eneg = b[k] == '-'
			k++
		}
		start := k
		for ; k < n; k++ {
			c := b[k] - '0'
			if c > 9 {
				break
			}
			if exp < 1e6 {
				exp = exp*10 + int(c)
			}
		}
		if k == start {
			exp = 0 // not an exponent: the number ends before the 'e'
		} else {
			i = k
			if eneg {
				exp = -exp
			}
		}
	}
	if !trunc {
		f := float64(mant)
		if neg {
			f = -f
		}
		if mant == 0 {
			return f, i, numOK
		}
		if mant < 1<<53 {
			switch e := dp + exp; {
			case e == 0:
				return f, i, numOK
			case e > 0 && e <= 22:
				return f * pow10[e], i, numOK
			case e < 0 && e >= -22:
				return f / pow10[-e], i, numOK
			}
		}
	}
	v, err := strconv.ParseFloat(unsafe.String(&b[0], i), 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return v, i, numNonFinite
		}
		return 0, i, numSyntax
	}
	return v, i, numOK
}

// isInfNaN reports whether b is inf, infinity or nan, in any case,
// optionally signed.
func isInfNaN(b []byte) bool {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	switch len(b) {
	case 3:
		return foldEq(b, "inf") || foldEq(b, "nan")
	case 8:
		return foldEq(b, "infinity")
	}
	return false
}

// foldEq reports whether b equals the lower-case ASCII word s, ignoring
// ASCII case.
func foldEq(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}
