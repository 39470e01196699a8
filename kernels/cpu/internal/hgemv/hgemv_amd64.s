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

// MASK sets K1 to the low CX lanes (CX < 16), for a partial chunk.
#define MASK \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, K1

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

// ZERO16_23 and ZERO8_23 zero the accumulators Z16…Z23 and Z8…Z23.
#define ZERO16_23 \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23
#define ZERO8_23 \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	ZERO16_23

// The kernels sum a row in one order, whatever else they do: the k values in
// chunks of 16 (the last one partial, read under a mask, the other lanes zero),
// chunk c added into accumulator c mod 2 by one FMA, then the two accumulators
// added and their lanes reduced by HSUM. Each kernel's sums therefore equal
// Dot1's bit for bit, however many rows of x and w it takes at once.

// DOT1 is the body of the Dot1 kernels over WIDEN and WIDENZ, for
// weights of WB bytes per 16 values (WB2, WB3: twice and three times WB):
// one row of w from R8 against x from SI, k values in CX, into Z16 and
// Z17; 64 values a step, then 32, 16 and the rest under a mask.
#define DOT1 \
	MOVQ   x+0(FP), SI; \
	MOVQ   w+8(FP), R8; \
	MOVQ   k+16(FP), CX; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
loop64: \
	CMPQ        CX, $64; \
	JLT         step32; \
	PREFETCHT2  AHEAD(R8); \
	PREFETCHT2  AHEAD+64(R8); \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	WIDEN(WB2(R8), Z6); \
	WIDEN(WB3(R8), Z7); \
	VFMADD231PS (SI), Z4, Z16; \
	VFMADD231PS 64(SI), Z5, Z17; \
	VFMADD231PS 128(SI), Z6, Z16; \
	VFMADD231PS 192(SI), Z7, Z17; \
	ADDQ        $256, SI; \
	ADDQ        $(4*WB), R8; \
	SUBQ        $64, CX; \
	JMP         loop64; \
step32: \
	CMPQ        CX, $32; \
	JLT         step16; \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	VFMADD231PS (SI), Z4, Z16; \
	VFMADD231PS 64(SI), Z5, Z17; \
	ADDQ        $128, SI; \
	ADDQ        $(2*WB), R8; \
	SUBQ        $32, CX; \
step16: \
	CMPQ        CX, $16; \
	JLT         tail0; \
	WIDEN((R8), Z4); \
	VFMADD231PS (SI), Z4, Z16; \
	ADDQ        $64, SI; \
	ADDQ        $WB, R8; \
	SUBQ        $16, CX; \
	TESTQ       CX, CX; \
	JZ          sum; \
	MASK; \
	VMOVUPS.Z   (SI), K1, Z0; \
	WIDENZ((R8), Z4); \
	VFMADD231PS Z0, Z4, Z17; \
	JMP         sum; \
tail0: \
	TESTQ       CX, CX; \
	JZ          sum; \
	MASK; \
	VMOVUPS.Z   (SI), K1, Z0; \
	WIDENZ((R8), Z4); \
	VFMADD231PS Z0, Z4, Z16; \
sum: \
	SUM2(Z16, Z17, ret+24(FP)); \
	VZEROUPPER; \
	RET

// FMA4 adds the 16 values at byte offset off of each of the four rows of
// x (SI, SI+R9, SI+2·R9, SI+R10) times wz into a0…a3, one accumulator of each row.
#define FMA4(off, wz, a0, a1, a2, a3) \
	VFMADD231PS off(SI), wz, a0; \
	VFMADD231PS off(SI)(R9*1), wz, a1; \
	VFMADD231PS off(SI)(R9*2), wz, a2; \
	VFMADD231PS off(SI)(R10*1), wz, a3

// TAIL4 adds the lanes of mask K1 of x's row at xm times wz into acc.
#define TAIL4(xm, wz, acc) \
	VMOVUPS.Z   xm, K1, Z0; \
	VFMADD231PS Z0, wz, acc

// SUM2 adds a row's two accumulators, reduces them with HSUM and stores
// the sum at dst: the one epilogue of every kernel.
#define SUM2(a0, a1, dst) \
	VADDPS a1, a0, Z0; \
	HSUM; \
	MOVSS  X0, dst

