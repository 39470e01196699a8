//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 and FMA versions of the functions of vecmath_amd64.s: the same
// operations in the same order, 8 lanes at a time, the rest (n mod 8) under
// a mask vector read by VMASKMOVPS, which neither reads nor writes the
// masked-off lanes and loads them as zero.
//
// Registers: Y0–Y5 scratch, Y6 and Y7 per-function constants, Y8–Y15 the
// exponential's constants. Constants the registers do not hold are 32-byte
// memory operands.

// VCONST defines name<> as 8 lanes of the float32 bits b (given twice, as
// one 64-bit value).
#define VCONST(name, b) \
	DATA name<>+0(SB)/8, $b; \
	DATA name<>+8(SB)/8, $b; \
	DATA name<>+16(SB)/8, $b; \
	DATA name<>+24(SB)/8, $b; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

// The exponential's constants, as in vecmath_amd64.s: log2e, −ln2 in a
// high and a low part, the Taylor coefficients 1/7! … 1/3!, 0.5, 1, the
// clamps 89 and −104, and the exponent bias 127 (an integer).
VCONST(log2e, 0x3fb8aa3b3fb8aa3b)
VCONST(nln2hi, 0xbf318000bf318000)
VCONST(nln2lo, 0x395e8083395e8083)
VCONST(exp7, 0x39500d0139500d01)
VCONST(exp6, 0x3ab60b613ab60b61)
VCONST(exp5, 0x3c0888893c088889)
VCONST(exp4, 0x3d2aaaab3d2aaaab)
VCONST(exp3, 0x3e2aaaab3e2aaaab)
VCONST(half, 0x3f0000003f000000)
VCONST(one, 0x3f8000003f800000)
VCONST(exphi, 0x42b2000042b20000)
VCONST(explo, 0xc2d00000c2d00000)
VCONST(bias, 0x0000007f0000007f)

// The per-function constants: the sign bit, the tanh GELU's 0.044715 and
// −2√(2/π), the erf GELU's 1/√2, the mask of all but the sign bit and the
// coefficients c0…c9 of its erfc, −Inf and a quiet NaN.
VCONST(signbit, 0x8000000080000000)
VCONST(gtc, 0x3d3727133d372713)
VCONST(gtk, 0xbfcc422abfcc422a)
VCONST(rsqrt2, 0x3f3504f33f3504f3)
VCONST(absmask, 0x7fffffff7fffffff)
VCONST(erfc0, 0xbfa1fc4ebfa1fc4e)
VCONST(erfc1, 0x3f8000c73f8000c7)
VCONST(erfc2, 0x3ebf88fb3ebf88fb)
VCONST(erfc3, 0x3dc636c93dc636c9)
VCONST(erfc4, 0xbe3ec24cbe3ec24c)
VCONST(erfc5, 0x3e8ec7cc3e8ec7cc)
VCONST(erfc6, 0xbf914e5dbf914e5d)
VCONST(erfc7, 0x3fbe87b03fbe87b0)
VCONST(erfc8, 0xbf527892bf527892)
VCONST(erfc9, 0x3e2ef9453e2ef945)
VCONST(neginf, 0xff800000ff800000)
VCONST(qnan, 0x7fc000007fc00000)

// tailmask<> is 8 lanes of all ones and then 8 of zero: the 8 lanes from
// tailmask<>+32−4k have the low k set.
DATA tailmask<>+0(SB)/8, $-1
DATA tailmask<>+8(SB)/8, $-1
DATA tailmask<>+16(SB)/8, $-1
DATA tailmask<>+24(SB)/8, $-1
DATA tailmask<>+32(SB)/8, $0
DATA tailmask<>+40(SB)/8, $0
DATA tailmask<>+48(SB)/8, $0
DATA tailmask<>+56(SB)/8, $0
GLOBL tailmask<>(SB), RODATA|NOPTR, $64

// TAILMASK sets AX to the address of the mask of the low CX lanes, CX in
// [1, 7]; it changes CX.
#define TAILMASK \
	LEAQ tailmask<>+32(SB), AX; \
	SHLQ $2, CX; \
	SUBQ CX, AX

