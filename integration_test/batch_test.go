package integration_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
)

// TestPutBatch: a batch is one transaction. Its results equal the reference
// fed the same documents one by one (the last version of a repeated id wins),
// and a batch with one bad document stores nothing.
func TestPutBatch(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	settings.Chunking.MaxWords, settings.Chunking.OverlapWords = 5, 1
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	ref, err := memory.New(settings)
	if err != nil {
		t.Fatal(err)
	}
	var docs []cordontype.Document
	for i := range 30 {
		docs = append(docs, cordontype.Document{Tenant: "bulk", DocID: fmt.Sprintf("d%d", i%25),
			Text: fmt.Sprintf("# part %d\nwire hold %d release notes for desk %d and more words here", i, i, i%7), Classification: cordontype.Classification(i % 3), AsOfTick: int64(i)})
	}
	if _, err := st.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if _, err := ref.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"wire hold", "release desk 3", "part 27 notes", "nothing"} {
		query := retrieval.Query{Principal: cordontype.Principal{Tenant: "bulk", Clearance: cordontype.Internal}, Text: q, NowTick: 40, Policy: retrieval.DefaultPolicy()}
		a, err := retrieval.New(st).Retrieve(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		b, err := retrieval.New(ref).Retrieve(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		if ids(a) != ids(b) {
			t.Fatalf("query %q: batch-loaded postgres %s, reference %s", q, ids(a), ids(b))
		}
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_bulk.documents`); n != 25 {
		t.Fatalf("%d documents stored, want 25", n)
	}
	before := queryInt(t, dbURL, `SELECT n_chunks FROM cordon_t_bulk.stats`)
	bad := []cordontype.Document{
		{Tenant: "bulk", DocID: "new1", Text: "fine text", Classification: cordontype.Public},
		{Tenant: "bulk", DocID: "new2", Text: "!!!", Classification: cordontype.Public},
	}
	if _, err := st.PutBatch(ctx, bad); !errors.Is(err, cordontype.ErrInvalid) {
		t.Fatalf("batch with a token-less document: got %v, want ErrInvalid", err)
	}
	if n := queryInt(t, dbURL, `SELECT n_chunks FROM cordon_t_bulk.stats`); n != before {
		t.Fatalf("a rejected batch changed n_chunks %d -> %d", before, n)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_bulk.documents WHERE doc_id = 'new1'`); n != 0 {
		t.Fatal("a rejected batch stored its valid document")
	}
}
