package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
)

func openStore(t testing.TB, dbURL string, opts postgres.Options) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), dbURL, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

func put(t *testing.T, st *postgres.Store, d cordontype.Document) {
	t.Helper()
	if _, err := st.Put(context.Background(), d); err != nil {
		t.Fatalf("put %s/%s: %v", d.Tenant, d.DocID, err)
	}
}

// TestCrossTenantProbes: tenant B holds the same doc ids and texts as tenant A
// plus more. A principal of A must see, count and be affected by nothing of B.
func TestCrossTenantProbes(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	docs := []cordontype.Document{
		{DocID: "pay-001", Text: "# Holds\nPMT-771 is on hold pending sanctions screening.", Classification: cordontype.Internal, AsOfTick: 10},
		{DocID: "pay-002", Text: "Wire release needs two approvals.", Classification: cordontype.Public, AsOfTick: 10},
	}
	query := func() retrieval.Result {
		t.Helper()
		res, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{
			Principal: cordontype.Principal{Tenant: "alpha", Clearance: cordontype.Restricted},
			Text:      "PMT-771 hold sanctions wire release secret merger",
			NowTick:   20,
			Policy:    retrieval.DefaultPolicy(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, d := range docs {
		d.Tenant = "alpha"
		put(t, st, d)
	}
	before := query()
	for _, d := range docs {
		d.Tenant = "beta"
		d.Text += " secret merger"
		put(t, st, d)
	}
	put(t, st, cordontype.Document{Tenant: "beta", DocID: "beta-only", Text: "secret merger PMT-771 hold", Classification: cordontype.Public})
	after := query()
	if len(after.Chunks) == 0 {
		t.Fatal("the probe query found nothing in tenant alpha; the test proves nothing")
	}
	for _, c := range after.Chunks {
		if c.Chunk.Tenant != "alpha" || strings.Contains(c.Chunk.Text, "secret") {
			t.Errorf("tenant alpha's result holds %s of tenant %s: %q", c.Chunk.ChunkID, c.Chunk.Tenant, c.Chunk.Text)
		}
	}
	if before.Considered != after.Considered || before.ExcludedByEntitlement != after.ExcludedByEntitlement {
		t.Errorf("tenant beta's documents changed alpha's counters: before %+v, after %+v", before, after)
	}
	if len(before.Chunks) != len(after.Chunks) {
		t.Fatalf("tenant beta changed alpha's result size: %d -> %d", len(before.Chunks), len(after.Chunks))
	}
	for i := range before.Chunks {
		b, a := before.Chunks[i], after.Chunks[i]
		if b.Chunk.ChunkID != a.Chunk.ChunkID || *b.BM25 != *a.BM25 || b.Fused != a.Fused {
			t.Errorf("result %d changed when tenant beta was filled: %s %v -> %s %v", i, b.Chunk.ChunkID, *b.BM25, a.Chunk.ChunkID, *a.BM25)
		}
	}
	// Deleting alpha's document leaves beta's same-named document alone.
	if ok, err := st.Delete(ctx, "alpha", "pay-001"); err != nil || !ok {
		t.Fatalf("delete alpha/pay-001: %v %v", ok, err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_beta.documents WHERE doc_id = 'pay-001'`); n != 1 {
		t.Fatalf("deleting alpha/pay-001 touched beta: %d rows left", n)
	}
}

// TestTenantNamesAreValidatedAndQuoted: hostile tenant names never reach SQL,
// and a search_path pointing at look-alike tables changes nothing.
func TestTenantNamesAreValidatedAndQuoted(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	for _, name := range []string{`x"; DROP SCHEMA cordon CASCADE; --`, "Alpha", "public", "pg_catalog ", "a-b", "", strings.Repeat("a", 41), "1abc"} {
		if name == "public" {
			continue // a valid name: it maps to cordon_t_public, not to public
		}
		_, err := st.Put(ctx, cordontype.Document{Tenant: name, DocID: "d", Text: "hello", Classification: cordontype.Public})
		if !errors.Is(err, cordontype.ErrInvalid) {
			t.Errorf("tenant %q: got %v, want an ErrInvalid rejection", name, err)
		}
	}
	put(t, st, cordontype.Document{Tenant: "public", DocID: "d", Text: "hello world", Classification: cordontype.Public})
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_public.chunks`); n != 1 {
		t.Fatalf("tenant public stored %d chunks in cordon_t_public, want 1", n)
	}
	// A decoy schema with Cordon's table names, first on the search_path of
	// every new session: qualified names must ignore it.
	execSQL(t, dbURL, `CREATE SCHEMA decoy; CREATE TABLE decoy.chunks (id int); CREATE TABLE decoy.stats (id int)`)
	execSQL(t, dbURL, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = decoy, public', current_database()); END $$`)
	st2 := openStore(t, dbURL, postgres.Options{})
	res, err := retrieval.New(st2).Retrieve(ctx, retrieval.Query{
		Principal: cordontype.Principal{Tenant: "public", Clearance: cordontype.Public},
		Text:      "hello", Policy: retrieval.DefaultPolicy(),
	})
	if err != nil || len(res.Chunks) != 1 {
		t.Fatalf("with a decoy search_path: %d chunks, err %v; want the one real chunk", len(res.Chunks), err)
	}
}

// TestHiddenChunksNeverLeaveTheDatabase: for a principal who may see nothing,
// the store returns counts only.
func TestHiddenChunksNeverLeaveTheDatabase(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	put(t, st, cordontype.Document{Tenant: "gc", DocID: "r1", Text: "restricted investigation of account 42", Classification: cordontype.Restricted})
	put(t, st, cordontype.Document{Tenant: "gc", DocID: "b1", Text: "investigation behind a wall", Classification: cordontype.Public, Barriers: []string{"wall:x"}})
	tokens := []string{"investigation", "account"}
	rk, err := st.Rank(ctx, retrieval.RankRequest{
		Principal: cordontype.Principal{Tenant: "gc", Clearance: cordontype.Internal, Barriers: []string{}},
		Tokens:    tokens, Terms: tokens, TopN: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rk.Lexical)+len(rk.Dense) != 0 {
		t.Fatalf("store returned %d hidden hits", len(rk.Lexical)+len(rk.Dense))
	}
	if rk.ExcludedByEntitlement < 2 {
		t.Fatalf("excluded_by_entitlement = %d, want >= 2 (both documents hidden on the lexical side)", rk.ExcludedByEntitlement)
	}
}
