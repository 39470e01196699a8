//go:build amd64 && !purego

#include "textflag.h"

// AHEAD is how far ahead of the weight it reads a decode kernel prefetches
// it into the outer caches (PREFETCHT2), a line per line read: the
// hardware prefetchers alone leave the stream short of the bandwidth.
#define AHEAD 8192

// ROW4 adds the products of the four a vectors Z17–Z20 with the b vector
// bz into the accumulators of column j (Z(j), Z(4+j), Z(8+j), Z(12+j)).
#define ROW4(bz, c0, c1, c2, c3) \
	VPDPBUSD bz, Z17, c0; \
	VPDPBUSD bz, Z18, c1; \
	VPDPBUSD bz, Z19, c2; \
	VPDPBUSD bz, Z20, c3

// HSUM4 reduces the accumulators z0–z3 (one output row, columns 0–3) to
// four int32 in x0, subtracts the corrections in X26 and stores them at
// dst. z1 serves as a temporary once folded in.
#define HSUM4(z0, z1, z2, z3, y0, y1, y2, y3, x0, x1, dst) \
	VEXTRACTI64X4 $1, z0, Y25; \
	VPADDD        Y25, y0, y0; \
	VEXTRACTI64X4 $1, z1, Y25; \
	VPADDD        Y25, y1, y1; \
	VEXTRACTI64X4 $1, z2, Y25; \
	VPADDD        Y25, y2, y2; \
	VEXTRACTI64X4 $1, z3, Y25; \
	VPADDD        Y25, y3, y3; \
	VPHADDD       y1, y0, y0; \
	VPHADDD       y3, y2, y2; \
	VPHADDD       y2, y0, y0; \
	VEXTRACTI128  $1, y0, x1; \
	VPADDD        x1, x0, x0; \
	VPSUBD        X26, x0, x0; \
	VMOVDQU       x0, dst

// The Dot4 kernels below are DotQ8 and DotQ8G for four rows of x at
// once: x from SI with rows R9 bytes apart (R10: three rows), one row of
// codes from R8 widened once for the four, each row's sums made in the
// order of the one-row kernel, so that each equals it bit for bit; the
// sums go to DI, DX bytes apart, and the codes from R11 are prefetched as
// those from R8 are read.

// ARGS4 loads the arguments common to the Dot4 kernels and clears the
// accumulators Z16–Z31 (four per row: Z16+4r+j).
#define ARGS4 \
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
	VPXORD Z31, Z31, Z31

// FMA4 adds the 16 values at byte offset off of each row of x times wz
// into the accumulators a0–a3 (one per row).
#define FMA4(off, wz, a0, a1, a2, a3) \
	VFMADD231PS off(SI), wz, a0; \
	VFMADD231PS off(SI)(R9*1), wz, a1; \
	VFMADD231PS off(SI)(R9*2), wz, a2; \
	VFMADD231PS off(SI)(R10*1), wz, a3

// Q8F sets z to the 16 int8 codes at mem as float32.
#define Q8F(mem, z) \
	VPMOVSXBD mem, z; \
	VCVTDQ2PS z, z

// HSUMPS reduces the 16 floats of Z0 into X0's first lane.
#define HSUMPS \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VPERMILPS     $0x4e, X0, X1; \
	VADDPS        X1, X0, X0; \
	VPERMILPS     $0xb1, X0, X1; \
	VADDPS        X1, X0, X0

// SUM4 folds a row's four accumulators (a0+a1)+(a2+a3), reduces them
// with HSUMPS and stores the sum at dst: the one epilogue of DotQ8 and
// the Dot4 kernels.
#define SUM4(a0, a1, a2, a3, dst) \
	VADDPS a1, a0, a0; \
	VADDPS a3, a2, a2; \
	VADDPS a2, a0, Z0; \
	HSUMPS; \
	MOVSS  X0, dst

// STORE4 stores the four rows' sums.
#define STORE4 \
	SUM4(Z16, Z17, Z18, Z19, (DI)); \
	SUM4(Z20, Z21, Z22, Z23, (DI)(DX*1)); \
	SUM4(Z24, Z25, Z26, Z27, (DI)(DX*2)); \
	LEAQ (DX)(DX*2), DX; \
	SUM4(Z28, Z29, Z30, Z31, (DI)(DX*1)); \
	VZEROUPPER

