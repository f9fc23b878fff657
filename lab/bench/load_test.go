package bench

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
)

var loadChunks = flag.Int("load-chunks", 20_000, "chunks of the tenant BenchmarkColdLoad loads")

// BenchmarkColdLoad measures loading one generated tenant of -load-chunks
// chunks into the in-memory query path: each iteration opens a store whose
// first query loads the tenant and waits for it (no background load). The
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
	b.ResetTimer()
	for b.Loop() {
		st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 4, CacheBytes: 16 << 30})
		if err != nil {
			b.Fatal(err)
		}
		sys := &cordonSystem{st: st, r: retrieval.New(st)}
		if _, err := sys.Query(ctx, q); err != nil {
			b.Fatal(err)
		}
		cs := st.CacheStats()
		st.Close()
		if cs.Loads != 1 || cs.MemoryAnswers != 1 {
			b.Fatalf("%+v: want one load and the query answered from it", cs)
		}
		b.ReportMetric(cs.LoadTime.Seconds(), "load-s/op")
		b.ReportMetric(float64(cs.Bytes)/float64(*loadChunks), "bytes/chunk")
	}
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
	if _, err := postgres.Migrate(ctx, u.String()); err != nil {
		return "", err
	}
	return u.String(), nil
}

// ingestOnce ingests g's corpus into dbURL unless its tenant already holds
// the corpus' chunk count.
func ingestOnce(ctx context.Context, dbURL string, g *Generator) error {
	st, err := newCordon(ctx, dbURL, 8, 0)
	if err != nil {
		return err
	}
	defer st.Close()
	schema, err := postgres.SchemaName(g.TenantName(0))
	if err != nil {
		return err
	}
	var n int64
	err = st.st.Pool().QueryRow(ctx, `SELECT n_chunks FROM `+quoteIdent(schema)+`.stats`).Scan(&n)
	if err == nil && n == int64(g.Config().Chunks) {
		return nil
	}
	_, err = st.Ingest(ctx, g, 8, 50, func(int64) {})
	return err
}
