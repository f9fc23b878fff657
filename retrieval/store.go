package retrieval

import (
	"context"

	"github.com/cordon-rag/cordon/cordontype"
)

// Store is what the retriever needs from an index: the principal's filtered,
// truncated rankings. The in-memory store and the Postgres store satisfy it.
type Store interface {
	Rank(ctx context.Context, req RankRequest) (Rankings, error)
}

// RankRequest asks a store for the two rankings of one query, already
// pre-filtered for Principal and truncated to TopN (SPEC section 5, steps 1-4).
type RankRequest struct {
	Principal cordontype.Principal
	// Tokens are the query's tokens with repetition (the dense side hashes
	// them); Terms are the distinct tokens in order of first occurrence (the
	// BM25 summation order).
	Tokens        []string
	Terms         []string
	NowTick       int64
	MaxStaleTicks *int64
	TopN          int
}

// Hit is one chunk in a ranking with its score. Chunk carries the text.
type Hit struct {
	Chunk cordontype.Chunk
	Score float64
}

// Rankings are a store's answer: each ranking filtered and truncated, best
// first, plus the funnel counters of SPEC section 5.
type Rankings struct {
	Lexical []Hit
	Dense   []Hit
	// IDF holds idf(t) of each of the request's Terms (same index) under the
	// principal's statistics scope, for the idf_overlap reranker; nil or
	// all zero when the scope holds no chunk.
	IDF                   []float64
	Considered            int
	ExcludedByEntitlement int
	ExcludedByFreshness   int
}
