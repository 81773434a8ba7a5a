//go:build !purego

#include "textflag.h"

// dotNorm2 in SSE2 (kernel_amd64.go says why). It computes the bits of
// its Go version in kernel.go: the same products and sums, rounded in the
// same order (SSE2 arithmetic is IEEE binary64 with round-to-nearest,
// never fused). The sums over entries keep the four partial sums of the
// canonical order (entry k into sum k mod 4); the reads pack sums 0,1 and
// 2,3 in two registers.
//
// No index is compared with len(w). The reads use idx[k]&mask, with mask
// = 2^j − 1 for the largest 2^j ≤ len(w), in bounds whatever idx holds,
// and OR all indices together: if one had a bit outside the mask, the
// result is dropped and the Go version runs instead (it reads a slot in
// [2^j, len(w)), such as a learner's bias slot, and panics on one beyond
// len(w)). len(val) < len(idx) and an empty w go to the Go version too,
// which panics as it always did. The Go version has the same signature:
// a tail jump with the arguments in place.

// SLOTMASK turns R8 = len(w) > 0 into 2^j − 1 for the largest 2^j ≤ len(w):
// every index ≤ R8 is in bounds of w. The reads use the low 32 bits
// (all ones once len(w) ≥ 2^32). Clobbers R10.
#define SLOTMASK \
	MOVQ  CX, R10; \
	BSRQ  R8, CX; \
	MOVL  $1, R8; \
	SHLQ  CX, R8; \
	DECQ  R8; \
	MOVQ  R10, CX

// MASKED jumps to slow if R9, the OR of the indices, has a bit outside
// the mask R8, that is if some index was masked. Clobbers AX.
#define MASKED(slow) \
	MOVQ  R8, AX; \
	NOTQ  AX; \
	TESTQ AX, R9; \
	JNZ   slow

// READS is the start of the read kernel, whose arguments are
// (idx, val, w): it sends len(val) < len(idx) and an empty w to slow,
// and sets CX = len(idx), R8 = the mask, SI, DX, DI = idx, val, w, R9 = 0
// (the OR of the indices), BX = len(idx)/4 (the loop's count), X0 = X1 = 0
// (sums 0,1 and 2,3).
#define READS(slow) \
	MOVQ  idx_len+8(FP), CX; \
	MOVQ  val_len+32(FP), BX; \
	CMPQ  BX, CX; \
	JLT   slow; \
	MOVQ  w_len+56(FP), R8; \
	TESTQ R8, R8; \
	JZ    slow; \
	SLOTMASK; \
	MOVQ  idx_base+0(FP), SI; \
	MOVQ  val_base+24(FP), DX; \
	MOVQ  w_base+48(FP), DI; \
	XORL  R9, R9; \
	XORPD X0, X0; \
	XORPD X1, X1; \
	MOVQ  CX, BX; \
	SHRQ  $2, BX

// GATHER4 reads the four entries at SI, DX: w at their masked indices
// into X4 (entries 0, 1) and X5 (2, 3), their values into X6 and X7, and
// ORs the indices into R9.
#define GATHER4 \
	MOVL   (SI), AX; \
	MOVL   4(SI), R10; \
	MOVL   8(SI), R11; \
	MOVL   12(SI), R12; \
	ORL    AX, R9; \
	ORL    R10, R9; \
	ORL    R11, R9; \
	ORL    R12, R9; \
	ANDL   R8, AX; \
	ANDL   R8, R10; \
	ANDL   R8, R11; \
	ANDL   R8, R12; \
	MOVSD  (DI)(AX*8), X4; \
	MOVHPD (DI)(R10*8), X4; \
	MOVSD  (DI)(R11*8), X5; \
	MOVHPD (DI)(R12*8), X5; \
	MOVUPD (DX), X6; \
	MOVUPD 16(DX), X7

// GATHER1 reads the entry at io(SI), vo(DX): w at its masked index into
// X9, its value into X8, and ORs the index into R9.
#define GATHER1(io, vo) \
	MOVL  io(SI), AX; \
	ORL   AX, R9; \
	ANDL  R8, AX; \
	MOVSD vo(DX), X8; \
	MOVSD (DI)(AX*8), X9

// func dotNorm2(idx []uint32, val []float64, w []float64) (dot, n2 float64)
TEXT ·dotNorm2(SB), NOSPLIT, $0-88
	READS(slow)
	XORPD X2, X2 // norm sums 0, 1
	XORPD X3, X3 // norm sums 2, 3
	TESTQ BX, BX
	JZ    split

loop:
	GATHER4
	MULPD X6, X4
	MULPD X7, X5
	ADDPD X4, X0
	ADDPD X5, X1
	MULPD X6, X6
	MULPD X7, X7
	ADDPD X6, X2
	ADDPD X7, X3
	ADDQ  $16, SI
	ADDQ  $32, DX
	DECQ  BX
	JNZ   loop

split:
	// Sums 0..3: dot in X0, X4, X1, X5; norm in X2, X6, X3, X7.
	MOVAPD   X0, X4
	UNPCKHPD X4, X4
	MOVAPD   X1, X5
	UNPCKHPD X5, X5
	MOVAPD   X2, X6
	UNPCKHPD X6, X6
	MOVAPD   X3, X7
	UNPCKHPD X7, X7
	ANDQ     $3, CX
	JZ       combine
	GATHER1(0, 0)
	MULSD    X8, X9
	ADDSD    X9, X0
	MULSD    X8, X8
	ADDSD    X8, X2
	DECQ     CX
	JZ       combine
	GATHER1(4, 8)
	MULSD    X8, X9
	ADDSD    X9, X4
	MULSD    X8, X8
	ADDSD    X8, X6
	DECQ     CX
	JZ       combine
	GATHER1(8, 16)
	MULSD    X8, X9
	ADDSD    X9, X1
	MULSD    X8, X8
	ADDSD    X8, X3

combine:
	// (s0+s1)+(s2+s3)
	ADDSD X4, X0
	ADDSD X5, X1
	ADDSD X1, X0
	ADDSD X6, X2
	ADDSD X7, X3
	ADDSD X3, X2
	MASKED(slow)
	MOVSD X0, dot+72(FP)
	MOVSD X2, n2+80(FP)
	RET

slow:
	JMP ·dotNorm2Generic(SB)
