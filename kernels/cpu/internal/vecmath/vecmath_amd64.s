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
// p(t) − a² is evaluated as ((c9·t + c8)·t⁴ + q₄₇)·t⁴ + (q₀₃ − a²), where
// q₄₇ and q₀₃ are c4…c7 and c0…c3 by Horner's scheme, not by Horner's scheme
// over all ten: a dependency chain of 5 multiply-adds instead of 10, which
// the loop's one vector per iteration waits on (a million values on one
// core: 585 → 505 µs).
#define GELU \
	VMOVAPS Z0, Z3; \
	VMULPS Z28, Z0, Z4; \
	VPANDD Z29, Z4, Z4; \
	VMOVAPS Z25, Z5; \
	VFMADD231PS Z24, Z4, Z5; \
	VDIVPS Z5, Z25, Z5; \
	VMOVAPS Z9, Z2; \
	VFMADD213PS Z8, Z5, Z2; \
	VFMADD213PS Z7, Z5, Z2; \
	VFMADD213PS Z6, Z5, Z2; \
	VFNMADD231PS Z4, Z4, Z2; \
	VMOVAPS Z13, Z1; \
	VFMADD213PS Z12, Z5, Z1; \
	VFMADD213PS Z11, Z5, Z1; \
	VFMADD213PS Z10, Z5, Z1; \
	VMOVAPS Z15, Z0; \
	VFMADD213PS Z14, Z5, Z0; \
	VMULPS Z5, Z5, Z4; \
	VMULPS Z4, Z4, Z4; \
	VFMADD213PS Z1, Z4, Z0; \
	VFMADD213PS Z2, Z4, Z0; \
	EXP; \
	VMULPS Z5, Z0, Z0; \
	VMULPS Z24, Z3, Z1; \
	VMULPS Z1, Z0, Z0; \
	VPXORD Z2, Z2, Z2; \
	VCMPPS $13, Z2, Z3, K2; \
	VSUBPS Z0, Z3, K2, Z0

// TAILMASK sets K1 to the low CX bits, CX in [1, 15], using AX.
#define TAILMASK \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1

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
	TAILMASK; \
	VMOVUPS.Z (SI), K1, Z0; \
	BODY; \
	VMOVUPS Z0, K1, (DI); \
done: \
	VZEROUPPER; \
	RET

// GELUCONST, GELUTANHCONST and SILUCONST load the constants of GELU,
// GELUTANH and SILU (see those).
#define GELUCONST \
	EXPCONST; \
	BCAST(0x3f3504f3, Z28); \
	BCAST(0x7fffffff, Z29); \
	BCAST(0xbfa1fc4e, Z6); \
	BCAST(0x3f8000c7, Z7); \
	BCAST(0x3ebf88fb, Z8); \
	BCAST(0x3dc636c9, Z9); \
	BCAST(0xbe3ec24c, Z10); \
	BCAST(0x3e8ec7cc, Z11); \
	BCAST(0xbf914e5d, Z12); \
	BCAST(0x3fbe87b0, Z13); \
	BCAST(0xbf527892, Z14); \
	BCAST(0x3e2ef945, Z15)

#define GELUTANHCONST EXPCONST; BCAST(0x3d372713, Z28); BCAST(0xbfcc422a, Z29)
#define SILUCONST EXPCONST; BCAST(0x80000000, Z28)

// func expAVX512(dst, src *float32, n int)
TEXT ·expAVX512(SB), NOSPLIT, $0-24
	EXPCONST
	LOOP(EXP)

// func siluAVX512(dst, src *float32, n int)
TEXT ·siluAVX512(SB), NOSPLIT, $0-24
	SILUCONST
	LOOP(SILU)

// func geluTanhAVX512(dst, src *float32, n int)
TEXT ·geluTanhAVX512(SB), NOSPLIT, $0-24
	GELUTANHCONST
	LOOP(GELUTANH)

// func geluAVX512(dst, src *float32, n int)
TEXT ·geluAVX512(SB), NOSPLIT, $0-24
	GELUCONST
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
	TAILMASK
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

// func scaleAVX512(dst, src *float32, n int, s float32)
//
// dst[i] = src[i]·s for i < n, n ≥ 1; Z28 holds s.
#define SCALE VMULPS Z28, Z0, Z0
TEXT ·scaleAVX512(SB), NOSPLIT, $0-28
	VBROADCASTSS s+24(FP), Z28
	LOOP(SCALE)

