package eval

import (
	"context"

	"github.com/cordon-rag/cordon/cordontype"
)

// ChunkRecord is one indexed chunk as [Chunks] exports it.
type ChunkRecord struct {
	ChunkID string `json:"chunk_id"`
	DocID   string `json:"doc_id"`
	Text    string `json:"text"`
}

// Chunks indexes docs exactly as [Run] does with the same queries and
// options (held-out passages and sections removed, same chunking) and
// returns every stored chunk in indexing order, so another system can index
// the very text Cordon ranks.
func Chunks(ctx context.Context, docs []Document, queries []Query, opts Options) ([]ChunkRecord, error) {
	docs, _, err := applyRemovals(docs, queries)
	if err != nil {
		return nil, err
	}
	var out []ChunkRecord
	_, _, err = build(ctx, docs, opts, func(c cordontype.Chunk) {
		out = append(out, ChunkRecord{ChunkID: c.ChunkID, DocID: c.DocID, Text: c.Text})
	})
	return out, err
}
