package bench

import (
	"context"
	"sync"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// feed hands every document to exactly one put, in batches of at most batch
// documents of one tenant, and reports every chunk.
func TestFeedBatches(t *testing.T) {
	g, err := NewGenerator(Config{Seed: 5, Chunks: 900, Tenants: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	_ = g.Each(func(cordontype.Document, int) error { want++; return nil })
	for _, batch := range []int{1, 7} {
		var mu sync.Mutex
		seen := map[string]bool{}
		var last int64
		err := feed(context.Background(), g, 3, batch, func(n int64) {
			mu.Lock()
			last = max(last, n)
			mu.Unlock()
		}, func(_ context.Context, docs []cordontype.Document) error {
			mu.Lock()
			defer mu.Unlock()
			if len(docs) == 0 || len(docs) > batch {
				t.Errorf("batch %d: got a put of %d documents", batch, len(docs))
			}
			for _, d := range docs {
				if d.Tenant != docs[0].Tenant {
					t.Errorf("batch %d: one put mixes tenants %s and %s", batch, docs[0].Tenant, d.Tenant)
				}
				key := d.Tenant + "/" + d.DocID
				if seen[key] {
					t.Errorf("batch %d: %s put twice", batch, key)
				}
				seen[key] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != want {
			t.Errorf("batch %d: got %d documents, want %d", batch, len(seen), want)
		}
		if last != 900 {
			t.Errorf("batch %d: progress reached %d chunks, want 900", batch, last)
		}
	}
}

// TestPolicyOption: Options.Policy replaces the bench's policy for the
// systems behind the retriever, and every query keeps its own freshness
// contract.
func TestPolicyOption(t *testing.T) {
	stale := int64(7)
	q := Query{MaxStaleTicks: &stale}
	if got := policy(q); got.Limit != Limit || got.RRFWeights.Doc != 0 || got.MaxStaleTicks != &stale {
		t.Errorf("default: got limit %d, doc weight %v, stale %v; want %d, 0, the query's", got.Limit, got.RRFWeights.Doc, got.MaxStaleTicks, Limit)
	}
	p := BasePolicy()
	p.RRFWeights.Doc = 2
	queries := make([]Query, 3)
	for i := range queries {
		queries[i].policy = &p
		queries[i].MaxStaleTicks = &stale
		if got := policy(queries[i]); got.RRFWeights.Doc != 2 || got.MaxStaleTicks != &stale {
			t.Errorf("query %d: got doc weight %v, stale %v; want 2 and the query's", i, got.RRFWeights.Doc, got.MaxStaleTicks)
		}
	}
	if p.MaxStaleTicks != nil {
		t.Errorf("policy() changed the shared policy's max_stale_ticks")
	}
}
