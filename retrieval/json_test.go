package retrieval

import (
	"encoding/json"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// TestScoredJSONViews: the one wire type gives the HTTP result (with digest
// and text, in the API's key order) and the replay result (without them)
// byte for byte.
func TestScoredJSONViews(t *testing.T) {
	score, rank := 1.5, 2
	s := Scored{
		Chunk: cordontype.Chunk{ChunkID: "d#0", DocID: "d", Section: "s", Text: "wire cutoff", StartChar: 0, EndChar: 11},
		BM25:  &score, BM25Rank: &rank, Fused: 0.25,
	}
	tests := []struct {
		name     string
		withText bool
		want     string
	}{
		{"http", true, `{"chunk_id":"d#0","digest":"` + s.Chunk.Digest() + `","doc_id":"d","section":"s","text":"wire cutoff","start_char":0,"end_char":11,"bm25":1.5,"bm25_rank":2,"cosine":null,"cosine_rank":null,"fused":0.25,"rerank":null}`},
		{"replay", false, `{"chunk_id":"d#0","doc_id":"d","section":"s","start_char":0,"end_char":11,"bm25":1.5,"bm25_rank":2,"cosine":null,"cosine_rank":null,"fused":0.25,"rerank":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(s.JSON(tt.withText))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