// func reluAVX512(dst, src *float32, n int)
//
// max(0, x) in Intel's operand order returns x where x is NaN (NaN
// propagates, as Go's max) and where x is −0; adding +0 then turns −0 into
// +0, as Go's max(x, 0) gives.
#define RELU VMAXPS Z0, Z29, Z0; VADDPS Z29, Z0, Z0
TEXT ·reluAVX512(SB), NOSPLIT, $0-24
	VPXORD Z29, Z29, Z29
	LOOP(RELU)

// func maxAVX512(src *float32, n int) float32
//
// 16 partial maxima of src[i], i < n, n ≥ 1 (lane j the largest of
// src[16k+j]) folded into one, or NaN where one of them is NaN (VCMPPS
// unordered into K2, gathered in K3, since VMAXPS drops a NaN in its
// accumulator). The tail's masked-off lanes are −Inf (a merging load into a
// register of −Inf).
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	BCAST(0xff800000, Z5)
	VMOVAPS Z5, Z30
	VMOVAPS Z5, Z31
	KXORW K3, K3, K3
max32:
	CMPQ CX, $32
	JLT max16
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VCMPPS $3, Z1, Z0, K2
	KORW K2, K3, K3
	VMAXPS Z0, Z30, Z30
	VMAXPS Z1, Z31, Z31
	ADDQ $128, SI
	SUBQ $32, CX
	JMP max32
max16:
	CMPQ CX, $16
	JLT maxtail
	VMOVUPS (SI), Z0
	VCMPPS $3, Z0, Z0, K2
	KORW K2, K3, K3
	VMAXPS Z0, Z30, Z30
	ADDQ $64, SI
	SUBQ $16, CX
maxtail:
	TESTQ CX, CX
	JZ maxdone
	TAILMASK
	VMOVAPS Z5, Z0
	VMOVUPS (SI), K1, Z0
	VCMPPS $3, Z0, Z0, K2
	KORW K2, K3, K3
	VMAXPS Z0, Z30, Z30
maxdone:
	// A NaN anywhere is the result; otherwise fold the 16 lanes in half
	// four times.
	VMAXPS Z31, Z30, Z0
	KORTESTW K3, K3
	JNZ maxnan
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET
maxnan:
	VZEROUPPER
	MOVL $0x7fc00000, ret+16(FP)
	RET

// func sumAVX512(src *float32, n int, acc *[8]float64)
//
// acc gets 8 partial sums in float64 of src[i], i < n, n ≥ 1: 16 floats at
// a time converted to two zmm of doubles and added to Z28–Z31 (two of them
// per 32 floats), the tail's masked-off lanes loaded as zero.
TEXT ·sumAVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
sum32:
	CMPQ CX, $32
	JLT sum16
	VCVTPS2PD (SI), Z0
	VCVTPS2PD 32(SI), Z1
	VCVTPS2PD 64(SI), Z2
	VCVTPS2PD 96(SI), Z3
	VADDPD Z0, Z28, Z28
	VADDPD Z1, Z29, Z29
	VADDPD Z2, Z30, Z30
	VADDPD Z3, Z31, Z31
	ADDQ $128, SI
	SUBQ $32, CX
	JMP sum32
sum16:
	CMPQ CX, $16
	JLT sumtail
	VCVTPS2PD (SI), Z0
	VCVTPS2PD 32(SI), Z1
	VADDPD Z0, Z28, Z28
	VADDPD Z1, Z29, Z29
	ADDQ $64, SI
	SUBQ $16, CX
sumtail:
	TESTQ CX, CX
	JZ sumdone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VCVTPS2PD Y0, Z1
	VEXTRACTF64X4 $1, Z0, Y2
	VCVTPS2PD Y2, Z2
	VADDPD Z1, Z30, Z30
	VADDPD Z2, Z31, Z31
sumdone:
	VADDPD Z29, Z28, Z28
	VADDPD Z31, Z30, Z30
	VADDPD Z30, Z28, Z28
	MOVQ acc+16(FP), DI
	VMOVUPD Z28, (DI)
	VZEROUPPER
	RET

