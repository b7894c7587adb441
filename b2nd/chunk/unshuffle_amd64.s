#include "textflag.h"

// Byte-plane unshuffle kernels (SSE2, which every amd64 CPU has): each
// iteration reads 16 bytes of every plane and writes the 16 elements they
// make, by interleaving bytes, then 16-bit pairs, then 32-bit quads (the
// transpose c-blosc2's SSE2 unshuffle does). n counts elements, a multiple
// of 16; the planes are read from their first byte.

// func unshuffle8SSE2(dst *byte, planes *[8]*byte, n int)
TEXT ·unshuffle8SSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ planes+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ 0(SI), R8
	MOVQ 8(SI), R9
	MOVQ 16(SI), R10
	MOVQ 24(SI), R11
	MOVQ 32(SI), R12
	MOVQ 40(SI), R13
	MOVQ 48(SI), AX
	MOVQ 56(SI), BX
	XORQ DX, DX

loop8:
	CMPQ DX, CX
	JAE  done8
	MOVOU (R8)(DX*1), X0
	MOVOU (R9)(DX*1), X1
	MOVOU (R10)(DX*1), X2
	MOVOU (R11)(DX*1), X3
	MOVOU (R12)(DX*1), X4
	MOVOU (R13)(DX*1), X5
	MOVOU (AX)(DX*1), X6
	MOVOU (BX)(DX*1), X7

	// Bytes of planes 0|1, 2|3, 4|5, 6|7: elements 0-7 (lo), 8-15 (hi).
	MOVO      X0, X8
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X8
	MOVO      X2, X9
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X9
	MOVO      X4, X10
	PUNPCKLBW X5, X4
	PUNPCKHBW X5, X10
	MOVO      X6, X11
	PUNPCKLBW X7, X6
	PUNPCKHBW X7, X11

	// 16-bit pairs: bytes 0-3 and 4-7 of elements 0-3, 4-7, 8-11, 12-15.
	MOVO      X0, X1
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X1
	MOVO      X8, X3
	PUNPCKLWL X9, X8
	PUNPCKHWL X9, X3
	MOVO      X4, X5
	PUNPCKLWL X6, X4
	PUNPCKHWL X6, X5
	MOVO      X10, X7
	PUNPCKLWL X11, X10
	PUNPCKHWL X11, X7

	// 32-bit quads: whole elements, two per register.
	MOVO      X0, X12
	PUNPCKLLQ X4, X0
	PUNPCKHLQ X4, X12
	MOVOU     X0, 0(DI)
	MOVOU     X12, 16(DI)
	MOVO      X1, X12
	PUNPCKLLQ X5, X1
	PUNPCKHLQ X5, X12
	MOVOU     X1, 32(DI)
	MOVOU     X12, 48(DI)
	MOVO      X8, X12
	PUNPCKLLQ X10, X8
	PUNPCKHLQ X10, X12
	MOVOU     X8, 64(DI)
	MOVOU     X12, 80(DI)
	MOVO      X3, X12
	PUNPCKLLQ X7, X3
	PUNPCKHLQ X7, X12
	MOVOU     X3, 96(DI)
	MOVOU     X12, 112(DI)

	ADDQ $128, DI
	ADDQ $16, DX
	JMP  loop8

done8:
	RET

// func unshuffle4SSE2(dst *byte, planes *[4]*byte, n int)
TEXT ·unshuffle4SSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ planes+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ 0(SI), R8
	MOVQ 8(SI), R9
	MOVQ 16(SI), R10
	MOVQ 24(SI), R11
	XORQ DX, DX