// EXPCONST loads the exponential's register constants: Y8 0.5, Y9 the bias
// 127, Y10 and Y11 −ln2 low and high, Y12 log2e, Y13 −104, Y14 89, Y15 1.
#define EXPCONST \
	VMOVUPS half<>(SB), Y8; \
	VMOVDQU bias<>(SB), Y9; \
	VMOVUPS nln2lo<>(SB), Y10; \
	VMOVUPS nln2hi<>(SB), Y11; \
	VMOVUPS log2e<>(SB), Y12; \
	VMOVUPS explo<>(SB), Y13; \
	VMOVUPS exphi<>(SB), Y14; \
	VMOVUPS one<>(SB), Y15

// EXP sets Y0 = e^Y0, using Y1 and Y2: the clamps, range reduction and
// polynomial of vecmath_amd64.s's EXP, then p·2^n in two products,
// p·2^⌊n/2⌋ (exact: n lies in [−150, 128], so both powers and that product
// are normal) and then ·2^(n−⌊n/2⌋), rounded once, which is VSCALEFPS's
// result: +Inf on overflow, gradual underflow, NaN kept.
#define EXP \
	VMINPS Y0, Y14, Y0; \
	VMAXPS Y0, Y13, Y0; \
	VMULPS Y12, Y0, Y1; \
	VROUNDPS $0, Y1, Y1; \
	VFMADD231PS Y11, Y1, Y0; \
	VFMADD231PS Y10, Y1, Y0; \
	VMOVUPS exp7<>(SB), Y2; \
	VFMADD213PS exp6<>(SB), Y0, Y2; \
	VFMADD213PS exp5<>(SB), Y0, Y2; \
	VFMADD213PS exp4<>(SB), Y0, Y2; \
	VFMADD213PS exp3<>(SB), Y0, Y2; \
	VFMADD213PS Y8, Y0, Y2; \
	VFMADD213PS Y15, Y0, Y2; \
	VFMADD213PS Y15, Y0, Y2; \
	VCVTPS2DQ Y1, Y1; \
	VPSRAD $1, Y1, Y0; \
	VPSUBD Y0, Y1, Y1; \
	VPADDD Y9, Y0, Y0; \
	VPSLLD $23, Y0, Y0; \
	VMULPS Y0, Y2, Y2; \
	VPADDD Y9, Y1, Y1; \
	VPSLLD $23, Y1, Y1; \
	VMULPS Y1, Y2, Y0

// SILU sets Y0 = x/(1+e^−x) for x = Y0, using Y1–Y3; Y6 holds the sign bit.
#define SILU \
	VMOVAPS Y0, Y3; \
	VXORPS Y6, Y0, Y0; \
	EXP; \
	VADDPS Y15, Y0, Y0; \
	VDIVPS Y0, Y3, Y0

// GELUTANH sets Y0 = x/(1+e^{−k·x·(1+c·x²)}) for x = Y0, using Y1–Y3; Y6
// holds c = 0.044715 and Y7 −k = −2√(2/π).
#define GELUTANH \
	VMOVAPS Y0, Y3; \
	VMULPS Y0, Y0, Y1; \
	VMOVAPS Y15, Y2; \
	VFMADD231PS Y6, Y1, Y2; \
	VMULPS Y3, Y2, Y0; \
	VMULPS Y7, Y0, Y0; \
	EXP; \
	VADDPS Y15, Y0, Y0; \
	VDIVPS Y0, Y3, Y0

// GELU sets Y0 = x·Φ(x) for x = Y0, using Y1–Y5, as vecmath_amd64.s's
// GELU: Y6 holds 1/√2, Y7 the mask of all but the sign bit, and the erfc
// coefficients are memory operands. The x ≥ 0 lanes are a compare's mask
// vector, blended.
#define GELU \
	VMOVAPS Y0, Y3; \
	VMULPS Y6, Y0, Y4; \
	VANDPS Y7, Y4, Y4; \
	VMOVAPS Y15, Y5; \
	VFMADD231PS Y8, Y4, Y5; \
	VDIVPS Y5, Y15, Y5; \
	VMOVUPS erfc3<>(SB), Y2; \
	VFMADD213PS erfc2<>(SB), Y5, Y2; \
	VFMADD213PS erfc1<>(SB), Y5, Y2; \
	VFMADD213PS erfc0<>(SB), Y5, Y2; \
	VFNMADD231PS Y4, Y4, Y2; \
	VMOVUPS erfc7<>(SB), Y1; \
	VFMADD213PS erfc6<>(SB), Y5, Y1; \
	VFMADD213PS erfc5<>(SB), Y5, Y1; \
	VFMADD213PS erfc4<>(SB), Y5, Y1; \
	VMOVUPS erfc9<>(SB), Y0; \
	VFMADD213PS erfc8<>(SB), Y5, Y0; \
	VMULPS Y5, Y5, Y4; \
	VMULPS Y4, Y4, Y4; \
	VFMADD213PS Y1, Y4, Y0; \
	VFMADD213PS Y2, Y4, Y0; \
	EXP; \
	VMULPS Y5, Y0, Y0; \
	VMULPS Y8, Y3, Y1; \
	VMULPS Y1, Y0, Y0; \
	VXORPS Y2, Y2, Y2; \
	VCMPPS $13, Y2, Y3, Y4; \
	VSUBPS Y0, Y3, Y1; \
	VBLENDVPS Y4, Y1, Y0, Y0

