package bench

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

var loadChunks = flag.Int("load-chunks", 20_000, "chunks of the tenant BenchmarkColdLoad loads")

// BenchmarkColdLoad measures loading one generated tenant of -load-chunks
// chunks into the in-memory query path: each iteration opens a store whose
// first query loads the tenant and waits for it (no background load). It
// reports the load's wall time (load-s/op), the CPU time of this process
// (cpu-s/op: the load, and one query) and of the database's PostgreSQL
// backends (pg-cpu-s/op) per load, what the budget is charged for the
// tenant per chunk (bytes/chunk: the index's own count of its memory,
// memindex.Index.Bytes) and the live
// heap the loaded store holds, after a collection, per chunk
// (heap-bytes/chunk). The
// corpus is ingested once into the database cordon_load_<chunks> on the
// CORDON_TEST_DATABASE_URL server and kept for later runs. Run it with
// -cpuprofile to see where a load spends its time.
//
//	go test ./lab/bench -run '^$' -bench ColdLoad -benchtime 3x -load-chunks 100000
func BenchmarkColdLoad(b *testing.B) {
	base := os.Getenv("CORDON_TEST_DATABASE_URL")
	if base == "" {
		b.Skip("SKIPPING: CORDON_TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	dbURL, err := keptDatabase(ctx, base, fmt.Sprintf("cordon_load_%d", *loadChunks))
	if err != nil {
		b.Fatal(err)
	}
	g, err := NewGenerator(Config{Seed: 1, Chunks: *loadChunks, Tenants: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := ingestOnce(ctx, dbURL, g); err != nil {
		b.Fatal(err)
	}
	q := g.Queries(1)[0]
	db := databaseName(dbURL)
	var load, cpu, dbCPU time.Duration
	var bytes int64
	var heap float64
	b.ResetTimer()
	for b.Loop() {
		heapBefore := liveHeap()
		before := readCPU(db)
		st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 4, CacheBytes: 16 << 30})
		if err != nil {
			b.Fatal(err)
		}
		sys := &cordonSystem{st: st, r: retrieval.New(st)}
		if _, err := sys.Query(ctx, q); err != nil {
			b.Fatal(err)
		}
		after := readCPU(db) // before Close: the backends' CPU leaves with them
		heap += float64(liveHeap() - heapBefore)
		cs := st.CacheStats()
		st.Close()
		if cs.Loads != 1 || cs.MemoryAnswers != 1 {
			b.Fatalf("%+v: want one load and the query answered from it", cs)
		}
		load += cs.LoadTime
		cpu += after.process - before.process
		dbCPU += after.db - before.db
		bytes = cs.Bytes
	}
	n := float64(b.N)
	b.ReportMetric(load.Seconds()/n, "load-s/op")
	b.ReportMetric(cpu.Seconds()/n, "cpu-s/op")
	b.ReportMetric(dbCPU.Seconds()/n, "pg-cpu-s/op")
	b.ReportMetric(float64(bytes)/float64(*loadChunks), "bytes/chunk")
	b.ReportMetric(heap/n/float64(*loadChunks), "heap-bytes/chunk")
}

// liveHeap is the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// keptDatabase returns the URL of database name on the server of base,
// creating and migrating it when missing.
func keptDatabase(ctx context.Context, base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil {
			return "", err
		}
	}
	u.Path = "/" + name
	if _, err := migrate.Up(ctx, u.String()); err != nil {
		return "", err
	}
	return u.String(), nil
}

// ingestOnce ingests g's corpus into dbURL unless it holds it already.
func ingestOnce(ctx context.Context, dbURL string, g *Generator) error {
	st, err := newCordon(ctx, dbURL, 8, 0)
	if err != nil {
		return err
	}
	defer st.Close()
	st.reuse = true
	_, err = st.Ingest(ctx, g, 8, 50, func(int64) {})
	return err
}

// TestReuseSkipsIngestOfAHeldCorpus: with reuse, cordon's ingest is skipped
// (nothing is written) when the tenants hold the corpus, and runs when
// they hold another one of the same size or none.
func TestReuseSkipsIngestOfAHeldCorpus(t *testing.T) {
	ctx := context.Background()
	dbURL := migratedDatabase(t)
	tenantIDs := func(c *cordonSystem, g *Generator) []int64 {
		t.Helper()
		var out []int64
		for i := range g.Config().Tenants {
			schema, err := postgres.SchemaName(g.TenantName(i))
			if err != nil {
				t.Fatal(err)
			}
			// The stats table's OID: an ingest drops and creates the tenant.
			var v int64
			if err := c.st.Pool().QueryRow(ctx, `SELECT to_regclass($1)::oid::bigint`, quoteIdent(schema)+`.stats`).Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	ingest := func(g *Generator) (bool, []int64) {
		t.Helper()
		c, err := newCordon(ctx, dbURL, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.reuse = true
		own, err := c.Ingest(ctx, g, 2, 10, func(int64) {})
		if err != nil {
			t.Fatal(err)
		}
		return own, tenantIDs(c, g)
	}
	g, err := NewGenerator(Config{Seed: 5, Chunks: 240, Tenants: 3})
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewGenerator(Config{Seed: 6, Chunks: 240, Tenants: 3})
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := ingest(g); !own {
		t.Fatal("an empty database: the corpus was not ingested")
	}
	_, before := ingest(other)
	if own, v := ingest(g); !own || slices.Equal(v, before) {
		t.Fatalf("another corpus of the same size was held: ingested %v, tenants %v then %v; want an ingest", own, before, v)
	}
	_, before = ingest(g)
	if own, v := ingest(g); own || !slices.Equal(v, before) {
		t.Fatalf("the corpus was held: ingested %v, tenants %v then %v; want no ingest", own, before, v)
	}
	o := Options{Reuse: true, CreateDatabase: true, Queries: 1, Concurrency: 1}
	if err := o.validate(); err == nil {
		t.Fatal("reuse with create-database: want an error")
	}
}