// func sumSqDevAVX512(src *float32, n int, c float64, acc *[8]float64)
//
// acc gets 8 partial sums in float64 of (src[i] − c)², i < n, n ≥ 1, c in
// Z27: each difference taken in float64, squared and added, rounded after
// each operation as the scalar Go does (no FMA). The tail's masked-off
// differences are zeroed (K1 the low 8 lanes, K4 the high 8).
TEXT ·sumSqDevAVX512(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD c+16(FP), Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
sq32:
	CMPQ CX, $32
	JLT sq16
	VCVTPS2PD (SI), Z0
	VCVTPS2PD 32(SI), Z1
	VCVTPS2PD 64(SI), Z2
	VCVTPS2PD 96(SI), Z3
	VSUBPD Z27, Z0, Z0
	VSUBPD Z27, Z1, Z1
	VSUBPD Z27, Z2, Z2
	VSUBPD Z27, Z3, Z3
	VMULPD Z0, Z0, Z0
	VMULPD Z1, Z1, Z1
	VMULPD Z2, Z2, Z2
	VMULPD Z3, Z3, Z3
	VADDPD Z0, Z28, Z28
	VADDPD Z1, Z29, Z29
	VADDPD Z2, Z30, Z30
	VADDPD Z3, Z31, Z31
	ADDQ $128, SI
	SUBQ $32, CX
	JMP sq32
sq16:
	CMPQ CX, $16
	JLT sqtail
	VCVTPS2PD (SI), Z0
	VCVTPS2PD 32(SI), Z1
	VSUBPD Z27, Z0, Z0
	VSUBPD Z27, Z1, Z1
	VMULPD Z0, Z0, Z0
	VMULPD Z1, Z1, Z1
	VADDPD Z0, Z28, Z28
	VADDPD Z1, Z29, Z29
	ADDQ $64, SI
	SUBQ $16, CX
sqtail:
	TESTQ CX, CX
	JZ sqdone
	TAILMASK
	KSHIFTRW $8, K1, K4
	VMOVUPS.Z (SI), K1, Z0
	VCVTPS2PD Y0, Z1
	VEXTRACTF64X4 $1, Z0, Y2
	VCVTPS2PD Y2, Z2
	VSUBPD.Z Z27, Z1, K1, Z1
	VSUBPD.Z Z27, Z2, K4, Z2
	VMULPD Z1, Z1, Z1
	VMULPD Z2, Z2, Z2
	VADDPD Z1, Z30, Z30
	VADDPD Z2, Z31, Z31
sqdone:
	VADDPD Z29, Z28, Z28
	VADDPD Z31, Z30, Z30
	VADDPD Z30, Z28, Z28
	MOVQ acc+24(FP), DI
	VMOVUPD Z28, (DI)
	VZEROUPPER
	RET

// NORM sets Z0 = (Z0 − mean)·rstd·γ for γ in Z1, mean in Z28 and rstd in
// Z29, rounding after each operation as the scalar Go does.
#define NORM \
	VSUBPS Z28, Z0, Z0; \
	VMULPS Z29, Z0, Z0; \
	VMULPS Z1, Z0, Z0

// func normAVX512(dst, src, gamma, beta *float32, n int, mean, rstd float32)
//
// dst[i] = (src[i] − mean)·rstd·gamma[i] + beta[i] for i < n, n ≥ 1.
TEXT ·normAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ gamma+16(FP), DX
	MOVQ beta+24(FP), BX
	MOVQ n+32(FP), CX
	VBROADCASTSS mean+40(FP), Z28
	VBROADCASTSS rstd+44(FP), Z29
nbloop:
	CMPQ CX, $16
	JLT nbtail
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	NORM
	VADDPS (BX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, BX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP nbloop
nbtail:
	TESTQ CX, CX
	JZ nbdone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VMOVUPS.Z (BX), K1, Z2
	NORM
	VADDPS Z2, Z0, Z0
	VMOVUPS Z0, K1, (DI)
nbdone:
	VZEROUPPER
	RET

// func normNoBetaAVX512(dst, src, gamma *float32, n int, mean, rstd float32)
//
// dst[i] = (src[i] − mean)·rstd·gamma[i] for i < n, n ≥ 1.
TEXT ·normNoBetaAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ gamma+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS mean+32(FP), Z28
	VBROADCASTSS rstd+36(FP), Z29
nloop:
	CMPQ CX, $16
	JLT ntail
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	NORM
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP nloop
ntail:
	TESTQ CX, CX
	JZ ndone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	NORM
	VMOVUPS Z0, K1, (DI)
ndone:
	VZEROUPPER
	RET
