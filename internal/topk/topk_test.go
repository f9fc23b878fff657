package topk

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOffer: after any stream, the heap holds the k best scores (ties
// included as values) and its root is the k-th best, against a sort.
func TestOffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 7))
	for trial := range 500 {
		k := 1 + rng.IntN(10)
		var h, all []float64
		for range rng.IntN(60) {
			v := float64(rng.IntN(12)) // ties
			h = Offer(h, k, v)
			all = append(all, v)
		}
		slices.SortFunc(all, func(a, b float64) int { return cmp.Compare(b, a) })
		want := all[:min(k, len(all))]
		got := slices.Clone(h)
		slices.SortFunc(got, func(a, b float64) int { return cmp.Compare(b, a) })
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d, k %d: kept %v, want %v", trial, k, got, want)
		}
		if len(h) > 0 && h[0] != want[len(want)-1] {
			t.Fatalf("trial %d, k %d: root %v, want the k-th best %v", trial, k, h[0], want[len(want)-1])
		}
	}
}
