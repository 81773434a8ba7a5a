package online

// The hot loops of the learners: sums over the entries of a sparse vector
// in the canonical order documented on Vector (four interleaved partial
// sums, entry k into sum k mod 4, combined as (s0+s1)+(s2+s3)), and the
// sparse updates. Every product that is added to something is wrapped in
// float64(·): the Go spec lets a compiler fuse x*y+z into one FMA (gc does
// on arm64, ppc64, s390x, riscv64, and on amd64 with GOAMD64=v3 or later),
// which rounds once instead of twice; the explicit conversion forbids it,
// so the results are the same bits on every architecture. It costs
// nothing where nothing would be fused.
//
// The functions here are Go. On amd64, dotNorm2 is SSE2 assembly that
// computes the bits of dotNorm2Generic (kernel_amd64.s, compared with it
// in kernel_test.go); elsewhere, and with the purego build tag, it is
// dotNorm2Generic (kernel_generic.go).

// dotNorm2Generic returns ⟨w,x⟩ and ‖x‖² of x = (idx, val) in one pass,
// each in the canonical summation order (see Vector).
func dotNorm2Generic(idx []uint32, val []float64, w []float64) (dot, n2 float64) {
	val = val[:len(idx)]
	var d0, d1, d2, d3, n0, n1, n2_, n3 float64
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		i := idx[k : k+4 : k+4]
		v := val[k : k+4 : k+4]
		d0 += float64(w[i[0]] * v[0])
		d1 += float64(w[i[1]] * v[1])
		d2 += float64(w[i[2]] * v[2])
		d3 += float64(w[i[3]] * v[3])
		n0 += float64(v[0] * v[0])
		n1 += float64(v[1] * v[1])
		n2_ += float64(v[2] * v[2])
		n3 += float64(v[3] * v[3])
	}
	i, v := idx[k:], val[k:]
	if len(i) > 0 {
		d0 += float64(w[i[0]] * v[0])
		n0 += float64(v[0] * v[0])
	}
	if len(i) > 1 {
		d1 += float64(w[i[1]] * v[1])
		n1 += float64(v[1] * v[1])
	}
	if len(i) > 2 {
		d2 += float64(w[i[2]] * v[2])
		n2_ += float64(v[2] * v[2])
	}
	return (d0 + d1) + (d2 + d3), (n0 + n1) + (n2_ + n3)
}

// dot returns ⟨w,x⟩ in the canonical summation order (see Vector).
func dot(idx []uint32, val []float64, w []float64) float64 {
	val = val[:len(idx)]
	var d0, d1, d2, d3 float64
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		i := idx[k : k+4 : k+4]
		v := val[k : k+4 : k+4]
		d0 += float64(w[i[0]] * v[0])
		d1 += float64(w[i[1]] * v[1])
		d2 += float64(w[i[2]] * v[2])
		d3 += float64(w[i[3]] * v[3])
	}
	i, v := idx[k:], val[k:]
	if len(i) > 0 {
		d0 += float64(w[i[0]] * v[0])
	}
	if len(i) > 1 {
		d1 += float64(w[i[1]] * v[1])
	}
	if len(i) > 2 {
		d2 += float64(w[i[2]] * v[2])
	}
	return (d0 + d1) + (d2 + d3)
}

func norm2(val []float64) float64 {
	var n0, n1, n2, n3 float64
	k := 0
	for ; k+4 <= len(val); k += 4 {
		v := val[k : k+4 : k+4]
		n0 += float64(v[0] * v[0])
		n1 += float64(v[1] * v[1])
		n2 += float64(v[2] * v[2])
		n3 += float64(v[3] * v[3])
	}
	v := val[k:]
	if len(v) > 0 {
		n0 += float64(v[0] * v[0])
	}
	if len(v) > 1 {
		n1 += float64(v[1] * v[1])
	}
	if len(v) > 2 {
		n2 += float64(v[2] * v[2])
	}
	return (n0 + n1) + (n2 + n3)
}

// axpy adds a·x to w: w[idx[k]] += a·val[k] in increasing k, each product
// rounded before the sum.
func axpy(w []float64, a float64, idx []uint32, val []float64) {
	val = val[:len(idx)]
	for k, i := range idx {
		w[i] += float64(a * val[k])
	}
}

// stepUnscaled makes OGD's step v_i ← v_i − η·(c·x_i) on the slots of x
// (w = v, scale 1) and returns the change of ‖v‖², summed in the canonical
// summation order (see Vector).
func stepUnscaled(v []float64, eta, c float64, idx []uint32, val []float64) float64 {
	val = val[:len(idx)]
	var d0, d1, d2, d3 float64
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		i := idx[k : k+4 : k+4]
		x := val[k : k+4 : k+4]
		d0 += step1(v, i[0], eta, c, x[0])
		d1 += step1(v, i[1], eta, c, x[1])
		d2 += step1(v, i[2], eta, c, x[2])
		d3 += step1(v, i[3], eta, c, x[3])
	}
	i, x := idx[k:], val[k:]
	if len(i) > 0 {
		d0 += step1(v, i[0], eta, c, x[0])
	}
	if len(i) > 1 {
		d1 += step1(v, i[1], eta, c, x[1])
	}
	if len(i) > 2 {
		d2 += step1(v, i[2], eta, c, x[2])
	}
	return (d0 + d1) + (d2 + d3)
}

// step1 is one coordinate of stepUnscaled: it returns the change of v_i².
func step1(v []float64, i uint32, eta, c, x float64) float64 {
	old := v[i]
	nw := old - float64(eta*float64(c*x))
	v[i] = nw
	return float64(nw*nw) - float64(old*old)
}

// stepScaled is stepUnscaled for w = s·v: the step is made in w's scale
// and stored divided by s (times inv = 1/s).
func stepScaled(v []float64, s, inv, eta, c float64, idx []uint32, val []float64) float64 {
	val = val[:len(idx)]
	var d0, d1, d2, d3 float64
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		i := idx[k : k+4 : k+4]
		x := val[k : k+4 : k+4]
		d0 += step1s(v, i[0], s, inv, eta, c, x[0])
		d1 += step1s(v, i[1], s, inv, eta, c, x[1])
		d2 += step1s(v, i[2], s, inv, eta, c, x[2])
		d3 += step1s(v, i[3], s, inv, eta, c, x[3])
	}
	i, x := idx[k:], val[k:]
	if len(i) > 0 {
		d0 += step1s(v, i[0], s, inv, eta, c, x[0])
	}
	if len(i) > 1 {
		d1 += step1s(v, i[1], s, inv, eta, c, x[1])
	}
	if len(i) > 2 {
		d2 += step1s(v, i[2], s, inv, eta, c, x[2])
	}
	return (d0 + d1) + (d2 + d3)
}

// step1s is one coordinate of stepScaled: it returns the change of w_i².
func step1s(v []float64, i uint32, s, inv, eta, c, x float64) float64 {
	old := float64(s * v[i])
	nw := old - float64(eta*float64(c*x))
	v[i] = float64(nw * inv)
	return float64(nw*nw) - float64(old*old)
}

// max0 is math.Max(x, 0), inlined: NaN stays NaN and −0 becomes +0.
func max0(x float64) float64 {
	if x > 0 || x != x {
		return x
	}
	return 0
}
