package retrieval

import (
	"context"
	"fmt"
	"slices"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/fusion"
)

// Result is one retrieval's answer.
type Result struct {
	Chunks                []Scored
	Considered            int
	ExcludedByEntitlement int
	ExcludedByFreshness   int
	// Degraded names the stages that were shed ("rerank"); never nil.
	Degraded []string
}

// Scored is a returned chunk with how its place was earned: each side's score
// and 1-based rank (nil when the chunk was not in that truncated ranking), the
// fused RRF score, and the rerank overlap (nil when rerank was shed).
type Scored struct {
	Chunk      cordontype.Chunk
	BM25       *float64
	BM25Rank   *int
	Cosine     *float64
	CosineRank *int
	Fused      float64
	Rerank     *float64
}

// Retriever runs the retrieve pipeline over a Store.
type Retriever struct {
	store Store
}

// New returns a Retriever over store.
func New(store Store) *Retriever { return &Retriever{store: store} }

// Query is one retrieval's input. The principal must come from an
// authenticated source, never from the request body of an untrusted caller.
type Query struct {
	Principal cordontype.Principal
	Text      string
	NowTick   int64
	Policy    Policy
}

// Retrieve runs SPEC section 5 for q. Invalid input returns an error wrapping
// [cordontype.ErrInvalid] or [ErrInvalidPolicy]; nothing is ranked.
func (r *Retriever) Retrieve(ctx context.Context, q Query) (Result, error) {
	if err := q.Principal.Validate(); err != nil {
		return Result{}, err
	}
	if err := cordontype.ValidateTick("now_tick", q.NowTick); err != nil {
		return Result{}, err
	}
	if err := q.Policy.Validate(); err != nil {
		return Result{}, err
	}
	tokens := analysis.Tokenize(q.Text)
	terms := distinct(tokens)
	rk, err := r.store.Rank(ctx, RankRequest{
		Principal:     q.Principal,
		Tokens:        tokens,
		Terms:         terms,
		NowTick:       q.NowTick,
		MaxStaleTicks: q.Policy.MaxStaleTicks,
		TopN:          q.Policy.TopN,
	})
	if err != nil {
		return Result{}, fmt.Errorf("rank: %w", err)
	}
	res := Result{
		Considered:            rk.Considered,
		ExcludedByEntitlement: rk.ExcludedByEntitlement,
		ExcludedByFreshness:   rk.ExcludedByFreshness,
		Degraded:              []string{},
	}
	res.Chunks = Fuse(rk, q.Policy.RRFK)
	if q.Policy.EnableRerank {
		res.Chunks = Rerank(res.Chunks, terms, q.Policy.RerankDepth, q.Policy.MinScore)
	} else {
		res.Degraded = append(res.Degraded, DegradedRerank)
	}
	if len(res.Chunks) > q.Policy.Limit {
		res.Chunks = res.Chunks[:q.Policy.Limit]
	}
	return res, nil
}

// Fuse turns a store's rankings into fused chunks with their per-side scores
// and ranks, in fused order. Empty rankings are dropped before fusion.
func Fuse(rk Rankings, k int64) []Scored {
	byID := make(map[string]*Scored)
	var lists [][]string
	side := func(hits []Hit, lexical bool) {
		if len(hits) == 0 {
			return
		}
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.Chunk.ChunkID
			s, ok := byID[h.Chunk.ChunkID]
			if !ok {
				s = &Scored{Chunk: h.Chunk}
				byID[h.Chunk.ChunkID] = s
			}
			score, rank := h.Score, i+1
			if lexical {
				s.BM25, s.BM25Rank = &score, &rank
			} else {
				s.Cosine, s.CosineRank = &score, &rank
			}
		}
		lists = append(lists, ids)
	}
	side(rk.Lexical, true)
	side(rk.Dense, false)
	fused := fusion.RRF(lists, k)
	out := make([]Scored, len(fused))
	for i, f := range fused {
		out[i] = *byID[f.ChunkID]
		out[i].Fused = f.Score
	}
	return out
}

// Rerank scores the first depth fused chunks by the share of the query's
// distinct terms each contains, keeps those with overlap > 0 and overlap >=
// minScore (the relevance floor: "nothing relevant" stays empty), and
// stable-sorts them by overlap descending. Chunks beyond depth are dropped.
func Rerank(in []Scored, terms []string, depth int, minScore float64) []Scored {
	if len(in) > depth {
		in = in[:depth]
	}
	out := make([]Scored, 0, len(in))
	for _, s := range in {
		ov := Overlap(terms, analysis.TokenSet(s.Chunk.Text))
		if ov > 0 && ov >= minScore {
			s.Rerank = &ov
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b Scored) int {
		switch {
		case *a.Rerank > *b.Rerank:
			return -1
		case *a.Rerank < *b.Rerank:
			return 1
		}
		return 0
	})
	return out
}

// Overlap is |set(query) ∩ set(chunk)| / |set(query)|, 0 for a query with no
// terms. Both arguments are distinct token lists.
func Overlap(query, chunk []string) float64 {
	if len(query) == 0 {
		return 0
	}
	have := make(map[string]struct{}, len(chunk))
	for _, t := range chunk {
		have[t] = struct{}{}
	}
	n := 0
	for _, t := range query {
		if _, ok := have[t]; ok {
			n++
		}
	}
	return float64(n) / float64(len(query))
}

func distinct(tokens []string) []string {
	seen := make(map[string]struct{}, len(tokens))
	out := make([]string, 0, len(tokens))
	for _, t := range tokens {
		if _, ok := seen[t]; !ok {
			seen[t] = struct{}{}
			out = append(out, t)
		}
	}
	return out
}
