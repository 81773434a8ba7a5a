//go:build !purego

package online

// On amd64, dotNorm2 is SSE2 assembly (kernel_amd64.s)
// that computes the bits of the Go versions in kernel.go (a NaN's payload
// aside, which Go does not fix either). A round over a hashed vector is
// bound by its scattered reads of w, each a likely cache miss: the fewer
// instructions between them, the more of them the processor keeps in
// flight. The assembly reads and sums two entries per instruction where
// the canonical order allows it (sums 0,1 and 2,3 are the two halves of a
// register) and replaces the bounds check of every w[idx[k]] by a mask.
// On the real text sets at 2^18 slots it takes 0.76–0.88 of the Go loop's
// time (BenchmarkKernelsText). The other kernels are Go: dot (the score
// alone) and the Perceptron's axpy were assembly too, and on SMS spam
// measured within 2% and 6% of the Go loop, below the 10% that pays for a
// second code path, so they went; the OGD steps, where a fifth of the
// rounds step, are 9% of a hinge round's profile.
//
// The function is the assembly itself, called without a Go wrapper (each
// wrapper layer cost ~8% of a Perceptron round): kernel_amd64.s says how
// the reads stay in bounds without a check per entry and when the Go
// version runs instead.

// Implemented in kernel_amd64.s.

//go:noescape
func dotNorm2(idx []uint32, val []float64, w []float64) (dot, n2 float64)
