//go:build amd64 && !purego

#include "textflag.h"
#include "tile12x32_amd64.h"

// The edge kernels multiply the first 8 or 4 rows of a 12-row panel of a
// (k·12 floats, a[p*12+i]) by a 32-column panel of b into rows of 32 in
// pairs of accumulators from Z8 up: Kernel12x32 for the last, partial
// panel of a product whose rows are not a multiple of 12.

// EDGEROW multiplies row i's value at offset off of SI into the
// accumulators acc0 and acc1 with b's k-step in Z0 and Z1, through z.
#define EDGEROW(off, z, acc0, acc1) \
	VBROADCASTSS off(SI), z; \
	VFMADD231PS  Z0, z, acc0; \
	VFMADD231PS  Z1, z, acc1

// EDGEB loads b's k-step at offset off of DI into Z0 and Z1.
#define EDGEB(off) \
	VMOVUPS off(DI), Z0; \
	VMOVUPS off+64(DI), Z1

// STEP8 and STEP4 are one k-step of 8 and 4 rows, a at offset ao of SI and
// b at bo of DI.
#define STEP8(ao, bo) \
	EDGEB(bo); \
	EDGEROW(ao, Z2, Z8, Z9); \
	EDGEROW(ao+4, Z3, Z10, Z11); \
	EDGEROW(ao+8, Z4, Z12, Z13); \
	EDGEROW(ao+12, Z5, Z14, Z15); \
	EDGEROW(ao+16, Z6, Z16, Z17); \
	EDGEROW(ao+20, Z7, Z18, Z19); \
	EDGEROW(ao+24, Z2, Z20, Z21); \
	EDGEROW(ao+28, Z3, Z22, Z23)

#define STEP4(ao, bo) \
	EDGEB(bo); \
	EDGEROW(ao, Z2, Z8, Z9); \
	EDGEROW(ao+4, Z3, Z10, Z11); \
	EDGEROW(ao+8, Z4, Z12, Z13); \
	EDGEROW(ao+12, Z5, Z14, Z15)

// SCALE multiplies acc0 and acc1 by alpha in Z0.
#define SCALE(acc0, acc1) \
	VMULPS Z0, acc0, acc0; \
	VMULPS Z0, acc1, acc1

// PUT stores acc0 and acc1 as the row of c at DX and moves DX to the next.
#define PUT(acc0, acc1) \
	VMOVUPS acc0, (DX); \
	VMOVUPS acc1, 64(DX); \
	ADDQ    R8, DX

// ADDPUT is PUT after adding beta (Z1) times the row of c.
#define ADDPUT(acc0, acc1) \
	VFMADD231PS (DX), Z1, acc0; \
	VFMADD231PS 64(DX), Z1, acc1; \
	PUT(acc0, acc1)

// ENTER loads the arguments, zeroes the accumulators Z8…Z23 and splits
// the depth CX into BX steps of two and CX (0 or 1) single steps.
#define ENTER \
	MOVQ   k+0(FP), CX; \
	MOVQ   a+8(FP), SI; \
	MOVQ   b+16(FP), DI; \
	MOVQ   c+24(FP), DX; \
	MOVQ   ldc+32(FP), R8; \
	SHLQ   $2, R8; \
	ZEROZ8Z23; \
	MOVQ   CX, BX; \
	SHRQ   $1, BX; \
	ANDQ   $1, CX

// ALPHA broadcasts alpha into Z0.
#define ALPHA \
	VBROADCASTSS alpha+40(FP), Z0

// func KernelEdge8x32(k int, a, b, c *float32, ldc int, alpha, beta float32)
TEXT ·KernelEdge8x32(SB), NOSPLIT, $0-48
	ENTER
	TESTQ BX, BX
	JZ    tail8
loop8:
	STEP8(0, 0)
	STEP8(48, 128)
	ADDQ  $96, SI
	ADDQ  $256, DI
	DECQ  BX
	JNZ   loop8
tail8:
	TESTQ CX, CX
	JZ    store8
	STEP8(0, 0)
store8:
	ALPHA
	SCALE(Z8, Z9)
	SCALE(Z10, Z11)
	SCALE(Z12, Z13)
	SCALE(Z14, Z15)
	SCALE(Z16, Z17)
	SCALE(Z18, Z19)
	SCALE(Z20, Z21)
	SCALE(Z22, Z23)
	BETANONZERO(accum8)
	PUT(Z8, Z9)
	PUT(Z10, Z11)
	PUT(Z12, Z13)
	PUT(Z14, Z15)
	PUT(Z16, Z17)
	PUT(Z18, Z19)
	PUT(Z20, Z21)
	PUT(Z22, Z23)
	VZEROUPPER
	RET
accum8:
	VBROADCASTSS beta+44(FP), Z1
	ADDPUT(Z8, Z9)
	ADDPUT(Z10, Z11)
	ADDPUT(Z12, Z13)
	ADDPUT(Z14, Z15)
	ADDPUT(Z16, Z17)
	ADDPUT(Z18, Z19)
	ADDPUT(Z20, Z21)
	ADDPUT(Z22, Z23)
	VZEROUPPER
	RET

// func KernelEdge4x32(k int, a, b, c *float32, ldc int, alpha, beta float32)
TEXT ·KernelEdge4x32(SB), NOSPLIT, $0-48
	ENTER
	TESTQ BX, BX
	JZ    tail4
loop4:
	STEP4(0, 0)
	STEP4(48, 128)
	ADDQ  $96, SI
	ADDQ  $256, DI
	DECQ  BX
	JNZ   loop4
tail4:
	TESTQ CX, CX
	JZ    store4
	STEP4(0, 0)
store4:
	ALPHA
	SCALE(Z8, Z9)
	SCALE(Z10, Z11)
	SCALE(Z12, Z13)
	SCALE(Z14, Z15)
	BETANONZERO(accum4)
	PUT(Z8, Z9)
	PUT(Z10, Z11)
	PUT(Z12, Z13)
	PUT(Z14, Z15)
	VZEROUPPER
	RET
accum4:
	VBROADCASTSS beta+44(FP), Z1
	ADDPUT(Z8, Z9)
	ADDPUT(Z10, Z11)
	ADDPUT(Z12, Z13)
	ADDPUT(Z14, Z15)
	VZEROUPPER
	RET
