//go:build amd64 && !purego

#include "textflag.h"

// LOAD4X4 loads a 4×4 tile of 16 channels into Z0–Z15 (Z4i+j for row i,
// column j): its rows from SI, R9, R10 and R11, its columns CX bytes apart
// (DX = 3·CX).
#define LOAD4X4 \
	VMOVUPS (SI), Z0; \
	VMOVUPS (SI)(CX*1), Z1; \
	VMOVUPS (SI)(CX*2), Z2; \
	VMOVUPS (SI)(DX*1), Z3; \
	VMOVUPS (R9), Z4; \
	VMOVUPS (R9)(CX*1), Z5; \
	VMOVUPS (R9)(CX*2), Z6; \
	VMOVUPS (R9)(DX*1), Z7; \
	VMOVUPS (R10), Z8; \
	VMOVUPS (R10)(CX*1), Z9; \
	VMOVUPS (R10)(CX*2), Z10; \
	VMOVUPS (R10)(DX*1), Z11; \
	VMOVUPS (R11), Z12; \
	VMOVUPS (R11)(CX*1), Z13; \
	VMOVUPS (R11)(CX*2), Z14; \
	VMOVUPS (R11)(DX*1), Z15

// func inputAVX512(n int, x *float32, rs, cs int, v *float32, vs int)
//
// The 4×4 tile d[i][j] = x[i·rs + j·cs + c] to v[(4i+j)·vs + c] = (Bᵀ d B)[i][j],
// 16 channels c at a time, n a positive multiple of 16. Rows first: e0 =
// d0 − d2, e1 = d1 + d2, e2 = d2 − d1, e3 = d1 − d3; then the same over
// each row's columns.
TEXT ·inputAVX512(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), R13
	MOVQ x+8(FP), SI
	MOVQ rs+16(FP), BX
	SHLQ $2, BX
	MOVQ cs+24(FP), CX
	SHLQ $2, CX
	LEAQ (CX)(CX*2), DX
	LEAQ (SI)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	MOVQ v+32(FP), DI
	MOVQ vs+40(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R14
	LEAQ (DI)(R12*4), R8
	LEAQ (R8)(R12*4), AX
	LEAQ (AX)(R12*4), BX
inloop:
	LOAD4X4
	VSUBPS Z8, Z0, Z16
	VADDPS Z8, Z4, Z20
	VSUBPS Z4, Z8, Z24
	VSUBPS Z12, Z4, Z28
	VSUBPS Z9, Z1, Z17
	VADDPS Z9, Z5, Z21
	VSUBPS Z5, Z9, Z25
	VSUBPS Z13, Z5, Z29
	VSUBPS Z10, Z2, Z18
	VADDPS Z10, Z6, Z22
	VSUBPS Z6, Z10, Z26
	VSUBPS Z14, Z6, Z30
	VSUBPS Z11, Z3, Z19
	VADDPS Z11, Z7, Z23
	VSUBPS Z7, Z11, Z27
	VSUBPS Z15, Z7, Z31
	VSUBPS Z18, Z16, Z0
	VADDPS Z18, Z17, Z1
	VSUBPS Z17, Z18, Z2
	VSUBPS Z19, Z17, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, (DI)(R12*1)
	VMOVUPS Z2, (DI)(R12*2)
	VMOVUPS Z3, (DI)(R14*1)
	VSUBPS Z22, Z20, Z0
	VADDPS Z22, Z21, Z1
	VSUBPS Z21, Z22, Z2
	VSUBPS Z23, Z21, Z3
	VMOVUPS Z0, (R8)
	VMOVUPS Z1, (R8)(R12*1)
	VMOVUPS Z2, (R8)(R12*2)
	VMOVUPS Z3, (R8)(R14*1)
	VSUBPS Z26, Z24, Z0
	VADDPS Z26, Z25, Z1
	VSUBPS Z25, Z26, Z2
	VSUBPS Z27, Z25, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, (AX)(R12*1)
	VMOVUPS Z2, (AX)(R12*2)
	VMOVUPS Z3, (AX)(R14*1)
	VSUBPS Z30, Z28, Z0
	VADDPS Z30, Z29, Z1
	VSUBPS Z29, Z30, Z2
	VSUBPS Z31, Z29, Z3
	VMOVUPS Z0, (BX)
	VMOVUPS Z1, (BX)(R12*1)
	VMOVUPS Z2, (BX)(R12*2)
	VMOVUPS Z3, (BX)(R14*1)
	ADDQ $64, SI
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, AX
	ADDQ $64, BX
	SUBQ $16, R13
	JNZ inloop
	VZEROUPPER
	RET

// func outputAVX512(n int, m *float32, ms int, y *float32, rs, cs int, r, bias *float32, floor float32)
//
// The 4×4 tile m[i][j] = m[(4i+j)·ms + c] to the 2×2 pixels y[a·rs + b·cs + c] =
// max(floor, (Aᵀ m A)[a][b] + bias[c] + r[a·rs + b·cs + c]), 16 channels c at a
// time, n a positive multiple of 16, bias and r left out where nil. Rows
// first: s0 = m0 + m1 + m2, s1 = m1 − m2 − m3; then the same over each row's
// columns. The maximum takes y where y is NaN.
TEXT ·outputAVX512(SB), NOSPLIT, $0-68
	MOVQ n+0(FP), R13
	MOVQ m+8(FP), SI
	MOVQ ms+16(FP), CX
	SHLQ $2, CX
	LEAQ (CX)(CX*2), DX
	LEAQ (SI)(CX*4), R9
	LEAQ (R9)(CX*4), R10
	LEAQ (R10)(CX*4), R11
	MOVQ y+24(FP), DI
	MOVQ rs+32(FP), R15
	SHLQ $2, R15
	LEAQ (DI)(R15*1), R12
	MOVQ cs+40(FP), R14
	SHLQ $2, R14
	MOVQ r+48(FP), AX
	LEAQ (AX)(R15*1), R8
	MOVQ bias+56(FP), BX
	VBROADCASTSS floor+64(FP), Z31
outloop:
	LOAD4X4
	VADDPS Z4, Z0, Z16
	VADDPS Z8, Z16, Z16
	VSUBPS Z8, Z4, Z20
	VSUBPS Z12, Z20, Z20
	VADDPS Z5, Z1, Z17
	VADDPS Z9, Z17, Z17
	VSUBPS Z9, Z5, Z21
	VSUBPS Z13, Z21, Z21
	VADDPS Z6, Z2, Z18
	VADDPS Z10, Z18, Z18
	VSUBPS Z10, Z6, Z22
	VSUBPS Z14, Z22, Z22
	VADDPS Z7, Z3, Z19
	VADDPS Z11, Z19, Z19
	VSUBPS Z11, Z7, Z23
	VSUBPS Z15, Z23, Z23
	VADDPS Z17, Z16, Z24
	VADDPS Z18, Z24, Z24
	VSUBPS Z18, Z17, Z25
	VSUBPS Z19, Z25, Z25
	VADDPS Z21, Z20, Z26
	VADDPS Z22, Z26, Z26
	VSUBPS Z22, Z21, Z27
	VSUBPS Z23, Z27, Z27
	TESTQ BX, BX
	JZ nobias
	VMOVUPS (BX), Z28
	VADDPS Z28, Z24, Z24
	VADDPS Z28, Z25, Z25
	VADDPS Z28, Z26, Z26
	VADDPS Z28, Z27, Z27
	ADDQ $64, BX
nobias:
	TESTQ AX, AX
	JZ nores
	VADDPS (AX), Z24, Z24
	VADDPS (AX)(R14*1), Z25, Z25
	VADDPS (R8), Z26, Z26
	VADDPS (R8)(R14*1), Z27, Z27
	ADDQ $64, AX
	ADDQ $64, R8
nores:
	VMAXPS Z24, Z31, Z24
	VMAXPS Z25, Z31, Z25
	VMAXPS Z26, Z31, Z26
	VMAXPS Z27, Z31, Z27
	VMOVUPS Z24, (DI)
	VMOVUPS Z25, (DI)(R14*1)
	VMOVUPS Z26, (R12)
	VMOVUPS Z27, (R12)(R14*1)
	ADDQ $64, SI
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, DI
	ADDQ $64, R12
	SUBQ $16, R13
	JNZ outloop
	VZEROUPPER
	RET
