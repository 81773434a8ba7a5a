//go:build !amd64 || purego

package online

// dotNorm2 is the Go version of kernel.go.

func dotNorm2(idx []uint32, val []float64, w []float64) (dot, n2 float64) {
	return dotNorm2Generic(idx, val, w)
}
