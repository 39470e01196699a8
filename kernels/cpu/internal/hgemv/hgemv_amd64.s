//go:build amd64 && !purego

#include "textflag.h"

// AHEAD is how far ahead of the weight it reads a decode kernel prefetches
// it into the outer caches (PREFETCHT2), a line per line read: the
// hardware prefetchers alone leave the stream short of the bandwidth.
#define AHEAD 8192

// WIDEN_F32, WIDEN_F16 and WIDEN_BF16 load 16 float32, float16 or
// bfloat16 values from mem into the 16 float32 lanes of z, exactly;
// WIDENZ_… load the lanes of mask K1 and zero the others.
#define WIDEN_F32(mem, z) VMOVUPS mem, z
#define WIDENZ_F32(mem, z) VMOVUPS.Z mem, K1, z
#define WIDEN_F16(mem, z) VCVTPH2PS mem, z
#define WIDENZ_F16(mem, z) VCVTPH2PS.Z mem, K1, z
#define WIDEN_BF16(mem, z) VPMOVZXWD mem, z; VPSLLD $16, z, z
#define WIDENZ_BF16(mem, z) VPMOVZXWD.Z mem, K1, z; VPSLLD $16, z, z

// HSUM sets the low lane of X0 to the sum of Z0's 16 lanes (Z1 clobbered).
#define HSUM \
	VEXTRACTF32X8 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VPERMILPS     $0x4e, X0, X1; \
	VADDPS        X1, X0, X0; \
	VPERMILPS     $0xb1, X0, X1; \
	VADDPS        X1, X0, X0

// DOT1 is the body of the Dot1 kernels over WIDEN and WIDENZ, for
// weights of WB bytes per 16 values (WB2, WB3: twice and three times WB):
// one row of w from R8 against x from SI, k values in CX; 64 values a
// step over four accumulators (Z16–Z19), then 16, then the rest under a
// mask.
#define DOT1 \
	MOVQ   x+0(FP), SI; \
	MOVQ   w+8(FP), R8; \
	MOVQ   k+16(FP), CX; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
loop64: \
	CMPQ        CX, $64; \
	JLT         loop16; \
	PREFETCHT2  AHEAD(R8); \
	PREFETCHT2  AHEAD+64(R8); \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	WIDEN(WB2(R8), Z6); \
	WIDEN(WB3(R8), Z7); \
	VFMADD231PS (SI), Z4, Z16; \
	VFMADD231PS 64(SI), Z5, Z17; \
	VFMADD231PS 128(SI), Z6, Z18; \
	VFMADD231PS 192(SI), Z7, Z19; \
	ADDQ        $256, SI; \
	ADDQ        $(4*WB), R8; \
	SUBQ        $64, CX; \
	JMP         loop64; \
loop16: \
	CMPQ        CX, $16; \
	JLT         tail; \
	WIDEN((R8), Z4); \
	VFMADD231PS (SI), Z4, Z16; \
	ADDQ        $64, SI; \
	ADDQ        $WB, R8; \
	SUBQ        $16, CX; \
	JMP         loop16; \
tail: \
	TESTQ       CX, CX; \
	JZ          sum; \
	MOVL        $1, AX; \
	SHLL        CX, AX; \
	DECL        AX; \
	KMOVW       AX, K1; \
	VMOVUPS.Z   (SI), K1, Z0; \
	WIDENZ((R8), Z4); \
	VFMADD231PS Z0, Z4, Z16; \
sum: \
	SUM4(Z16, Z17, Z18, Z19, ret+24(FP)); \
	VZEROUPPER; \
	RET

// FMA4 adds the 16 values at byte offset off of each of the four rows of
// x (SI, SI+R9, SI+2·R9, SI+R10) times wz into accumulator j of each row
// (Z16+j, Z20+j, Z24+j, Z28+j).
#define FMA4(off, wz, a0, a1, a2, a3) \
	VFMADD231PS off(SI), wz, a0; \
	VFMADD231PS off(SI)(R9*1), wz, a1; \
	VFMADD231PS off(SI)(R9*2), wz, a2; \
	VFMADD231PS off(SI)(R10*1), wz, a3

// TAIL4 adds the lanes of mask K1 of x's row at xm times Z4 into acc.
#define TAIL4(xm, acc) \
	VMOVUPS.Z   xm, K1, Z0; \
	VFMADD231PS Z0, Z4, acc

// SUM4 folds a row's four accumulators (a0+a1)+(a2+a3), reduces them
// with HSUM and stores the sum at dst: the one epilogue of DOT1 and DOT4.
#define SUM4(a0, a1, a2, a3, dst) \
	VADDPS a1, a0, a0; \
	VADDPS a3, a2, a2; \
	VADDPS a2, a0, Z0; \
	HSUM; \
	MOVSS  X0, dst