// LOOP applies BODY to n = CX elements from SI to DI: 8 at a time, then
// the rest under the mask at AX (reloaded into Y1 after BODY).
#define LOOP(BODY) \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
loop: \
	CMPQ CX, $8; \
	JLT tail; \
	VMOVUPS (SI), Y0; \
	BODY; \
	VMOVUPS Y0, (DI); \
	ADDQ $32, SI; \
	ADDQ $32, DI; \
	SUBQ $8, CX; \
	JMP loop; \
tail: \
	TESTQ CX, CX; \
	JZ done; \
	TAILMASK; \
	VMOVDQU (AX), Y1; \
	VMASKMOVPS (SI), Y1, Y0; \
	BODY; \
	VMOVDQU (AX), Y1; \
	VMASKMOVPS Y0, Y1, (DI); \
done: \
	VZEROUPPER; \
	RET

// func expAVX2(dst, src *float32, n int)
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	EXPCONST
	LOOP(EXP)

// func siluAVX2(dst, src *float32, n int)
TEXT ·siluAVX2(SB), NOSPLIT, $0-24
	EXPCONST
	VMOVUPS signbit<>(SB), Y6
	LOOP(SILU)

// func geluTanhAVX2(dst, src *float32, n int)
TEXT ·geluTanhAVX2(SB), NOSPLIT, $0-24
	EXPCONST
	VMOVUPS gtc<>(SB), Y6
	VMOVUPS gtk<>(SB), Y7
	LOOP(GELUTANH)

// func geluAVX2(dst, src *float32, n int)
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	EXPCONST
	VMOVUPS rsqrt2<>(SB), Y6
	VMOVUPS absmask<>(SB), Y7
	LOOP(GELU)

// func expScaledSumAVX2(dst, src *float32, n int, scale, negm float32, acc *[8]float64)
//
// dst[i] = e^(scale·src[i] − m) for i < n, n ≥ 1, the exponent by one FMA;
// acc gets 8 partial sums of the results in float64 (Y3 the low 4 lanes,
// Y4 the high 4), the tail's masked-off lanes zeroed (the mask in Y5)
// before they are added.
TEXT ·expScaledSumAVX2(SB), NOSPLIT, $0-40
	EXPCONST
	VBROADCASTSS scale+24(FP), Y6
	VBROADCASTSS negm+28(FP), Y7
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
loop:
	CMPQ CX, $8
	JLT tail
	VMOVUPS (SI), Y0
	VFMADD213PS Y7, Y6, Y0
	EXP
	VMOVUPS Y0, (DI)
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VADDPD Y1, Y3, Y3
	VADDPD Y2, Y4, Y4
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	TAILMASK
	VMOVDQU (AX), Y5
	VMASKMOVPS (SI), Y5, Y0
	VFMADD213PS Y7, Y6, Y0
	EXP
	VANDPS Y5, Y0, Y0
	VMASKMOVPS Y0, Y5, (DI)
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VADDPD Y1, Y3, Y3
	VADDPD Y2, Y4, Y4
done:
	MOVQ acc+32(FP), DI
	VMOVUPD Y3, (DI)
	VMOVUPD Y4, 32(DI)
	VZEROUPPER
	RET

// func scaleAVX2(dst, src *float32, n int, s float32)
//
// dst[i] = src[i]·s for i < n, n ≥ 1; Y6 holds s.
#define SCALE VMULPS Y6, Y0, Y0
TEXT ·scaleAVX2(SB), NOSPLIT, $0-28
	VBROADCASTSS s+24(FP), Y6
	LOOP(SCALE)

