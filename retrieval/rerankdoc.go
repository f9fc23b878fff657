package retrieval

// docShares maps each document of a document ranking to its score
// relative to the ranking's first: float64(score / max), the document
// evidence the rerank score mixes in (docs/spec.md, section 5, "Document
// evidence", rerank_doc). An empty ranking gives an empty map. Scores in a
// document ranking are > 0, so max is too.
func docShares(docs []DocHit) map[string]float64 {
	out := make(map[string]float64, len(docs))
	if len(docs) == 0 {
		return out
	}
	top := docs[0].Score
	for _, d := range docs {
		out[d.DocID] = d.Score / top
	}
	return out
}

// blendDoc is the rerank score with document evidence (policy rerank_doc
// v > 0): (1 - v) * score + v * share, share the chunk's document's
// [docShares] (0 when the document is not in the ranking), each step
// rounded (no fused multiply-add).
func blendDoc(score, share, v float64) float64 {
	t1 := float64(float64(1.0-v) * score)
	t2 := float64(v * share)
	return float64(t1 + t2)
}
