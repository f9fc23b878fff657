package labcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/lab/bench"
)

func runBenchCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }},
		append([]string{"bench"}, args...))
	return out.String(), errb.String(), code
}

// benchDatabaseURL returns the test server's URL, skipping loudly without
// one, except where a database is required (CI, CORDON_REQUIRE_DB).
func benchDatabaseURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("CORDON_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") != "" || os.Getenv("CORDON_REQUIRE_DB") != "" {
			t.Fatal("PostgreSQL is required here: set CORDON_TEST_DATABASE_URL")
		}
		t.Skip("SKIPPING bench end-to-end test: CORDON_TEST_DATABASE_URL is not set (run 'make test', which starts a throwaway PostgreSQL)")
	}
	return u
}

// An end-to-end run on a small corpus: the JSON has the documented shape,
// the two exact stores return byte-identical top-10 lists, and the plot is
// drawn from the report.
func TestBenchEndToEnd(t *testing.T) {
	url := benchDatabaseURL(t)
	stdout, stderr, code := runBenchCLI(t, nil, "--database-url", url, "--chunks", "300", "--tenants", "2",
		"--queries", "20", "--concurrency", "3", "--warmup", "2", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "[cordon] ingested 300 chunks") {
		t.Errorf("stderr has no progress display:\n%s", stderr)
	}

	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"chunks", "tenants", "queries", "systems"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON has no %q", k)
		}
	}
	var systems map[string]map[string]any
	if err := json.Unmarshal(raw["systems"], &systems); err != nil {
		t.Fatal(err)
	}
	keys := []string{"p50_ms", "p95_ms", "p99_ms", "qps", "ingest_chunks_per_s", "bytes_per_chunk", "recall_at_10"}
	for _, name := range bench.DefaultSystems {
		s, ok := systems[name]
		if !ok || s == nil {
			t.Fatalf("systems.%s is missing or null", name)
		}
		for _, k := range keys {
			if _, ok := s[k]; !ok {
				t.Errorf("systems.%s has no %q", name, k)
			}
		}
		if p50, _ := s["p50_ms"].(float64); !(p50 > 0) {
			t.Errorf("systems.%s.p50_ms = %v, want > 0", name, s["p50_ms"])
		}
	}
	nulls := map[string][]string{
		"memory":     {"bytes_per_chunk"},
		"sql_exact":  {"ingest_chunks_per_s", "bytes_per_chunk"},
		"cordon_sql": {"ingest_chunks_per_s", "bytes_per_chunk"},
	}
	for name, ks := range nulls {
		for _, k := range ks {
			if systems[name][k] != nil {
				t.Errorf("systems.%s.%s = %v, want null", name, k, systems[name][k])
			}
		}
	}
	for _, name := range []string{"cordon", "sql_hybrid"} {
		if b, _ := systems[name]["bytes_per_chunk"].(float64); !(b > 0) {
			t.Errorf("systems.%s.bytes_per_chunk = %v, want > 0", name, systems[name]["bytes_per_chunk"])
		}
	}

	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Chunks != 300 || rep.Tenants != 2 || rep.Queries != 20 || rep.Reference != "memory" {
		t.Errorf("got chunks %d, tenants %d, queries %d, reference %q; want 300, 2, 20, memory", rep.Chunks, rep.Tenants, rep.Queries, rep.Reference)
	}
	// The headline is cordon as 'cordon serve' runs it by default: an
	// automatic budget, the cold tenant answered while it loads, every
	// measured query answered from memory; cordon_sql is its SQL path.
	if rep.Headline != "cordon" || rep.CacheBytes <= 0 || !strings.HasPrefix(rep.CacheRule, "auto: ") {
		t.Errorf("headline %q, budget %d (%q); want cordon with an automatic budget", rep.Headline, rep.CacheBytes, rep.CacheRule)
	}
	if c := rep.Systems["cordon"]; c.ColdFirstQueryMS == nil || c.LoadedAfterS == nil || c.Cache == nil ||
		c.Cache.Loads != 2 || c.Cache.Tenants != 2 || c.Cache.SQLAnswers != 0 || c.Cache.MemoryAnswers == 0 || c.Cache.PeakBytes > rep.CacheBytes {
		t.Errorf("cordon: cold %v, loaded after %v, cache %+v; want two tenants loaded before the measured run, which memory answered", c.ColdFirstQueryMS, c.LoadedAfterS, c.Cache)
	}
	if c := rep.Systems["cordon_sql"]; c.Cache != nil {
		t.Errorf("cordon_sql has an in-memory path: %+v", c.Cache)
	}
	for _, name := range []string{"memory", "cordon", "cordon_sql"} {
		s := rep.Systems[name]
		if s.RecallAt10 == nil || *s.RecallAt10 != 1 {
			t.Errorf("systems.%s.recall_at_10 = %v, want 1", name, s.RecallAt10)
		}
		if s.Identical == nil || *s.Identical != rep.Queries {
			t.Errorf("systems.%s: %v of %d top-10 lists identical to the reference, want all", name, s.Identical, rep.Queries)
		}
	}
	if r := rep.Systems["sql_hybrid"].RecallAt10; r == nil || *r < 0 || *r > 1 {
		t.Errorf("systems.sql_hybrid.recall_at_10 = %v, want a value in [0, 1]", r)
	}
	// sql_exact is exact in intent: it finds what the reference finds, but
	// for ties its ln() and sum() may order differently.
	if r := rep.Systems["sql_exact"].RecallAt10; r == nil || *r < 0.9 {
		t.Errorf("systems.sql_exact.recall_at_10 = %v, want at least 0.9", r)
	}

	dir := t.TempDir()
	report := filepath.Join(dir, "r.json")
	if err := os.WriteFile(report, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(dir, "plot.png")
	if code, _, plotErr := runEvalCLI(t, "plot", "bench", "--out", png, report); code != ExitOK {
		t.Fatalf("plot bench: exit %d: %s", code, plotErr)
	}
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Error("plot did not write a PNG")
	}
}