// func reluAVX2(dst, src *float32, n int)
//
// As reluAVX512: max(0, x) in Intel's operand order keeps a NaN and −0 in
// x, and adding +0 turns −0 into +0.
#define RELU VMAXPS Y0, Y6, Y0; VADDPS Y6, Y0, Y0
TEXT ·reluAVX2(SB), NOSPLIT, $0-24
	VXORPS Y6, Y6, Y6
	LOOP(RELU)

// func maxAVX2(src *float32, n int, acc *[8]float32)
//
// acc gets 8 partial maxima of src[i], i < n, n ≥ 1: lane j the largest of
// src[8k+j], or NaN where one of those is NaN (VCMPPS unordered, ORed into
// Y5, since VMAXPS drops a NaN in its accumulator). The tail's masked-off
// lanes are −Inf (blended from Y6).
TEXT ·maxAVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS neginf<>(SB), Y6
	VMOVAPS Y6, Y14
	VMOVAPS Y6, Y15
	VXORPS Y5, Y5, Y5
max16:
	CMPQ CX, $16
	JLT max8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VCMPPS $3, Y1, Y0, Y2
	VORPS Y2, Y5, Y5
	VMAXPS Y0, Y14, Y14
	VMAXPS Y1, Y15, Y15
	ADDQ $64, SI
	SUBQ $16, CX
	JMP max16
max8:
	CMPQ CX, $8
	JLT maxtail
	VMOVUPS (SI), Y0
	VCMPPS $3, Y0, Y0, Y2
	VORPS Y2, Y5, Y5
	VMAXPS Y0, Y14, Y14
	ADDQ $32, SI
	SUBQ $8, CX
maxtail:
	TESTQ CX, CX
	JZ maxdone
	TAILMASK
	VMOVDQU (AX), Y1
	VMASKMOVPS (SI), Y1, Y0
	VBLENDVPS Y1, Y0, Y6, Y0
	VCMPPS $3, Y0, Y0, Y2
	VORPS Y2, Y5, Y5
	VMAXPS Y0, Y14, Y14
maxdone:
	VMAXPS Y15, Y14, Y14
	VBLENDVPS Y5, qnan<>(SB), Y14, Y14
	MOVQ acc+16(FP), DI
	VMOVUPS Y14, (DI)
	VZEROUPPER
	RET

// func sumAVX2(src *float32, n int, acc *[8]float64)
//
// acc gets 8 partial sums in float64 of src[i], i < n, n ≥ 1: 4 floats at a
// time converted to a ymm of doubles and added to Y8–Y11 (all four per 16
// floats, Y8 and Y9 per 8, Y10 and Y11 for the tail, whose masked-off lanes
// load as zero).
TEXT ·sumAVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
sum16:
	CMPQ CX, $16
	JLT sum8
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VCVTPS2PD 32(SI), Y2
	VCVTPS2PD 48(SI), Y3
	VADDPD Y0, Y8, Y8
	VADDPD Y1, Y9, Y9
	VADDPD Y2, Y10, Y10
	VADDPD Y3, Y11, Y11
	ADDQ $64, SI
	SUBQ $16, CX
	JMP sum16
sum8:
	CMPQ CX, $8
	JLT sumtail
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VADDPD Y0, Y8, Y8
	VADDPD Y1, Y9, Y9
	ADDQ $32, SI
	SUBQ $8, CX
sumtail:
	TESTQ CX, CX
	JZ sumdone
	TAILMASK
	VMOVDQU (AX), Y1
	VMASKMOVPS (SI), Y1, Y0
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VADDPD Y1, Y10, Y10
	VADDPD Y2, Y11, Y11
sumdone:
	VADDPD Y10, Y8, Y8
	VADDPD Y11, Y9, Y9
	MOVQ acc+16(FP), DI
	VMOVUPD Y8, (DI)
	VMOVUPD Y9, 32(DI)
	VZEROUPPER
	RET

// SQDEV sets Yd = (Yd − c)² for c in Y7, rounding after each operation.
#define SQDEV(Yd) VSUBPD Y7, Yd, Yd; VMULPD Yd, Yd, Yd

