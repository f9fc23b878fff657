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

// func candAsm(a *int32, norm *float64, k *[3]float64, cand *uint64, words int)
// cand[g] bit b = !(float64(a[i]) < k[0]*norm[i]*k[1]*k[2]), i = 64g+b,
// the products taken as (k[1]*(k[0]*norm[i]))*k[2], for g < words (AVX2).
TEXT ·candAsm(SB), NOSPLIT, $0-40
	MOVQ         a+0(FP), SI
	MOVQ         norm+8(FP), DX
	MOVQ         k+16(FP), AX
	MOVQ         cand+24(FP), DI
	MOVQ         words+32(FP), R8
	VBROADCASTSD 0(AX), Y10
	VBROADCASTSD 8(AX), Y11
	VBROADCASTSD 16(AX), Y12

cword:
	TESTQ R8, R8
	JZ    cend
	XORQ  R9, R9
	XORQ  CX, CX

cquad:
	VCVTDQ2PD (SI), Y1
	VMULPD    (DX), Y10, Y2
	VMULPD    Y2, Y11, Y2
	VMULPD    Y12, Y2, Y2
	VCMPPD    $5, Y2, Y1, Y3
	VMOVMSKPD Y3, AX
	SHLQ      CX, AX
	ORQ       AX, R9
	ADDQ      $16, SI
	ADDQ      $32, DX
	ADDQ      $4, CX
	CMPQ      CX, $64
	JLT       cquad
	MOVQ      R9, (DI)
	ADDQ      $8, DI
	DECQ      R8
	JMP       cword

cend:
	VZEROUPPER
	RET

// func staleAsm(asOf *int64, k *[2]int64, stale *uint64, words int)
// stale[g] bit b = k[0]-asOf[64g+b] > k[1] (wrapping subtraction, signed
// comparison), for g < words (AVX2).
TEXT ·staleAsm(SB), NOSPLIT, $0-32
	MOVQ         asOf+0(FP), SI
	MOVQ         k+8(FP), AX
	MOVQ         stale+16(FP), DI
	MOVQ         words+24(FP), R8
	VPBROADCASTQ 0(AX), Y10
	VPBROADCASTQ 8(AX), Y11

sword:
	TESTQ R8, R8
	JZ    send
	XORQ  R9, R9
	XORQ  CX, CX

squad:
	VMOVDQU   (SI), Y1
	VPSUBQ    Y1, Y10, Y1
	VPCMPGTQ  Y11, Y1, Y1
	VMOVMSKPD Y1, AX
	SHLQ      CX, AX
	ORQ       AX, R9
	ADDQ      $32, SI
	ADDQ      $4, CX
	CMPQ      CX, $64
	JLT       squad
	MOVQ      R9, (DI)
	ADDQ      $8, DI
	DECQ      R8
	JMP       sword

send:
	VZEROUPPER
	RET
