package memindex

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// BenchmarkRank ranks 2-8 term Zipf queries over 100,000 chunks of one tenant.
func BenchmarkRank(b *testing.B) {
	s := index.DefaultSettings()
	x := New(s)
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
		pcs, err := index.Prepare(&doc, s)
		if err != nil {
			b.Fatal(err)
		}
		x.Put(doc.DocID, pcs, true)
	}
	queries := make([]retrieval.RankRequest, 64)
	for i := range queries {
		var q strings.Builder
		for j := 0; j < 2+r.IntN(7); j++ {
			q.WriteString(word() + " ")
		}
		toks := analysis.Tokenize(q.String())
		queries[i] = retrieval.RankRequest{Principal: cordontype.Principal{Tenant: "t", Clearance: cordontype.Confidential, Barriers: []string{}},
			Tokens: toks, Terms: analysis.TokenSet(q.String()), TopN: 50}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		x.Rank(queries[i%len(queries)])
	}
	b.ReportMetric(float64(x.Len()), "chunks")
}
