package retrieval

// ScoredJSON is a retrieved chunk on the wire, fields in SPEC section 9's
// order: its citation span and how its place was earned. The HTTP API's
// results ([Scored.JSON] with text) add the chunk's Digest and Text; replay
// output and `cordon-lab eval` leave both out. Both are never empty where they
// are given (a digest is 64 hex digits, a stored chunk has at least one
// token), so omitempty drops exactly the two fields a replay line does not
// carry.
type ScoredJSON struct {
	ChunkID string `json:"chunk_id"`
	// Digest pins the chunk's text and citation ([cordontype.Chunk.Digest]);
	// ground and assemble take it back to refuse a chunk that has changed
	// since.
	Digest     string   `json:"digest,omitempty"`
	DocID      string   `json:"doc_id"`
	Section    string   `json:"section"`
	Text       string   `json:"text,omitempty"`
	StartChar  int      `json:"start_char"`
	EndChar    int      `json:"end_char"`
	BM25       *float64 `json:"bm25"`
	BM25Rank   *int     `json:"bm25_rank"`
	Cosine     *float64 `json:"cosine"`
	CosineRank *int     `json:"cosine_rank"`
	Fused      float64  `json:"fused"`
	Rerank     *float64 `json:"rerank"`
	// DocRank is the chunk's document's rank in the document ranking,
	// given only when the policy weighs that ranking and the document is
	// in it, so a line of a policy without it is unchanged.
	DocRank *int `json:"doc_rank,omitempty"`
}

// JSON is s on the wire; withText adds the chunk's digest and text.
func (s Scored) JSON(withText bool) ScoredJSON {
	c := s.Chunk
	out := ScoredJSON{
		ChunkID: c.ChunkID, DocID: c.DocID, Section: c.Section, StartChar: c.StartChar, EndChar: c.EndChar,
		BM25: s.BM25, BM25Rank: s.BM25Rank, Cosine: s.Cosine, CosineRank: s.CosineRank, Fused: s.Fused, Rerank: s.Rerank,
		DocRank: s.DocRank,
	}
	if withText {
		out.Digest, out.Text = c.Digest(), c.Text
	}
	return out
}
