//go:build !amd64

package memindex

const haveAsm = false

func dot4Asm(a *int32, c0, c1, c2, c3 *int8, w *[4]int32, n int) {
	panic("memindex: no vectorized kernel on this architecture")
}

func posAsm(a *int32, pos *uint64, words int) {
	panic("memindex: no vectorized kernel on this architecture")
}

func candAsm(a *int32, norm *float64, k *[3]float64, cand *uint64, words int) {
	panic("memindex: no vectorized kernel on this architecture")
}

func staleAsm(asOf *int64, k *[2]int64, stale *uint64, words int) {
	panic("memindex: no vectorized kernel on this architecture")
}
