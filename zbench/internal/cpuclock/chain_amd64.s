#include "textflag.h"

// func addChain(n int)
//
// n ≥ 1 iterations of 32 additions, each depending on the one before
// through AX: 32 cycles per iteration whatever the core's width. The
// register-register form is used because some cores fold an immediate
// addition into the renamer.
#define ADD8 ADDQ BX, AX; ADDQ BX, AX; ADDQ BX, AX; ADDQ BX, AX; ADDQ BX, AX; ADDQ BX, AX; ADDQ BX, AX; ADDQ BX, AX

TEXT ·addChain(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	MOVQ $1, BX
	XORQ AX, AX
loop:
	ADD8
	ADD8
	ADD8
	ADD8
	DECQ CX
	JNZ loop
	RET
