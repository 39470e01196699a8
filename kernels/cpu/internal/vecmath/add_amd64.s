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
