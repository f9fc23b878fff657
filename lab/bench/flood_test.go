package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

var (
	floodClients   = flag.Int("flood-clients", 28, "BenchmarkTenantFlood: tenant A's concurrent ground clients")
	floodChunks    = flag.Int("flood-chunks", 1000, "BenchmarkTenantFlood: chunk ids each of tenant A's grounds names")
	floodRetrieves = flag.Int("flood-retrieves", 400, "BenchmarkTenantFlood: tenant B's retrieves measured alone and under the flood, per iteration")
	floodConns     = flag.Int("flood-max-conns", 0, "BenchmarkTenantFlood: the server's database pool (0: pgxpool's default, as cordon serve)")
	floodPolite    = flag.Bool("flood-retry-after", false, "BenchmarkTenantFlood: tenant A's clients wait the Retry-After delay after a 429 (default: they send again at once)")
)

// BenchmarkTenantFlood measures what one tenant's flood of ground requests
// does to another tenant's retrieves (issue 42, item 5). The real server
// runs in this process with cordon serve's defaults (server.Config{}, the
// pool at pgxpool's default size unless -flood-max-conns) over two
// generated tenants of 5,000 chunks each, kept in the database
// cordon_flood on the CORDON_TEST_DATABASE_URL server. Each iteration
// sends tenant B's -flood-retrieves retrieves one after another alone,
// then again while -flood-clients clients of tenant A send grounds naming
// -flood-chunks chunk ids each, back to back (a refused ground is sent
// again at once, as a client that ignores Retry-After would, or after the
// Retry-After delay with -flood-retry-after). It reports
// B's p50 and p99 alone and under the flood, the ratio of the p99s
// (p99-ratio), and A's grounds answered and refused per second of the
// flood.
//
//	go test ./lab/bench/ -run '^$' -bench TenantFlood -benchtime 3x
func BenchmarkTenantFlood(b *testing.B) {
	base := os.Getenv("CORDON_TEST_DATABASE_URL")
	if base == "" {
		b.Skip("SKIPPING: CORDON_TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	dbURL, err := keptDatabase(ctx, base, "cordon_flood")
	if err != nil {
		b.Fatal(err)
	}
	g, err := NewGenerator(Config{Seed: 1, Chunks: 10000, Tenants: 2})
	if err != nil {
		b.Fatal(err)
	}
	if err := ingestOnce(ctx, dbURL, g); err != nil {
		b.Fatal(err)
	}
	tenantA, tenantB := g.TenantName(0), g.TenantName(1)
	ids, err := firstChunkIDs(ctx, dbURL, tenantA, *floodChunks)
	if err != nil {
		b.Fatal(err)
	}
	var queries []Query
	for _, q := range g.Queries(4 * *floodRetrieves) {
		if q.Principal.Tenant == tenantB {
			queries = append(queries, q)
		}
	}
	if len(queries) == 0 {
		b.Fatal("no query of tenant B")
	}
	h, err := newFloodServer(ctx, dbURL, *floodClients+1)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			b.Error(err)
		}
	}()
	// Tenant A's principal sees every chunk.
	qa := Query{Text: queries[0].Text, Principal: cordontype.Principal{Tenant: tenantA, Clearance: cordontype.Restricted, Barriers: []string{"mna", "trading"}}}
	ground := func(ctx context.Context) error {
		return h.do(ctx, http.MethodPost, tenantPath(tenantA, "/ground"), server.RoleReader, qa,
			server.GroundRequest{Claims: []string{qa.Text}, ChunkIDs: ids}, nil)
	}
	retrieve := func(i int) time.Duration {
		q := queries[i%len(queries)]
		start := time.Now()
		if err := h.do(ctx, http.MethodPost, tenantPath(tenantB, "/retrieve"), server.RoleReader, q,
			server.RetrieveRequest{Query: &q.Text, NowTick: &q.NowTick}, nil); err != nil {
			b.Fatalf("tenant B's retrieve: %v", err)
		}
		return time.Since(start)
	}
	// Both tenants loaded into memory, as a server that has run a while.
	if err := ground(ctx); err != nil {
		b.Fatal(err)
	}
	retrieve(0)
	for h.stats().Cache.Loading > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 50 {
		retrieve(i)
	}
	var alone, flooded []time.Duration
	var answered, refused atomic.Int64
	var floodTime time.Duration
	b.ResetTimer()
	for b.Loop() {
		for i := range *floodRetrieves {
			alone = append(alone, retrieve(i))
		}
		fctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var started sync.WaitGroup
		started.Add(*floodClients)
		errc := make(chan error, *floodClients)
		for range *floodClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				for fctx.Err() == nil {
					err := ground(fctx)
					if first {
						started.Done()
						first = false
					}
					var se *statusError
					switch {
					case err == nil:
						answered.Add(1)
					case errors.As(err, &se) && se.code == http.StatusTooManyRequests:
						refused.Add(1)
						if *floodPolite {
							select {
							case <-fctx.Done():
							case <-time.After(time.Second): // the server's Retry-After: 1
							}
						}
					case fctx.Err() != nil:
					default:
						errc <- err
						return
					}
				}
			}()
		}
		// Every flood client has had an answer: the flood is at full
		// strength before B is measured.
		started.Wait()
		t0 := time.Now()
		for i := range *floodRetrieves {
			flooded = append(flooded, retrieve(i))
		}
		floodTime += time.Since(t0)
		stop()
		wg.Wait()
		close(errc)
		for err := range errc {
			b.Fatalf("tenant A's ground: %v", err)
		}
	}
	b.StopTimer()
	p99a, p99f := Percentile(alone, 99), Percentile(flooded, 99)
	b.ReportMetric(ms(Percentile(alone, 50)), "alone-p50-ms")
	b.ReportMetric(ms(p99a), "alone-p99-ms")
	b.ReportMetric(ms(Percentile(flooded, 50)), "flood-p50-ms")
	b.ReportMetric(ms(p99f), "flood-p99-ms")
	b.ReportMetric(float64(p99f)/float64(p99a), "p99-ratio")
	b.ReportMetric(float64(answered.Load())/floodTime.Seconds(), "a-grounds/s")
	b.ReportMetric(float64(refused.Load())/floodTime.Seconds(), "a-refused/s")
}