// DOT4 is the body of the Dot4 kernels: DOT1 for four rows of x at once,
// x from SI with rows R9 bytes apart, against one row of w from R8, each
// weight vector widened once for the four; every row's sum is made in
// DOT1's order, so that each equals the Dot1 kernel's bit for bit. The
// sums go to DI, DX bytes apart. The weight from R11 is prefetched as
// the weight from R8 is read, a step of 64 values at a time.
#define DOT4 \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldx+8(FP), R9; \
	SHLQ   $2, R9; \
	LEAQ   (R9)(R9*2), R10; \
	MOVQ   w+16(FP), R8; \
	MOVQ   k+24(FP), CX; \
	MOVQ   out+32(FP), DI; \
	MOVQ   ldo+40(FP), DX; \
	SHLQ   $2, DX; \
	MOVQ   pre+48(FP), R11; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29; \
	VPXORD Z30, Z30, Z30; \
	VPXORD Z31, Z31, Z31; \
loop64: \
	CMPQ CX, $64; \
	JLT  loop16; \
	PREFETCHT0 (R11); \
	PREFETCHT0 WB(R11); \
	PREFETCHT0 WB2(R11); \
	PREFETCHT0 WB3(R11); \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	WIDEN(WB2(R8), Z6); \
	WIDEN(WB3(R8), Z7); \
	FMA4(0, Z4, Z16, Z20, Z24, Z28); \
	FMA4(64, Z5, Z17, Z21, Z25, Z29); \
	FMA4(128, Z6, Z18, Z22, Z26, Z30); \
	FMA4(192, Z7, Z19, Z23, Z27, Z31); \
	ADDQ $256, SI; \
	ADDQ $(4*WB), R8; \
	ADDQ $(4*WB), R11; \
	SUBQ $64, CX; \
	JMP  loop64; \
loop16: \
	CMPQ CX, $16; \
	JLT  tail; \
	WIDEN((R8), Z4); \
	FMA4(0, Z4, Z16, Z20, Z24, Z28); \
	ADDQ $64, SI; \
	ADDQ $WB, R8; \
	SUBQ $16, CX; \
	JMP  loop16; \
tail: \
	TESTQ CX, CX; \
	JZ    sum; \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, K1; \
	WIDENZ((R8), Z4); \
	TAIL4((SI), Z16); \
	TAIL4((SI)(R9*1), Z20); \
	TAIL4((SI)(R9*2), Z24); \
	TAIL4((SI)(R10*1), Z28); \
sum: \
	SUM4(Z16, Z17, Z18, Z19, (DI)); \
	SUM4(Z20, Z21, Z22, Z23, (DI)(DX*1)); \
	SUM4(Z24, Z25, Z26, Z27, (DI)(DX*2)); \
	LEAQ (DX)(DX*2), DX; \
	SUM4(Z28, Z29, Z30, Z31, (DI)(DX*1)); \
	VZEROUPPER; \
	RET

// The float32 weights: 64 bytes per 16 values.
#define WB 64
#define WB2 128
#define WB3 192
#define WIDEN WIDEN_F32
#define WIDENZ WIDENZ_F32

// func Dot1F32(x *float32, w *float32, k int) float32
TEXT ·Dot1F32(SB), NOSPLIT, $0-28
	DOT1

// func Dot4F32(x *float32, ldx int, w *float32, k int, out *float32, ldo int, pre *float32)
TEXT ·Dot4F32(SB), NOSPLIT, $0-56
	DOT4
#undef WIDEN
#undef WIDENZ
#undef WB
#undef WB2
#undef WB3

// The 16-bit weights: 32 bytes per 16 values.
#define WB 32
#define WB2 64
#define WB3 96
#define WIDEN WIDEN_F16
#define WIDENZ WIDENZ_F16

// func Dot1F16(x *float32, w *uint16, k int) float32
TEXT ·Dot1F16(SB), NOSPLIT, $0-28
	DOT1

// func Dot4F16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4F16(SB), NOSPLIT, $0-56
	DOT4
#undef WIDEN
#undef WIDENZ
#define WIDEN WIDEN_BF16
#define WIDENZ WIDENZ_BF16

// func Dot1BF16(x *float32, w *uint16, k int) float32
TEXT ·Dot1BF16(SB), NOSPLIT, $0-28
	DOT1

// func Dot4BF16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4BF16(SB), NOSPLIT, $0-56
	DOT4
