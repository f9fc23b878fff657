package retrieval_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/internal/proccpu"
	"github.com/cordon-rag/cordon/lab/bench"
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

// BenchmarkRerankStems is the service profile's rerank (idf_overlap
// with stem_weight 0.5) of the top rerank_depth fused chunks, whose text
// holds every query word as written ("held") or one only in another form
// ("other-form"): a word found as written needs no stem look.
func BenchmarkRerankStems(b *testing.B) {
	for _, c := range []struct{ name, word string }{{"held", "approvals"}, {"other-form", "approving"}} {
		b.Run(c.name, func(b *testing.B) {
			fused := retrieval.Fuse(benchRankings(), 60, retrieval.DefaultWeights())
			terms := []string{"payment", "hold", c.word}
			in := retrieval.RerankInput{Terms: terms, IDF: []float64{1, 2, 3}, Depth: retrieval.DefaultRerankDepth, MinScore: retrieval.DefaultMinScore,
				Kind: retrieval.RerankIDFOverlap, StemWeight: retrieval.ServicePolicy().StemWeight}
			b.ReportAllocs()
			for b.Loop() {
				retrieval.Rerank(fused, in)
			}
		})
	}
}

// BenchmarkRerankDoc is BenchmarkRerank with document evidence
// (rerank_doc) off and at the service profile's weight, over a document
// ranking of top_n documents: what the field adds to the rerank alone.
func BenchmarkRerankDoc(b *testing.B) {
	rk := benchRankings()
	for i := range retrieval.DefaultTopN {
		rk.Docs = append(rk.Docs, retrieval.DocHit{DocID: fmt.Sprintf("doc-%03d", i), Score: float64(100 - i)})
	}
	for i := range rk.Lexical {
		rk.Lexical[i].Chunk.DocID = strings.SplitN(rk.Lexical[i].Chunk.ChunkID, "::", 2)[0]
		rk.Dense[i].Chunk.DocID = strings.SplitN(rk.Dense[i].Chunk.ChunkID, "::", 2)[0]
	}
	fused := retrieval.Fuse(rk, 60, retrieval.DefaultWeights())
	terms := []string{"payment", "hold", "tx4096"}
	for _, v := range []float64{0, retrieval.ServicePolicy().RerankDoc} {
		b.Run(fmt.Sprintf("rerank_doc=%g", v), func(b *testing.B) {
			in := retrieval.RerankInput{Terms: terms, Depth: retrieval.DefaultRerankDepth, MinScore: retrieval.DefaultMinScore,
				Kind: retrieval.RerankOverlap, Doc: v, Docs: rk.Docs}
			b.ReportAllocs()
			for b.Loop() {
				retrieval.Rerank(fused, in)
			}
		})
	}
}