// The service path end to end: the real server answers every query over
// HTTP with the store's own top-10 list, its throughput is reported next to
// the store's with their ratio, and the mix reports every operation.
func TestBenchHTTP(t *testing.T) {
	url := benchDatabaseURL(t)
	stdout, stderr, code := runBenchCLI(t, nil, "--database-url", url, "--chunks", "400", "--tenants", "3",
		"--queries", "40", "--concurrency", "4", "--warmup", "2", "--systems", "cordon,http", "--mix", "default", "--json", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not a report: %v\n%s", err, stdout)
	}
	h, c := rep.Systems["http"], rep.Systems["cordon"]
	if h == nil || c == nil {
		t.Fatalf("systems.http = %v, systems.cordon = %v; want both", h, c)
	}
	if rep.Reference != "cordon" {
		t.Errorf("reference %q, want cordon", rep.Reference)
	}
	if !(h.QPS > 0) || !(h.P50 > 0) {
		t.Errorf("http: qps %v, p50 %v ms; want > 0", h.QPS, h.P50)
	}
	if h.Identical == nil || *h.Identical != rep.Queries {
		t.Errorf("http: %v of %d top-10 lists equal the store's, want all", h.Identical, rep.Queries)
	}
	if h.QPSRatioToCordon == nil || *h.QPSRatioToCordon != h.QPS/c.QPS {
		t.Errorf("http: qps_ratio_to_cordon %v, want %v / %v", h.QPSRatioToCordon, h.QPS, c.QPS)
	}
	// The CPU of both systems is measured here (Linux, PostgreSQL on this
	// machine): the service path's cost over the store's is reported.
	if h.CPUMsPerQuery == nil || c.CPUMsPerQuery == nil || h.CPURatioToCordon == nil || h.AddedCPUMsPerQuery == nil {
		t.Fatalf("http: cpu %v, cordon cpu %v, cpu_ratio_to_cordon %v, added_cpu_ms_per_query %v; want all",
			h.CPUMsPerQuery, c.CPUMsPerQuery, h.CPURatioToCordon, h.AddedCPUMsPerQuery)
	}
	hc, cc := *h.CPUMsPerQuery, *c.CPUMsPerQuery
	if h.DBCPUMsPerQuery != nil && c.DBCPUMsPerQuery != nil {
		hc, cc = hc+*h.DBCPUMsPerQuery, cc+*c.DBCPUMsPerQuery
	}
	if *h.CPURatioToCordon != hc/cc || *h.AddedCPUMsPerQuery != hc-cc {
		t.Errorf("http: cpu_ratio_to_cordon %v, added_cpu_ms_per_query %v; want %v / %v and their difference", *h.CPURatioToCordon, *h.AddedCPUMsPerQuery, hc, cc)
	}
	// Keep-alive: each client holds one connection for all its requests.
	if h.Connections == nil || *h.Connections < 1 || *h.Connections > int64(rep.Concurrency) {
		n := "none"
		if h.Connections != nil {
			n = strconv.FormatInt(*h.Connections, 10)
		}
		t.Errorf("http: %s connections for %d queries with %d clients, want 1 to %d", n, rep.Queries, rep.Concurrency, rep.Concurrency)
	}
	if h.AuditRecordsPerCommit == nil || !(*h.AuditRecordsPerCommit >= 1) {
		t.Errorf("http: audit records per commit %v, want >= 1", h.AuditRecordsPerCommit)
	}
	// A cluster on this machine's loopback (the Makefile's and CI's) has
	// its backends in /proc; one elsewhere may not.
	u, _ := neturl.Parse(url)
	local := u != nil && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost")
	for name, s := range map[string]*bench.SystemResult{"http": h, "cordon": c} {
		if s.CPUMsPerQuery == nil || !(*s.CPUMsPerQuery > 0) {
			t.Errorf("%s: cpu_ms_per_query %v, want > 0", name, s.CPUMsPerQuery)
		}
		if d := s.DBCPUMsPerQuery; (d == nil && local) || (d != nil && *d < 0) {
			t.Errorf("%s: db_cpu_ms_per_query %v, want >= 0 (database %s)", name, d, u.Host)
		}
	}
	// By default the server runs in a process of its own (the test binary
	// again, through TestMain): its CPU is apart from its clients'.
	if !h.ServerProcess || h.ClientCPUMsPerQuery == nil || !(*h.ClientCPUMsPerQuery > 0) {
		t.Errorf("http: server_process %t, client_cpu_ms_per_query %v; want true, > 0", h.ServerProcess, h.ClientCPUMsPerQuery)
	}
	if c.ServerProcess || c.ClientCPUMsPerQuery != nil {
		t.Errorf("cordon: server_process %t, client_cpu_ms_per_query %v; want neither", c.ServerProcess, c.ClientCPUMsPerQuery)
	}
	if h.Mix == nil {
		t.Fatal("http: no mix in the report")
	}
	total := 0
	for _, op := range []string{bench.OpRetrieve, bench.OpGround, bench.OpAssemble, bench.OpPut} {
		o := h.Mix.Ops[op]
		if o == nil || o.Count == 0 || !(o.P50 > 0) {
			t.Errorf("mix: %s = %+v, want requests with a latency", op, o)
			continue
		}
		total += o.Count
	}
	if total != rep.Queries || h.Mix.Requests != rep.Queries || !(h.Mix.QPS > 0) || rep.Mix != bench.DefaultMix {
		t.Errorf("mix: %d requests counted by operation, %d reported, %v requests/s, mix %q; want %d, %d, > 0, %q",
			total, h.Mix.Requests, h.Mix.QPS, rep.Mix, rep.Queries, rep.Queries, bench.DefaultMix)
	}

	// The server in the bench process: one CPU figure, clients included.
	table, stderr, code := runBenchCLI(t, nil, "--database-url", url, "--chunks", "200", "--queries", "10",
		"--concurrency", "2", "--systems", "cordon,http", "--http-server", "local", "--quiet")
	if code != ExitOK {
		t.Fatalf("table run: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"\nhttp ", "http/cordon qps at 2 clients:", "http/cordon CPU per query at 2 clients:", "\n  http "} {
		if !strings.Contains(table, want) {
			t.Errorf("table has no %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "(server process") {
		t.Errorf("with --http-server local the table reports a server process:\n%s", table)
	}
}

// Without a database only the memory store runs, and the table lists it
// alone.
func TestBenchMemoryOnly(t *testing.T) {
	stdout, stderr, code := runBenchCLI(t, nil, "--systems", "memory", "--chunks", "200", "--queries", "10", "--concurrency", "2", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"SYSTEM", "memory", "reference for recall: memory"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table has no %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "cordon ") {
		t.Errorf("table lists a system that did not run:\n%s", stdout)
	}
}

func TestBenchUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown system", []string{"--systems", "elastic", "--chunks", "10"}, "unknown system"},
		{"sql_exact without cordon", []string{"--systems", "memory,sql_exact", "--database-url", "postgres://x/y"}, "run it with cordon"},
		{"http without cordon", []string{"--systems", "http", "--database-url", "postgres://x/y"}, "run it with cordon"},
		{"mix without http", []string{"--systems", "cordon", "--mix", "default", "--database-url", "postgres://x/y"}, "add http"},
		{"bad mix", []string{"--systems", "cordon,http", "--mix", "retrieve=1,scan=2", "--database-url", "postgres://x/y"}, "unknown operation"},
		{"no database", []string{"--systems", "cordon"}, "no database URL"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"bad policy", []string{"--systems", "memory", "--policy", `{"rrf_weights":{"doc":-1}}`}, "rrf_weights.doc -1 must be"},
		{"bad http server", []string{"--systems", "cordon,http", "--http-server", "remote", "--database-url", "postgres://x/y"}, "want process or local"},
		{"unknown policy field", []string{"--systems", "memory", "--policy", `{"rrf_wieghts":{}}`}, "rrf_wieghts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runBenchCLI(t, nil, tt.args...)
			if code == ExitOK || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want a failure mentioning %q", code, stderr, tt.want)
			}
		})
	}
	stdout, _, code := runBenchCLI(t, nil, "--help")
	if code != ExitOK || !strings.Contains(stdout, "cordon-lab plot bench") || !slices.ContainsFunc(bench.AllSystems, func(s string) bool { return strings.Contains(stdout, s) }) {
		t.Errorf("--help: exit %d, output:\n%s", code, stdout)
	}
}

// With --create-database=false the bench runs in the given database and
// removes its tenants and schema afterwards.
func TestBenchInPlace(t *testing.T) {
	base := benchDatabaseURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	name := fmt.Sprintf("cordon_bench_test_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)") //nolint:errcheck // best effort
	})
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	_, stderr, code := runBenchCLI(t, nil, "--database-url", u.String(), "--create-database=false", "--chunks", "120",
		"--tenants", "3", "--queries", "5", "--concurrency", "2", "--systems", "cordon,sql_hybrid,sql_exact", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tenants, schemas int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cordon.tenants`).Scan(&tenants); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cordon_t_bench%' OR nspname IN ('bench_hybrid', 'bench_exact')`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if tenants != 0 || schemas != 0 {
		t.Errorf("after the run: %d tenants, %d bench schemas left; want none", tenants, schemas)
	}
}
