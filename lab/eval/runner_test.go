package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
)

// TestRunTies: two documents with the same text tie on every score; every
// ranking breaks the tie by chunk id, so "a" comes first, and a query whose
// relevant document is "b" finds it at rank 2 in every pipeline.
func TestRunTies(t *testing.T) {
	docs := []Document{
		{ID: "a", Text: "alpha beta gamma"},
		{ID: "b", Text: "alpha beta gamma"},
		{ID: "c", Text: "delta epsilon"},
	}
	queries := []Query{{Query: "alpha beta", Relevant: []string{"b"}}}
	rep, err := Run(context.Background(), docs, queries, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Documents != 3 || rep.Chunks != 3 || rep.Queries != 1 {
		t.Errorf("counts: got %d docs, %d chunks, %d queries, want 3, 3, 1", rep.Documents, rep.Chunks, rep.Queries)
	}
	// Rank 2: recall@1 0, recall@5 1, RR 1/2, nDCG 1/log2(3).
	want := Metrics{RecallAt1: 0, RecallAt5: 1, RecallAt10: 1, MRRAt10: 0.5, NDCGAt10: 1 / math.Log2(3)}
	for _, p := range Pipelines {
		if got := rep.Result(p).Metrics; got != want {
			t.Errorf("%s: got %+v, want %+v", p, got, want)
		}
	}
	if got := rep.Result(BM25Only).MeanDocs; got != 2 {
		t.Errorf("bm25 documents returned: got %v, want 2 (c shares no term)", got)
	}
}

// TestRunEmptyResults: a query that shares no term with the corpus gets
// nothing from BM25 and nothing past the rerank floor (the dense side may
// still return a chunk that shares only a hash bucket).
func TestRunEmptyResults(t *testing.T) {
	docs := []Document{{ID: "a", Text: "alpha"}}
	queries := []Query{{Query: "zulu yankee", Relevant: []string{"a"}}}
	rep, err := Run(context.Background(), docs, queries, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Result(HybridRerank); got.Empty != 1 || got.RecallAt10 != 0 {
		t.Errorf("hybrid + rerank: got %+v, want one empty query and recall 0", got)
	}
	if got := rep.Result(BM25Only); got.Empty != 1 {
		t.Errorf("bm25: got %d empty, want 1", got.Empty)
	}
}

func TestRunErrors(t *testing.T) {
	docs := []Document{{ID: "a", Text: "alpha"}}
	_, err := Run(context.Background(), docs, []Query{{Query: "alpha", Relevant: []string{"zz"}}}, DefaultOptions())
	if !errors.Is(err, ErrRelevantMissing) {
		t.Errorf("missing relevant: got %v, want ErrRelevantMissing", err)
	}
	if _, err := Run(context.Background(), docs, nil, DefaultOptions()); !errors.Is(err, ErrNoQueries) {
		t.Errorf("no queries: got %v, want ErrNoQueries", err)
	}
	opts := DefaultOptions()
	opts.Policy.Limit = 5
	if _, err := Run(context.Background(), docs, []Query{{Query: "alpha", Relevant: []string{"a"}}}, opts); !errors.Is(err, retrieval.ErrInvalidPolicy) {
		t.Errorf("limit 5: got %v, want ErrInvalidPolicy", err)
	}
	// A held-out section can leave a document without text: it is refused,
	// counted, and stays a relevant document nothing can find.
	opts = DefaultOptions()
	opts.DropSections = []string{"NAME"}
	docs = []Document{{ID: "a", Text: "# NAME\nalpha\n"}, {ID: "b", Text: "# NAME\nx\n# BODY\nalpha beta\n"}}
	rep, err := Run(context.Background(), docs, []Query{{Query: "alpha", Relevant: []string{"a"}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Refused) != 1 || rep.Result(BM25Only).RecallAt10 != 0 {
		t.Errorf("refused: got %v and recall %v, want a refused and recall 0", rep.Refused, rep.Result(BM25Only).RecallAt10)
	}
}

// TestHybridIsTheRetriever: the hybrid pipelines are retrieval.Tail over
// rankings computed once per query; their chunks must be exactly what the
// Retriever returns over the store, for the service, seed and profile
// policies (query expansion, document evidence, stem and field terms), and
// their first chunks the document-level ranking's start.
func TestHybridIsTheRetriever(t *testing.T) {
	docs := []Document{
		{ID: "a", Text: "# NAME\nls - list directory contents\n# DESCRIPTION\nList information about the FILEs."},
		{ID: "b", Text: "# NAME\ncp - copy files and directories\n# DESCRIPTION\nCopy SOURCE to DEST."},
		{ID: "c", Text: "# NAME\nmv - move (rename) files\n", Title: "Renaming listed files"},
	}
	opts := DefaultOptions()
	prof := opts.Policy
	prof.RRFK, prof.Rerank, prof.RerankBlend, prof.MinScore = 10, retrieval.RerankIDFOverlap, 0.5, 0
	prf := opts.Policy
	prf.PRFDocs, prf.PRFTerms, prf.MaxChunksPerDoc = 2, 3, 1
	doc := opts.Policy
	doc.RRFWeights.Doc = 3
	stems := prof
	stems.StemWeight, stems.FieldWeight = 0.5, 2
	opts.Profiles = []Profile{{Name: "p", Policy: prof}, {Name: "prf", Policy: prf}, {Name: "doc", Policy: doc}, {Name: "stems", Policy: stems}}
	opts.PerQuery = true
	st, _, err := build(context.Background(), docs, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var queries []Query
	for _, q := range []string{"list files", "copy directories", "rename", "nothing matches zz", "renamed listing"} {
		queries = append(queries, Query{Query: q, Relevant: []string{"a"}})
	}
	rep, err := Run(context.Background(), docs, queries, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range queries {
		for _, s := range opts.Specs() {
			if s.Mode != Hybrid {
				continue
			}
			want, err := retrieval.New(st).Retrieve(context.Background(), retrieval.Query{Principal: principal, Text: q.Query, Policy: s.Policy})
			if err != nil {
				t.Fatal(err)
			}
			got := rep.PerQuery[i].Chunks[s.Name]
			if len(got) != len(want.Chunks) {
				t.Fatalf("%q %s: got %d chunks, the Retriever %d", q.Query, s.Name, len(got), len(want.Chunks))
			}
			for j, w := range want.Chunks {
				g := got[j]
				if g.ChunkID != w.Chunk.ChunkID || *g.Fused != w.Fused || !reflect.DeepEqual(g.Rerank, w.Rerank) ||
					!reflect.DeepEqual(g.BM25Rank, w.BM25Rank) || !reflect.DeepEqual(g.CosineRank, w.CosineRank) {
					t.Errorf("%q %s chunk %d: got %+v, the Retriever %+v", q.Query, s.Name, j, g, w)
				}
			}
		}
	}
}

// TestDocLevelRecall: a document whose first chunk is below the first K
// chunks is missed at chunk level and found at document level, which looks
// at the first K distinct documents.
func TestDocLevelRecall(t *testing.T) {
	long := strings.Repeat("alpha beta gamma delta ", 400) // many chunks, all matching
	docs := []Document{{ID: "a", Text: long}, {ID: "b", Text: "alpha zeta"}}
	queries := []Query{{Query: "alpha beta", Relevant: []string{"b"}}}
	rep, err := Run(context.Background(), docs, queries, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Chunks <= K {
		t.Fatalf("a has %d chunks in all, want more than %d", rep.Chunks, K)
	}
	got := rep.Result(BM25Only)
	if got.RecallAt10 != 0 || got.Doc.RecallAt10 != 1 || got.Doc.MRRAt10 != 0.5 {
		t.Errorf("bm25: chunk-level R@10 %v, doc-level R@10 %v MRR %v; want 0, 1, 0.5", got.RecallAt10, got.Doc.RecallAt10, got.Doc.MRRAt10)
	}
}

func TestBakeOffVariants(t *testing.T) {
	vs := DefaultVariants()
	if len(vs) != 9 {
		t.Fatalf("got %d variants, want 9", len(vs))
	}
	for _, v := range vs {
		if err := v.Chunking.Validate(); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
	if vs[0].Name != "fixed 50/0" || vs[0].Strategy != Flat || vs[8].Name != "structure 200/40" || vs[8].Chunking.OverlapWords != 40 {
		t.Errorf("variants: got %+v", vs)
	}
}

// TestRunDepth: with Depth 100 every pipeline's document ranking holds 100
// documents (R@100 measured), and its first K documents, so every @10
// metric, are those of the run at depth K.
func TestRunDepth(t *testing.T) {
	var docs []Document
	var relevant []string
	for i := range 150 {
		id := fmt.Sprintf("d%03d", i)
		docs = append(docs, Document{ID: id, Text: fmt.Sprintf("alpha beta w%d", i)})
		relevant = append(relevant, id)
	}
	queries := []Query{{ID: "q", Query: "alpha", Relevant: relevant}}
	shallow, err := Run(context.Background(), docs, queries, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Depth = DeepK
	opts.PerQuery = true
	deep, err := Run(context.Background(), docs, queries, opts)
	if err != nil {
		t.Fatal(err)
	}
	if shallow.Depth != K || deep.Depth != DeepK {
		t.Errorf("report depth: got %d and %d, want %d and %d", shallow.Depth, deep.Depth, K, DeepK)
	}
	for _, p := range []Pipeline{BM25Only, HybridRRF, HybridRerank, Seed} {
		s, d := shallow.Result(p), deep.Result(p)
		if got := len(deep.PerQuery[0].DocRanks[p]); got != DeepK {
			t.Errorf("%s: got %d documents, want %d", p, got, DeepK)
		}
		if want := float64(DeepK) / 150; d.Doc.RecallAt100 != want || s.Doc.RecallAt100 != 0 {
			t.Errorf("%s: R@100 got %v (depth 100) and %v (depth 10), want %v and 0", p, d.Doc.RecallAt100, s.Doc.RecallAt100, want)
		}
		d.Doc.RecallAt100 = 0
		if d.Doc != s.Doc || d.Metrics != s.Metrics {
			t.Errorf("%s: @10 metrics differ with depth: got %+v / %+v, want %+v / %+v", p, d.Metrics, d.Doc, s.Metrics, s.Doc)
		}
	}
	for _, n := range []int{-1, K - 1, MaxDepth + 1} {
		opts.Depth = n
		if _, err := Run(context.Background(), docs, queries, opts); !errors.Is(err, ErrDepth) {
			t.Errorf("depth %d: got %v, want ErrDepth", n, err)
		}
	}
}
