package event

import (
	"unicode"
	"unicode/utf8"

	"github.com/streamlearn/streamlearn/internal/online"
)

// asciiWord[c] is c lower-cased when c is an ASCII letter or digit, else 0.
var asciiWord = func() (t [128]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c)
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = byte(c)
		t[c-'a'+'A'] = byte(c)
	}
	return t
}()

// tokenizer turns text into hashed word n-gram features with reusable
// buffers. Not safe for concurrent use.
type tokenizer struct {
	buf    []byte  // lower-cased tokens, each followed by one space
	starts []int32 // start of each token in buf
}

// add appends to x one entry of value 1 per occurrence of every n-gram of
// s, n = 1..ngrams: tokens are maximal runs of Unicode letters and digits
// (unicode.IsLetter, unicode.IsDigit), lower-cased (unicode.ToLower), and
// an n-gram is n consecutive tokens joined by one space. Bytes that are not
// valid UTF-8 separate tokens. The slot is online.TextSlot of the n-gram.
// It reports whether s is valid UTF-8 (as utf8.Valid), so that callers
// need not validate it in another pass.
func (t *tokenizer) add(x *online.Vector, s []byte, ngrams int, mask uint32) (valid bool) {
	buf, starts := t.buf[:0], t.starts[:0]
	valid = true
	in := false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			l := asciiWord[c]
			if l == 0 {
				i++
				if in {
					buf = append(buf, ' ')
					in = false
				}
				continue
			}
			if !in {
				starts = append(starts, int32(len(buf)))
				in = true
			}
			// Copy the run of ASCII letters and digits, lower-cased.
			for {
				buf = append(buf, l)
				if i++; i >= len(s) || s[i] >= utf8.RuneSelf {
					break
				}
				if l = asciiWord[s[i]]; l == 0 {
					break
				}
			}
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			valid = false
		} else if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if !in {
				starts = append(starts, int32(len(buf)))
				in = true
			}
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			continue
		}
		if in {
			buf = append(buf, ' ')
			in = false
		}
	}
	if in {
		buf = append(buf, ' ')
	}
	t.buf, t.starts = buf, starts
	nt := len(starts)
	for k := 0; k < nt; k++ {
		// The n-gram of tokens k..k+n-1 is buf[starts[k] : end of k+n-1],
		// the end being the start of token k+n less its separator.
		for n := 1; n <= ngrams && k+n <= nt; n++ {
			end := len(buf) - 1
			if k+n < nt {
				end = int(starts[k+n]) - 1
			}
			x.Idx = append(x.Idx, online.TextSlot(buf[starts[k]:end], mask))
			x.Val = append(x.Val, 1)
		}
	}
	return valid
}