// func sumSqDevAVX2(src *float32, n int, c float64, acc *[8]float64)
//
// acc gets 8 partial sums in float64 of (src[i] − c)², i < n, n ≥ 1, as
// sumAVX2 adds src[i]: each difference taken in float64, squared and added,
// rounded after each operation as the scalar Go does (no FMA). The tail's
// masked-off differences are zeroed by the mask widened to 64-bit lanes.
TEXT ·sumSqDevAVX2(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD c+16(FP), Y7
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
sq16:
	CMPQ CX, $16
	JLT sq8
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VCVTPS2PD 32(SI), Y2
	VCVTPS2PD 48(SI), Y3
	SQDEV(Y0)
	SQDEV(Y1)
	SQDEV(Y2)
	SQDEV(Y3)
	VADDPD Y0, Y8, Y8
	VADDPD Y1, Y9, Y9
	VADDPD Y2, Y10, Y10
	VADDPD Y3, Y11, Y11
	ADDQ $64, SI
	SUBQ $16, CX
	JMP sq16
sq8:
	CMPQ CX, $8
	JLT sqtail
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	SQDEV(Y0)
	SQDEV(Y1)
	VADDPD Y0, Y8, Y8
	VADDPD Y1, Y9, Y9
	ADDQ $32, SI
	SUBQ $8, CX
sqtail:
	TESTQ CX, CX
	JZ sqdone
	TAILMASK
	VMOVDQU (AX), Y3
	VMASKMOVPS (SI), Y3, Y0
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VPMOVSXDQ X3, Y4
	VEXTRACTI128 $1, Y3, X5
	VPMOVSXDQ X5, Y5
	VSUBPD Y7, Y1, Y1
	VSUBPD Y7, Y2, Y2
	VANDPD Y4, Y1, Y1
	VANDPD Y5, Y2, Y2
	VMULPD Y1, Y1, Y1
	VMULPD Y2, Y2, Y2
	VADDPD Y1, Y10, Y10
	VADDPD Y2, Y11, Y11
sqdone:
	VADDPD Y10, Y8, Y8
	VADDPD Y11, Y9, Y9
	MOVQ acc+24(FP), DI
	VMOVUPD Y8, (DI)
	VMOVUPD Y9, 32(DI)
	VZEROUPPER
	RET

// NORM sets Y0 = (Y0 − mean)·rstd·γ for γ in Y1, mean in Y6 and rstd in
// Y7, rounding after each operation as the scalar Go does.
#define NORM \
	VSUBPS Y6, Y0, Y0; \
	VMULPS Y7, Y0, Y0; \
	VMULPS Y1, Y0, Y0

// func normAVX2(dst, src, gamma, beta *float32, n int, mean, rstd float32)
//
// dst[i] = (src[i] − mean)·rstd·gamma[i] + beta[i] for i < n, n ≥ 1; the
// tail's mask in Y3.
TEXT ·normAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ gamma+16(FP), DX
	MOVQ beta+24(FP), BX
	MOVQ n+32(FP), CX
	VBROADCASTSS mean+40(FP), Y6
	VBROADCASTSS rstd+44(FP), Y7
nbloop:
	CMPQ CX, $8
	JLT nbtail
	VMOVUPS (SI), Y0
	VMOVUPS (DX), Y1
	NORM
	VADDPS (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP nbloop
nbtail:
	TESTQ CX, CX
	JZ nbdone
	TAILMASK
	VMOVDQU (AX), Y3
	VMASKMOVPS (SI), Y3, Y0
	VMASKMOVPS (DX), Y3, Y1
	VMASKMOVPS (BX), Y3, Y2
	NORM
	VADDPS Y2, Y0, Y0
	VMASKMOVPS Y0, Y3, (DI)
nbdone:
	VZEROUPPER
	RET

// func normNoBetaAVX2(dst, src, gamma *float32, n int, mean, rstd float32)
//
// dst[i] = (src[i] − mean)·rstd·gamma[i] for i < n, n ≥ 1; the tail's mask
// in Y3.
TEXT ·normNoBetaAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ gamma+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS mean+32(FP), Y6
	VBROADCASTSS rstd+36(FP), Y7
nloop:
	CMPQ CX, $8
	JLT ntail
	VMOVUPS (SI), Y0
	VMOVUPS (DX), Y1
	NORM
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP nloop
ntail:
	TESTQ CX, CX
	JZ ndone
	TAILMASK
	VMOVDQU (AX), Y3
	VMASKMOVPS (SI), Y3, Y0
	VMASKMOVPS (DX), Y3, Y1
	NORM
	VMASKMOVPS Y0, Y3, (DI)
ndone:
	VZEROUPPER
	RET
