package labcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/lab/bench"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/retrieval"
)

func benchCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "bench",
		Summary: "benchmark Cordon against SQL baselines on one synthetic corpus",
		Usage: `Usage:
  cordon-lab bench [--database-url URL] [--chunks N] [--tenants T] [--queries Q]
               [--concurrency C] [--writers W] [--batch B] [--seed S] [--systems LIST]
               [--warmup N] [--warm-tenants=false] [--cache-mib auto|M] [--serial N]
               [--mix OPS] [--policy JSON|@FILE|service] [--cpuprofile FILE]
               [--http-server process|local] [--analyzer english|exact] [--fields=false]
               [--create-database=false] [--keep] [--json]

Generates a deterministic corpus of N chunks split across T tenants (Zipf
vocabulary, Markdown sections of realistic sizes, rare identifiers such as
tx4096 and PMT-771, classifications, information barriers, as-of ticks) and
Q queries (2-8 terms, some with a rare identifier, a random tenant each,
clearance confidential with one barrier, a freshness contract on half), then
for each system ingests the corpus with W concurrent writers (one document
per transaction, or B documents of one tenant with --batch: cordon's
PutBatch) and runs the queries with C concurrent clients:

  cordon      the headline: the Postgres store behind the retriever
              (exact) as 'cordon serve' runs it with no tuning flags: the
              in-memory query path within --cache-mib (default auto: a
              quarter of the memory this process may use), tenants loaded
              in the background while SQL answers; it also reports its
              first query on a cold tenant and when the loads were done
  cordon_sql  the same store with the in-memory path off ('cordon serve
              --cache-bytes 0'): every query ranked in SQL, over cordon's
              tables
  memory      the in-memory reference store (exact)
  http        the service path: the real server on a loopback port, in a
              process of its own (this executable again; --http-server
              local: in the bench process) with the same store options,
              HS256 tokens minted per tenant, a generated audit key and
              every request audited, over
              cordon's tenants, queried with POST /v1/tenants/T/retrieve
              under the same policy; run it with cordon (not by default)
  sql_exact   the same pipeline written entirely in SQL over Cordon's chunks and a
              plain postings table copied from Cordon's index
  sql_hybrid  the usual recipe: tsvector + GIN + ts_rank_cd, pgvector HNSW,
              RRF in SQL (approximate)

Before measuring, each system answers one unmeasured query per tenant
(--warm-tenants) and the first --warmup queries, and the run waits for the
background loads these started, so stores that load a tenant on first use
are measured warm. Every system returns a top-10 list
under the same policy (SPEC's seed profile, limit 10; --policy sets another
for memory, cordon, cordon_sql and http, e.g. '{"rrf_weights":{"doc":1}}',
or "service" for the service profile a retrieve with no policy gets;
sql_exact and sql_hybrid keep their fixed pipelines); recall@10 and the number of identical lists are
measured against the memory store's lists (the reference), or cordon's when
memory is not run. Latency is per query, with C clients queueing for the
machine's cores; --serial N adds the latency of N queries run one at a
time (serial_p50_ms, ...). qps is Q over the wall time of the measured run; ingest_chunks_per_s includes index
builds; bytes_per_chunk is the Postgres storage of the system's relations
(indexes and TOAST included) minus the bytes of document and chunk text,
right after ingest; for cordon, compacted_bytes_per_chunk is the same after
VACUUM FULL (without row versions that merges leave for vacuum).

With http and cordon, qps_ratio_to_cordon is http's qps over cordon's: what
the service path (JSON, tokens, the audit append, the loopback round trip,
client included: it shares the machine) keeps of the store's throughput.
The http client keeps one connection alive per client (connections: those
the server accepted) and reads and decodes every response whole;
audit_records_per_commit is the mean batch of the audit group commit.
--mix OP=W,... (or --mix default: retrieve=80,ground=10,assemble=5,put=5)
then sends the Q queries again over HTTP as a mix in fixed proportions:
ground and assemble over the chunks the query retrieved, put a new
3-chunk document in the query's tenant; it reports requests/s and each
operation's latency (systems.http.mix).

CPU per query is the bench process's (cpu_ms_per_query) and that of the
PostgreSQL backends of the bench database (db_cpu_ms_per_query, when the
cluster runs on this machine). For http, cpu_ms_per_query is the server
process's alone (server_process: true) and client_cpu_ms_per_query the
bench process's, its clients'; with --http-server local, the bench
process's, server and clients together. With http and cordon,
cpu_ratio_to_cordon is http's CPU per query over cordon's, each system's
cpu_ms_per_query plus its db_cpu_ms_per_query, and added_cpu_ms_per_query
their difference: what a retrieve through the service costs over the
store's. --cpuprofile FILE profiles the
bench process, and the http server process into FILE.server (with
--http-server local the one profile covers the server).

By default a fresh database is created on the server of --database-url for
the run and dropped afterwards (the role needs CREATEDB); with
--create-database=false the URL's database is migrated and used, and the
bench replaces its own tenants (bench, bench_NNNNN) and schema bench_hybrid.

Progress goes to stderr; the results go to stdout as a table, or with --json
as one JSON object:
  {"chunks": N, "tenants": T, "queries": Q, "systems": {"cordon": {"p50_ms",
   "p95_ms", "p99_ms", "qps", "ingest_chunks_per_s", "bytes_per_chunk", "compacted_bytes_per_chunk",
   "recall_at_10", ...}, "sql_exact": ..., "sql_hybrid": ..., "memory": ...}, ...}

'cordon-lab plot bench' (plotting stays out of 'cordon') draws p50
latency against corpus size from one or more --json reports.

Examples:
  cordon-lab bench --database-url "$URL" --chunks 10000 --queries 500 --concurrency 8
  cordon-lab bench --database-url "$URL" --chunks 100000 --json > bench-100k.json
  cordon-lab bench --database-url "$URL" --chunks 100000 --tenants 100 --batch 50 --json > bench-100x1k.json
  cordon-lab bench --systems memory --chunks 100000
  cordon-lab bench --database-url "$URL" --systems cordon,http --concurrency 8 --mix default --cpuprofile http.prof
  go run ./cmd/cordon-lab plot bench --out docs/benchmarks.png bench-10k.json bench-100k.json
`,
		Run: runBench,
	}
}

