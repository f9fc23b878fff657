package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// shardScans sums, on the node at nodeURL, the sequential and index scans
// of each tenant's shard tables and of the registry's placement, from the
// node's own statistics (pg_stat_user_tables, with the shards Citus hides
// from other sessions shown).
func shardScans(t *testing.T, nodeURL string, tenants []string) (perTenant map[string]int64, registry int64) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, nodeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `SET citus.override_table_visibility = off`); err != nil {
		t.Fatal(err)
	}
	perTenant = map[string]int64{}
	for _, tenant := range tenants {
		var n int64
		if err := c.QueryRow(ctx, `SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)::bigint
			FROM pg_stat_user_tables WHERE schemaname = 'cordon_t_' || $1 AND relname ~ '_[0-9]+$'`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		perTenant[tenant] = n
	}
	if err := c.QueryRow(ctx, `SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = 'cordon' AND relname ~ '^tenants_[0-9]+$'`).Scan(&registry); err != nil {
		t.Fatal(err)
	}
	return perTenant, registry
}

// TestCitusQueriesStayOnOneWorker: tenants spread over the workers, and
// each tenant's queries, registry lookup included, run on its own worker
// alone, as the workers' own statistics count them: the shards of the
// tenant and the registry's copy are scanned there, and nothing is
// scanned on the other worker.
func TestCitusQueriesStayOnOneWorker(t *testing.T) {
	ctx := context.Background()
	base := requireCitus(t)
	dbURL := newCitusDatabase(t, base, true)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	settings := index.DefaultSettings()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{AutoCreate: &settings})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []string{"q0", "q1", "q2", "q3"}
	where := map[string]string{}
	perWorker := map[string]int{}
	for _, tenant := range tenants {
		for i := range 20 {
			put(t, st, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("d%d", i), Text: fmt.Sprintf("ledger %d wire hold release %s", i, tenant), Classification: cordontype.Public})
		}
		p, err := st.TenantPlacement(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		where[tenant] = p.Node
		perWorker[p.Node]++
	}
	st.Close() // the workers' backends of these connections end and report their statistics
	workers := citusWorkers(t, base)
	if len(perWorker) != len(workers) {
		t.Fatalf("tenants per worker %v: want tenants on each of the %d workers", perWorker, len(workers))
	}
	t.Logf("tenants per worker: %v", perWorker)
	db := strings.TrimPrefix(mustParsePath(t, dbURL), "/")
	snapshot := func() map[string][2]any {
		out := map[string][2]any{}
		for _, w := range workers {
			pt, reg := shardScans(t, withNode(t, base, &w, db), tenants)
			out[w.String()] = [2]any{pt, reg}
		}
		return out
	}
	const queries = 25
	for _, tenant := range tenants[:2] {
		before := snapshot()
		st, err := postgres.Open(ctx, dbURL, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range queries {
			if _, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Public},
				Text: fmt.Sprintf("ledger %d wire", i), Policy: retrieval.DefaultPolicy()}); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		var after map[string][2]any
		// A backend reports its statistics as it exits, shortly after the
		// coordinator closed its connections.
		for range 50 {
			after = snapshot()
			pt := after[where[tenant]][0].(map[string]int64)
			if pt[tenant]-before[where[tenant]][0].(map[string]int64)[tenant] > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, w := range workers {
			n := w.String()
			scans := after[n][0].(map[string]int64)[tenant] - before[n][0].(map[string]int64)[tenant]
			reg := after[n][1].(int64) - before[n][1].(int64)
			t.Logf("%d queries of tenant %s (on %s): worker %s scanned the tenant's shards %d times and the registry %d times", queries, tenant, where[tenant], n, scans, reg)
			switch {
			case n == where[tenant] && (scans < queries || reg < queries):
				t.Errorf("tenant %s: its worker %s counts %d shard scans and %d registry scans for %d queries, want at least %d of each", tenant, n, scans, reg, queries, queries)
			case n != where[tenant] && (scans != 0 || reg != 0):
				t.Errorf("tenant %s: worker %s, which does not hold it, counts %d shard scans and %d registry scans, want 0", tenant, n, scans, reg)
			}
		}
	}
}

func mustParsePath(t *testing.T, u string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	return "/" + cfg.Database
}

