package memindex

import "golang.org/x/sys/cpu"

var haveAsm = cpu.X86.HasAVX2

// dot4Asm adds to a[:n] the four columns' values weighted by w; n is a
// multiple of 8.
//
//go:noescape
func dot4Asm(a *int32, c0, c1, c2, c3 *int8, w *[4]int32, n int)

// posAsm sets pos[:words] to the positive bits of a[:64*words].
//
//go:noescape
func posAsm(a *int32, pos *uint64, words int)

// candAsm sets cand[:words] to the bits of the slots of a[:64*words] whose
// dot product is not below the bar (k: qnorm, floor, margin) of norm.
//
//go:noescape
func candAsm(a *int32, norm *float64, k *[3]float64, cand *uint64, words int)

// staleAsm sets stale[:words] to the bits of the slots of asOf[:64*words]
// older than k[0] (now) less k[1] (maxStale).
//
//go:noescape
func staleAsm(asOf *int64, k *[2]int64, stale *uint64, words int)
