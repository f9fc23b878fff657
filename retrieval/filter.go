package retrieval

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/cordontype"
)

// Visible is the entitlement predicate: same tenant AND classification within
// clearance AND every barrier label of the chunk held by the principal. It is a
// conjunction; failing any one hides the chunk. Barrier lists are sorted sets
// (see [cordontype.ValidateBarriers]).
func Visible(p cordontype.Principal, c *cordontype.Chunk) bool {
	return c.Tenant == p.Tenant &&
		c.Classification <= p.Clearance &&
		Subset(c.Barriers, p.Barriers)
}

// Stale reports whether a chunk breaks the freshness contract:
// now - as_of_tick > maxStale. Ticks are in [0, 2^62], so the difference
// cannot overflow. A document from the future is never stale.
func Stale(c *cordontype.Chunk, now int64, maxStale *int64) bool {
	return maxStale != nil && now-c.AsOfTick > *maxStale
}

// Subset reports whether every element of sorted set a is in sorted set b
// (barrier lists are sorted sets, see [cordontype.ValidateBarriers]): the
// barrier half of [Visible], shared with the stores that evaluate it in Go.
func Subset(a, b []string) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
		j++
	}
	return true
}

// SortHits orders a ranking by score descending, then chunk id ascending in
// byte order.
func SortHits(h []Hit) {
	slices.SortFunc(h, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Chunk.ChunkID, b.Chunk.ChunkID)
	})
}

// Funnel filters two sorted, unfiltered rankings for req and fills Rankings:
// considered before the filter, exclusions counted once per ranking, each
// ranking truncated to TopN. A store that ranks in Go calls it; a store that
// filters in its database must give the same answer.
func Funnel(req RankRequest, lexical, dense []Hit) Rankings {
	r := Rankings{Considered: len(lexical) + len(dense)}
	r.Lexical = r.filter(req, lexical)
	r.Dense = r.filter(req, dense)
	return r
}

func (r *Rankings) filter(req RankRequest, hits []Hit) []Hit {
	out := make([]Hit, 0, min(len(hits), req.TopN))
	for i := range hits {
		c := &hits[i].Chunk
		switch {
		case !Visible(req.Principal, c):
			r.ExcludedByEntitlement++
		case Stale(c, req.NowTick, req.MaxStaleTicks):
			r.ExcludedByFreshness++
		case len(out) < req.TopN:
			out = append(out, hits[i])
		}
	}
	return out
}
