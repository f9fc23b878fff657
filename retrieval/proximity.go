package retrieval

import "github.com/cordon-rag/cordon/analysis"

// proximity is a chunk's phrase proximity to the query (docs/spec.md,
// section 5, "phrase proximity"): of the query's distinct adjacent token
// pairs, the share the text holds adjacent and in order,
// float64(found) / float64(pairs); 0 when the query has no pair (one token
// or none).
func proximity(m *analysis.PairMatcher, text string) float64 {
	if m.Pairs() == 0 {
		return 0
	}
	return float64(m.Count(text)) / float64(m.Pairs())
}

// mixIn is the rerank score with one more signal x in [0, 1] weighed w > 0
// (phrase proximity under rerank_proximity, document evidence under
// rerank_doc): (1 - w) * score + w * x, each step rounded (no fused
// multiply-add), so every store and platform gives the same bits.
func mixIn(score, x, w float64) float64 {
	t1 := float64(float64(1.0-w) * score)
	t2 := float64(w * x)
	return float64(t1 + t2)
}
