package event

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// checkCanonical fails t unless x is canonical: slots strictly increasing
// and within mask, values finite, Idx and Val of equal length.
func checkCanonical(t testing.TB, x online.Vector, mask uint32) {
	t.Helper()
	if len(x.Idx) != len(x.Val) {
		t.Fatalf("len(Idx) %d != len(Val) %d", len(x.Idx), len(x.Val))
	}
	for k, i := range x.Idx {
		if i > mask {
			t.Fatalf("slot %d outside mask %#x", i, mask)
		}
		if k > 0 && x.Idx[k-1] >= i {
			t.Fatalf("slots not strictly increasing at %d: %v", k, x.Idx)
		}
		if v := x.Val[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("value %v at slot %d", v, i)
		}
	}
}

func gzipWriter(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
