// ZEROZ8Z23 zeroes the accumulators Z8…Z23 (a 12×32 kernel's first 16;
// the 8-row edge kernel's all).
#define ZEROZ8Z23 \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// BETANONZERO jumps to accum where the argument beta is not 0 (NaN
// included), X1 and X2 clobbered.
#define BETANONZERO(accum) \
	MOVSS   beta+44(FP), X1; \
	XORPS   X2, X2; \
	UCOMISS X2, X1; \
	JNE     accum; \
	JPS     accum

// ENTER12X32 zeroes the accumulators Z8…Z31 of a 12×32 micro-kernel and
// splits its depth CX into BX steps of four and CX single steps, jumping to
// tail512 where there is no step of four.
#define ENTER12X32 \
	ZEROZ8Z23; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29; \
	VPXORD Z30, Z30, Z30; \
	VPXORD Z31, Z31, Z31; \
	MOVQ CX, BX; \
	SHRQ $2, BX; \
	ANDQ $3, CX; \
	TESTQ BX, BX; \
	JZ tail512

// STORE12X32 sets the 12×32 tile of c at DX (row stride R8 bytes) to
// alpha·Z8…Z31 + beta·c, the accumulators holding rows of 32 in pairs of
// registers; beta 0 stores without reading c. Its labels are
// store512 (the entry) and accum512, once per function that expands it.
#define STORE12X32 \
store512: \
	VBROADCASTSS alpha+40(FP), Z0; \
	VMULPS Z0, Z8, Z8; \
	VMULPS Z0, Z9, Z9; \
	VMULPS Z0, Z10, Z10; \
	VMULPS Z0, Z11, Z11; \
	VMULPS Z0, Z12, Z12; \
	VMULPS Z0, Z13, Z13; \
	VMULPS Z0, Z14, Z14; \
	VMULPS Z0, Z15, Z15; \
	VMULPS Z0, Z16, Z16; \
	VMULPS Z0, Z17, Z17; \
	VMULPS Z0, Z18, Z18; \
	VMULPS Z0, Z19, Z19; \
	VMULPS Z0, Z20, Z20; \
	VMULPS Z0, Z21, Z21; \
	VMULPS Z0, Z22, Z22; \
	VMULPS Z0, Z23, Z23; \
	VMULPS Z0, Z24, Z24; \
	VMULPS Z0, Z25, Z25; \
	VMULPS Z0, Z26, Z26; \
	VMULPS Z0, Z27, Z27; \
	VMULPS Z0, Z28, Z28; \
	VMULPS Z0, Z29, Z29; \
	VMULPS Z0, Z30, Z30; \
	VMULPS Z0, Z31, Z31; \
	BETANONZERO(accum512); \
	VMOVUPS Z8, (DX); \
	VMOVUPS Z9, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z10, (DX); \
	VMOVUPS Z11, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z12, (DX); \
	VMOVUPS Z13, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z14, (DX); \
	VMOVUPS Z15, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z16, (DX); \
	VMOVUPS Z17, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z18, (DX); \
	VMOVUPS Z19, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z20, (DX); \
	VMOVUPS Z21, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z22, (DX); \
	VMOVUPS Z23, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z24, (DX); \
	VMOVUPS Z25, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z26, (DX); \
	VMOVUPS Z27, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z28, (DX); \
	VMOVUPS Z29, 64(DX); \
	ADDQ R8, DX; \
	VMOVUPS Z30, (DX); \
	VMOVUPS Z31, 64(DX); \
	VZEROUPPER; \
	RET; \
accum512: \
	VBROADCASTSS beta+44(FP), Z1; \
	VFMADD231PS (DX), Z1, Z8; \
	VFMADD231PS 64(DX), Z1, Z9; \
	VMOVUPS Z8, (DX); \
	VMOVUPS Z9, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z10; \
	VFMADD231PS 64(DX), Z1, Z11; \
	VMOVUPS Z10, (DX); \
	VMOVUPS Z11, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z12; \
	VFMADD231PS 64(DX), Z1, Z13; \
	VMOVUPS Z12, (DX); \
	VMOVUPS Z13, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z14; \
	VFMADD231PS 64(DX), Z1, Z15; \
	VMOVUPS Z14, (DX); \
	VMOVUPS Z15, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z16; \
	VFMADD231PS 64(DX), Z1, Z17; \
	VMOVUPS Z16, (DX); \
	VMOVUPS Z17, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z18; \
	VFMADD231PS 64(DX), Z1, Z19; \
	VMOVUPS Z18, (DX); \
	VMOVUPS Z19, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z20; \
	VFMADD231PS 64(DX), Z1, Z21; \
	VMOVUPS Z20, (DX); \
	VMOVUPS Z21, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z22; \
	VFMADD231PS 64(DX), Z1, Z23; \
	VMOVUPS Z22, (DX); \
	VMOVUPS Z23, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z24; \
	VFMADD231PS 64(DX), Z1, Z25; \
	VMOVUPS Z24, (DX); \
	VMOVUPS Z25, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z26; \
	VFMADD231PS 64(DX), Z1, Z27; \
	VMOVUPS Z26, (DX); \
	VMOVUPS Z27, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z28; \
	VFMADD231PS 64(DX), Z1, Z29; \
	VMOVUPS Z28, (DX); \
	VMOVUPS Z29, 64(DX); \
	ADDQ R8, DX; \
	VFMADD231PS (DX), Z1, Z30; \
	VFMADD231PS 64(DX), Z1, Z31; \
	VMOVUPS Z30, (DX); \
	VMOVUPS Z31, 64(DX); \
	VZEROUPPER; \
	RET