// G32X4 adds group g (0–3) of a step of 128 codes, 32 at byte offset
// 32·g from R8, into accumulator g of each row, as G32 does: the codes
// times the scale at SW·g from R12 (SCALE), then the products with x's
// two halves at byte offset 128·g, one after the other.
#define G32X4(g, a0, a1, a2, a3) \
	Q8F(32*g(R8), Z2); \
	Q8F(32*g+16(R8), Z3); \
	SCALE(SW*g, R12); \
	VMULPS Z6, Z2, Z2; \
	VMULPS Z6, Z3, Z3; \
	FMA4(128*g, Z2, a0, a1, a2, a3); \
	FMA4(128*g+64, Z3, a0, a1, a2, a3)

// GROWS is the body of DotQ8GRows over GDOT.
#define GROWS \
	MOVQ  x+0(FP), R10; \
	MOVQ  w+8(FP), DI; \
	MOVQ  k+16(FP), R12; \
	MOVQ  rows+24(FP), BX; \
	MOVQ  scales+32(FP), R8; \
	MOVQ  group+40(FP), R9; \
	MOVQ  out+48(FP), R11; \
growrow: \
	MOVQ  R10, SI; \
	MOVQ  R12, CX; \
	GDOT; \
	MOVSS X0, (R11); \
	ADDQ  $4, R11; \
	DECQ  BX; \
	JNZ   growrow; \
	VZEROUPPER; \
	RET

// G32ROWS4 is the body of Dot4Q8G32 over SCALE.
#define G32ROWS4 \
	ARGS4; \
	MOVQ       scales+56(FP), R12; \
g32x4loop: \
	CMPQ       CX, $128; \
	JL         g32x4done; \
	PREFETCHT0 (R11); \
	PREFETCHT0 64(R11); \
	G32X4(0, Z16, Z20, Z24, Z28); \
	G32X4(1, Z17, Z21, Z25, Z29); \
	G32X4(2, Z18, Z22, Z26, Z30); \
	G32X4(3, Z19, Z23, Z27, Z31); \
	ADDQ       $128, R8; \
	ADDQ       $128, R11; \
	ADDQ       $512, SI; \
	ADDQ       $SW4, R12; \
	SUBQ       $128, CX; \
	JMP        g32x4loop; \
g32x4done: \
	STORE4; \
	RET

// func Dot4x4(a *int8, lda int, b *int8, ldb int, k int, out *int32, ldo int, corr *int32)
TEXT ·Dot4x4(SB), NOSPLIT, $0-64
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R8
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	MOVQ k+32(FP), CX
	MOVQ out+40(FP), DX
	MOVQ ldo+48(FP), R12
	MOVQ corr+56(FP), BX
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

loop4:
	CMPQ CX, $64
	JL   tail4
	VPXORD   (SI), Z16, Z17
	VPXORD   (SI)(R8*1), Z16, Z18
	VPXORD   (SI)(R8*2), Z16, Z19
	VPXORD   (SI)(R10*1), Z16, Z20
	VMOVDQU8 (DI), Z21
	VMOVDQU8 (DI)(R9*1), Z22
	VMOVDQU8 (DI)(R9*2), Z23
	VMOVDQU8 (DI)(R11*1), Z24
	ROW4(Z21, Z0, Z4, Z8, Z12)
	ROW4(Z22, Z1, Z5, Z9, Z13)
	ROW4(Z23, Z2, Z6, Z10, Z14)
	ROW4(Z24, Z3, Z7, Z11, Z15)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  loop4

tail4:
	// The last k mod 64 bytes under a mask: a's masked bytes read as 0 and
	// flip to 128, b's read as 0, so they add nothing.
	TESTQ CX, CX
	JZ    reduce4
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVQ AX, K1
	VMOVDQU8.Z (SI), K1, Z17
	VMOVDQU8.Z (SI)(R8*1), K1, Z18
	VMOVDQU8.Z (SI)(R8*2), K1, Z19
	VMOVDQU8.Z (SI)(R10*1), K1, Z20
	VPXORD     Z17, Z16, Z17
	VPXORD     Z18, Z16, Z18
	VPXORD     Z19, Z16, Z19
	VPXORD     Z20, Z16, Z20
	VMOVDQU8.Z (DI), K1, Z21
	VMOVDQU8.Z (DI)(R9*1), K1, Z22
	VMOVDQU8.Z (DI)(R9*2), K1, Z23
	VMOVDQU8.Z (DI)(R11*1), K1, Z24
	ROW4(Z21, Z0, Z4, Z8, Z12)
	ROW4(Z22, Z1, Z5, Z9, Z13)
	ROW4(Z23, Z2, Z6, Z10, Z14)
	ROW4(Z24, Z3, Z7, Z11, Z15)

