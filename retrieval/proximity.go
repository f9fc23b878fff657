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

// blendProximity is the rerank score with phrase proximity (policy
// rerank_proximity w > 0): (1 - w) * score + w * proximity, each step
// rounded (no fused multiply-add).
func blendProximity(score, proximity, w float64) float64 {
	t1 := float64(float64(1.0-w) * score)
	t2 := float64(w * proximity)
	return float64(t1 + t2)
}
