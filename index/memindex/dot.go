package memindex

import "math"

// The dense side's kernels. A query's nonzero dimensions are taken four at
// a time; each kernel call adds the four columns' weighted values to a
// block's dot products. When every partial sum of the query provably fits
// an int32 (its weights' absolute values sum to at most
// math.MaxInt32/128, since a column value is at least -128), the
// accumulators are int32 and the kernel may be vectorized: integer sums, so
// the results are the int64 path's exactly.

// dims32 is the query's dimensions in groups of four for the int32
// kernels; the last group is padded with zero weights on the first column.
type dims32 struct {
	cols [][4][]int8
	w    [][4]int32
}

// fitsInt32 reports whether every partial dot product of the query with
// int8 columns fits an int32.
func fitsInt32(dims []dim) bool {
	var sum int64
	for _, d := range dims {
		sum += abs64(d.w)
		if sum > math.MaxInt32/128 {
			return false
		}
	}
	return true
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// group32 groups dims for the int32 kernels.
func group32(dims []dim) dims32 {
	var g dims32
	for i := 0; i < len(dims); i += 4 {
		var c [4][]int8
		var w [4]int32
		for k := range 4 {
			if i+k < len(dims) {
				c[k], w[k] = dims[i+k].col, int32(dims[i+k].w)
			} else {
				c[k] = dims[i].col
			}
		}
		g.cols = append(g.cols, c)
		g.w = append(g.w, w)
	}
	return g
}

// kernelAsm selects the vectorized kernels where the CPU has them; tests
// turn it off to run the portable ones.
var kernelAsm = haveAsm

// kernel32 allows the int32 kernels; tests turn it off to run the int64
// path on every block.
var kernel32 = true

// dotBlock32 sets a to the dot products of the slots [base, end) with the
// query's grouped dimensions.
func dotBlock32(a []int32, g dims32, base, end int) {
	clear(a)
	n := end - base
	vec := 0
	if kernelAsm {
		vec = n &^ 7
	}
	for j, c := range g.cols {
		w := &g.w[j]
		if vec > 0 {
			dot4Asm(&a[0], &c[0][base], &c[1][base], &c[2][base], &c[3][base], w, vec)
		}
		dot4(a[vec:n], c[0][base+vec:end], c[1][base+vec:end], c[2][base+vec:end], c[3][base+vec:end], w)
	}
}

// dot4 adds the four columns' weighted values to a.
func dot4(a []int32, c0, c1, c2, c3 []int8, w *[4]int32) {
	w0, w1, w2, w3 := w[0], w[1], w[2], w[3]
	c0, c1, c2, c3 = c0[:len(a)], c1[:len(a)], c2[:len(a)], c3[:len(a)]
	for i := range a {
		a[i] += w0*int32(c0[i]) + w1*int32(c1[i]) + w2*int32(c2[i]) + w3*int32(c3[i])
	}
}

// posWords32 sets pos[i] to the bits of the positive values among
// a[64i:64i+64].
func posWords32(a []int32, pos []uint64) {
	full := 0
	if kernelAsm {
		full = len(a) / 64
		if full > 0 {
			posAsm(&a[0], &pos[0], full)
		}
	}
	posWords(a[full*64:], pos[full:])
}

// posWords64 is posWords32 for int64 dot products.
func posWords64(a []int64, pos []uint64) { posWords(a, pos) }

// posWords is the portable posWords32 and posWords64.
func posWords[T int32 | int64](a []T, pos []uint64) {
	for g := 0; g*64 < len(a); g++ {
		var p uint64
		for b, v := range a[g*64 : min(g*64+64, len(a))] {
			p |= uint64(b2i(v > 0)) << b
		}
		pos[g] = p
	}
}

// barMargin scales the dense side's bar (see scoreBlock) down for
// rounding.
const barMargin = 1 - 1e-9

// bar is what a dot product must reach for the cosine with a chunk of
// norm to reach floor, less barMargin: below it, the cosine is below
// floor.
func bar(qnorm, floor, norm float64) float64 {
	return floor * float64(qnorm*norm) * barMargin
}

// candWord is the bits of the slots of a (at most 64) whose dot product
// is not below the bar; k is qnorm, floor and barMargin.
func candWord(a []int32, norm []float64, k *[3]float64) uint64 {
	var c uint64
	for b, v := range a {
		c |= uint64(b2i(!(float64(v) < bar(k[0], k[1], norm[b])))) << b
	}
	return c
}

// staleWord is the bits of the slots of asOf (at most 64) older than
// k[0] (now) less k[1] (maxStale).
func staleWord(asOf []int64, k *[2]int64) uint64 {
	var o uint64
	for b, t := range asOf {
		o |= uint64(b2i(k[0]-t > k[1])) << b
	}
	return o
}

// blockMasks sets cand and stale (when the query has a freshness
// contract) for the block of dot products a from slot base, with the
// part's floor so far: a slot outside cand cannot enter the part's top
// list, and one in stale is outdated.
func (st *denseState) blockMasks(a []int32, base int, cand, stale []uint64) {
	x, f := st.x, st.f
	full := len(a) / 64
	kc := [3]float64{st.qnorm, st.floor, barMargin}
	ks := [2]int64{f.now, f.maxStale}
	if full > 0 {
		candAsm(&a[0], &x.norm[base], &kc, &cand[0], full)
		if f.fresh {
			staleAsm(&x.asOf[base], &ks, &stale[0], full)
		}
	}
	if full < len(cand) {
		lo := full * 64
		cand[full] = candWord(a[lo:], x.norm[base+lo:base+len(a)], &kc)
		if f.fresh {
			stale[full] = staleWord(x.asOf[base+lo:base+len(a)], &ks)
		}
	}
}