// ARGS4(xshift) loads the arguments of a Dot4 kernel (x, ldx, w, k, out,
// ldo, pre) into SI, R9 (ldx in bytes, x's values 1<<xshift bytes), R10
// (3·R9), R8, CX, DI, DX (ldo in bytes) and R11, and zeroes the rows'
// accumulators; SUMS4 stores row r's sum (Z16+2r, Z17+2r) at DI + r·DX
// and returns.
#define ARGS4(xshift) \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldx+8(FP), R9; \
	SHLQ   $xshift, R9; \
	LEAQ   (R9)(R9*2), R10; \
	MOVQ   w+16(FP), R8; \
	MOVQ   k+24(FP), CX; \
	MOVQ   out+32(FP), DI; \
	MOVQ   ldo+40(FP), DX; \
	SHLQ   $2, DX; \
	MOVQ   pre+48(FP), R11; \
	ZERO16_23
#define SUMS4 \
	SUM2(Z16, Z17, (DI)); \
	SUM2(Z18, Z19, (DI)(DX*1)); \
	SUM2(Z20, Z21, (DI)(DX*2)); \
	LEAQ (DX)(DX*2), DX; \
	SUM2(Z22, Z23, (DI)(DX*1)); \
	VZEROUPPER; \
	RET

// ARGS4X2(xshift, wshift) loads the arguments of a Dot4x2 kernel (x, ldx,
// w, ldw, k, out, ldo, pre) into SI, R9, R10 as ARGS4 does, R8 and R11
// (the two rows of w, w's values 1<<wshift bytes), CX, DI, DX, R12 and R13
// (the two rows to prefetch), and zeroes the pairs' accumulators; SUMS4X2
// stores pair (r, c)'s sum (Z8+4r+2c, Z9+4r+2c) at DI + r·DX + 4c and
// returns.
#define ARGS4X2(xshift, wshift) \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldx+8(FP), R9; \
	SHLQ   $xshift, R9; \
	LEAQ   (R9)(R9*2), R10; \
	MOVQ   w+16(FP), R8; \
	MOVQ   ldw+24(FP), BX; \
	SHLQ   $wshift, BX; \
	LEAQ   (R8)(BX*1), R11; \
	MOVQ   k+32(FP), CX; \
	MOVQ   out+40(FP), DI; \
	MOVQ   ldo+48(FP), DX; \
	SHLQ   $2, DX; \
	MOVQ   pre+56(FP), R12; \
	LEAQ   (R12)(BX*1), R13; \
	ZERO8_23
#define SUMS4X2 \
	SUM2(Z8, Z9, (DI)); \
	SUM2(Z10, Z11, 4(DI)); \
	SUM2(Z12, Z13, (DI)(DX*1)); \
	SUM2(Z14, Z15, 4(DI)(DX*1)); \
	SUM2(Z16, Z17, (DI)(DX*2)); \
	SUM2(Z18, Z19, 4(DI)(DX*2)); \
	LEAQ (DX)(DX*2), DX; \
	SUM2(Z20, Z21, (DI)(DX*1)); \
	SUM2(Z22, Z23, 4(DI)(DX*1)); \
	VZEROUPPER; \
	RET

// DOT4 is the body of the Dot4 kernels: DOT1 for four rows of x at once,
// x from SI with rows R9 bytes apart, against one row of w from R8, each
// weight vector widened once for the four (row r's accumulators Z16+2r and
// Z17+2r). The sums go to DI, DX bytes apart. The weight from R11 is
// prefetched as the weight from R8 is read, a step of 64 values at a time.
#define DOT4 \
	ARGS4(2); \
loop64: \
	CMPQ CX, $64; \
	JLT  step32; \
	PREFETCHT0 (R11); \
	PREFETCHT0 WB(R11); \
	PREFETCHT0 WB2(R11); \
	PREFETCHT0 WB3(R11); \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	WIDEN(WB2(R8), Z6); \
	WIDEN(WB3(R8), Z7); \
	FMA4(0, Z4, Z16, Z18, Z20, Z22); \
	FMA4(64, Z5, Z17, Z19, Z21, Z23); \
	FMA4(128, Z6, Z16, Z18, Z20, Z22); \
	FMA4(192, Z7, Z17, Z19, Z21, Z23); \
	ADDQ $256, SI; \
	ADDQ $(4*WB), R8; \
	ADDQ $(4*WB), R11; \
	SUBQ $64, CX; \
	JMP  loop64; \
