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
// (The OGD steps stay in Go: where a fifth of the rounds step, the step
// loop is 9% of a hinge round's profile, of which SSE2 pairs would save
// perhaps a quarter.)
//
// The functions are the assembly itself, called without a Go wrapper
// (each wrapper layer cost ~8% of a Perceptron round): kernel_amd64.s says
// how the reads stay in bounds without a check per entry and when the Go
// version runs instead.

// Implemented in kernel_amd64.s.

//go:noescape
func dotNorm2(idx []uint32, val []float64, w []float64) (dot, n2 float64)

//go:noescape
func dot(idx []uint32, val []float64, w []float64) float64

//go:noescape
func axpy(w []float64, a float64, idx []uint32, val []float64)
