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