step32: \
	CMPQ CX, $32; \
	JLT  step16; \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	FMA4(0, Z4, Z16, Z18, Z20, Z22); \
	FMA4(64, Z5, Z17, Z19, Z21, Z23); \
	ADDQ $128, SI; \
	ADDQ $(2*WB), R8; \
	SUBQ $32, CX; \
step16: \
	CMPQ CX, $16; \
	JLT  tail0; \
	WIDEN((R8), Z4); \
	FMA4(0, Z4, Z16, Z18, Z20, Z22); \
	ADDQ $64, SI; \
	ADDQ $WB, R8; \
	SUBQ $16, CX; \
	TESTQ CX, CX; \
	JZ    sum; \
	MASK; \
	WIDENZ((R8), Z4); \
	TAIL4((SI), Z4, Z17); \
	TAIL4((SI)(R9*1), Z4, Z19); \
	TAIL4((SI)(R9*2), Z4, Z21); \
	TAIL4((SI)(R10*1), Z4, Z23); \
	JMP   sum; \
tail0: \
	TESTQ CX, CX; \
	JZ    sum; \
	MASK; \
	WIDENZ((R8), Z4); \
	TAIL4((SI), Z4, Z16); \
	TAIL4((SI)(R9*1), Z4, Z18); \
	TAIL4((SI)(R9*2), Z4, Z20); \
	TAIL4((SI)(R10*1), Z4, Z22); \
sum: \
	SUMS4

// XLOAD4 loads the 64 bytes at byte offset off of each of the four rows of
// x (16 float32 or 32 bfloat16 values) into z0…z3; XLOADZ4 the float32
// lanes of mask K1 from offset 0, zeroing the others.
#define XLOAD4(off, z0, z1, z2, z3) \
	VMOVUPS off(SI), z0; \
	VMOVUPS off(SI)(R9*1), z1; \
	VMOVUPS off(SI)(R9*2), z2; \
	VMOVUPS off(SI)(R10*1), z3
#define XLOADZ4 \
	VMOVUPS.Z (SI), K1, Z0; \
	VMOVUPS.Z (SI)(R9*1), K1, Z1; \
	VMOVUPS.Z (SI)(R9*2), K1, Z2; \
	VMOVUPS.Z (SI)(R10*1), K1, Z3

// PAIRS0 adds the chunk of the four rows of x in x0…x3 times the chunks of
// the two rows of w in w0 and w1 into the pairs' accumulators 0
// (Z8+4r+2c); PAIRS1 into their accumulators 1 (Z9+4r+2c).
#define PAIRS0(x0, x1, x2, x3, w0, w1) \
	VFMADD231PS x0, w0, Z8; \
	VFMADD231PS x0, w1, Z10; \
	VFMADD231PS x1, w0, Z12; \
	VFMADD231PS x1, w1, Z14; \
	VFMADD231PS x2, w0, Z16; \
	VFMADD231PS x2, w1, Z18; \
	VFMADD231PS x3, w0, Z20; \
	VFMADD231PS x3, w1, Z22
#define PAIRS1(x0, x1, x2, x3, w0, w1) \
	VFMADD231PS x0, w0, Z9; \
	VFMADD231PS x0, w1, Z11; \
	VFMADD231PS x1, w0, Z13; \
	VFMADD231PS x1, w1, Z15; \
	VFMADD231PS x2, w0, Z17; \
	VFMADD231PS x2, w1, Z19; \
	VFMADD231PS x3, w0, Z21; \
	VFMADD231PS x3, w1, Z23

// TAIL4X2 adds the last, partial chunk (CX values) of the four rows of x
// and the two of w into the pairs' accumulators PAIRS.
#define TAIL4X2(PAIRS) \
	MASK; \
	WIDENZ((R8), Z4); \
	WIDENZ((R11), Z5); \
	XLOADZ4; \
	PAIRS(Z0, Z1, Z2, Z3, Z4, Z5)

