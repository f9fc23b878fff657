package fusion

import (
	"slices"
	"strings"
)

// DefaultK is the RRF constant of Cormack, Clarke and Büttcher (2009), also the
// default of Azure AI Search and Weaviate: far enough out that ranks beyond ~20
// barely differ.
const DefaultK = 60

// Fused is one chunk's fused score.
type Fused struct {
	ChunkID string
	Score   float64
}

// Contribution is 1 / (k + rank) for a 1-based rank, with k + rank computed
// exactly in integers before the one rounding of the division.
func Contribution(k int64, rank int) float64 {
	return 1 / float64(uint64(k)+uint64(rank))
}

// RRF fuses rankings of chunk ids (each best first, without repeats) with
// constant k >= 1. The result is sorted by fused score descending, then chunk
// id ascending in byte order.
func RRF(rankings [][]string, k int64) []Fused {
	ranks := make(map[string][]int)
	var order []string
	for _, r := range rankings {
		for i, id := range r {
			if _, ok := ranks[id]; !ok {
				order = append(order, id)
			}
			ranks[id] = append(ranks[id], i+1)
		}
	}
	out := make([]Fused, 0, len(order))
	for _, id := range order {
		rs := ranks[id]
		slices.Sort(rs)
		var s float64
		for _, r := range rs {
			s += Contribution(k, r)
		}
		out = append(out, Fused{ChunkID: id, Score: s})
	}
	slices.SortFunc(out, func(a, b Fused) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ChunkID, b.ChunkID)
	})
	return out
}
