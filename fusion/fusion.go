package fusion

import (
	"cmp"
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
	return WeightedContribution(1, k, rank)
}

// WeightedContribution is w / (k + rank), k + rank computed exactly in
// integers before the one rounding of the division. With w = 1 it is
// [Contribution] bit for bit.
func WeightedContribution(w float64, k int64, rank int) float64 {
	return w / float64(uint64(k)+uint64(rank))
}

// RRF fuses rankings of chunk ids (each best first, without repeats) with
// constant k >= 1 and every ranking weighted 1. The result is sorted by fused
// score descending, then chunk id ascending in byte order.
func RRF(rankings [][]string, k int64) []Fused {
	return WeightedRRF(rankings, nil, k)
}

// WeightedRRF is [RRF] with a weight per ranking (weights[i] for
// rankings[i]; nil weights all 1): a chunk's fused score is the sum of
// w / (k + rank) over the rankings holding it, added in ascending order of
// (rank, contribution), so the result does not depend on the order of the
// rankings. Weights are finite and >= 0; a chunk of a ranking weighted 0
// stays in the result with that ranking's contribution 0.
func WeightedRRF(rankings [][]string, weights []float64, k int64) []Fused {
	ranked := make([][]Ranked, len(rankings))
	for i, r := range rankings {
		ranked[i] = make([]Ranked, len(r))
		for j, id := range r {
			ranked[i][j] = Ranked{ID: id, Rank: j + 1}
		}
	}
	return WeightedRRFRanked(ranked, weights, k)
}

// Ranked is a chunk id with its 1-based rank in one ranking, for rankings
// in which several chunks share a rank (each chunk of a document takes the
// document's rank in a document ranking).
type Ranked struct {
	ID   string
	Rank int
}

// WeightedRRFRanked is [WeightedRRF] over rankings whose ranks are given:
// each ranking names a chunk at most once, ranks are >= 1 and may repeat
// or skip. With ranks 1, 2, 3, ... in list order it is [WeightedRRF] bit
// for bit.
func WeightedRRFRanked(rankings [][]Ranked, weights []float64, k int64) []Fused {
	// Every contribution, tagged with its chunk's place in order (first
	// seen first), sorted by (chunk, rank, contribution) and summed chunk
	// by chunk: each chunk's sum in ascending (rank, contribution), as the
	// contract says, from one allocation instead of a slice per chunk.
	type part struct {
		at   int // the chunk's index in order
		rank int
		c    float64
	}
	total := 0
	for _, r := range rankings {
		total += len(r)
	}
	at := make(map[string]int, total)
	order := make([]string, 0, total)
	parts := make([]part, 0, total)
	for i, r := range rankings {
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		for _, e := range r {
			j, ok := at[e.ID]
			if !ok {
				j = len(order)
				at[e.ID] = j
				order = append(order, e.ID)
			}
			parts = append(parts, part{at: j, rank: e.Rank, c: WeightedContribution(w, k, e.Rank)})
		}
	}
	slices.SortFunc(parts, func(a, b part) int {
		if a.at != b.at {
			return a.at - b.at
		}
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return cmp.Compare(a.c, b.c)
	})
	out := make([]Fused, len(order))
	for j, id := range order {
		out[j].ChunkID = id
	}
	for _, p := range parts {
		out[p.at].Score += p.c
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
