package memindex

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// BenchmarkRank ranks 2-8 term Zipf queries over 100,000 chunks of one
// tenant (four classifications, no barriers; the reader sees three of four
// label sets), under the default (entitled) statistics scope.
func BenchmarkRank(b *testing.B) {
	benchRank(b, index.DefaultSettings(), 0, false)
}

// BenchmarkRankDocs is BenchmarkRank with the document ranking asked for
// (the policy's rrf_weights.doc > 0).
func BenchmarkRankDocs(b *testing.B) {
	benchRank(b, index.DefaultSettings(), 0, true)
}

// BenchmarkRankScope compares the two statistics scopes on the same 100,000
// chunks spread over 8 or 64 label sets (4 classifications x 2 or 16
// barrier sets); the reader (confidential, half of the barrier labels) sees
// about 3/8 of them.
func BenchmarkRankScope(b *testing.B) {
	for _, sets := range []int{8, 64} {
		for _, scope := range []bm25.Scope{bm25.ScopeTenant, bm25.ScopeEntitled} {
			b.Run(fmt.Sprintf("labelsets=%d/scope=%s", sets, scope), func(b *testing.B) {
				s := index.DefaultSettings()
				s.Statistics = scope
				benchRank(b, s, sets/4, false)
			})
		}
	}
}

// benchRank indexes 20,000 five-section documents (100,000 chunks) whose
// classification cycles through the four levels and, with barrierSets > 0,
// whose barrier set is one of barrierSets distinct sets; queries come from a
// principal holding the labels of the first half of those sets; docs asks
// for the document ranking too.
func benchRank(b *testing.B, s index.Settings, barrierSets int, docs bool) {
	x := New(s)
	x.DropTexts()
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.1, 1, 49999)
	word := func() string { return fmt.Sprintf("w%d", zipf.Uint64()) }
	for d := 0; d < 20000; d++ {
		var t strings.Builder
		for sec := 0; sec < 5; sec++ {
			fmt.Fprintf(&t, "# S%d\n", sec)
			for w := 0; w < 150; w++ {
				t.WriteString(word() + " ")
			}
			t.WriteString("\n")
		}
		doc := cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("d%d", d), Text: t.String(), Classification: cordontype.Classification(d % 4)}
		if barrierSets > 0 {
			doc.Barriers = []string{fmt.Sprintf("deal-%02d", (d/4)%barrierSets)}
		}
		pcs, err := index.Prepare(&doc, s)
		if err != nil {
			b.Fatal(err)
		}
		x.Put(doc.DocID, pcs)
	}
	held := []string{}
	for i := range barrierSets / 2 {
		held = append(held, fmt.Sprintf("deal-%02d", i))
	}
	queries := make([]retrieval.RankRequest, 64)
	for i := range queries {
		var q strings.Builder
		for j := 0; j < 2+r.IntN(7); j++ {
			q.WriteString(word() + " ")
		}
		toks := analysis.Tokenize(q.String())
		queries[i] = retrieval.RankRequest{Principal: cordontype.Principal{Tenant: "t", Clearance: cordontype.Confidential, Barriers: held},
			Tokens: toks, Terms: analysis.TokenSet(q.String()), TopN: 50, Docs: docs}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		x.Rank(queries[i%len(queries)])
	}
	b.ReportMetric(float64(x.Len()), "chunks")
}