func runBench(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	dbURL := cmdline.DatabaseFlag(fs)
	chunks := fs.Int("chunks", 10_000, "chunks in the corpus, over all tenants")
	tenants := fs.Int("tenants", 1, "tenants the corpus is split across")
	queries := fs.Int("queries", 200, "measured queries per system")
	concurrency := fs.Int("concurrency", 8, "concurrent query clients")
	writers := fs.Int("writers", 0, "concurrent ingest writers (default: --concurrency)")
	batch := fs.Int("batch", 1, "documents of one tenant per ingest transaction (1: Put; more: PutBatch)")
	seed := fs.Uint64("seed", 1, "corpus and query seed")
	systems := fs.String("systems", strings.Join(bench.DefaultSystems, ","), "systems to run, comma-separated, of "+strings.Join(bench.AllSystems, ","))
	mix := fs.String("mix", "", "after http's retrieve run, a mixed run over HTTP: OP=WEIGHT,... of retrieve, ground, assemble, put, or 'default' ("+bench.DefaultMix+")")
	warmup := fs.Int("warmup", 20, "unmeasured warm-up queries per system")
	serial := fs.Int("serial", 0, "after the measured run, run the first N queries again with one client and report their latency (serial_p50_ms, serial_p95_ms, serial_p99_ms)")
	warmTenants := fs.Bool("warm-tenants", true, "before measuring, one unmeasured query per tenant per system")
	cacheMiB := fs.String("cache-mib", cmdline.CacheAuto, "cordon's in-memory query path budget in MiB; auto: as 'cordon serve' chooses it (a quarter of the memory this process may use); 0: every query in SQL")
	create := fs.Bool("create-database", true, "run in a fresh database created on the server, dropped afterwards")
	keep := fs.Bool("keep", false, "keep the bench database (or tenants) afterwards")
	reuse := fs.Bool("reuse", false, "with --create-database=false: skip cordon's ingest when the database's bench tenants already hold this corpus (left by a run with --keep); ingest and storage are then not measured")
	asJSON := fs.Bool("json", false, "write one JSON object to stdout")
	quiet := fs.Bool("quiet", false, "no progress display on stderr")
	policy := fs.String("policy", "", "the retrieval policy of memory, cordon, cordon_sql and http: a SPEC 9 policy JSON object over the bench's (the seed profile, limit 10), or @FILE; \"service\": the service profile, what 'cordon serve' ranks a retrieve with when its request names no policy (limit 10)")
	analyzer := fs.String("analyzer", analysis.AnalyzerEnglish, `the bench tenants' analyzer: "english" or "exact"`)
	fields := fs.Bool("fields", true, "the bench tenants index titles and headings as field terms")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench process (ingest and queries) to this file, for go tool pprof; with --http-server process, the http server's to FILE.server")
	httpServer := fs.String("http-server", "process", "where the http system's server runs: process (a process of its own: its CPU measured apart from the clients') or local (in the bench process)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	}
	if *httpServer != "process" && *httpServer != "local" {
		return fmt.Errorf("%w: --http-server %q: want process or local", cmdline.ErrUsage, *httpServer)
	}
	var opMix bench.Mix
	if *mix != "" {
		m, err := bench.ParseMix(*mix)
		if err != nil {
			return fmt.Errorf("%w: --mix: %w", cmdline.ErrUsage, err)
		}
		opMix = m
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var pol *retrieval.Policy
	if *policy == "service" {
		p := retrieval.ServicePolicy()
		p.Limit = bench.Limit
		pol = &p
	} else if *policy != "" {
		raw, err := policyArg(*policy)
		if err != nil {
			return err
		}
		p, err := replay.ParsePolicy(raw, bench.BasePolicy())
		if err != nil {
			return fmt.Errorf("%w: --policy: %w", cmdline.ErrUsage, err)
		}
		pol = &p
	}
	cacheBytes, cacheRule, err := cmdline.CacheBudget("--cache-mib", *cacheMiB, 1<<20)
	if err != nil {
		return err
	}
	if err := analysis.ValidateAnalyzer(*analyzer); err != nil {
		return fmt.Errorf("%w: --analyzer: %w", cmdline.ErrUsage, err)
	}
	settings := index.DefaultSettings()
	settings.Analyzer, settings.Fields = *analyzer, *fields
	opts := bench.Options{
		Settings:          &settings,
		DatabaseURL:       cmdline.DatabaseURL(env, *dbURL),
		CreateDatabase:    *create,
		Keep:              *keep,
		Reuse:             *reuse,
		Seed:              *seed,
		Chunks:            *chunks,
		Tenants:           *tenants,
		Queries:           *queries,
		Concurrency:       *concurrency,
		Writers:           *writers,
		Batch:             *batch,
		Warmup:            *warmup,
		Serial:            *serial,
		WarmTenants:       *warmTenants,
		CacheBytes:        cacheBytes,
		CacheRule:         cacheRule,
		Systems:           cmdline.SplitList(*systems),
		Policy:            pol,
		HTTPServerProcess: *httpServer == "process",
		Mix:               opMix,
	}
	if *cpuProfile != "" && opts.HTTPServerProcess {
		opts.HTTPServerCPUProfile = *cpuProfile + ".server"
	}
	if !*quiet {
		opts.Progress = env.Stderr
	}
	rep, err := bench.Run(ctx, opts)
	if opts.Progress != nil {
		fmt.Fprint(env.Stderr, "\r\033[K")
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeBenchTable(env.Stdout, rep)
	return nil
}

func writeBenchTable(w io.Writer, rep *bench.Report) {
	fmt.Fprintf(w, "%d chunks, %d tenant(s), %d queries, %d clients, %d writers, %d documents per write; %d CPUs, %s",
		rep.Chunks, rep.Tenants, rep.Queries, rep.Concurrency, rep.Writers, rep.Batch, rep.Env.CPUs, rep.Env.GoVersion)
	if rep.Env.Postgres != "" {
		fmt.Fprintf(w, ", %s", rep.Env.Postgres)
	}
	fmt.Fprint(w, "\n\n")
	if rep.Systems[rep.Headline] != nil {
		fmt.Fprintf(w, "%s is the headline: 'cordon serve' with no tuning flags (in-memory budget %.0f MiB, %s; tenants loaded in the background)\n",
			rep.Headline, float64(rep.CacheBytes)/(1<<20), rep.CacheRule)
	}
	fmt.Fprintf(w, "policy of memory, cordon, cordon_sql and http: %s\n\n", rep.PolicyName)
	fmt.Fprintf(w, "%-11s %9s %9s %9s %8s %10s %10s %10s %10s %9s\n", "SYSTEM", "P50_MS", "P95_MS", "P99_MS", "QPS", "INGEST/S", "BYTES/CHK", "RECALL@10", "IDENTICAL", "HEAP_MIB")
	opt := func(p *float64, format string) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf(format, *p)
	}
	for _, name := range bench.ReportOrder {
		s := rep.Systems[name]
		if s == nil {
			continue
		}
		ident := "-"
		if s.Identical != nil {
			ident = fmt.Sprintf("%d/%d", *s.Identical, rep.Queries)
		}
		fmt.Fprintf(w, "%-11s %9.2f %9.2f %9.2f %8.0f %10s %10s %10s %10s %9.0f\n", name, s.P50, s.P95, s.P99, s.QPS,
			opt(s.IngestChunksPerS, "%.0f"), opt(s.BytesPerChunk, "%.0f"), opt(s.RecallAt10, "%.4f"), ident, float64(s.PeakHeapBytes)/(1<<20))
	}
	cpuLine := false
	for _, name := range bench.ReportOrder {
		s := rep.Systems[name]
		if s == nil || s.CPUMsPerQuery == nil {
			continue
		}
		if !cpuLine {
			fmt.Fprint(w, "\nCPU per query (ms): bench process (http: the server process, when apart) + PostgreSQL backends of the bench database (- where not visible)\n")
			cpuLine = true
		}
		fmt.Fprintf(w, "  %-11s %.3f + %s", name, *s.CPUMsPerQuery, opt(s.DBCPUMsPerQuery, "%.3f"))
		if s.ClientCPUMsPerQuery != nil {
			fmt.Fprintf(w, " (server process; its clients in the bench process: %.3f)", *s.ClientCPUMsPerQuery)
		}
		fmt.Fprintln(w)
	}
	for _, name := range bench.ReportOrder {
		s := rep.Systems[name]
		if s == nil || s.Cache == nil || s.ColdFirstQueryMS == nil || s.LoadedAfterS == nil {
			continue
		}
		c := s.Cache
		fmt.Fprintf(w, "\n%s in memory: first query of a cold tenant %.1f ms (ranked in SQL while it loads); loads done %.2f s after it; "+
			"%d loads (%d failed, %d declined: no room without evicting tenants in use) in %.2f s, %d evictions, %d tenants held, peak %.0f MiB of %.0f; measured queries from memory %d, in SQL %d\n",
			name, *s.ColdFirstQueryMS, *s.LoadedAfterS, c.Loads, c.LoadFailures, c.Declined, c.LoadS, c.Evictions, c.Tenants,
			float64(c.PeakBytes)/(1<<20), float64(rep.CacheBytes)/(1<<20), c.MemoryAnswers, c.SQLAnswers)
	}
	if h := rep.Systems[bench.SystemHTTP]; h != nil && h.QPSRatioToCordon != nil {
		fmt.Fprintf(w, "\nhttp/cordon qps at %d clients: %.2f\n", rep.Concurrency, *h.QPSRatioToCordon)
	}
	if h := rep.Systems[bench.SystemHTTP]; h != nil && h.CPURatioToCordon != nil && h.AddedCPUMsPerQuery != nil {
		fmt.Fprintf(w, "http/cordon CPU per query at %d clients: %.2f (%.3f ms added a query)\n", rep.Concurrency, *h.CPURatioToCordon, *h.AddedCPUMsPerQuery)
	}
	if h := rep.Systems[bench.SystemHTTP]; h != nil && h.Connections != nil {
		fmt.Fprintf(w, "http connections: %d; audit records per commit: %s\n", *h.Connections, opt(h.AuditRecordsPerCommit, "%.2f"))
	}
	if h := rep.Systems[bench.SystemHTTP]; h != nil && h.Mix != nil {
		m := h.Mix
		fmt.Fprintf(w, "\nhttp mix %s: %d requests, %d clients, %.0f requests/s\n", m.Mix, m.Requests, rep.Concurrency, m.QPS)
		fmt.Fprintf(w, "%-11s %7s %9s %9s %9s\n", "OPERATION", "COUNT", "P50_MS", "P95_MS", "P99_MS")
		for _, op := range []string{bench.OpRetrieve, bench.OpGround, bench.OpAssemble, bench.OpPut} {
			if o := m.Ops[op]; o != nil {
				fmt.Fprintf(w, "%-11s %7d %9.2f %9.2f %9.2f\n", op, o.Count, o.P50, o.P95, o.P99)
			}
		}
	}
	fmt.Fprintf(w, "\nreference for recall: %s; peak RSS of the bench process: %.0f MiB; load average %.2f at start, %.2f at end\n",
		rep.Reference, float64(rep.Env.MaxRSSBytes)/(1<<20), rep.Env.LoadAvg[0], rep.Env.LoadAvg[1])
}
