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
