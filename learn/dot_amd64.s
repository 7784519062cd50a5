#include "textflag.h"

// func dotI8AVX2(q *float32, x *int8, n int) float32
//
// The dot product of n float32s at q and n int8s at x, n a multiple of
// 8: each eight int8s sign-extended, converted to float32 and multiplied
// into one of four accumulators (VFMADD231PS), summed at the end.
TEXT ·dotI8AVX2(SB), NOSPLIT, $0-28
	MOVQ q+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop32:
	CMPQ CX, $32
	JL   loop8
	VPMOVSXBD 0(DI), Y4
	VPMOVSXBD 8(DI), Y5
	VPMOVSXBD 16(DI), Y6
	VPMOVSXBD 24(DI), Y7
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD231PS 0(SI), Y4, Y0
	VFMADD231PS 32(SI), Y5, Y1
	VFMADD231PS 64(SI), Y6, Y2
	VFMADD231PS 96(SI), Y7, Y3
	ADDQ $32, DI
	ADDQ $128, SI
	SUBQ $32, CX
	JMP  loop32

loop8:
	CMPQ CX, $8
	JL   done
	VPMOVSXBD 0(DI), Y4
	VCVTDQ2PS Y4, Y4
	VFMADD231PS 0(SI), Y4, Y0
	ADDQ $8, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP  loop8

done:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
