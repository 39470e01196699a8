//go:build amd64 && !purego

#include "textflag.h"

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
	VADDPS      Z17, Z16, Z16; \
	VADDPS      Z19, Z18, Z18; \
	VADDPS      Z18, Z16, Z0; \
	HSUM; \
	MOVSS       X0, ret+24(FP); \
	VZEROUPPER; \
	RET

// func Dot1F32(x *float32, w *float32, k int) float32
#define WIDEN WIDEN_F32
#define WIDENZ WIDENZ_F32
#define WB 64
#define WB2 128
#define WB3 192
TEXT ·Dot1F32(SB), NOSPLIT, $0-28
	DOT1
#undef WIDEN
#undef WIDENZ
#undef WB
#undef WB2
#undef WB3

// The 16-bit weights: 32 bytes per 16 values.
#define WB 32
#define WB2 64
#define WB3 96

// func Dot1F16(x *float32, w *uint16, k int) float32
#define WIDEN WIDEN_F16
#define WIDENZ WIDENZ_F16
TEXT ·Dot1F16(SB), NOSPLIT, $0-28
	DOT1
#undef WIDEN
#undef WIDENZ

// func Dot1BF16(x *float32, w *uint16, k int) float32
#define WIDEN WIDEN_BF16
#define WIDENZ WIDENZ_BF16
TEXT ·Dot1BF16(SB), NOSPLIT, $0-28
	DOT1
