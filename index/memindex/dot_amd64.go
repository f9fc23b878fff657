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
