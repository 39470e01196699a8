//go:build amd64 && !purego

#include "textflag.h"

// Registers: Z0–Z5 scratch, Z6–Z15 the erfc coefficients (GELU), Z16–Z27
// the exponential's constants, Z28–Z31 per-function constants. K1 masks the
// tail (n mod 16 elements), K2 the GELU's x ≥ 0 lanes.

// BCAST sets all 16 lanes of z to the float32 of bits b.
#define BCAST(b, z) MOVL $b, AX; VPBROADCASTD AX, z

// EXPCONST loads the exponential's constants: log2e, −ln2 in a high part
// (0.693359375, exact in n·ln2Hi) and a low part (−2.12194440e-4), the
// Taylor coefficients 1/7! … 1/3!, 0.5 and 1, and the clamps 89 (e^89
// overflows) and −104 (e^−104 underflows to 0).
#define EXPCONST \
	BCAST(0x3fb8aa3b, Z16); \
	BCAST(0xbf318000, Z17); \
	BCAST(0x395e8083, Z18); \
	BCAST(0x39500d01, Z19); \
	BCAST(0x3ab60b61, Z20); \
	BCAST(0x3c088889, Z21); \
	BCAST(0x3d2aaaab, Z22); \
	BCAST(0x3e2aaaab, Z23); \
	BCAST(0x3f000000, Z24); \
	BCAST(0x3f800000, Z25); \
	BCAST(0x42b20000, Z26); \
	BCAST(0xc2d00000, Z27)

// EXP sets Z0 = e^Z0, using Z1 and Z2. The clamps keep a NaN (MINPS and
// MAXPS return their second source operand, x, on NaN); n = round(x·log2e),
// r = x − n·ln2 by two FMAs, e^r by Horner's scheme on the degree-7 Taylor
// polynomial (truncation below 6e-9 relative for |r| ≤ ln2/2), and
// VSCALEFPS multiplies by 2^n with overflow to +Inf and gradual underflow.
#define EXP \
	VMINPS Z0, Z26, Z0; \
	VMAXPS Z0, Z27, Z0; \
	VMULPS Z16, Z0, Z1; \
	VRNDSCALEPS $0, Z1, Z1; \
	VFMADD231PS Z17, Z1, Z0; \
	VFMADD231PS Z18, Z1, Z0; \
	VMOVAPS Z19, Z2; \
	VFMADD213PS Z20, Z0, Z2; \
	VFMADD213PS Z21, Z0, Z2; \
	VFMADD213PS Z22, Z0, Z2; \
	VFMADD213PS Z23, Z0, Z2; \
	VFMADD213PS Z24, Z0, Z2; \
	VFMADD213PS Z25, Z0, Z2; \
	VFMADD213PS Z25, Z0, Z2; \
	VSCALEFPS Z1, Z2, Z0

// SILU sets Z0 = x/(1+e^−x) for x = Z0, using Z1–Z3; Z28 holds the sign bit.
#define SILU \
	VMOVAPS Z0, Z3; \
	VPXORD Z28, Z0, Z0; \
	EXP; \
	VADDPS Z25, Z0, Z0; \
	VDIVPS Z0, Z3, Z0

// GELUTANH sets Z0 = x/(1+e^{−k·x·(1+c·x²)}) for x = Z0, using Z1–Z3;
// Z28 holds c = 0.044715 and Z29 −k = −2√(2/π).
#define GELUTANH \
	VMOVAPS Z0, Z3; \
	VMULPS Z0, Z0, Z1; \
	VMOVAPS Z25, Z2; \
	VFMADD231PS Z28, Z1, Z2; \
	VMULPS Z3, Z2, Z0; \
	VMULPS Z29, Z0, Z0; \
	EXP; \
	VADDPS Z25, Z0, Z0; \
	VDIVPS Z0, Z3, Z0

// GELU sets Z0 = x·Φ(x) for x = Z0, using Z1–Z5 and K2; Z28 holds 1/√2,
// Z29 the mask of all but the sign bit and Z6–Z15 the coefficients c0…c9
// of erfc(a) = t·e^{p(t)−a²}, t = 1/(1+a/2), p(t) = Σ cᵢtⁱ, for a = |x/√2|.
// With h = x·erfc(a)/2, the result is x − h where x ≥ 0 and h elsewhere.
#define GELU \
	VMOVAPS Z0, Z3; \
	VMULPS Z28, Z0, Z4; \
	VPANDD Z29, Z4, Z4; \
	VMOVAPS Z25, Z5; \
	VFMADD231PS Z24, Z4, Z5; \
	VDIVPS Z5, Z25, Z5; \
	VMOVAPS Z15, Z0; \
	VFMADD213PS Z14, Z5, Z0; \
	VFMADD213PS Z13, Z5, Z0; \
	VFMADD213PS Z12, Z5, Z0; \
	VFMADD213PS Z11, Z5, Z0; \
	VFMADD213PS Z10, Z5, Z0; \
	VFMADD213PS Z9, Z5, Z0; \
	VFMADD213PS Z8, Z5, Z0; \
	VFMADD213PS Z7, Z5, Z0; \
	VFMADD213PS Z6, Z5, Z0; \
	VFNMADD231PS Z4, Z4, Z0; \
	EXP; \
	VMULPS Z5, Z0, Z0; \
	VMULPS Z24, Z3, Z1; \
	VMULPS Z1, Z0, Z0; \
	VPXORD Z2, Z2, Z2; \
	VCMPPS $13, Z2, Z3, K2; \
	VSUBPS Z0, Z3, K2, Z0

