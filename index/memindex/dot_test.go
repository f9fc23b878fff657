package memindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDenseKernels: the int32 kernels, vectorized and portable, give the
// int64 kernel's dot products and positive bits on random columns, at
// every block start and length, with the extreme column values and the
// largest weights fitsInt32 allows.
func TestDenseKernels(t *testing.T) {
	if !haveAsm {
		t.Log("no vectorized kernel on this CPU: only the portable int32 kernel is compared")
	}
	r := rand.New(rand.NewPCG(3, 25))
	const slots = 700
	for round := range 300 {
		ndims := 1 + r.IntN(9)
		var dims []dim
		budget := int64(math.MaxInt32 / 128)
		for d := range ndims {
			col := make([]int8, slots)
			for i := range col {
				switch r.IntN(4) {
				case 0:
					col[i] = int8(-128 + 255*r.IntN(2)) // -128 or 127
				case 1:
					col[i] = 0
				default:
					col[i] = int8(r.IntN(256) - 128)
				}
			}
			var w int64
			switch {
			case round%3 == 0 && d == ndims-1:
				w = budget // the sum of weights at fitsInt32's bound
			case round%3 == 0:
				w = 1 + r.Int64N(budget/int64(ndims))
			default:
				w = 1 + r.Int64N(40)
			}
			budget -= w
			if r.IntN(2) == 0 {
				w = -w
			}
			dims = append(dims, dim{col: col, w: w})
		}
		if !fitsInt32(dims) {
			t.Fatalf("round %d: weights within the bound do not fit", round)
		}
		g := group32(dims)
		base := r.IntN(slots)
		end := base + r.IntN(slots-base+1)
		want := make([]int64, end-base)
		dotBlock(want, dims, base, end)
		wantPos := make([]uint64, (end-base+63)/64)
		posWords64(want, wantPos)
		for _, asm := range []bool{false, true} {
			old := kernelAsm
			kernelAsm = asm && haveAsm
			got := make([]int32, end-base)
			for i := range got {
				got[i] = int32(r.Uint32()) // dotBlock32 must overwrite
			}
			dotBlock32(got, g, base, end)
			gotPos := make([]uint64, len(wantPos))
			posWords32(got, gotPos)
			kernelAsm = old
			name := fmt.Sprintf("round %d, %d dims, slots [%d, %d), vectorized %v", round, ndims, base, end, asm && haveAsm)
			for i := range got {
				if int64(got[i]) != want[i] {
					t.Fatalf("%s: slot %d: %d, want %d", name, base+i, got[i], want[i])
				}
			}
			if !slices.Equal(gotPos, wantPos) {
				t.Fatalf("%s: positive bits %x, want %x", name, gotPos, wantPos)
			}
		}
	}
}

// TestFitsInt32: weights summing past math.MaxInt32/128 do not fit, in
// either sign.
func TestFitsInt32(t *testing.T) {
	for _, c := range []struct {
		w    []int64
		fits bool
	}{
		{[]int64{math.MaxInt32 / 128}, true},
		{[]int64{-math.MaxInt32 / 128}, true},
		{[]int64{math.MaxInt32/128 + 1}, false},
		{[]int64{math.MaxInt32 / 256, -(math.MaxInt32/256 + 2)}, false},
		{[]int64{1 << 24, 1 << 24}, false},
		{nil, true},
	} {
		var dims []dim
		for _, w := range c.w {
			dims = append(dims, dim{w: w})
		}
		if got := fitsInt32(dims); got != c.fits {
			t.Errorf("fitsInt32(%v) = %v, want %v", c.w, got, c.fits)
		}
	}
}

// TestMaskKernels: the vectorized candidate and stale masks equal the
// portable ones, a bit a slot, on random dot products, norms, floors and
// ticks (wrapping subtractions included).
func TestMaskKernels(t *testing.T) {
	if !haveAsm {
		t.Skip("no vectorized kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(4, 25))
	const words = 5
	for round := range 500 {
		a := make([]int32, 64*words)
		norm := make([]float64, len(a))
		asOf := make([]int64, len(a))
		for i := range a {
			a[i] = int32(r.Uint32()) >> r.IntN(32)
			norm[i] = math.Sqrt(float64(1 + r.IntN(1<<20)))
			switch r.IntN(8) {
			case 0:
				asOf[i] = math.MinInt64 + r.Int64N(10)
			case 1:
				asOf[i] = math.MaxInt64 - r.Int64N(10)
			default:
				asOf[i] = r.Int64N(2000) - 500
			}
		}
		// Dot products on the bar of some slots, where rounding decides.
		kc := [3]float64{math.Sqrt(float64(1 + r.IntN(1<<16))), r.Float64(), barMargin}
		for range 40 {
			i := r.IntN(len(a))
			if b := bar(kc[0], kc[1], norm[i]); b < math.MaxInt32 {
				a[i] = int32(math.Ceil(b)) - int32(r.IntN(2))
			}
		}
		ks := [2]int64{r.Int64N(2000) - 500, r.Int64N(1000)}
		if round%7 == 0 {
			ks[0] = math.MaxInt64 - r.Int64N(5)
		}
		cand, stale := make([]uint64, words), make([]uint64, words)
		candAsm(&a[0], &norm[0], &kc, &cand[0], words)
		staleAsm(&asOf[0], &ks, &stale[0], words)
		for g := range words {
			if want := candWord(a[g*64:g*64+64], norm[g*64:], &kc); cand[g] != want {
				t.Fatalf("round %d, word %d: candidates %x, want %x", round, g, cand[g], want)
			}
			if want := staleWord(asOf[g*64:g*64+64], &ks); stale[g] != want {
				t.Fatalf("round %d, word %d: stale %x, want %x", round, g, stale[g], want)
			}
		}
	}
}

// TestListHasAny: listHas and listHasAny agree with a slot-by-slot look
// at random bitmaps shorter than the ranges asked, over ranges within a
// word and across words.
func TestListHasAny(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 25))
	for round := range 2000 {
		b := make([]uint64, r.IntN(5))
		for i := range b {
			for range r.IntN(4) {
				b[i] |= 1 << r.IntN(64)
			}
		}
		has := func(s int32) bool { return int(s>>6) < len(b) && b[s>>6]>>(s&63)&1 != 0 }
		lo := int32(r.IntN(64 * 6))
		hi := lo + int32(r.IntN(150))
		want := false
		for s := lo; s < hi; s++ {
			if listHas(b, s) != has(s) {
				t.Fatalf("round %d: listHas(%x, %d) = %v", round, b, s, !has(s))
			}
			want = want || has(s)
		}
		if got := listHasAny(b, lo, hi); got != want {
			t.Fatalf("round %d: listHasAny(%x, %d, %d) = %v, want %v", round, b, lo, hi, got, want)
		}
	}
}
