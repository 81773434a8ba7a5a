//go:build !amd64 || purego

package online

// The learners' kernels are the Go versions of kernel.go.

func dotNorm2(idx []uint32, val []float64, w []float64) (dot, n2 float64) {
	return dotNorm2Generic(idx, val, w)
}

func dot(idx []uint32, val []float64, w []float64) float64 { return dotGeneric(idx, val, w) }

func axpy(w []float64, a float64, idx []uint32, val []float64) { axpyGeneric(w, a, idx, val) }
