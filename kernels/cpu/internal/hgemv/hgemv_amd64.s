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

// DOT4 is the body of the Dot4 kernels over WIDEN and WIDENZ, for
// weights of WB bytes per 16 values (WB = 16 << WSHIFT): four rows of w,
// from R8, R9, R10 and R11, against x from SI, k values in CX; 32 values
// a step over two accumulators per row (Z16–Z23), then 16, then the rest
// under a mask.
#define DOT4 \
	MOVQ   x+0(FP), SI; \
	MOVQ   w+8(FP), R8; \
	MOVQ   ldw+16(FP), AX; \
	MOVQ   k+24(FP), CX; \
	SHLQ   $WSHIFT, AX; \
	LEAQ   (R8)(AX*1), R9; \
	LEAQ   (R9)(AX*1), R10; \
	LEAQ   (R10)(AX*1), R11; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
loop32: \
	CMPQ        CX, $32; \
	JLT         loop16; \
	VMOVUPS     (SI), Z0; \
	VMOVUPS     64(SI), Z1; \
	WIDEN((R8), Z4); \
	WIDEN(WB(R8), Z5); \
	WIDEN((R9), Z6); \
	WIDEN(WB(R9), Z7); \
	WIDEN((R10), Z8); \
	WIDEN(WB(R10), Z9); \
	WIDEN((R11), Z10); \
	WIDEN(WB(R11), Z11); \
	VFMADD231PS Z0, Z4, Z16; \
	VFMADD231PS Z1, Z5, Z17; \
	VFMADD231PS Z0, Z6, Z18; \
	VFMADD231PS Z1, Z7, Z19; \
	VFMADD231PS Z0, Z8, Z20; \
	VFMADD231PS Z1, Z9, Z21; \
	VFMADD231PS Z0, Z10, Z22; \
	VFMADD231PS Z1, Z11, Z23; \
	ADDQ        $128, SI; \
	ADDQ        $(2*WB), R8; \
	ADDQ        $(2*WB), R9; \
	ADDQ        $(2*WB), R10; \
	ADDQ        $(2*WB), R11; \
	SUBQ        $32, CX; \
	JMP         loop32; \
loop16: \
	CMPQ        CX, $16; \
	JLT         tail; \
	VMOVUPS     (SI), Z0; \
	WIDEN((R8), Z4); \
	WIDEN((R9), Z6); \
	WIDEN((R10), Z8); \
	WIDEN((R11), Z10); \
	VFMADD231PS Z0, Z4, Z16; \
	VFMADD231PS Z0, Z6, Z18; \
	VFMADD231PS Z0, Z8, Z20; \
	VFMADD231PS Z0, Z10, Z22; \
	ADDQ        $64, SI; \
	ADDQ        $WB, R8; \
	ADDQ        $WB, R9; \
	ADDQ        $WB, R10; \
	ADDQ        $WB, R11; \
	SUBQ        $16, CX; \
tail: \
	TESTQ       CX, CX; \
	JZ          sum; \
	MOVL        $1, AX; \
	SHLL        CX, AX; \
	DECL        AX; \
	KMOVW       AX, K1; \
	VMOVUPS.Z   (SI), K1, Z0; \
	WIDENZ((R8), Z4); \
	WIDENZ((R9), Z6); \
	WIDENZ((R10), Z8); \
	WIDENZ((R11), Z10); \
	VFMADD231PS Z0, Z4, Z16; \
	VFMADD231PS Z0, Z6, Z18; \
	VFMADD231PS Z0, Z8, Z20; \
	VFMADD231PS Z0, Z10, Z22; \
sum: \
	MOVQ        out+32(FP), DI; \
	VADDPS      Z17, Z16, Z0; \
	HSUM; \
	MOVSS       X0, (DI); \
	VADDPS      Z19, Z18, Z0; \
	HSUM; \
	MOVSS       X0, 4(DI); \
	VADDPS      Z21, Z20, Z0; \
	HSUM; \
	MOVSS       X0, 8(DI); \
	VADDPS      Z23, Z22, Z0; \
	HSUM; \
	MOVSS       X0, 12(DI); \
	VZEROUPPER; \
	RET

// func Dot4F32(x *float32, w *float32, ldw, k int, out *[4]float32)
#define WIDEN WIDEN_F32
#define WIDENZ WIDENZ_F32
#define WB 64
#define WSHIFT 2
TEXT ·Dot4F32(SB), NOSPLIT, $0-40
	DOT4
#undef WIDEN
#undef WIDENZ
#undef WB
#undef WSHIFT

#define WB 32
#define WSHIFT 1

// func Dot4F16(x *float32, w *uint16, ldw, k int, out *[4]float32)
#define WIDEN WIDEN_F16
#define WIDENZ WIDENZ_F16
TEXT ·Dot4F16(SB), NOSPLIT, $0-40
	DOT4
#undef WIDEN
#undef WIDENZ

// func Dot4BF16(x *float32, w *uint16, ldw, k int, out *[4]float32)
#define WIDEN WIDEN_BF16
#define WIDENZ WIDENZ_BF16
TEXT ·Dot4BF16(SB), NOSPLIT, $0-40
	DOT4
