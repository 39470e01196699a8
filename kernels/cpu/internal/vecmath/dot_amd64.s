//go:build amd64 && !purego

#include "textflag.h"

// func dotBF16AVX512(a *float32, w *uint16, n int) float32
//
// Σ a[i]·w[i] for i < n, n ≥ 0, the bfloat16 w widened exactly (its bits
// shifted into the top half of a float32): 64 at a time over four
// accumulators of 16 lanes, then 16 at a time, then the rest under a
// mask.
TEXT ·dotBF16AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   n+16(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

loop64:
	CMPQ        CX, $64
	JLT         loop16
	VPMOVZXWD   (DI), Z4
	VPMOVZXWD   32(DI), Z5
	VPMOVZXWD   64(DI), Z6
	VPMOVZXWD   96(DI), Z7
	VPSLLD      $16, Z4, Z4
	VPSLLD      $16, Z5, Z5
	VPSLLD      $16, Z6, Z6
	VPSLLD      $16, Z7, Z7
	VFMADD231PS (SI), Z4, Z0
	VFMADD231PS 64(SI), Z5, Z1
	VFMADD231PS 128(SI), Z6, Z2
	VFMADD231PS 192(SI), Z7, Z3
	ADDQ        $128, DI
	ADDQ        $256, SI
	SUBQ        $64, CX
	JMP         loop64

loop16:
	CMPQ        CX, $16
	JLT         tail
	VPMOVZXWD   (DI), Z4
	VPSLLD      $16, Z4, Z4
	VFMADD231PS (SI), Z4, Z0
	ADDQ        $32, DI
	ADDQ        $64, SI
	SUBQ        $16, CX
	JMP         loop16

tail:
	TESTQ       CX, CX
	JZ          sum
	MOVL        $1, AX
	SHLL        CX, AX
	DECL        AX
	KMOVW       AX, K1
	VPMOVZXWD.Z (DI), K1, Z4
	VMOVUPS.Z   (SI), K1, Z5
	VPSLLD      $16, Z4, Z4
	VFMADD231PS Z5, Z4, Z0

sum:
	VADDPS         Z1, Z0, Z0
	VADDPS         Z3, Z2, Z2
	VADDPS         Z2, Z0, Z0
	VEXTRACTF32X8  $1, Z0, Y1
	VADDPS         Y1, Y0, Y0
	VEXTRACTF128   $1, Y0, X1
	VADDPS         X1, X0, X0
	VPERMILPS      $0x4e, X0, X1
	VADDPS         X1, X0, X0
	VPERMILPS      $0xb1, X0, X1
	VADDPS         X1, X0, X0
	MOVSS          X0, ret+24(FP)
	VZEROUPPER
	RET
