//go:build amd64 && !purego

#include "textflag.h"

// func addAVX512(dst, a, b *float32, n int)
//
// dst[i] = a[i] + b[i] for i < n, n ≥ 1: 16 at a time, then the rest
// under the mask K1 (masked-off lanes neither read nor written).
TEXT ·addAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
loop:
	CMPQ CX, $16
	JLT tail
	VMOVUPS (SI), Z0
	VADDPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
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
	VMOVUPS.Z (DX), K1, Z1
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// func addAVX2(dst, a, b *float32, n int)
//
// dst[i] = a[i] + b[i] for i < n, n ≥ 1: 8 at a time, then one by one.
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
loop:
	CMPQ CX, $8
	JLT tail
	VMOVUPS (SI), Y0
	VADDPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	VMOVSS (SI), X0
	VADDSS (DX), X0, X0
	VMOVSS X0, (DI)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ $4, DI
	DECQ CX
	JMP tail
done:
	VZEROUPPER
	RET

// MAX16 sets Z2 to max(Z0, Z1) as Go's max: VMAXPS returns its second
// operand where either is NaN or both are zero, so lanes where they are
// equal (±0 among them) take a AND b (+0 for +0 and −0), and lanes where
// either is NaN take a + b (NaN).
#define MAX16 \
	VMAXPS Z1, Z0, Z2; \
	VCMPPS $0, Z1, Z0, K2; \
	VPANDD Z1, Z0, K2, Z2; \
	VCMPPS $3, Z1, Z0, K3; \
	VADDPS Z1, Z0, K3, Z2

// func maxOfAVX512(dst, a, b *float32, n int)
//
// dst[i] = max(a[i], b[i]) for i < n, n ≥ 1 (MAX16): 16 at a time, then
// the rest under the mask K1.
TEXT ·maxOfAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
loop:
	CMPQ CX, $16
	JLT tail
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	MAX16
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
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
	VMOVUPS.Z (DX), K1, Z1
	MAX16
	VMOVUPS Z2, K1, (DI)
done:
	VZEROUPPER
	RET

// MAX8 sets Y2 to max(Y0, Y1) as MAX16 does, blending through vector
// masks: Y3 where they are equal, Y5 where either is NaN.
#define MAX8 \
	VMAXPS Y1, Y0, Y2; \
	VCMPPS $0, Y1, Y0, Y3; \
	VANDPS Y1, Y0, Y4; \
	VBLENDVPS Y3, Y4, Y2, Y2; \
	VCMPPS $3, Y1, Y0, Y5; \
	VADDPS Y1, Y0, Y4; \
	VBLENDVPS Y5, Y4, Y2, Y2

// func maxOfAVX2(dst, a, b *float32, n int)
//
// dst[i] = max(a[i], b[i]) for i < n, n ≥ 1 (MAX8): 8 at a time, then
// one by one in the low lanes.
TEXT ·maxOfAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
loop:
	CMPQ CX, $8
	JLT tail
	VMOVUPS (SI), Y0
	VMOVUPS (DX), Y1
	MAX8
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop
tail:
	TESTQ CX, CX
	JZ done
	VMOVSS (SI), X0
	VMOVSS (DX), X1
	MAX8
	VMOVSS X2, (DI)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ $4, DI
	DECQ CX
	JMP tail
done:
	VZEROUPPER
	RET

// func maxWindowsAVX512(dst, src *float32, c, n, step, taps, tapStep int)
//
// For each of n windows, 16 values of c at a time: the first tap's row,
// then MAX16 with each further tap's, stored to dst; the next window
// starts step values on in src and c values on in dst.
TEXT ·maxWindowsAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ c+16(FP), R12
	SHLQ $2, R12
	MOVQ n+24(FP), R8
	MOVQ step+32(FP), R9
	SHLQ $2, R9
	MOVQ taps+40(FP), R10
	MOVQ tapStep+48(FP), R11
	SHLQ $2, R11
window:
	XORQ AX, AX
lanes:
	LEAQ (SI)(AX*1), DX
	VMOVUPS (DX), Z0
	MOVQ R10, BX
	DECQ BX
	JZ store
tap:
	ADDQ R11, DX
	VMOVUPS (DX), Z1
	MAX16
	VMOVAPS Z2, Z0
	DECQ BX
	JNZ tap
store:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R12
	JLT lanes
	ADDQ R9, SI
	ADDQ R12, DI
	DECQ R8
	JNZ window
	VZEROUPPER
	RET