// nodeCPU is the CPU time the PostgreSQL server listening on port has used:
// its postmaster's own and reaped children's, plus its live children's
// (/proc, Linux; the server must run on this machine).
func nodeCPU(t testing.TB, port int) time.Duration {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	flag := []byte("-p\x00" + strconv.Itoa(port) + "\x00")
	var post int
	parent := map[int]int{}
	stats := map[int][]string{}
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		b, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid], stats[pid] = ppid, f
		if cmd, err := os.ReadFile(p + "/cmdline"); err == nil && bytes.HasPrefix(cmd, []byte("/usr/lib/postgresql/")) && bytes.Contains(cmd, flag) {
			post = pid
		}
	}
	if post == 0 {
		t.Skipf("SKIPPING: no PostgreSQL server with -p %d visible in /proc", port)
	}
	ticks := func(f []string, fields ...int) time.Duration {
		var s int64
		for _, k := range fields {
			v, _ := strconv.ParseInt(f[k-3], 10, 64)
			s += v
		}
		return time.Duration(s) * 10 * time.Millisecond
	}
	d := ticks(stats[post], 14, 15, 16, 17)
	for pid, pp := range parent {
		if pp == post {
			d += ticks(stats[pid], 14, 15)
		}
	}
	return d
}

// BenchmarkCitusOverhead measures what a coordinator adds to a query
// against a single PostgreSQL: latency (serial queries, SQL ranking and
// the in-memory path) and the CPU of every node, logged. It needs both
// CORDON_TEST_DATABASE_URL and CORDON_TEST_CITUS_URL, servers on this
// machine; docs/benchmarks.md ("Citus") has its numbers.
func BenchmarkCitusOverhead(b *testing.B) {
	t := testing.TB(b) // one pass whatever b.N: run it with -benchtime 1x
	ctx := context.Background()
	base := requireCitus(t)
	single := migrated(t) // the plain server of CORDON_TEST_DATABASE_URL
	clustered := newCitusDatabase(t, base, true)
	if _, err := migrate.Up(ctx, clustered); err != nil {
		t.Fatal(err)
	}
	const tenant, docs, queries = "perf", 2000, 400
	settings := index.DefaultSettings()
	type setup struct {
		name  string
		url   string
		ports func() []int
	}
	singlePort := coordinatorNode(t, single).port
	coordPort := coordinatorNode(t, base).port
	setups := []setup{
		{"single node", single, func() []int { return []int{singlePort} }},
		{"coordinator + worker", clustered, nil},
	}
	for _, s := range setups {
		st := openStore(t, s.url, postgres.Options{AutoCreate: &settings})
		var batch []cordontype.Document
		for i := range docs {
			batch = append(batch, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("d%05d", i),
				Text: fmt.Sprintf("ledger %d wire hold %d release review of account %d by desk %d", i, i%97, i%13, i%7), Classification: cordontype.Classification(i % 3)})
		}
		if _, err := st.PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	p, err := openStore(t, clustered, postgres.Options{}).TenantPlacement(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	_, wport, _ := strings.Cut(p.Node, ":")
	workerPort := mustAtoi(t, wport)
	setups[1].ports = func() []int { return []int{coordPort, workerPort} }
	for _, cache := range []int64{0, 1 << 28} {
		for _, s := range setups {
			st := openStore(t, s.url, postgres.Options{CacheBytes: cache, MaxConns: 2})
			q := func(i int) {
				if _, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Internal},
					Text: fmt.Sprintf("ledger %d wire review desk %d", i, i%7), Policy: retrieval.DefaultPolicy()}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				q(i) // warm: plans, caches, connections
			}
			cpu0 := map[int]time.Duration{}
			for _, port := range s.ports() {
				cpu0[port] = nodeCPU(t, port)
			}
			lat := make([]time.Duration, queries)
			for i := range queries {
				start := time.Now()
				q(i)
				lat[i] = time.Since(start)
			}
			slices.Sort(lat)
			var cpu []string
			var total time.Duration
			for _, port := range s.ports() {
				d := nodeCPU(t, port) - cpu0[port]
				total += d
				cpu = append(cpu, fmt.Sprintf(":%d %v/query", port, (d/queries).Round(time.Microsecond)))
			}
			t.Logf("%s, cache %d: p50 %v p95 %v per query; server CPU %v/query (%s)", s.name, cache,
				lat[queries/2].Round(time.Microsecond), lat[queries*95/100].Round(time.Microsecond),
				(total / queries).Round(time.Microsecond), strings.Join(cpu, ", "))
		}
	}
}