// LOOP applies BODY to n = CX elements from SI to DI: 16 at a time, then
// the rest under the mask K1 (masked-off lanes are neither read nor written).
#define LOOP(BODY) \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
loop: \
	CMPQ CX, $16; \
	JLT tail; \
	VMOVUPS (SI), Z0; \
	BODY; \
	VMOVUPS Z0, (DI); \
	ADDQ $64, SI; \
	ADDQ $64, DI; \
	SUBQ $16, CX; \
	JMP loop; \
tail: \
	TESTQ CX, CX; \
	JZ done; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1; \
	VMOVUPS.Z (SI), K1, Z0; \
	BODY; \
	VMOVUPS Z0, K1, (DI); \
done: \
	VZEROUPPER; \
	RET

// func expAVX512(dst, src *float32, n int)
TEXT ·expAVX512(SB), NOSPLIT, $0-24
	EXPCONST
	LOOP(EXP)

// func siluAVX512(dst, src *float32, n int)
TEXT ·siluAVX512(SB), NOSPLIT, $0-24
	EXPCONST
	BCAST(0x80000000, Z28)
	LOOP(SILU)

// func geluTanhAVX512(dst, src *float32, n int)
TEXT ·geluTanhAVX512(SB), NOSPLIT, $0-24
	EXPCONST
	BCAST(0x3d372713, Z28)
	BCAST(0xbfcc422a, Z29)
	LOOP(GELUTANH)

// func geluAVX512(dst, src *float32, n int)
TEXT ·geluAVX512(SB), NOSPLIT, $0-24
	EXPCONST
	BCAST(0x3f3504f3, Z28)
	BCAST(0x7fffffff, Z29)
	BCAST(0xbfa1fc4e, Z6)
	BCAST(0x3f8000c7, Z7)
	BCAST(0x3ebf88fb, Z8)
	BCAST(0x3dc636c9, Z9)
	BCAST(0xbe3ec24c, Z10)
	BCAST(0x3e8ec7cc, Z11)
	BCAST(0xbf914e5d, Z12)
	BCAST(0x3fbe87b0, Z13)
	BCAST(0xbf527892, Z14)
	BCAST(0x3e2ef945, Z15)
	LOOP(GELU)

// func expScaledSumAVX512(dst, src *float32, n int, scale, negm float32, acc *[8]float64)
//
// dst[i] = e^(scale·src[i] − m) for i < n, n ≥ 1, the exponent by one FMA;
// acc gets 8 partial sums of the results in float64 (Z30 + Z31), the tail's
// masked-off lanes zeroed before they are added.
TEXT ·expScaledSumAVX512(SB), NOSPLIT, $0-40
	EXPCONST
	VBROADCASTSS scale+24(FP), Z28
	VBROADCASTSS negm+28(FP), Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
loop:
	CMPQ CX, $16
	JLT tail
	VMOVUPS (SI), Z0
	VFMADD213PS Z29, Z28, Z0
	EXP
	VMOVUPS Z0, (DI)
	VCVTPS2PD Y0, Z3
	VEXTRACTF64X4 $1, Z0, Y4
	VCVTPS2PD Y4, Z4
	VADDPD Z3, Z30, Z30
	VADDPD Z4, Z31, Z31
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z0
	VFMADD213PS Z29, Z28, Z0
	EXP
	VMOVAPS.Z Z0, K1, Z0
	VMOVUPS Z0, K1, (DI)
	VCVTPS2PD Y0, Z3
	VEXTRACTF64X4 $1, Z0, Y4
	VCVTPS2PD Y4, Z4
	VADDPD Z3, Z30, Z30
	VADDPD Z4, Z31, Z31
done:
	VADDPD Z31, Z30, Z30
	MOVQ acc+32(FP), DI
	VMOVUPD Z30, (DI)
	VZEROUPPER
	RET
