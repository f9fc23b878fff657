package retrieval_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// countingStore is a store whose rankings count the texts the pipeline
// unpacks, and how many hits came packed.
type countingStore struct {
	retrieval.Store
	unpacked, packed, hits atomic.Int64
}

func (c *countingStore) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	rk, err := c.Store.Rank(ctx, req)
	if err != nil || rk.Unpack == nil {
		return rk, err
	}
	for _, hits := range [][]retrieval.Hit{rk.Lexical, rk.Dense} {
		for _, h := range hits {
			c.hits.Add(1)
			if h.Packed != "" {
				c.packed.Add(1)
				if h.Chunk.Text != "" {
					panic("a packed hit carries its text too")
				}
			}
		}
	}
	unpack := rk.Unpack
	rk.Unpack = func(p string) string {
		c.unpacked.Add(1)
		return unpack(p)
	}
	return rk, nil
}

// TestLazyTexts: the in-memory index (the Postgres store's query path)
// returns its hits' texts packed to the retriever, which unpacks only
// those of the chunks it reranks, returns or expands the query from; the
// results are those of the reference store, which gives every text, under
// every policy that reads texts differently (the overlap and idf_overlap
// rerankers with proximity, no rerank with and without a cap per
// document, query expansion, the model reranker).
func TestLazyTexts(t *testing.T) {
	var docs []cordontype.Document
	words := strings.Fields("payment hold sanctions review release wire desk escalation ledger approval cut-off batch")
	for i := range 80 {
		var b strings.Builder
		for j := range 30 + i%50 {
			b.WriteString(words[(i*7+j*j)%len(words)] + " ")
		}
		docs = append(docs, doc("w", fmt.Sprintf("d%02d", i), cordontype.Classification(i%4), 100, b.String()))
	}
	docs = append(docs, doc("w", "empty-ish", cordontype.Public, 100, "hold"))
	mem := newStore(t, docs...)
	mi := &countingStore{Store: newMemindex(t, docs...)}
	p := principal("w", cordontype.Restricted)
	model := &fakeModel{keywords: []string{"sanctions", "ledger"}, scores: []float64{0.9, 0.5}}
	for _, tt := range []struct {
		name  string
		edit  func(*retrieval.Policy)
		model bool
	}{
		{"seed", nil, false},
		{"service", func(pol *retrieval.Policy) { *pol = retrieval.ServicePolicy() }, false},
		{"no rerank", func(pol *retrieval.Policy) { pol.EnableRerank = false }, false},
		{"no rerank, one chunk a document", func(pol *retrieval.Policy) { pol.EnableRerank, pol.MaxChunksPerDoc, pol.Limit = false, 1, 10 }, false},
		{"query expansion", func(pol *retrieval.Policy) { *pol = retrieval.ServicePolicy(); pol.PRFDocs = 3 }, false},
		{"model", func(pol *retrieval.Policy) { pol.Rerank = retrieval.RerankModel }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := query(p, "payment hold sanctions release", tt.edit)
			var want, got retrieval.Result
			if tt.model {
				want, got = modelRetrieve(t, mem, model, q), modelRetrieve(t, mi, model, q)
			} else {
				want, got = retrieve(t, mem, q), retrieve(t, mi, q)
			}
			if len(want.Chunks) == 0 {
				t.Fatal("nothing retrieved: the test exercises nothing")
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("from packed hits:\n%+v\nwant (every text given):\n%+v", got, want)
			}
			for _, s := range got.Chunks {
				if s.Chunk.Text == "" {
					t.Fatalf("chunk %s returned without its text", s.Chunk.ChunkID)
				}
			}
			hits, packed, unpacked := mi.hits.Swap(0), mi.packed.Swap(0), mi.unpacked.Swap(0)
			read := int64(q.Policy.RerankDepth + q.Policy.Limit + q.Policy.PRFDocs)
			if packed != hits || unpacked == 0 || unpacked > read || unpacked >= hits {
				t.Fatalf("%d hits, %d packed, %d unpacked: want every hit packed and at most %d unpacked", hits, packed, unpacked, read)
			}
		})
	}
}