loop4:
	CMPQ DX, CX
	JAE  done4
	MOVOU (R8)(DX*1), X0
	MOVOU (R9)(DX*1), X1
	MOVOU (R10)(DX*1), X2
	MOVOU (R11)(DX*1), X3
	MOVO      X0, X4
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X4
	MOVO      X2, X5
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X5
	MOVO      X0, X6
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X6
	MOVO      X4, X7
	PUNPCKLWL X5, X4
	PUNPCKHWL X5, X7
	MOVOU     X0, 0(DI)
	MOVOU     X6, 16(DI)
	MOVOU     X4, 32(DI)
	MOVOU     X7, 48(DI)
	ADDQ $64, DI
	ADDQ $16, DX
	JMP  loop4

done4:
	RET

// func unshuffle2SSE2(dst *byte, planes *[2]*byte, n int)
TEXT ·unshuffle2SSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ planes+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ 0(SI), R8
	MOVQ 8(SI), R9
	XORQ DX, DX

loop2:
	CMPQ DX, CX
	JAE  done2
	MOVOU (R8)(DX*1), X0
	MOVOU (R9)(DX*1), X1
	MOVO      X0, X2
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X2
	MOVOU     X0, 0(DI)
	MOVOU     X2, 16(DI)
	ADDQ $32, DI
	ADDQ $16, DX
	JMP  loop2

done2:
	RET

// func unshuffle8NT(dst *byte, planes *[8]*byte, n int)
TEXT ·unshuffle8NT(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ planes+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ 0(SI), R8
	MOVQ 8(SI), R9
	MOVQ 16(SI), R10
	MOVQ 24(SI), R11
	MOVQ 32(SI), R12
	MOVQ 40(SI), R13
	MOVQ 48(SI), AX
	MOVQ 56(SI), BX
	XORQ DX, DX

loop8nt:
	CMPQ DX, CX
	JAE  done8nt
	MOVOU (R8)(DX*1), X0
	MOVOU (R9)(DX*1), X1
	MOVOU (R10)(DX*1), X2
	MOVOU (R11)(DX*1), X3
	MOVOU (R12)(DX*1), X4
	MOVOU (R13)(DX*1), X5
	MOVOU (AX)(DX*1), X6
	MOVOU (BX)(DX*1), X7

	// Bytes of planes 0|1, 2|3, 4|5, 6|7: elements 0-7 (lo), 8-15 (hi).
	MOVO      X0, X8
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X8
	MOVO      X2, X9
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X9
	MOVO      X4, X10
	PUNPCKLBW X5, X4
	PUNPCKHBW X5, X10
	MOVO      X6, X11
	PUNPCKLBW X7, X6
	PUNPCKHBW X7, X11

	// 16-bit pairs: bytes 0-3 and 4-7 of elements 0-3, 4-7, 8-11, 12-15.
	MOVO      X0, X1
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X1
	MOVO      X8, X3
	PUNPCKLWL X9, X8
	PUNPCKHWL X9, X3
	MOVO      X4, X5
	PUNPCKLWL X6, X4
	PUNPCKHWL X6, X5
	MOVO      X10, X7
	PUNPCKLWL X11, X10
	PUNPCKHWL X11, X7

	// 32-bit quads: whole elements, two per register.
	MOVO      X0, X12
	PUNPCKLLQ X4, X0
	PUNPCKHLQ X4, X12
	MOVNTO    X0, 0(DI)
	MOVNTO    X12, 16(DI)
	MOVO      X1, X12
	PUNPCKLLQ X5, X1
	PUNPCKHLQ X5, X12
	MOVNTO    X1, 32(DI)
	MOVNTO    X12, 48(DI)
	MOVO      X8, X12
	PUNPCKLLQ X10, X8
	PUNPCKHLQ X10, X12
	MOVNTO    X8, 64(DI)
	MOVNTO    X12, 80(DI)
	MOVO      X3, X12
	PUNPCKLLQ X7, X3
	PUNPCKHLQ X7, X12
	MOVNTO    X3, 96(DI)
	MOVNTO    X12, 112(DI)

	ADDQ $128, DI
	ADDQ $16, DX
	JMP  loop8nt

done8nt:
	SFENCE
	RET