// DOT4X2 is the body of the Dot4x2 kernels: DOT4 against two rows of w at
// once, from R8 and R11 (R11 − R8 bytes apart), each row of x loaded once for
// the two and each weight vector widened once for the four rows of x: 16
// FMAs to four weight vectors and eight of x, where DOT4 takes four to
// one and four. Pair (r, c)'s accumulators are Z8+4r+2c and Z9+4r+2c; the
// sums go to DI + r·DX + 4c. The two weight rows from R12 and R13 are
// prefetched as R8 and R11 are read, a step of 32 values at a time.
#define DOT4X2 \
	ARGS4X2(2, WSHIFT); \
loop32: \
	CMPQ CX, $32; \
	JLT  step16; \
	PREFETCHT0 (R12); \
	PREFETCHT0 WB(R12); \
	PREFETCHT0 (R13); \
	PREFETCHT0 WB(R13); \
	WIDEN((R8), Z4); \
	WIDEN((R11), Z5); \
	WIDEN(WB(R8), Z6); \
	WIDEN(WB(R11), Z7); \
	XLOAD4(0, Z0, Z1, Z2, Z3); \
	XLOAD4(64, Z24, Z25, Z26, Z27); \
	PAIRS0(Z0, Z1, Z2, Z3, Z4, Z5); \
	PAIRS1(Z24, Z25, Z26, Z27, Z6, Z7); \
	ADDQ $128, SI; \
	ADDQ $(2*WB), R8; \
	ADDQ $(2*WB), R11; \
	ADDQ $(2*WB), R12; \
	ADDQ $(2*WB), R13; \
	SUBQ $32, CX; \
	JMP  loop32; \
step16: \
	CMPQ CX, $16; \
	JLT  tail0; \
	WIDEN((R8), Z4); \
	WIDEN((R11), Z5); \
	XLOAD4(0, Z0, Z1, Z2, Z3); \
	PAIRS0(Z0, Z1, Z2, Z3, Z4, Z5); \
	ADDQ $64, SI; \
	ADDQ $WB, R8; \
	ADDQ $WB, R11; \
	SUBQ $16, CX; \
	TESTQ CX, CX; \
	JZ    sum; \
	TAIL4X2(PAIRS1); \
	JMP   sum; \
tail0: \
	TESTQ CX, CX; \
	JZ    sum; \
	TAIL4X2(PAIRS0); \
sum: \
	SUMS4X2

// The float32 weights: 64 bytes per 16 values.
#define WB 64
#define WB2 128
#define WB3 192
#define WSHIFT 2
#define WIDEN WIDEN_F32
#define WIDENZ WIDENZ_F32

// func Dot1F32(x *float32, w *float32, k int) float32
TEXT ·Dot1F32(SB), NOSPLIT, $0-28
	DOT1

// func Dot4F32(x *float32, ldx int, w *float32, k int, out *float32, ldo int, pre *float32)
TEXT ·Dot4F32(SB), NOSPLIT, $0-56
	DOT4

// func Dot4x2F32(x *float32, ldx int, w *float32, ldw int, k int, out *float32, ldo int, pre *float32)
TEXT ·Dot4x2F32(SB), NOSPLIT, $0-64
	DOT4X2
#undef WIDEN
#undef WIDENZ
#undef WB
#undef WB2
#undef WB3
#undef WSHIFT

// The 16-bit weights: 32 bytes per 16 values.
#define WB 32
#define WB2 64
#define WB3 96
#define WSHIFT 1
#define WIDEN WIDEN_F16
#define WIDENZ WIDENZ_F16

// func Dot1F16(x *float32, w *uint16, k int) float32
TEXT ·Dot1F16(SB), NOSPLIT, $0-28
	DOT1

// func Dot4F16(x *float32, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4F16(SB), NOSPLIT, $0-56
	DOT4

// func Dot4x2F16(x *float32, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4x2F16(SB), NOSPLIT, $0-64
	DOT4X2
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

// func Dot4x2BF16(x *float32, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4x2BF16(SB), NOSPLIT, $0-64
	DOT4X2
#undef WIDEN
#undef WIDENZ
#undef WB
#undef WB2
#undef WB3
#undef WSHIFT

