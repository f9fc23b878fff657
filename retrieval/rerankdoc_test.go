package retrieval_test

import (
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// rerank_doc mixes the chunk's document's score in the document ranking,
// relative to the ranking's first, into the rerank score: weight 0 changes
// no bit; a chunk of the better document overtakes one with more BM25; a
// chunk whose document is not ranked gets only the scaled score; the
// arithmetic is the documented (1 - v) * score + v * (doc / doc_max).
func TestRerankDoc(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	chunks := []retrieval.Scored{
		{Chunk: cordontype.Chunk{ChunkID: "a", DocID: "d1", Text: "payment hold"}, BM25: f(4)},
		{Chunk: cordontype.Chunk{ChunkID: "b", DocID: "d2", Text: "payment hold"}, BM25: f(3)},
		{Chunk: cordontype.Chunk{ChunkID: "c", DocID: "d3", Text: "payment hold"}, BM25: f(2)},
	}
	docs := []retrieval.DocHit{{DocID: "d2", Score: 6}, {DocID: "d1", Score: 1.5}}
	in := retrieval.RerankInput{Terms: []string{"payment", "hold"}, BM25Max: 4, Depth: 10, Kind: retrieval.RerankOverlap, Blend: 0.9}
	plain := retrieval.Rerank(chunks, in)
	if plain[0].Chunk.ChunkID != "a" {
		t.Fatalf("without document evidence the first is %s, want a", plain[0].Chunk.ChunkID)
	}
	zero := in
	zero.Docs = docs
	for i, s := range retrieval.Rerank(chunks, zero) {
		if *s.Rerank != *plain[i].Rerank || s.Chunk.ChunkID != plain[i].Chunk.ChunkID {
			t.Fatalf("weight 0 changed chunk %d: %v, want %v", i, *s.Rerank, *plain[i].Rerank)
		}
	}
	v := 0.3
	with := in
	with.Doc, with.Docs = v, docs
	got := retrieval.Rerank(chunks, with)
	if got[0].Chunk.ChunkID != "b" {
		t.Fatalf("with document evidence the first is %s, want b (the best document's)", got[0].Chunk.ChunkID)
	}
	share := map[string]float64{"d2": 1, "d1": 1.5 / 6.0} // each score over the first, 6
	want := map[string]float64{}
	for _, s := range plain {
		t1 := float64(float64(1.0-v) * *s.Rerank)
		t2 := float64(v * share[s.Chunk.DocID])
		want[s.Chunk.ChunkID] = float64(t1 + t2)
	}
	for _, s := range got {
		if *s.Rerank != want[s.Chunk.ChunkID] {
			t.Errorf("chunk %s: rerank %v, want %v", s.Chunk.ChunkID, *s.Rerank, want[s.Chunk.ChunkID])
		}
	}
	// An empty document ranking scales every score alike.
	empty := with
	empty.Docs = []retrieval.DocHit{}
	for i, s := range retrieval.Rerank(chunks, empty) {
		if s.Chunk.ChunkID != plain[i].Chunk.ChunkID || *s.Rerank != float64(float64(1.0-v)**plain[i].Rerank) {
			t.Fatalf("empty document ranking: chunk %d %s %v, want %s scaled", i, s.Chunk.ChunkID, *s.Rerank, plain[i].Chunk.ChunkID)
		}
	}
}

// Through the tail: rerank_doc reads the document ranking only when the
// policy weighs it (rrf_weights.doc > 0); otherwise the result is bit for
// bit the one without it.
func TestRerankDocTail(t *testing.T) {
	chunk := func(id, doc string) cordontype.Chunk {
		return cordontype.Chunk{ChunkID: id, DocID: doc, Text: "payment hold " + id}
	}
	rk := retrieval.Rankings{
		Lexical: []retrieval.Hit{{Chunk: chunk("a", "d1"), Score: 4}, {Chunk: chunk("b", "d2"), Score: 3}},
		Dense:   []retrieval.Hit{{Chunk: chunk("b", "d2"), Score: 0.5}},
		IDF:     []float64{1, 1},
		Docs:    []retrieval.DocHit{{DocID: "d2", Score: 6}, {DocID: "d1", Score: 1}},
	}
	terms := []string{"payment", "hold"}
	for _, tt := range []struct {
		name    string
		doc     float64
		changes bool
	}{
		{"document ranking weighed", 1, true},
		{"document ranking not weighed", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := retrieval.ServicePolicy()
			p.RRFWeights.Doc, p.RerankDoc = tt.doc, 0
			off := retrieval.Tail(rk, terms, nil, p)
			p.RerankDoc = 0.5
			on := retrieval.Tail(rk, terms, nil, p)
			same := len(on.Chunks) == len(off.Chunks)
			for i := range on.Chunks {
				same = same && *on.Chunks[i].Rerank == *off.Chunks[i].Rerank
			}
			if same == tt.changes {
				t.Fatalf("rerank_doc 0.5 with rrf_weights.doc %v: changed %v, want %v", tt.doc, !same, tt.changes)
			}
		})
	}
}
