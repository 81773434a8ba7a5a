//go:build !purego

package online

// On amd64, dotNorm2, dot and axpy are SSE2 assembly (kernel_amd64.s)
// that computes the bits of the Go versions in kernel.go (a NaN's payload
// aside, which Go does not fix either). A round over a hashed vector is
// bound by its scattered reads of w, each a likely cache miss: the fewer
// instructions between them, the more of them the processor keeps in
// flight. The assembly reads and sums two entries per instruction where
// the canonical order allows it (sums 0,1 and 2,3 are the two halves of a
// register) and replaces the bounds check of every w[idx[k]] by a mask.
// (The OGD steps stay in Go: the same treatment did not make them faster.)
//
// Bounds: the reads use idx[k]&mask with mask = slotMask(len(w)), always
// in bounds, and return the OR of the indices; if an index had a bit above
// the mask, the wrapper drops the result and runs the Go version, which
// reads the slot if it is below len(w) (the bias slot w[2^bits] of a
// learner) and panics if not, exactly as before. axpy checks the indices
// before it writes and leaves the same cases to the Go version, untouched.

func dotNorm2(idx []uint32, val []float64, w []float64) (dot, n2 float64) {
	val = val[:len(idx)]
	if len(w) > 0 {
		m := slotMask(len(w))
		if d, n, or := dotNorm2SSE2(idx, val, w, m); or&^m == 0 {
			return d, n
		}
	}
	return dotNorm2Generic(idx, val, w)
}

func dot(idx []uint32, val []float64, w []float64) float64 {
	val = val[:len(idx)]
	if len(w) > 0 {
		m := slotMask(len(w))
		if d, or := dotSSE2(idx, val, w, m); or&^m == 0 {
			return d
		}
	}
	return dotGeneric(idx, val, w)
}

func axpy(w []float64, a float64, idx []uint32, val []float64) {
	val = val[:len(idx)]
	if len(w) == 0 || !axpySSE2(w, a, idx, val, slotMask(len(w))) {
		axpyGeneric(w, a, idx, val)
	}
}

// The assembly. len(val) ≥ len(idx) and len(w) > mask are the callers'
// to guarantee.

//go:noescape
func dotNorm2SSE2(idx []uint32, val []float64, w []float64, mask uint32) (dot, n2 float64, or uint32)

//go:noescape
func dotSSE2(idx []uint32, val []float64, w []float64, mask uint32) (dot float64, or uint32)

//go:noescape
func axpySSE2(w []float64, a float64, idx []uint32, val []float64, mask uint32) (ok bool)
