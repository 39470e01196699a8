//go:build amd64 && !purego

#include "textflag.h"

// RELU16 sets Y0 to ReLU16 of the 16 values in Y0, using Y1–Y3: Y4 is 0,
// Y5 inf, Y6 the quiet bit and Y7 0x7fff in every lane.
#define RELU16 \
	VPAND Y7, Y0, Y1; \
	VPCMPGTW Y5, Y1, Y1; \
	VPMAXSW Y4, Y0, Y2; \
	VPOR Y6, Y0, Y3; \
	VPBLENDVB Y1, Y3, Y2, Y0

// func relu16AVX2(dst, src *uint16, n int, inf, quiet uint16)
//
// n a positive multiple of 32: two vectors of 16 an iteration.
TEXT ·relu16AVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTW inf+24(FP), Y5
	VPBROADCASTW quiet+26(FP), Y6
	MOVL $0x7fff, AX
	MOVD AX, X7
	VPBROADCASTW X7, Y7
	VPXOR Y4, Y4, Y4
loop:
	VMOVDQU (SI), Y0
	RELU16
	VMOVDQU Y0, (DI)
	VMOVDQU 32(SI), Y0
	RELU16
	VMOVDQU Y0, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JNZ loop
	VZEROUPPER
	RET
