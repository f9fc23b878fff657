#include "textflag.h"

// func dot4Asm(a *int32, c0, c1, c2, c3 *int8, w *[4]int32, n int)
// a[i] += w[0]*c0[i] + w[1]*c1[i] + w[2]*c2[i] + w[3]*c3[i] for i < n,
// 8 slots at a time (AVX2; n is a multiple of 8).
TEXT ·dot4Asm(SB), NOSPLIT, $0-56
	MOVQ a+0(FP), DI
	MOVQ c0+8(FP), R8
	MOVQ c1+16(FP), R9
	MOVQ c2+24(FP), R10
	MOVQ c3+32(FP), R11
	MOVQ w+40(FP), AX
	MOVQ n+48(FP), CX
	VPBROADCASTD 0(AX), Y0
	VPBROADCASTD 4(AX), Y1
	VPBROADCASTD 8(AX), Y2
	VPBROADCASTD 12(AX), Y3
	XORQ SI, SI

loop:
	CMPQ SI, CX
	JGE  done
	VPMOVSXBD (R8)(SI*1), Y4
	VPMULLD   Y0, Y4, Y4
	VPMOVSXBD (R9)(SI*1), Y5
	VPMULLD   Y1, Y5, Y5
	VPADDD    Y5, Y4, Y4
	VPMOVSXBD (R10)(SI*1), Y6
	VPMULLD   Y2, Y6, Y6
	VPMOVSXBD (R11)(SI*1), Y7
	VPMULLD   Y3, Y7, Y7
	VPADDD    Y7, Y6, Y6
	VPADDD    Y6, Y4, Y4
	VPADDD    (DI)(SI*4), Y4, Y4
	VMOVDQU   Y4, (DI)(SI*4)
	ADDQ      $8, SI
	JMP       loop

done:
	VZEROUPPER
	RET

// func posAsm(a *int32, pos *uint64, words int)
// pos[g] bit b = a[64g+b] > 0, for g < words (AVX2).
TEXT ·posAsm(SB), NOSPLIT, $0-24
	MOVQ  a+0(FP), SI
	MOVQ  pos+8(FP), DI
	MOVQ  words+16(FP), CX
	VPXOR Y0, Y0, Y0

word:
	TESTQ CX, CX
	JZ    end
	VMOVDQU   0(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, DX
	VMOVDQU   32(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $8, AX
	ORQ       AX, DX
	VMOVDQU   64(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $16, AX
	ORQ       AX, DX
	VMOVDQU   96(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $24, AX
	ORQ       AX, DX
	VMOVDQU   128(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $32, AX
	ORQ       AX, DX
	VMOVDQU   160(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $40, AX
	ORQ       AX, DX
	VMOVDQU   192(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $48, AX
	ORQ       AX, DX
	VMOVDQU   224(SI), Y1
	VPCMPGTD  Y0, Y1, Y1
	VMOVMSKPS Y1, AX
	SHLQ      $56, AX
	ORQ       AX, DX
	MOVQ      DX, (DI)
	ADDQ      $256, SI
	ADDQ      $8, DI
	DECQ      CX
	JMP       word

end:
	VZEROUPPER
	RET
