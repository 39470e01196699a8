//go:build amd64 && !purego

#include "textflag.h"

// The casts between float32 and binary16 or bfloat16. The AVX-512 functions
// take 16 elements at a time and the rest (n mod 16) under the mask K1,
// whose masked-off lanes are neither read nor written; the AVX2 functions
// take 8 at a time and n a multiple of 8.

// CASTMASK sets K1 to the low CX bits, CX in [1, 15], using AX.
#define CASTMASK \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1

// ARGS loads dst into DI, src into SI and n into CX.
#define ARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX

// func f16ToF32AVX512(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX512(SB), NOSPLIT, $0-24
	ARGS
loop:
	CMPQ CX, $16
	JLT tail
	VCVTPH2PS (SI), Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	CASTMASK
	VCVTPH2PS.Z (SI), K1, Z0
	VMOVUPS Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// func f32ToF16AVX512(dst *uint16, src *float32, n int)
//
// VCVTPS2PH's immediate 0 rounds to nearest, ties to even, whatever MXCSR
// says.
TEXT ·f32ToF16AVX512(SB), NOSPLIT, $0-24
	ARGS
loop:
	CMPQ CX, $16
	JLT tail
	VMOVUPS (SI), Z0
	VCVTPS2PH $0, Z0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	CASTMASK
	VMOVUPS.Z (SI), K1, Z0
	VCVTPS2PH $0, Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// func bf16ToF32AVX512(dst *float32, src *uint16, n int)
TEXT ·bf16ToF32AVX512(SB), NOSPLIT, $0-24
	ARGS
loop:
	CMPQ CX, $16
	JLT tail
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	CASTMASK
	VPMOVZXWD.Z (SI), K1, Z0
	VPSLLD $16, Z0, Z0
	VMOVDQU32 Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// BF16ROUND sets Z3 to the bfloat16 of the float32 bits in Z0, in the low
// half of each lane, using Z1, Z2 and K2: (b + 0x7fff + (b>>16)&1) >> 16,
// or (b>>16) | 0x40 in the NaN lanes (VCMPPS unordered). Z28 holds 0x7fff,
// Z29 1 and Z30 0x40.
#define BF16ROUND \
	VPSRLD $16, Z0, Z1; \
	VPANDD Z29, Z1, Z2; \
	VPADDD Z28, Z0, Z3; \
	VPADDD Z2, Z3, Z3; \
	VPSRLD $16, Z3, Z3; \
	VCMPPS $3, Z0, Z0, K2; \
	VPORD Z30, Z1, K2, Z3

// func f32ToBF16AVX512(dst *uint16, src *float32, n int)
TEXT ·f32ToBF16AVX512(SB), NOSPLIT, $0-24
	ARGS
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z28
	MOVL $1, AX
	VPBROADCASTD AX, Z29
	MOVL $0x40, AX
	VPBROADCASTD AX, Z30
loop:
	CMPQ CX, $16
	JLT tail
	VMOVDQU32 (SI), Z0
	BF16ROUND
	VPMOVDW Z3, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	CASTMASK
	VMOVDQU32.Z (SI), K1, Z0
	BF16ROUND
	VPMOVDW Z3, K1, (DI)
done:
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	ARGS
loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	ARGS
loop:
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	ARGS
loop:
	VPMOVZXWD (SI), Y0
	VPSLLD $16, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func f32ToBF16AVX2(dst *uint16, src *float32, n int)
//
// As BF16ROUND, 8 lanes at a time with Y5 holding 0x7fff, Y6 1 and Y7 0x40,
// the NaN lanes blended in by the mask vector Y4; VPACKUSDW then narrows
// the two halves, whose lanes are all below 0x10000, without saturating.
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-24
	ARGS
	MOVL $0x7fff, AX
	MOVQ AX, X5
	VPBROADCASTD X5, Y5
	MOVL $1, AX
	MOVQ AX, X6
	VPBROADCASTD X6, Y6
	MOVL $0x40, AX
	MOVQ AX, X7
	VPBROADCASTD X7, Y7
loop:
	VMOVDQU (SI), Y0
	VPSRLD $16, Y0, Y1
	VPAND Y6, Y1, Y2
	VPADDD Y5, Y0, Y3
	VPADDD Y2, Y3, Y3
	VPSRLD $16, Y3, Y3
	VPOR Y7, Y1, Y1
	VCMPPS $3, Y0, Y0, Y4
	VPBLENDVB Y4, Y1, Y3, Y3
	VEXTRACTI128 $1, Y3, X4
	VPACKUSDW X4, X3, X3
	VMOVDQU X3, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET
