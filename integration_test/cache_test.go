package integration_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
)

func ids(res retrieval.Result) string {
	s := ""
	for _, c := range res.Chunks {
		s += fmt.Sprintf("%s %v %v|", c.Chunk.ChunkID, c.Fused, c.Chunk.Text)
	}
	return fmt.Sprintf("%s c=%d e=%d f=%d", s, res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness)
}

// TestCacheCoherentAcrossReplicas: a writer and a reader are separate stores
// (as two service replicas are). The reader's in-memory index must serve every
// committed write at its next query, exactly as the SQL path does.
func TestCacheCoherentAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	writer := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	cached := openStore(t, dbURL, postgres.Options{CacheBytes: 1 << 30})
	sql := openStore(t, dbURL, postgres.Options{})
	q := retrieval.Query{
		Principal: cordontype.Principal{Tenant: "rep", Clearance: cordontype.Internal},
		Text:      "wire hold release", NowTick: 50, Policy: retrieval.DefaultPolicy(),
	}
	check := func(step string) retrieval.Result {
		t.Helper()
		a, err := retrieval.New(cached).Retrieve(ctx, q)
		if err != nil {
			t.Fatalf("%s: cached: %v", step, err)
		}
		b, err := retrieval.New(sql).Retrieve(ctx, q)
		if err != nil {
			t.Fatalf("%s: sql: %v", step, err)
		}
		if ids(a) != ids(b) {
			t.Fatalf("%s: cached path %s, SQL path %s", step, ids(a), ids(b))
		}
		return a
	}
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "a", Text: "wire hold for review", Classification: cordontype.Public})
	if r := check("first load"); len(r.Chunks) != 1 {
		t.Fatalf("first load: %d chunks, want 1", len(r.Chunks))
	}
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "b", Text: "release the wire hold today", Classification: cordontype.Public})
	if r := check("after a new document"); len(r.Chunks) != 2 {
		t.Fatalf("after a new document: %d chunks, want 2", len(r.Chunks))
	}
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "a", Text: "wire hold raised", Classification: cordontype.Restricted})
	if r := check("after a classification raise"); len(r.Chunks) != 1 || r.ExcludedByEntitlement == 0 {
		t.Fatalf("after raising a's classification: %s", ids(r))
	}
	if _, err := writer.Delete(ctx, "rep", "b"); err != nil {
		t.Fatal(err)
	}
	if r := check("after a delete"); len(r.Chunks) != 0 {
		t.Fatalf("after deleting b: %s", ids(r))
	}
	if st := cached.CacheStats(); st.Tenants != 1 || st.Bytes <= 0 || st.Bytes > st.Budget {
		t.Fatalf("cache stats %+v: want one tenant within budget", st)
	}
}

// TestCacheBudgetFallsBackToSQL: a tenant larger than the budget is ranked in
// SQL with the same results, and the cache stays within its budget.
func TestCacheBudgetFallsBackToSQL(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	writer := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	for i := range 40 {
		put(t, writer, cordontype.Document{Tenant: "big", DocID: fmt.Sprintf("d%d", i), Text: fmt.Sprintf("wire hold number %d with release notes", i), Classification: cordontype.Public})
	}
	small := openStore(t, dbURL, postgres.Options{CacheBytes: 4096})
	sql := openStore(t, dbURL, postgres.Options{})
	q := retrieval.Query{Principal: cordontype.Principal{Tenant: "big", Clearance: cordontype.Public}, Text: "wire release 7", Policy: retrieval.DefaultPolicy()}
	a, err := retrieval.New(small).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	b, err := retrieval.New(sql).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if ids(a) != ids(b) || len(a.Chunks) == 0 {
		t.Fatalf("over budget: %s, SQL %s", ids(a), ids(b))
	}
	if st := small.CacheStats(); st.Bytes > st.Budget || st.Tenants != 0 {
		t.Fatalf("cache stats %+v: the tenant should not be cached", st)
	}
}

// TestCacheTenantRecreated: a tenant dropped and created again starts over at
// the same index versions; the cached index of its previous incarnation must
// never answer for it (a deleted document would come back).
func TestCacheTenantRecreated(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	writer := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	cached := openStore(t, dbURL, postgres.Options{CacheBytes: 1 << 30})
	q := retrieval.Query{Principal: cordontype.Principal{Tenant: "again", Clearance: cordontype.Public}, Text: "wire hold", Policy: retrieval.DefaultPolicy()}
	retrieve := func(step string) retrieval.Result {
		t.Helper()
		r, err := retrieval.New(cached).Retrieve(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return r
	}
	put(t, writer, cordontype.Document{Tenant: "again", DocID: "a", Text: "wire hold secret alpha", Classification: cordontype.Public})
	if r := retrieve("first incarnation"); len(r.Chunks) != 1 || r.Chunks[0].Chunk.Text != "wire hold secret alpha" {
		t.Fatalf("first incarnation: %s", ids(r))
	}
	if _, err := writer.DropTenant(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	if r := retrieve("dropped"); len(r.Chunks) != 0 || r.Considered != 0 {
		t.Fatalf("dropped tenant still answers: %s", ids(r))
	}
	put(t, writer, cordontype.Document{Tenant: "again", DocID: "a", Text: "wire hold public beta", Classification: cordontype.Public})
	if r := retrieve("second incarnation"); len(r.Chunks) != 1 || r.Chunks[0].Chunk.Text != "wire hold public beta" {
		t.Fatalf("second incarnation at the same version answered from the first: %s", ids(r))
	}
}
