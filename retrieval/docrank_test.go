package retrieval_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// TestRankDocs: whole-document BM25 with the document scope's statistics,
// only rankable documents, ties by doc id, truncated to top_n.
func TestRankDocs(t *testing.T) {
	p := bm25.DefaultParams()
	req := retrieval.RankRequest{Terms: []string{"copy", "remote"}, Weights: []float64{1, 2}, TopN: 10}
	docs := []retrieval.DocEvidence{
		{DocID: "b", Length: 10, TF: []int64{1, 1}, Ranked: true},
		{DocID: "a", Length: 10, TF: []int64{1, 1}, Ranked: true}, // ties with b
		{DocID: "c", Length: 4, TF: []int64{0, 3}, Ranked: true},
		{DocID: "hidden", Length: 2, TF: []int64{5, 5}, Ranked: false},
	}
	sc := retrieval.DocScope{N: 5, SumLen: 40, DF: []int64{3, 4}}
	got := retrieval.RankDocs(&req, docs, sc, p)
	avgdl := 40.0 / 5
	idf0, idf1 := bm25.IDF(5, 3), bm25.IDF(5, 4)
	ab := float64(1*bm25.Term(idf0, 1, 10, avgdl, p)) + float64(2*bm25.Term(idf1, 1, 10, avgdl, p))
	c := 0 + float64(2*bm25.Term(idf1, 3, 4, avgdl, p))
	want := []retrieval.DocHit{{"a", ab}, {"b", ab}, {"c", c}}
	if ab < c {
		want = []retrieval.DocHit{{"c", c}, {"a", ab}, {"b", ab}}
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rank %d: got %v, want %v", i+1, got[i], want[i])
		}
	}
	req.TopN = 1
	if got := retrieval.RankDocs(&req, docs, sc, p); len(got) != 1 || got[0] != want[0] {
		t.Errorf("top_n 1: got %v, want %v", got, want[:1])
	}
	req.IDF = bm25.IDFRSJ
	req.TopN = 10
	for _, d := range retrieval.RankDocs(&req, docs, sc, p) {
		if d.DocID == "hidden" {
			t.Errorf("a document that may not be ranked was ranked: %v", d)
		}
	}
	if got := retrieval.RankDocs(&req, docs, retrieval.DocScope{DF: []int64{0, 0}}, p); len(got) != 0 {
		t.Errorf("an empty scope ranked %v", got)
	}
}

// TestFuseDocuments: a ranked document's lead chunk (its first in the
// fusion of the other rankings) takes the document's rank as a third RRF
// input weighted rrf_weights.doc; its other chunks and chunks of other
// documents take none, and no chunk joins through its document alone.
func TestFuseDocuments(t *testing.T) {
	hit := func(id, doc string, s float64) retrieval.Hit {
		return retrieval.Hit{Chunk: cordontype.Chunk{ChunkID: id, DocID: doc}, Score: s}
	}
	rk := retrieval.Rankings{
		Lexical: []retrieval.Hit{hit("x::0", "x", 3), hit("y::0", "y", 2), hit("x::1", "x", 1)},
		Dense:   []retrieval.Hit{hit("z::0", "z", 0.9)},
		Docs:    []retrieval.DocHit{{"y", 5}, {"x", 4}, {"w", 1}},
	}
	fused := retrieval.Fuse(rk, 60, retrieval.Weights{BM25: 1, Cosine: 1, Doc: 2})
	want := map[string]struct {
		docRank int
		fused   float64
	}{
		"y::0": {1, float64(1.0/62) + float64(2.0/61)},
		"x::0": {2, float64(1.0/61) + float64(2.0/62)},
		"x::1": {0, 1.0 / 63},
		"z::0": {0, 1.0 / 61},
	}
	if len(fused) != len(want) {
		t.Fatalf("got %d fused chunks, want %d", len(fused), len(want))
	}
	for _, s := range fused {
		w := want[s.Chunk.ChunkID]
		if s.Fused != w.fused {
			t.Errorf("%s: fused %v, want %v", s.Chunk.ChunkID, s.Fused, w.fused)
		}
		switch {
		case w.docRank == 0 && s.DocRank != nil:
			t.Errorf("%s: doc rank %d, want none", s.Chunk.ChunkID, *s.DocRank)
		case w.docRank > 0 && (s.DocRank == nil || *s.DocRank != w.docRank):
			t.Errorf("%s: doc rank %v, want %d", s.Chunk.ChunkID, s.DocRank, w.docRank)
		}
	}
	if fused[0].Chunk.ChunkID != "y::0" {
		t.Errorf("first fused %s, want y::0 (its document ranks first)", fused[0].Chunk.ChunkID)
	}
	// Without a document ranking the fusion is the two-ranking one.
	rk.Docs = nil
	two := retrieval.Fuse(rk, 60, retrieval.Weights{BM25: 1, Cosine: 1, Doc: 2})
	if two[0].Chunk.ChunkID != "x::0" || two[0].Fused != 1.0/61 || two[0].DocRank != nil {
		t.Errorf("without documents: first %s %v, want x::0 at 1/61", two[0].Chunk.ChunkID, two[0].Fused)
	}
}

func TestDocWeightValidation(t *testing.T) {
	for _, w := range []float64{-1, math.Inf(1), math.NaN()} {
		p := retrieval.DefaultPolicy()
		p.RRFWeights.Doc = w
		if err := p.Validate(); err == nil {
			t.Errorf("rrf_weights.doc %v: valid, want an error", w)
		}
	}
	p := retrieval.DefaultPolicy()
	p.RRFWeights.Doc = 2.5
	if err := p.Validate(); err != nil {
		t.Errorf("rrf_weights.doc 2.5: %v", err)
	}
}

// TestTopDocs: the heap cut gives the first topN of the whole sorted
// ranking, ties by doc id, for every topN.
func TestTopDocs(t *testing.T) {
	var all []retrieval.DocHit
	for i := range 200 {
		all = append(all, retrieval.DocHit{DocID: fmt.Sprintf("d%03d", (i*37)%200), Score: float64((i * 7) % 13)})
	}
	want := retrieval.TopDocs(slices.Clone(all), len(all))
	for i := 1; i < len(want); i++ {
		a, b := want[i-1], want[i]
		if a.Score < b.Score || a.Score == b.Score && a.DocID >= b.DocID {
			t.Fatalf("full sort out of order at %d: %v then %v", i, a, b)
		}
	}
	for _, n := range []int{0, 1, 5, 50, 199, 200, 500} {
		got := retrieval.TopDocs(slices.Clone(all), n)
		if w := want[:min(n, len(want))]; !slices.Equal(got, w) {
			t.Errorf("topN %d: got %v, want %v", n, got, w)
		}
	}
}