// The pair kernels dot a bfloat16 x with bfloat16 weights by VDPBF16PS,
// two products per float32 lane, in one order whatever they do: the k
// values in chunks of 32 (the last one partial, read under a mask, the
// other values zero), chunk c added into accumulator c mod 2 by one
// VDPBF16PS, then the two accumulators added and their lanes reduced by
// HSUM.

// VDP is VDPBF16PS Z(d), Z(s1), Z(s2) (Intel's operand order), which Go's
// assembler does not know, EVEX-encoded (EVEX.512.F3.0F38.W0 52 /r):
// lane j of Z(d) gets Z(s1)'s and Z(s2)'s values 2j+1 multiplied and added,
// then their values 2j.
#define VDP(d, s1, s2) \
	BYTE $0x62; \
	BYTE $(0x02 | ((((d)>>3)&1)^1)<<7 | ((((s2)>>4)&1)^1)<<6 | ((((s2)>>3)&1)^1)<<5 | ((((d)>>4)&1)^1)<<4); \
	BYTE $((((s1)&15)^15)<<3 | 0x06); \
	BYTE $(0x40 | ((((s1)>>4)&1)^1)<<3); \
	BYTE $0x52; \
	BYTE $(0xc0 | ((d)&7)<<3 | ((s2)&7))

// MASKW sets K1 to the low CX 16-bit lanes (CX < 32), for a partial chunk.
#define MASKW \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVD AX, K1

