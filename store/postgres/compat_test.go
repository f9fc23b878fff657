package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// TestTenantNeedsNewerBinary: a tenant whose registry row asks for a
// binary built with later migrations than this one's (reader_min, which a
// migration that does not keep the previous release correct raises) is
// refused on every path, with ErrSchemaTooNew and never an answer: a
// retrieve on the in-memory path and in SQL, even one cached before the
// migration, a write, a chunk load. Readiness names it. Another tenant,
// left readable, is served as before.
func TestTenantNeedsNewerBinary(t *testing.T) {
	ctx := context.Background()
	url := testDatabase(t)
	settings := index.DefaultSettings()
	w, err := Open(ctx, url, Options{AutoCreate: &settings})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tn := range []string{"newer", "older"} {
		if _, err := w.Put(ctx, cordontype.Document{Tenant: tn, DocID: "d", Text: "wire hold release", Classification: cordontype.Public}); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := Open(ctx, url, Options{CacheBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	sql, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sql.Close()
	q := func(tn string) retrieval.Query {
		return retrieval.Query{Principal: cordontype.Principal{Tenant: tn, Clearance: cordontype.Internal, Barriers: []string{}},
			Text: "wire hold", NowTick: 1, Policy: retrieval.DefaultPolicy()}
	}
	if r, err := retrieval.New(mem).Retrieve(ctx, q("newer")); err != nil || len(r.Chunks) != 1 {
		t.Fatalf("before: %d chunks, %v; want 1 from the cache", len(r.Chunks), err)
	}
	if err := mem.Ready(ctx); err != nil {
		t.Fatalf("ready before: %v", err)
	}
	// What a later, incompatible migration does to a tenant it changes;
	// the goose row stands for that migration.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	next := migrate.Latest() + 1
	if _, err := conn.Exec(ctx, `UPDATE cordon.tenants SET reader_min = $1 WHERE name = 'newer'`, next); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO public.goose_db_version (version_id, is_applied) VALUES ($1, true)`, next); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"in-memory path": mem, "SQL path": sql} {
		r, err := retrieval.New(s).Retrieve(ctx, q("newer"))
		if !errors.Is(err, ErrSchemaTooNew) || len(r.Chunks) != 0 {
			t.Fatalf("%s: %d chunks, error %v; want none and ErrSchemaTooNew", name, len(r.Chunks), err)
		}
		if r, err := retrieval.New(s).Retrieve(ctx, q("older")); err != nil || len(r.Chunks) != 1 {
			t.Fatalf("%s, a tenant left readable: %d chunks, %v; want 1", name, len(r.Chunks), err)
		}
	}
	if _, err := w.Put(ctx, cordontype.Document{Tenant: "newer", DocID: "e", Text: "more", Classification: cordontype.Public}); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("put: %v, want ErrSchemaTooNew", err)
	}
	p := cordontype.Principal{Tenant: "newer", Clearance: cordontype.Internal, Barriers: []string{}}
	if _, _, err := sql.LoadChunks(ctx, p, []string{"d::0"}); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("load chunks: %v, want ErrSchemaTooNew", err)
	}
	err = mem.Ready(ctx)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("ready: %v; want not ready, naming tenant newer", err)
	}
	if _, err := conn.Exec(ctx, `UPDATE cordon.tenants SET reader_min = $1 WHERE name = 'newer'`, migrate.Latest()); err != nil {
		t.Fatal(err)
	}
	if err := mem.Ready(ctx); err != nil {
		t.Fatalf("ready with a newer migration that keeps this binary correct: %v", err)
	}
}

// TestSchemaBehindBinary: a database whose migrations stop before this
// binary's newest refuses reads with ErrSchemaBehind, naming the command
// to run, rather than failing on an unknown column.
func TestSchemaBehindBinary(t *testing.T) {
	ctx := context.Background()
	url := testDatabase(t)
	settings := index.DefaultSettings()
	w, err := Open(ctx, url, Options{AutoCreate: &settings})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Put(ctx, cordontype.Document{Tenant: "t", DocID: "d", Text: "wire hold release", Classification: cordontype.Public}); err != nil {
		t.Fatal(err)
	}
	if err := migrate.DownTo(ctx, url, 15); err != nil {
		t.Fatal(err)
	}
	_, err = retrieval.New(w).Retrieve(ctx, retrieval.Query{Principal: cordontype.Principal{Tenant: "t", Clearance: cordontype.Internal, Barriers: []string{}},
		Text: "wire hold", NowTick: 1, Policy: retrieval.DefaultPolicy()})
	if !errors.Is(err, ErrSchemaBehind) || !strings.Contains(err.Error(), "cordon migrate") {
		t.Fatalf("retrieve: %v; want ErrSchemaBehind naming 'cordon migrate'", err)
	}
}

// TestDropTenantTakesTheWriteLock: migration 00016's drop_tenant names the
// write lock's class by number; it must be writeLockClass.
func TestDropTenantTakesTheWriteLock(t *testing.T) {
	b, err := os.ReadFile("../../migrations/00016_tenant_incarnation.sql")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("pg_advisory_xact_lock(%d, hashtext(s))", writeLockClass); !strings.Contains(string(b), want) {
		t.Fatalf("migration 00016's drop_tenant does not take %s", want)
	}
}
