package retrieval_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// benchRankings are two top_n = 50 rankings sharing half their chunks.
func benchRankings() retrieval.Rankings {
	var rk retrieval.Rankings
	text := strings.Repeat("payment hold sanctions review release approvals ", 20)
	for i := range retrieval.DefaultTopN {
		lex := cordontype.Chunk{ChunkID: fmt.Sprintf("doc-%03d::%d", i, i%3), Text: text}
		den := cordontype.Chunk{ChunkID: fmt.Sprintf("doc-%03d::%d", (i*7)%100, i%3), Text: text}
		rk.Lexical = append(rk.Lexical, retrieval.Hit{Chunk: lex, Score: float64(100 - i)})
		rk.Dense = append(rk.Dense, retrieval.Hit{Chunk: den, Score: 1 / float64(i+1)})
	}
	return rk
}

// BenchmarkFuse is RRF over the two rankings, with per-side scores and ranks.
func BenchmarkFuse(b *testing.B) {
	rk := benchRankings()
	b.ReportAllocs()
	for b.Loop() {
		retrieval.Fuse(rk, 60, retrieval.DefaultWeights())
	}
}

// BenchmarkRerank tokenizes the top rerank_depth fused chunks (200 words
// each) and applies the relevance floor.
func BenchmarkRerank(b *testing.B) {
	fused := retrieval.Fuse(benchRankings(), 60, retrieval.DefaultWeights())
	terms := []string{"payment", "hold", "tx4096"}
	b.ReportAllocs()
	for b.Loop() {
		retrieval.Rerank(fused, retrieval.RerankInput{Terms: terms, Depth: retrieval.DefaultRerankDepth, MinScore: retrieval.DefaultMinScore, Kind: retrieval.RerankOverlap})
	}
}
