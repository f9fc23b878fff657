package integration_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/store/postgres"
)

// TestServerTenantFairShare (issue 42, item 5): one tenant's expensive
// requests hold at most their share of the database pool, so another
// tenant is still served while they are stuck. Wholesale's chunks table is
// locked, so every ground of wholesale that reaches the database waits
// there holding a pool connection. With cordon serve's defaults over a
// pool of 4, two of wholesale's 13 grounds run (half the pool), eight wait
// in the tenant's queue (4 x 2) and three are refused with 429, counted by
// reason; retail's retrieve and ground are answered meanwhile. Nothing is
// timed: the test waits for the database to show the grounds waiting and
// asserts who was admitted.
func TestServerTenantFairShare(t *testing.T) {
	const pool = 4
	a := startAPIServer(t, serverOpts{metrics: true, maxConns: pool})
	a.seed(t)
	ctx := context.Background()
	wholesale := tok(t, "alice", "tenant=wholesale", "clearance=restricted", "reader")
	retail := tok(t, "bob", "tenant=retail", "reader")
	retrieve := func(tenant, token string) []string {
		t.Helper()
		r := a.want(t, a.call(t, "POST", "/v1/tenants/"+tenant+"/retrieve", token, map[string]any{"query": "treasury hold settlement"}), http.StatusOK)
		return resultIDs(t, r.json(t))
	}
	ground := func(tenant, token string, ids []string) (resp, error) {
		return a.try("POST", "/v1/tenants/"+tenant+"/ground", token, map[string]any{"claims": []string{"treasury approval"}, "chunk_ids": ids})
	}
	wholesaleIDs, retailIDs := retrieve("wholesale", wholesale), retrieve("retail", retail)
	if len(wholesaleIDs) == 0 || len(retailIDs) == 0 {
		t.Fatalf("seeded tenants found nothing: wholesale %v, retail %v", wholesaleIDs, retailIDs)
	}

	schema, err := postgres.SchemaName("wholesale")
	if err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{schema, "chunks"}.Sanitize()
	lock, err := pgx.Connect(ctx, a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	unlock := sync.OnceFunc(func() {
		_ = tx.Rollback(ctx)
		_ = lock.Close(ctx)
	})
	t.Cleanup(unlock)

	// cordon serve's defaults over this pool: half of it per tenant, and
	// four times that waiting.
	const running, queued, refused = pool / 2, 4 * (pool / 2), 3
	results := make(chan resp, running+queued+refused)
	for range running + queued + refused {
		go func() {
			r, err := ground("wholesale", wholesale, wholesaleIDs)
			if err != nil {
				r = resp{status: -1, body: []byte(err.Error())}
			}
			results <- r
		}()
	}
	waiting := func() int64 {
		return queryInt(t, a.dbURL, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, table)
	}
	for waiting() < running {
		if t.Context().Err() != nil {
			t.Fatalf("gave up waiting for %d grounds of wholesale in the database", running)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Retail is served while wholesale's grounds are stuck.
	if got := retrieve("retail", retail); len(got) == 0 {
		t.Fatal("retail's retrieve found nothing")
	}
	if r, err := ground("retail", retail, retailIDs); err != nil || r.status != http.StatusOK {
		t.Fatalf("retail's ground while wholesale's are stuck: %v %d %s, want 200", err, r.status, r.body)
	}
	// Wholesale's grounds beyond its running and waiting ones were refused
	// at once, saying which limit; the running ones hold no more than
	// their share of the pool.
	for range refused {
		r := <-results
		if r.status != http.StatusTooManyRequests || r.errCode(t) != "too_many_requests" || r.header.Get("Retry-After") != "1" ||
			!strings.Contains(string(r.body), "--tenant-requests") {
			t.Fatalf("a ground of wholesale past its limit: %d %v %s, want 429 too_many_requests naming --tenant-requests, with Retry-After 1",
				r.status, r.header, r.body)
		}
	}
	if n := waiting(); n != running {
		t.Fatalf("%d grounds of wholesale wait in the database, want %d (its share of a pool of %d)", n, running, pool)
	}
	m := a.get(t, a.metricsURL+"/metrics")
	for _, want := range []string{
		`cordon_requests_refused_total{op="ground",reason="tenant_limit"} 3` + "\n",
		`cordon_requests_refused_total{op="retrieve",reason="tenant_limit"} 0` + "\n",
		`cordon_requests_refused_total{op="ground",reason="chunk_ids"} 0` + "\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", strings.TrimSpace(want))
		}
	}

	// Once the table is free, every admitted ground is answered.
	unlock()
	for range running + queued {
		if r := <-results; r.status != http.StatusOK {
			t.Fatalf("an admitted ground of wholesale: %d %s, want 200", r.status, r.body)
		}
	}
	retrieve("wholesale", wholesale)
}