// BenchmarkPolicyCost retrieves the bench corpus's queries (lab/bench:
// 2-8 Zipf terms, a confidential reader with one barrier) from one tenant
// of 10,000 chunks on the in-memory index, under the service profile and
// with one costly policy field raised at a time (and what it needs to take
// effect: a top_n that fills rerank_depth or limit, expansion on for
// prf_terms), then with every field at its default limit: what a caller
// can make one retrieve cost. docs/benchmarks.md ("What one retrieve may
// cost") holds the figures [retrieval.DefaultLimits] come from; x-default
// is a run's CPU time per retrieve over the default policy's.
func BenchmarkPolicyCost(b *testing.B) {
	st, queries := policyCostCorpus(b)
	rt := retrieval.New(st) // the retriever applies no limits: the service does
	// CPU time, not wall time, is what one request takes from the others,
	// and it is what a machine shared with other work measures best; each
	// run also reports it relative to the default policy's, run first.
	var defaultCPU float64
	run := func(name string, p retrieval.Policy) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			start := proccpu.Self()
			for b.Loop() {
				q := queries[i%len(queries)]
				i++
				if _, err := rt.Retrieve(context.Background(), retrieval.Query{Principal: q.Principal, Text: q.Text, NowTick: q.NowTick, Policy: p}); err != nil {
					b.Fatal(err)
				}
			}
			cpu := float64(proccpu.Self()-start) / float64(b.N)
			if name == "default" {
				defaultCPU = cpu
			}
			b.ReportMetric(cpu, "cpu-ns/op")
			b.ReportMetric(cpu/defaultCPU, "x-default")
		})
	}
	knobs := []struct {
		name string
		set  func(p *retrieval.Policy, v int)
		vals []int
	}{
		{"top_n", func(p *retrieval.Policy, v int) { p.TopN = v }, []int{100, 200, 500, 1000, 10000}},
		{"rerank_depth", func(p *retrieval.Policy, v int) { p.TopN, p.RerankDepth = max(p.TopN, v), v }, []int{100, 200, 500, 1000}},
		{"limit", func(p *retrieval.Policy, v int) {
			p.EnableRerank, p.MaxChunksPerDoc, p.TopN, p.Limit = false, 0, max(p.TopN, v/2), v
		}, []int{100, 400, 1000, 10000}},
		{"prf_docs", func(p *retrieval.Policy, v int) { p.TopN, p.PRFDocs = max(p.TopN, v), v }, []int{10, 50, 100, 200, 1000}},
		{"prf_terms", func(p *retrieval.Policy, v int) { p.PRFDocs, p.PRFTerms = 10, v }, []int{10, 50, 100, 200, 1000, 10000}},
	}
	run("default", retrieval.ServicePolicy())
	for _, k := range knobs {
		for _, v := range k.vals {
			p := retrieval.ServicePolicy()
			k.set(&p, v)
			run(fmt.Sprintf("%s=%d", k.name, v), p)
		}
	}
	// The rerank score's mixes, each off against the profile's weight, at
	// the default depth and at its limit: rerank_proximity tokenizes the
	// rerank_depth chunks once more; rerank_doc reads the document ranking
	// the profile already asks for (rrf_weights.doc) and looks each kept
	// chunk's document up once.
	mixes := []struct {
		name  string
		field func(*retrieval.Policy) *float64
	}{
		{"rerank_proximity", func(p *retrieval.Policy) *float64 { return &p.RerankProximity }},
		{"rerank_doc", func(p *retrieval.Policy) *float64 { return &p.RerankDoc }},
	}
	for _, mix := range mixes {
		for _, depth := range []int{retrieval.DefaultRerankDepth, retrieval.DefaultLimits().RerankDepth} {
			p := retrieval.ServicePolicy()
			p.TopN, p.RerankDepth = max(p.TopN, depth), depth
			for _, v := range []float64{0, *mix.field(&p)} {
				*mix.field(&p) = v
				run(fmt.Sprintf("rerank_depth=%d,%s=%g", depth, mix.name, v), p)
			}
		}
	}
	lim := retrieval.DefaultLimits()
	p := retrieval.ServicePolicy()
	p.TopN, p.RerankDepth, p.Limit, p.PRFDocs, p.PRFTerms, p.MaxChunksPerDoc = lim.TopN, lim.RerankDepth, lim.Limit, lim.PRFDocs, lim.PRFTerms, 0
	run("all_at_limits", p)
	p.EnableRerank = false
	run("all_at_limits,enable_rerank=false", p)
	p = retrieval.ServicePolicy()
	p.PRFDocs, p.PRFTerms, p.TopN = 10000, 10000, 10000
	run("prf_docs=10000,prf_terms=10000,top_n=10000", p)
}

// policyCostCorpus loads lab/bench's generated corpus (seed 1, one tenant of
// 10,000 chunks) into the in-memory index, with 64 of its queries.
func policyCostCorpus(b *testing.B) (*memindextest.Store, []bench.Query) {
	b.Helper()
	g, err := bench.NewGenerator(bench.Config{Seed: 1, Chunks: 10000, Tenants: 1})
	if err != nil {
		b.Fatal(err)
	}
	st, err := memindextest.NewStore(index.DefaultSettings())
	if err != nil {
		b.Fatal(err)
	}
	docs := 0
	err = g.Each(func(doc cordontype.Document, _ int) error {
		docs++
		_, err := st.Put(context.Background(), doc)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d documents, %d chunks", docs, g.Config().Chunks)
	return st, g.Queries(64)
}
