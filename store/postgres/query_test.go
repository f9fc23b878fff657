package postgres

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopWithTies holds topWithTies to its definition, computed by sorting
// all scores, on random inputs with many ties.
func TestTopWithTies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		n, k := r.IntN(60), r.IntN(12)-1
		c := make([]candidate, n)
		for i := range c {
			c[i] = candidate{id: int64(i), score: float64(r.IntN(8)) / 4}
		}
		scores := make([]float64, n)
		for i, x := range c {
			scores[i] = x.score
		}
		slices.Sort(scores)
		var want []int64
		for _, x := range c {
			if k > 0 && (n <= k || x.score >= scores[n-k]) {
				want = append(want, x.id)
			}
		}
		var got []int64
		for _, x := range topWithTies(slices.Clone(c), k) {
			got = append(got, x.id)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (n %d, k %d): got %v, want %v", trial, n, k, got, want)
		}
	}
}

// TestQueryPostingsChunks: the distinct chunk ids of a query's postings,
// ascending, through the bitmap (a narrow id range) and through sorting
// (a wide one).
func TestQueryPostingsChunks(t *testing.T) {
	tests := []struct {
		name string
		runs [][]postingList
		want []int64
	}{
		{name: "none", runs: [][]postingList{nil, {}}, want: nil},
		{name: "narrow range", runs: [][]postingList{
			{{chunks: []int64{5, 9, 70}}, {chunks: []int64{1, 9}}},
			{{chunks: []int64{64, 65, 70, 128}}},
		}, want: []int64{1, 5, 9, 64, 65, 70, 128}},
		{name: "wide range", runs: [][]postingList{
			{{chunks: []int64{3, 1 << 40}}},
			{{chunks: []int64{2, 3, 1 << 50}}, {chunks: []int64{7}}},
		}, want: []int64{2, 3, 7, 1 << 40, 1 << 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (queryPostings{runs: tt.runs}).chunks(); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestKeepTop: candidates passed one by one through a topKeeper leave
// exactly the list topWithTies makes of all of them, on random inputs with
// many ties and with none, and the keeper's list stays a few k long.
func TestKeepTop(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for trial := range 400 {
		n, k := r.IntN(3000), r.IntN(60)-1
		levels := 1 + r.IntN(50)
		if trial%4 == 0 {
			levels = 1 << 30 // ties are rare
		}
		all := make([]candidate, n)
		var keeper topKeeper
		longest := 0
		for i := range all {
			all[i] = candidate{id: int64(i), score: float64(r.IntN(levels))}
			keeper.add(all[i], k)
			longest = max(longest, len(keeper.kept))
		}
		kept := keeper.kept
		ids := func(c []candidate) []int64 {
			out := make([]int64, len(c))
			for i, x := range c {
				out[i] = x.id
			}
			slices.Sort(out)
			return out
		}
		want := ids(topWithTies(slices.Clone(all), k))
		if got := ids(topWithTies(kept, k)); !slices.Equal(got, want) {
			t.Fatalf("trial %d (n %d, k %d, %d levels): kept %v, want %v", trial, n, k, levels, got, want)
		}
		if levels == 1<<30 && longest > 16*max(k, 1)+8 {
			t.Fatalf("trial %d: the keeper's list grew to %d for k %d", trial, longest, k)
		}
	}
}