// newFloodServer starts the real server with cordon serve's defaults
// (server.Config{}: tenant limits at their defaults) over a pool of
// -flood-max-conns, and a client of up to clients connections.
func newFloodServer(ctx context.Context, dbURL string, clients int) (*httpSystem, error) {
	secret, err := randomText(32)
	if err != nil {
		return nil, err
	}
	key := make([]byte, audit.MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Clients 0: the server's per-tenant limits take their defaults.
	srv, err := startLocalServer(ctx, serverConfig{DatabaseURL: dbURL, Conns: int32(*floodConns), CacheBytes: 2 << 30, Secret: secret, AuditKey: key})
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients, MaxConnsPerHost: clients, DisableCompression: true}
	return &httpSystem{srv: srv, base: "http://" + srv.Addr(), client: &http.Client{Transport: tr}, secret: secret, tokens: map[string]string{}}, nil
}

// firstChunkIDs returns n chunk ids of tenant, in id order.
func firstChunkIDs(ctx context.Context, dbURL, tenant string, n int) ([]string, error) {
	st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 1})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	schema, err := postgres.SchemaName(tenant)
	if err != nil {
		return nil, err
	}
	rows, err := st.Pool().Query(ctx, `SELECT chunk_id FROM `+quoteIdent(schema)+`.chunks ORDER BY chunk_id LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(ids) < n {
		return nil, fmt.Errorf("tenant %s has %d chunks, want %d", tenant, len(ids), n)
	}
	return ids, nil
}
