package retrieval

import (
	"context"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
)

// Store is what the retriever needs from an index: the principal's filtered,
// truncated rankings, and idf under the principal's statistics scope for
// query expansion. The in-memory stores and the Postgres store satisfy it.
type Store interface {
	Rank(ctx context.Context, req RankRequest) (Rankings, error)
	// IDF returns idf(t) of each of terms (same index) under p's BM25
	// statistics scope (SPEC section 4), the values Rank would use for
	// them; all zero for an unknown tenant or an empty scope.
	IDF(ctx context.Context, p cordontype.Principal, terms []string) ([]float64, error)
}

// VersionedStore is a [Store] whose rankings come from a numbered index
// snapshot (the Postgres store's stats.version): the retriever then ranks
// through RankVersion and reports the version ([Retriever.RetrieveVersion]), so
// an audit record can cite exactly which index answered.
type VersionedStore interface {
	Store
	RankVersion(ctx context.Context, req RankRequest) (Rankings, int64, error)
}

// RankRequest asks a store for the two rankings of one query, already
// pre-filtered for Principal and truncated to TopN (SPEC section 5, steps 1-4).
type RankRequest struct {
	Principal cordontype.Principal
	// Tokens are the query's tokens with repetition (the dense side hashes
	// them); Terms are the distinct tokens in order of first occurrence (the
	// BM25 summation order).
	Tokens []string
	Terms  []string
	// Weights, when not nil, weigh each term's BM25 contribution (same
	// index as Terms): a chunk's score sums float64(w * contribution) in
	// term order. Nil weighs every term 1, which gives the same bits as the
	// unweighted sum. Query expansion weighs its added terms below 1;
	// qtf_k3 weighs the terms a query repeats above 1 ([QueryTermWeights]).
	Weights []float64
	// Combined, when not nil, scores the lexical and document rankings by
	// its groups of terms (SPEC section 4, "Combined terms"; the policy's
	// bm25f) instead of term by term: Weights then weigh nothing. A store
	// applies [Combined.ForTenant] first.
	Combined *Combined
	// IDF is the idf formula the lexical ranking scores with: "" or
	// bm25.IDFPlusOne is SPEC section 4's, bm25.IDFRSJ the
	// Robertson-Spärck Jones weight. Rankings.IDF and [Store.IDF] are
	// SPEC's whatever it is, so the reranker's overlap and its floor keep
	// their meaning.
	IDF bm25.IDFKind
	// Dense is the query's vector under the tenant's embedding model; nil
	// for signed hashing, whose vector the store computes from Tokens (see
	// [RankRequest.QueryVector]).
	Dense *DenseQuery
	// NoDense turns the dense side off: the query vector is the zero
	// vector of the tenant's model, which ranks no chunk and counts none
	// in the funnel (see [RankRequest.QueryVector]).
	NoDense bool
	// Docs asks for the document ranking too (Rankings.Docs): the policy
	// weighs it (rrf_weights.doc > 0).
	Docs          bool
	NowTick       int64
	MaxStaleTicks *int64
	TopN          int
	// LazyTexts lets the store leave its hits' texts packed (Hit.Packed,
	// Chunk.Text empty) for Rankings.Unpack to give: the retriever reads
	// those of the chunks it reranks and returns, a few of the hits. A
	// store may ignore it.
	LazyTexts bool
}

// Weight is the weight of Terms[i]: Weights[i], or 1 when Weights does not
// reach i.
func (r *RankRequest) Weight(i int) float64 { return weightAt(r.Weights, i) }

// Hit is one chunk in a ranking with its score. Chunk carries the text,
// unless the store left it packed (Packed).
type Hit struct {
	Chunk cordontype.Chunk
	Score float64
	// Ref is the store's id of the chunk's stored row (index.PreparedChunk's
	// Ref), for a store whose ranking leaves texts for it to fill; 0
	// otherwise.
	Ref int64
	// Packed, when not empty, is the chunk's text as the store keeps it
	// (RankRequest.LazyTexts): Chunk.Text is then empty, and
	// Rankings.Unpack(Packed) is the text.
	Packed string
}

// Rankings are a store's answer: each ranking filtered and truncated, best
// first, plus the funnel counters of SPEC section 5.
type Rankings struct {
	Lexical []Hit
	Dense   []Hit
	// Stemmed says the tenant indexes stem terms (the English analyzer):
	// only then do the overlap rerankers credit a query word found in
	// another form (stem_weight).
	Stemmed bool
	// IDF holds idf(t) of each of the request's Terms (same index) under the
	// principal's statistics scope, for the idf_overlap reranker; nil or
	// all zero when the scope holds no chunk.
	IDF []float64
	// Docs is the document ranking (SPEC section 5, "Document evidence"):
	// the documents the principal may see (fresh ones under
	// max_stale_ticks) by whole-document BM25, truncated to TopN; nil
	// unless the request asked for it.
	Docs                  []DocHit
	Considered            int
	ExcludedByEntitlement int
	ExcludedByFreshness   int
	// Unpack gives a hit's text from its Packed form; nil when no hit is
	// packed.
	Unpack func(packed string) string
}

// FillTexts gives each of hits that is packed (Hit.Packed) its text.
func (rk Rankings) FillTexts(hits []Hit) {
	for i := range hits {
		if h := &hits[i]; h.Packed != "" {
			h.Chunk.Text, h.Packed = rk.Unpack(h.Packed), ""
		}
	}
}

// fillScored gives each of chunks that is packed its text.
func (rk Rankings) fillScored(chunks []Scored) {
	for i := range chunks {
		if s := &chunks[i]; s.packed != "" {
			s.Chunk.Text, s.packed = rk.Unpack(s.packed), ""
		}
	}
}