reduce4:
	VMOVDQU32 (BX), X26
	HSUM4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, (DX))
	HSUM4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, (DX)(R12*1))
	HSUM4(Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11, X8, X9, (DX)(R12*2))
	HSUM4(Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15, X12, X13, (DX)(R13*1))
	VZEROUPPER
	RET

// func Sum(b *int8, k int) int32
TEXT ·Sum(SB), NOSPLIT, $0-20
	MOVQ b+0(FP), DI
	MOVQ k+8(FP), CX
	MOVL $0x01010101, AX
	VPBROADCASTD AX, Z16
	VPXORD Z0, Z0, Z0

loops:
	CMPQ CX, $64
	JL   tails
	VPDPBUSD (DI), Z16, Z0
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  loops

tails:
	TESTQ CX, CX
	JZ    reduces
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVQ AX, K1
	VMOVDQU8.Z (DI), K1, Z21
	VPDPBUSD   Z21, Z16, Z0

reduces:
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD        Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0xb1, X0, X1
	VPADDD        X1, X0, X0
	VMOVD         X0, AX
	MOVL          AX, ret+16(FP)
	VZEROUPPER
	RET

// func Rescale(dst *float32, acc *int32, n int, s float32, cs *float32, bias *float32)
TEXT ·Rescale(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         acc+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Z16
	MOVQ         cs+32(FP), R8
	MOVQ         bias+40(FP), R9

rloop:
	CMPQ         CX, $16
	JL           rtail
	VCVTDQ2PS    (SI), Z0
	VMULPS       (R8), Z16, Z1
	VMULPS       Z1, Z0, Z0
	VADDPS       (R9), Z0, Z0
	VMOVUPS      Z0, (DI)
	ADDQ         $64, SI
	ADDQ         $64, R8
	ADDQ         $64, R9
	ADDQ         $64, DI
	SUBQ         $16, CX
	JMP          rloop

rtail:
	TESTQ        CX, CX
	JZ           rdone
	MOVQ         $1, AX
	SHLQ         CX, AX
	DECQ         AX
	KMOVW        AX, K1
	VMOVDQU32.Z  (SI), K1, Z0
	VCVTDQ2PS    Z0, Z0
	VMOVUPS.Z    (R8), K1, Z1
	VMULPS       Z1, Z16, Z1
	VMOVUPS.Z    (R9), K1, Z2
	VMULPS       Z1, Z0, Z0
	VADDPS       Z2, Z0, Z0
	VMOVUPS      Z0, K1, (DI)

rdone:
	VZEROUPPER
	RET

// func Quantize(dst *int8, src *float32, n int, s float32)
TEXT ·Quantize(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Z16
	MOVL         $0x42fe0000, AX // 127.0
	VPBROADCASTD AX, Z17
	MOVL         $0xc2fe0000, AX // -127.0
	VPBROADCASTD AX, Z18

qloop:
	CMPQ         CX, $16
	JL           qtail
	VMOVUPS      (SI), Z0
	VDIVPS       Z16, Z0, Z0
	VCMPPS       $0, Z0, Z0, K2 // ordered: NaN lanes give 0
	VMINPS       Z17, Z0, Z0
	VMAXPS       Z18, Z0, Z0
	VCVTPS2DQ.Z  Z0, K2, Z0
	VPMOVSDB     Z0, (DI)
	ADDQ         $64, SI
	ADDQ         $16, DI
	SUBQ         $16, CX
	JMP          qloop

qtail:
	TESTQ        CX, CX
	JZ           qdone
	MOVQ         $1, AX
	SHLQ         CX, AX
	DECQ         AX
	KMOVW        AX, K1
	VMOVUPS.Z    (SI), K1, Z0
	VDIVPS       Z16, Z0, Z0
	VCMPPS       $0, Z0, Z0, K2
	VMINPS       Z17, Z0, Z0
	VMAXPS       Z18, Z0, Z0
	VCVTPS2DQ.Z  Z0, K2, Z0
	VPMOVSDB     Z0, K1, (DI)

qdone:
	VZEROUPPER
	RET

// Q8DOT is the body of DotQ8 and DotQ8Rows: Σ x[p]·float32(w[p]) for x
// from SI, codes from DI, k values in CX (a multiple of 16), 64 a step
// over four accumulators (Z0–Z3), then 16 into the first; the sum left in
// X0's first lane, DI past the codes (Z4–Z7 clobbered).
#define Q8DOT \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
d8loop64: \
	CMPQ        CX, $64; \
	JL          d8loop16; \
	PREFETCHT2  AHEAD(DI); \
	VPMOVSXBD   (DI), Z4; \
	VPMOVSXBD   16(DI), Z5; \
	VPMOVSXBD   32(DI), Z6; \
	VPMOVSXBD   48(DI), Z7; \
	VCVTDQ2PS   Z4, Z4; \
	VCVTDQ2PS   Z5, Z5; \
	VCVTDQ2PS   Z6, Z6; \
	VCVTDQ2PS   Z7, Z7; \
	VFMADD231PS (SI), Z4, Z0; \
	VFMADD231PS 64(SI), Z5, Z1; \
	VFMADD231PS 128(SI), Z6, Z2; \
	VFMADD231PS 192(SI), Z7, Z3; \
	ADDQ        $64, DI; \
	ADDQ        $256, SI; \
	SUBQ        $64, CX; \
	JMP         d8loop64; \
d8loop16: \
	CMPQ        CX, $16; \
	JL          d8done; \
	VPMOVSXBD   (DI), Z4; \
	VCVTDQ2PS   Z4, Z4; \
	VFMADD231PS (SI), Z4, Z0; \
	ADDQ        $16, DI; \
	ADDQ        $64, SI; \
	SUBQ        $16, CX; \
	JMP         d8loop16; \
d8done: \
	SUM4(Z0, Z1, Z2, Z3, X0)

// func DotQ8(x *float32, w *int8, k int) float32
TEXT ·DotQ8(SB), NOSPLIT, $0-28
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  k+16(FP), CX
	Q8DOT
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func DotQ8Rows(x *float32, w *int8, k int, rows int, scales *float32, out *float32)
//
// out[r] = DotQ8(x, w[r·k:], k)·scales[r] for r < rows, each sum made in
// DotQ8's order: the rows of w follow one another in memory, read as one
// stream.
TEXT ·DotQ8Rows(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), R10
	MOVQ w+8(FP), DI
	MOVQ k+16(FP), R9
	MOVQ rows+24(FP), BX
	MOVQ scales+32(FP), R8
	MOVQ out+40(FP), DX

rrow:
	MOVQ  R10, SI
	MOVQ  R9, CX
	Q8DOT
	MULSS (R8), X0
	MOVSS X0, (DX)
	ADDQ  $4, R8
	ADDQ  $4, DX
	DECQ  BX
	JNZ   rrow
	VZEROUPPER
	RET

// WIDEN_Q8 and WIDEN_Q4 set Z2 and Z3 to 32 codes at byte offset off from
// DI as float32, in the order of x: int8 codes as they are; 4-bit codes
// (16 bytes) the levels in Z30 of the low nibbles, then of the high ones,
// the nibble mask in Z31 (Z1 clobbered).
#define WIDEN_Q8(off) \
	VPMOVSXBD off(DI), Z2; \
	VPMOVSXBD off+16(DI), Z3; \
	VCVTDQ2PS Z2, Z2; \
	VCVTDQ2PS Z3, Z3
#define WIDEN_Q4(off) \
	VPMOVZXBD off(DI), Z1; \
	VPANDD    Z31, Z1, Z2; \
	VPSRLD    $4, Z1, Z3; \
	VPERMPS   Z30, Z2, Z2; \
	VPERMPS   Z30, Z3, Z3

// SCALE_F32 and SCALE_F16 set every lane of Z6 to the scale at byte
// offset so from register r: a float32, or a float16 widened (exactly)
// to one. SW is the bytes of one scale (SW2–SW4: two to four times it),
// defined with SCALE before each kernel over GDOT or G32X4.
#define SCALE_F32(so, r) \
	VBROADCASTSS so(r), Z6
#define SCALE_F16(so, r) \
	VPBROADCASTW so(r), Y6; \
	VCVTPH2PS    Y6, Z6

// G32 adds to acc one group of 32 codes at byte offset wo from DI (WIDEN)
// times the scale at byte offset so from R8 (SCALE), each code's product
// with its scale rounded to float32 (the weight as dequantized), against
// x at byte offset xo from SI: the first 16 products, then the last 16
// (Z1–Z6 clobbered).
#define G32(wo, xo, so, acc) \
	WIDEN(wo); \
	SCALE(so, R8); \
	VMULPS      Z6, Z2, Z2; \
	VMULPS      Z6, Z3, Z3; \
	VFMADD231PS xo(SI), Z2, acc; \
	VFMADD231PS xo+64(SI), Z3, acc

// GDOT is the body of the grouped dot products over WIDEN, for codes of
// CB bytes per 32 (CB2, CB3: twice and three times CB): Σ_g scales[g]·
// Σ_{p in group g} x[p]·code(p) for x from SI, codes from DI, k values in
// CX, scales (SCALE, SW bytes each) from R8 and the group in R9, left in
// X0's first lane. Groups
// of 32 (GGUF's blocks) go four a step, each into an accumulator of its
// own (Z7, Z9, Z10, Z11), x times each code's scaled value (G32), so that
// no group waits for the previous one's; other groups one at a time,
// their 32-value chunks into Z0 and Z8, each group's sum then scaled.
#define GDOT \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	CMPQ   R9, $32; \
	JNE    group; \
g32: \
	CMPQ   CX, $128; \
	JLT    g32tail; \
	PREFETCHT2 AHEAD(DI); \
	PREFETCHT2 AHEAD+64(DI); \
	G32(0, 0, 0, Z7); \
	G32(CB, 128, SW, Z9); \
	G32(CB2, 256, SW2, Z10); \
	G32(CB3, 384, SW3, Z11); \
	ADDQ   $(4*CB), DI; \
	ADDQ   $512, SI; \
	ADDQ   $SW4, R8; \
	SUBQ   $128, CX; \
	JMP    g32; \
g32tail: \
	VADDPS Z9, Z7, Z7; \
	VADDPS Z11, Z10, Z10; \
	VADDPS Z10, Z7, Z7; \
group: \
	TESTQ  CX, CX; \
	JZ     done; \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z8, Z8, Z8; \
	MOVQ   R9, DX; \
chunk: \
	WIDEN(0); \
	VFMADD231PS (SI), Z2, Z0; \
	VFMADD231PS 64(SI), Z3, Z8; \
	ADDQ        $CB, DI; \
	ADDQ        $128, SI; \
	SUBQ        $32, DX; \
	SUBQ        $32, CX; \
	TESTQ       DX, DX; \
	JNZ         chunk; \
	VADDPS      Z8, Z0, Z0; \
	SCALE(0, R8); \
	VFMADD231PS Z6, Z0, Z7; \
	ADDQ        $SW, R8; \
	JMP         group; \
done: \
	VMOVAPS Z7, Z0; \
	HSUMPS

// The kernels up to Dot4Q8G32 take float32 scales; the H kernels after
// it take float16 ones.
#define SCALE SCALE_F32
#define SW 4
#define SW2 8
#define SW3 12
#define SW4 16

// func DotQ8G(x *float32, w *int8, k int, scales *float32, group int) float32
#define WIDEN WIDEN_Q8
#define CB 32
#define CB2 64
#define CB3 96
TEXT ·DotQ8G(SB), NOSPLIT, $0-44
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  k+16(FP), CX
	MOVQ  scales+24(FP), R8
	MOVQ  group+32(FP), R9
	GDOT
	MOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func DotQ8GRows(x *float32, w *int8, k int, rows int, scales *float32, group int, out *float32)
//
// out[r] = DotQ8G(x, w[r·k:], k, scales[r·k/group:], group) for r < rows,
// each sum made in DotQ8G's order: the rows of w, and their scales,
// follow one another in memory.
TEXT ·DotQ8GRows(SB), NOSPLIT, $0-56
	GROWS
#undef WIDEN
#undef CB
#undef CB2
#undef CB3

// func DotQ4(x *float32, w *int8, k int, scales *float32, group int, levels *[16]float32) float32
#define WIDEN WIDEN_Q4
#define CB 16
#define CB2 32
#define CB3 48
TEXT ·DotQ4(SB), NOSPLIT, $0-52
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DI
	MOVQ         k+16(FP), CX
	MOVQ         scales+24(FP), R8
	MOVQ         group+32(FP), R9
	MOVQ         levels+40(FP), R10
	VMOVUPS      (R10), Z30
	MOVL         $15, AX
	VPBROADCASTD AX, Z31
	GDOT
	MOVSS        X0, ret+48(FP)
	VZEROUPPER
	RET
#undef WIDEN
#undef CB
#undef CB2
#undef CB3

// func Dot1x4S(a *int8, b *int8, ldb int, k int, out *int32)
TEXT ·Dot1x4S(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ ldb+16(FP), R9
	MOVQ k+24(FP), CX
	MOVQ out+32(FP), DX
	LEAQ (R9)(R9*2), R11
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

sloop:
	CMPQ     CX, $64
	JL       stail
	VPXORD   (SI), Z16, Z17
	VMOVDQU8 (DI), Z21
	VMOVDQU8 (DI)(R9*1), Z22
	VMOVDQU8 (DI)(R9*2), Z23
	VMOVDQU8 (DI)(R11*1), Z24
	VPDPBUSD Z21, Z17, Z0
	VPDPBUSD Z22, Z17, Z1
	VPDPBUSD Z23, Z17, Z2
	VPDPBUSD Z24, Z17, Z3
	VPDPBUSD Z21, Z16, Z4
	VPDPBUSD Z22, Z16, Z5
	VPDPBUSD Z23, Z16, Z6
	VPDPBUSD Z24, Z16, Z7
	ADDQ     $64, SI
	ADDQ     $64, DI
	SUBQ     $64, CX
	JMP      sloop

stail:
	TESTQ CX, CX
	JZ    sreduce
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVQ AX, K1
	VMOVDQU8.Z (SI), K1, Z17
	VPXORD     Z17, Z16, Z17
	VMOVDQU8.Z (DI), K1, Z21
	VMOVDQU8.Z (DI)(R9*1), K1, Z22
	VMOVDQU8.Z (DI)(R9*2), K1, Z23
	VMOVDQU8.Z (DI)(R11*1), K1, Z24
	VPDPBUSD   Z21, Z17, Z0
	VPDPBUSD   Z22, Z17, Z1
	VPDPBUSD   Z23, Z17, Z2
	VPDPBUSD   Z24, Z17, Z3
	VPDPBUSD   Z21, Z16, Z4
	VPDPBUSD   Z22, Z16, Z5
	VPDPBUSD   Z23, Z16, Z6
	VPDPBUSD   Z24, Z16, Z7

sreduce:
	// The corrections 128·Σb are the sums of Z4–Z7: subtract lane by lane.
	VPSUBD Z4, Z0, Z0
	VPSUBD Z5, Z1, Z1
	VPSUBD Z6, Z2, Z2
	VPSUBD Z7, Z3, Z3
	VPXORD Z26, Z26, Z26
	HSUM4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, (DX))
	VZEROUPPER
	RET

// func AbsMax(x *float32, n int) float32
TEXT ·AbsMax(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z16
	VPXORD       Z0, Z0, Z0
	KXORW        K3, K3, K3

aloop:
	CMPQ    CX, $16
	JL      atail
	VANDPS  (SI), Z16, Z1
	VCMPPS  $3, Z1, Z1, K2 // unordered: NaN
	KORW    K2, K3, K3
	VMAXPS  Z1, Z0, Z0
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     aloop

atail:
	TESTQ       CX, CX
	JZ          adone
	MOVQ        $1, AX
	SHLQ        CX, AX
	DECQ        AX
	KMOVW       AX, K1
	VMOVUPS.Z   (SI), K1, Z1
	VANDPS      Z16, Z1, Z1
	VCMPPS      $3, Z1, Z1, K2
	KORW        K2, K3, K3
	VMAXPS      Z1, Z0, Z0

adone:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	KORTESTW      K3, K3
	JZ            aret
	MOVL          $0x7fc00000, AX // a NaN was seen
	VMOVD         AX, X0

aret:
	MOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func DequantQ8(dst *float32, w *int8, k int, s float32)
TEXT ·DequantQ8(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         w+8(FP), SI
	MOVQ         k+16(FP), CX
	VBROADCASTSS s+24(FP), Z6

q8loop:
	CMPQ      CX, $16
	JL        q8done
	VPMOVSXBD (SI), Z1
	VCVTDQ2PS Z1, Z1
	VMULPS    Z6, Z1, Z1
	VMOVUPS   Z1, (DI)
	ADDQ      $16, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JMP       q8loop

q8done:
	VZEROUPPER
	RET

// func DequantQ4(dst *float32, w *int8, k int, scales *float32, group int, levels *[16]float32)
TEXT ·DequantQ4(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         w+8(FP), SI
	MOVQ         k+16(FP), CX
	MOVQ         scales+24(FP), R8
	MOVQ         group+32(FP), R9
	MOVQ         levels+40(FP), R10
	VMOVUPS      (R10), Z30
	MOVL         $15, AX
	VPBROADCASTD AX, Z31

q4group:
	TESTQ        CX, CX
	JZ           q4done
	VBROADCASTSS (R8), Z6
	MOVQ         R9, DX

q4chunk:
	VPMOVZXBD (SI), Z1
	VPANDD    Z31, Z1, Z2
	VPSRLD    $4, Z1, Z3
	VPERMPS   Z30, Z2, Z2
	VPERMPS   Z30, Z3, Z3
	VMULPS    Z6, Z2, Z2
	VMULPS    Z6, Z3, Z3
	VMOVUPS   Z2, (DI)
	VMOVUPS   Z3, 64(DI)
	ADDQ      $16, SI
	ADDQ      $128, DI
	SUBQ      $32, DX
	SUBQ      $32, CX
	TESTQ     DX, DX
	JNZ       q4chunk
	ADDQ      $4, R8
	JMP       q4group

q4done:
	VZEROUPPER
	RET

// LWALK sets up a ScaleWalk from DX: P in R8, the scales' lane indices in
// Z30, N in BX, 4·N in R11, Per in R10 and R12 (the steps left before P
// moves on).
#define LWALK \
	MOVQ      0(DX), R8; \
	MOVQ      8(DX), BX; \
	MOVQ      16(DX), R10; \
	VMOVDQU32 24(DX), Z30; \
	LEAQ      (BX*4), R11; \
	MOVQ      R10, R12

// LD1, LD2 and LD4 load a step's 1, 2 or 4 scales from R8 into Z10,
// repeated across it.
#define LD1 VBROADCASTSS (R8), Z10
#define LD2 VBROADCASTSD (R8), Z10
#define LD4 VBROADCASTF32X4 (R8), Z10

// L4STEP is one step of DotQ4LRows: 128 codes from DI against x from SI, the
// scales loaded by LOAD (exactly the step's N of them, repeated across
// Z10) and spread to the lanes; then the walk moves on and the loop goes
// back to top, or to done when CX is spent.
#define L4STEP(LOAD, top, done) \
	PREFETCHT2  AHEAD(DI); \
	VMOVDQU32   (DI), Z4; \
	VPERMPS     Z31, Z4, Z12; \
	VPSRLD      $4, Z4, Z13; \
	VPSRLD      $8, Z4, Z14; \
	VPSRLD      $12, Z4, Z15; \
	VPSRLD      $16, Z4, Z16; \
	VPSRLD      $20, Z4, Z17; \
	VPSRLD      $24, Z4, Z18; \
	VPSRLD      $28, Z4, Z19; \
	VPERMPS     Z31, Z13, Z13; \
	VPERMPS     Z31, Z14, Z14; \
	VPERMPS     Z31, Z15, Z15; \
	VPERMPS     Z31, Z16, Z16; \
	VPERMPS     Z31, Z17, Z17; \
	VPERMPS     Z31, Z18, Z18; \
	VPERMPS     Z31, Z19, Z19; \
	VMULPS      (SI), Z12, Z8; \
	VMULPS      64(SI), Z13, Z9; \
	VFMADD231PS 128(SI), Z14, Z8; \
	VFMADD231PS 192(SI), Z15, Z9; \
	VFMADD231PS 256(SI), Z16, Z8; \
	VFMADD231PS 320(SI), Z17, Z9; \
	VFMADD231PS 384(SI), Z18, Z8; \
	VFMADD231PS 448(SI), Z19, Z9; \
	VADDPS      Z9, Z8, Z8; \
	LOAD; \
	VPERMPS     Z10, Z30, Z10; \
	VFMADD231PS Z10, Z8, Z0; \
	ADDQ        $64, DI; \
	ADDQ        $512, SI; \
	DECQ        R12; \
	JNZ         3(PC); \
	ADDQ        R11, R8; \
	MOVQ        R10, R12; \
	SUBQ        $128, CX; \
	JNZ         top; \
	JMP         done

// L4ROW is one row of DotQ4LRows: x from R9, k codes from R13, its sum
// stored at AX, which moves on; then the next row from top, or the end.
#define L4ROW(LOAD, top, loop, done) \
top: \
	MOVQ   R9, SI; \
	MOVQ   R13, CX; \
	VPXORD Z0, Z0, Z0; \
loop: \
	L4STEP(LOAD, loop, done); \
done: \
	HSUMPS; \
	MOVSS  X0, (AX); \
	ADDQ   $4, AX; \
	DECQ   R14; \
	JNZ    top; \
	VZEROUPPER; \
	RET

// func DotQ4LRows(x *float32, w *int8, k int, rows int, s *ScaleWalk, levels *[16]float32, out *float32)
TEXT ·DotQ4LRows(SB), NOSPLIT, $0-56
	MOVQ    s+32(FP), DX
	LWALK
	MOVQ    levels+40(FP), AX
	VMOVUPS (AX), Z31
	MOVQ    x+0(FP), R9
	MOVQ    w+8(FP), DI
	MOVQ    k+16(FP), R13
	MOVQ    rows+24(FP), R14
	MOVQ    out+48(FP), AX
	CMPQ    BX, $2
	JEQ     r4two
	JGT     r4four
	L4ROW(LD1, r4one, r4oneloop, r4onedone)
	L4ROW(LD2, r4two, r4twoloop, r4twodone)
	L4ROW(LD4, r4four, r4fourloop, r4fourdone)

// func Dot4Q8(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8)
TEXT ·Dot4Q8(SB), NOSPLIT, $0-56
	ARGS4

q8x4loop64:
	CMPQ       CX, $64
	JL         q8x4loop16
	PREFETCHT0 (R11)
	Q8F((R8), Z4)
	Q8F(16(R8), Z5)
	Q8F(32(R8), Z6)
	Q8F(48(R8), Z7)
	FMA4(0, Z4, Z16, Z20, Z24, Z28)
	FMA4(64, Z5, Z17, Z21, Z25, Z29)
	FMA4(128, Z6, Z18, Z22, Z26, Z30)
	FMA4(192, Z7, Z19, Z23, Z27, Z31)
	ADDQ       $64, R8
	ADDQ       $64, R11
	ADDQ       $256, SI
	SUBQ       $64, CX
	JMP        q8x4loop64

q8x4loop16:
	CMPQ CX, $16
	JL   q8x4done
	Q8F((R8), Z4)
	FMA4(0, Z4, Z16, Z20, Z24, Z28)
	ADDQ $16, R8
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  q8x4loop16

q8x4done:
	STORE4
	RET

// func Dot4Q8G32(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8, scales *float32)
TEXT ·Dot4Q8G32(SB), NOSPLIT, $0-64
	G32ROWS4

#undef SCALE
#undef SW
#undef SW2
#undef SW3
#undef SW4
#define SCALE SCALE_F16
#define SW 2
#define SW2 4
#define SW3 6
#define SW4 8

// func DotQ8GRowsH(x *float32, w *int8, k int, rows int, scales *uint16, group int, out *float32)
#define WIDEN WIDEN_Q8
#define CB 32
#define CB2 64
#define CB3 96
TEXT ·DotQ8GRowsH(SB), NOSPLIT, $0-56
	GROWS
#undef WIDEN
#undef CB
#undef CB2
#undef CB3

// func Dot4Q8G32H(x *float32, ldx int, w *int8, k int, out *float32, ldo int, pre *int8, scales *uint16)
TEXT ·Dot4Q8G32H(SB), NOSPLIT, $0-64
	G32ROWS4