// func Dot1PairsBF16(x *uint16, w *uint16, k int) float32
TEXT ·Dot1PairsBF16(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), R8
	MOVQ   k+16(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17

p1loop64:
	CMPQ       CX, $64
	JLT        p1step32
	PREFETCHT2 AHEAD(R8)
	PREFETCHT2 AHEAD+64(R8)
	VMOVDQU16  (R8), Z4
	VMOVDQU16  64(R8), Z5
	VMOVDQU16  (SI), Z0
	VMOVDQU16  64(SI), Z1
	VDP(16, 0, 4)
	VDP(17, 1, 5)
	ADDQ       $128, SI
	ADDQ       $128, R8
	SUBQ       $64, CX
	JMP        p1loop64

p1step32:
	CMPQ      CX, $32
	JLT       p1tail0
	VMOVDQU16 (R8), Z4
	VMOVDQU16 (SI), Z0
	VDP(16, 0, 4)
	ADDQ      $64, SI
	ADDQ      $64, R8
	SUBQ      $32, CX
	TESTQ     CX, CX
	JZ        p1sum
	MASKW
	VMOVDQU16.Z (R8), K1, Z4
	VMOVDQU16.Z (SI), K1, Z0
	VDP(17, 0, 4)
	JMP       p1sum

p1tail0:
	TESTQ CX, CX
	JZ    p1sum
	MASKW
	VMOVDQU16.Z (R8), K1, Z4
	VMOVDQU16.Z (SI), K1, Z0
	VDP(16, 0, 4)

p1sum:
	SUM2(Z16, Z17, ret+24(FP))
	VZEROUPPER
	RET

// PXLOADZ4 loads the 16-bit lanes of mask K1 at offset 0 of each of the
// four rows of x (full chunks go through XLOAD4, the same bytes), zeroing
// the others.
#define PXLOADZ4 \
	VMOVDQU16.Z (SI), K1, Z0; \
	VMOVDQU16.Z (SI)(R9*1), K1, Z1; \
	VMOVDQU16.Z (SI)(R9*2), K1, Z2; \
	VMOVDQU16.Z (SI)(R10*1), K1, Z3

// PDOT4 adds the chunk of the four rows of x in registers x0…x3 times the
// weight in register w into the rows' accumulators a (row r's is a+2r).
#define PDOT4(x0, x1, x2, x3, w, a) \
	VDP(a, x0, w); \
	VDP(a+2, x1, w); \
	VDP(a+4, x2, w); \
	VDP(a+6, x3, w)

// func Dot4PairsBF16(x *uint16, ldx int, w *uint16, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4PairsBF16(SB), NOSPLIT, $0-56
	ARGS4(1)

p4loop64:
	CMPQ       CX, $64
	JLT        p4step32
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	VMOVDQU16  (R8), Z4
	VMOVDQU16  64(R8), Z5
	XLOAD4(0, Z0, Z1, Z2, Z3)
	XLOAD4(64, Z24, Z25, Z26, Z27)
	PDOT4(0, 1, 2, 3, 4, 16)
	PDOT4(24, 25, 26, 27, 5, 17)
	ADDQ       $128, SI
	ADDQ       $128, R8
	ADDQ       $128, R11
	SUBQ       $64, CX
	JMP        p4loop64

p4step32:
	CMPQ      CX, $32
	JLT       p4tail0
	VMOVDQU16 (R8), Z4
	XLOAD4(0, Z0, Z1, Z2, Z3)
	PDOT4(0, 1, 2, 3, 4, 16)
	ADDQ      $64, SI
	ADDQ      $64, R8
	SUBQ      $32, CX
	TESTQ     CX, CX
	JZ        p4sum
	MASKW
	VMOVDQU16.Z (R8), K1, Z4
	PXLOADZ4
	PDOT4(0, 1, 2, 3, 4, 17)
	JMP       p4sum

p4tail0:
	TESTQ CX, CX
	JZ    p4sum
	MASKW
	VMOVDQU16.Z (R8), K1, Z4
	PXLOADZ4
	PDOT4(0, 1, 2, 3, 4, 16)

p4sum:
	SUMS4

// PPAIRS adds the chunk of the four rows of x in registers x0…x3 times the
// chunks of the two rows of w in w0 and w1 into the pairs' accumulators a
// (pair (r, c)'s is a+4r+2c).
#define PPAIRS(x0, x1, x2, x3, w0, w1, a) \
	VDP(a, x0, w0); \
	VDP(a+2, x0, w1); \
	VDP(a+4, x1, w0); \
	VDP(a+6, x1, w1); \
	VDP(a+8, x2, w0); \
	VDP(a+10, x2, w1); \
	VDP(a+12, x3, w0); \
	VDP(a+14, x3, w1)

// func Dot4x2PairsBF16(x *uint16, ldx int, w *uint16, ldw int, k int, out *float32, ldo int, pre *uint16)
TEXT ·Dot4x2PairsBF16(SB), NOSPLIT, $0-64
	ARGS4X2(1, 1)

p42loop64:
	CMPQ       CX, $64
	JLT        p42step32
	PREFETCHT0 (R12)
	PREFETCHT0 64(R12)
	PREFETCHT0 (R13)
	PREFETCHT0 64(R13)
	VMOVDQU16  (R8), Z4
	VMOVDQU16  (R11), Z5
	VMOVDQU16  64(R8), Z6
	VMOVDQU16  64(R11), Z7
	XLOAD4(0, Z0, Z1, Z2, Z3)
	XLOAD4(64, Z24, Z25, Z26, Z27)
	PPAIRS(0, 1, 2, 3, 4, 5, 8)
	PPAIRS(24, 25, 26, 27, 6, 7, 9)
	ADDQ       $128, SI
	ADDQ       $128, R8
	ADDQ       $128, R11
	ADDQ       $128, R12
	ADDQ       $128, R13
	SUBQ       $64, CX
	JMP        p42loop64

p42step32:
	CMPQ      CX, $32
	JLT       p42tail0
	VMOVDQU16 (R8), Z4
	VMOVDQU16 (R11), Z5
	XLOAD4(0, Z0, Z1, Z2, Z3)
	PPAIRS(0, 1, 2, 3, 4, 5, 8)
	ADDQ      $64, SI
	ADDQ      $64, R8
	ADDQ      $64, R11
	SUBQ      $32, CX
	TESTQ     CX, CX
	JZ        p42sum
	MASKW
	VMOVDQU16.Z (R8), K1, Z4
	VMOVDQU16.Z (R11), K1, Z5
	PXLOADZ4
	PPAIRS(0, 1, 2, 3, 4, 5, 9)
	JMP       p42sum

p42tail0:
	TESTQ CX, CX
	JZ    p42sum
	MASKW
	VMOVDQU16.Z (R8), K1, Z4
	VMOVDQU16.Z (R11), K1, Z5
	PXLOADZ4
	PPAIRS(0, 1, 2, 3, 4, 5, 8)

p42sum:
	SUMS4X2
