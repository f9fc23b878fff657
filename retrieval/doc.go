// Package retrieval is Cordon's authorized retrieve pipeline (SPEC section 5).
//
// The pipeline, every arrow a decision:
//
//	rank both sides in the principal's tenant only  (Store.Rank)
//	  -> count considered
//	    -> pre-filter each ranking: entitlement, then freshness; count exclusions
//	      -> truncate each to top_n, drop empty rankings
//	        -> reciprocal rank fusion (package fusion)
//	          -> rerank the first rerank_depth with a relevance floor
//	             (query-term overlap, or a model within a latency budget)
//	            -> limit
//
// The first three steps happen inside the store, so that a chunk the principal
// may not see is never a candidate: the Postgres store applies the filter in
// SQL, before any ranked row reaches Go. The rest is pure and shared by every
// store, which is what keeps their results byte-identical.
//
// # Query expansion
//
// With a policy's prf_docs > 0 the retriever ranks twice: terms of the first
// prf_docs chunks of the principal's own lexical ranking (already filtered)
// are valued by their share of those chunks times their idf in the
// principal's statistics scope ([Store.IDF]), and the best are ranked again
// with the query at BM25 weights below 1 ([RankRequest.Weights]). See
// [FeedbackTerms] and [ChooseExpansion]; docs/decisions.md states the
// arithmetic.
//
// # Model reranker
//
// With a model reranker ([WithReranker], package rerank), the policy's
// rerank kind "model" scores the first rerank_depth fused chunks with a
// cross-encoder instead of the query-term overlap: [Retriever.Finish] sends
// the query text and the chunks' texts within the policy's rerank_budget_ms,
// keeps the chunks the model scores >= rerank_min_score, and blends the
// model's score with BM25 as the overlap kinds do. A timeout, an error or
// an open circuit breaker sheds the stage: the result is then exactly the
// one with enable_rerank false, and [Result.Model] says what happened. The
// model call is the one step whose result depends on something outside the
// store; everything around it stays pure ([Tail], [Rerank]), so that the
// same model scores give the same bits.
//
// # Enforcement points
//
//   - Namespace: [RankRequest] names one tenant; a store searches only that
//     tenant's index (the Postgres store, only that tenant's schema).
//   - Entitlement: [Visible] is a conjunction of tenant, classification and
//     barriers. It is applied to each ranking before truncation and fusion, so
//     a hidden chunk cannot take a slot or shift another chunk's rank.
//   - Freshness: a visible chunk older than max_stale_ticks is removed and
//     counted separately, because a freshness spike means ingestion stalled.
package retrieval
