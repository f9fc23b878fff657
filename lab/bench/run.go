package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// Options configure a run.
type Options struct {
	// DatabaseURL is the PostgreSQL the Postgres systems use. With
	// CreateDatabase, a fresh database is created on that server for the
	// run and dropped afterwards; otherwise the URL's database is migrated
	// and used (the bench replaces its own tenants, "bench" and
	// "bench_NNNNN", and its schema bench_hybrid).
	DatabaseURL    string
	CreateDatabase bool
	// Keep leaves the created database (or the bench tenants) in place.
	Keep bool
	// Reuse (without CreateDatabase) skips cordon's ingest when the
	// database's bench tenants already hold this corpus, as a run with Keep
	// leaves them: for several runs over one large corpus. The ingest and
	// storage figures are then not measured (null).
	Reuse bool

	Seed uint64
	// Settings are the index settings of the bench's tenants (memory and
	// cordon); the zero value is index.DefaultSettings.
	Settings    *index.Settings
	Chunks      int
	Tenants     int
	Queries     int
	Concurrency int // concurrent query clients
	Writers     int // concurrent ingest writers (0: Concurrency)
	// Batch is how many documents of one tenant a writer stores per
	// transaction (cordon: postgres.Store.PutBatch); 0 or 1 is one document
	// per transaction (Put).
	Batch int
	// Warmup queries run before measuring, unmeasured (the first Warmup
	// queries of the set); 0 means none. With WarmTenants, one more
	// unmeasured query per tenant is run first, so a store that loads a
	// tenant on its first query is measured in its steady state.
	Warmup      int
	WarmTenants bool
	// Serial, when > 0, runs the first Serial queries again with one client
	// after the measured run and reports their latency (serial_p50_ms...):
	// latency without queueing behind other clients.
	Serial int
	// CacheBytes is the cordon system's in-memory query path budget
	// (postgres.Options.CacheBytes, tenants loaded in the background, as
	// 'cordon serve' runs); 0 ranks every query in SQL. CacheRule says how
	// it was chosen (reported).
	CacheBytes int64
	CacheRule  string
	// Policy, when set, is the retrieval policy of the systems behind the
	// retriever (memory, cordon, cordon_sql, http) instead of BasePolicy;
	// each query still sets max_stale_ticks. sql_exact and sql_hybrid run
	// their own fixed pipelines.
	Policy  *retrieval.Policy
	Systems []string // subset of AllSystems, run in AllSystems order (none: DefaultSystems)
	// Mix, when set, runs the http system's queries again as a mix of
	// operations (retrieve, ground, assemble, put) after its measured
	// retrieve run, and reports each operation's latency.
	Mix Mix
	// HTTPServerProcess runs the http system's server in a process of its
	// own (the bench's executable again, which must call
	// ServeChildIfAsked first): its CPU is then measured apart from the
	// clients' (cpu_ms_per_query is the server's, client_cpu_ms_per_query
	// the bench process's). HTTPServerCPUProfile, when set, is where that
	// process writes its CPU profile.
	HTTPServerProcess    bool
	HTTPServerCPUProfile string

	// Progress, when set, receives a human progress display.
	Progress io.Writer
}

func (o *Options) validate() error {
	switch {
	case o.Queries < 1:
		return fmt.Errorf("queries %d must be >= 1", o.Queries)
	case o.Concurrency < 1:
		return fmt.Errorf("concurrency %d must be >= 1", o.Concurrency)
	case o.Writers < 0:
		return fmt.Errorf("writers %d must be >= 0", o.Writers)
	case o.Warmup < 0:
		return fmt.Errorf("warmup %d must be >= 0", o.Warmup)
	}
	if o.Batch < 1 {
		o.Batch = 1
	}
	if o.Writers == 0 {
		o.Writers = o.Concurrency
	}
	if len(o.Systems) == 0 {
		o.Systems = DefaultSystems
	}
	for _, s := range o.Systems {
		if !slices.Contains(AllSystems, s) {
			return fmt.Errorf("unknown system %q (want %v)", s, AllSystems)
		}
	}
	if o.Reuse && o.CreateDatabase {
		return errors.New("reuse needs an existing database: run it without create-database")
	}
	if slices.Contains(o.Systems, SystemSQLExact) && !slices.Contains(o.Systems, SystemCordon) {
		return errors.New("system sql_exact reads Cordon's tables: run it with cordon")
	}
	if slices.Contains(o.Systems, SystemCordonSQL) && !slices.Contains(o.Systems, SystemCordon) {
		return errors.New("system cordon_sql reads the tables cordon writes: run it with cordon")
	}
	if slices.Contains(o.Systems, SystemHTTP) && !slices.Contains(o.Systems, SystemCordon) {
		return errors.New("system http serves the tenants cordon ingests: run it with cordon")
	}
	if o.Mix != nil && !slices.Contains(o.Systems, SystemHTTP) {
		return errors.New("a mix runs over HTTP: add http to the systems")
	}
	if o.needsDB() && o.DatabaseURL == "" {
		return errors.New("no database URL: pass --database-url or set CORDON_DATABASE_URL, or run only --systems memory")
	}
	return nil
}

func (o *Options) needsDB() bool {
	return slices.ContainsFunc(o.Systems, func(s string) bool { return s != SystemMemory })
}

// Run generates the corpus and queries, then for each system ingests,
// measures storage and runs the queries with Concurrency clients, and
// returns the report. Recall is measured against the memory store's lists
// (the reference) when it ran, else against cordon's.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	g, err := NewGenerator(Config{Seed: opts.Seed, Chunks: opts.Chunks, Tenants: opts.Tenants})
	if err != nil {
		return nil, err
	}
	queries := g.Queries(opts.Queries)
	for i := range queries {
		queries[i].policy = opts.Policy
	}
	rep := newReport(opts)
	rep.Env.LoadAvg[0] = loadAvg()
	pr := &progress{w: opts.Progress}

	dbURL := opts.DatabaseURL
	if opts.needsDB() {
		if opts.CreateDatabase {
			created, drop, err := createDatabase(ctx, opts.DatabaseURL)
			if err != nil {
				return nil, err
			}
			if !opts.Keep {
				defer drop()
			}
			dbURL = created
			pr.logf("created database %s\n", databaseName(created))
		}
		if _, err := migrate.Up(ctx, dbURL); err != nil {
			return nil, err
		}
		rep.Env.Postgres = serverVersion(ctx, dbURL)
	}

	var dbName string // whose backends' CPU is counted
	if opts.needsDB() {
		dbName = databaseName(dbURL)
	}
	lists := map[string][][]string{}
	conns := int32(max(opts.Concurrency, opts.Writers) + 2)
	for _, name := range AllSystems {
		if !slices.Contains(opts.Systems, name) {
			continue
		}
		sys, err := openSystem(ctx, name, dbURL, conns, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		res, l, err := measure(ctx, name, sys, g, queries, opts, dbName, pr)
		// Each system is closed before the next runs, so what it holds (the
		// memory store's index, cordon's in-memory path) is not carried into
		// the next system's measurements.
		cerr := sys.Close()
		runtime.GC()
		if err == nil && cerr != nil {
			err = fmt.Errorf("closing: %w", cerr)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rep.Systems[name] = res
		lists[name] = l
	}
	if opts.needsDB() && !opts.Keep && !opts.CreateDatabase {
		cleanup(ctx, dbURL, g, opts, pr)
	}

	ref := SystemMemory
	if lists[ref] == nil {
		ref = SystemCordon
	}
	if lists[ref] == nil {
		ref = "" // no exact system ran: recall is not measured
	}
	rep.Reference = ref
	if h, c := rep.Systems[SystemHTTP], rep.Systems[SystemCordon]; h != nil && c != nil && c.QPS > 0 {
		r := h.QPS / c.QPS
		h.QPSRatioToCordon = &r
	}
	if h, c := rep.Systems[SystemHTTP], rep.Systems[SystemCordon]; h != nil && c != nil {
		h.CPURatioToCordon, h.AddedCPUMsPerQuery = CPUOverCordon(h, c)
	}
	for name, l := range lists {
		if ref == "" {
			break
		}
		r := rep.Systems[name]
		var sum float64
		var n, same int
		for i := range l {
			if slices.Equal(l[i], lists[ref][i]) {
				same++
			}
			if rc, ok := RecallAt(l[i], lists[ref][i], Limit); ok {
				sum += rc
				n++
			}
		}
		r.Identical = &same
		if n > 0 {
			v := sum / float64(n)
			r.RecallAt10 = &v
		}
	}
	rep.Env.MaxRSSBytes = maxRSS()
	rep.Env.LoadAvg[1] = loadAvg()
	return rep, nil
}

// settings are the tenants' index settings: Settings, or the defaults.
func (o Options) settings() index.Settings {
	if o.Settings != nil {
		return *o.Settings
	}
	return index.DefaultSettings()
}

func openSystem(ctx context.Context, name, dbURL string, conns int32, opts Options) (System, error) {
	switch name {
	case SystemMemory:
		return newMemory(opts.settings())
	case SystemCordon:
		c, err := newCordon(ctx, dbURL, conns, opts.CacheBytes)
		if err == nil {
			c.reuse, c.settings = opts.Reuse, opts.settings()
		}
		return c, err
	case SystemCordonSQL:
		return newCordonSQL(ctx, dbURL, conns)
	case SystemHTTP:
		return newHTTP(ctx, dbURL, conns, opts.Concurrency, opts.CacheBytes, opts.HTTPServerProcess, opts.HTTPServerCPUProfile)
	case SystemSQLExact:
		return newSQLExact(ctx, dbURL, conns)
	case SystemSQLHybrid:
		return newSQLHybrid(ctx, dbURL, conns)
	}
	return nil, fmt.Errorf("unknown system %q", name)
}

// cleanup removes the bench's tenants and schema from a database the bench
// did not create. Failures are reported, not fatal: the results stand.
func cleanup(ctx context.Context, dbURL string, g *Generator, opts Options, pr *progress) {
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		pr.logf("clean up: %v\n", err)
		return
	}
	defer st.Close()
	if slices.Contains(opts.Systems, SystemCordon) {
		for t := range opts.Tenants {
			if _, err := st.DropTenant(ctx, g.TenantName(t)); err != nil {
				pr.logf("drop tenant %s: %v\n", g.TenantName(t), err)
			}
		}
	}
	for sys, schema := range map[string]string{SystemSQLHybrid: HybridSchema, SystemSQLExact: ExactSchema} {
		if !slices.Contains(opts.Systems, sys) {
			continue
		}
		if _, err := st.Pool().Exec(ctx, `DROP SCHEMA IF EXISTS `+quoteIdent(schema)+` CASCADE`); err != nil {
			pr.logf("drop schema %s: %v\n", schema, err)
		}
	}
}

// measure ingests and queries one system.
func measure(ctx context.Context, name string, sys System, g *Generator, queries []Query, opts Options, dbName string, pr *progress) (*SystemResult, [][]string, error) {
	res := &SystemResult{}
	total := int64(g.Config().Chunks)
	runtime.GC()
	heap := sampleHeap()
	defer func() { res.PeakHeapBytes = heap() }()
	start := time.Now()
	var done atomic.Int64
	stop := pr.every(func() string {
		n := done.Load()
		el := time.Since(start).Seconds()
		return fmt.Sprintf("[%s] ingest %d/%d chunks, %.0f chunks/s, %s", name, n, total, float64(n)/el, time.Since(start).Round(time.Second))
	})
	own, err := sys.Ingest(ctx, g, opts.Writers, opts.Batch, func(n int64) { done.Store(n) })
	stop()
	if err != nil {
		return nil, nil, fmt.Errorf("ingest: %w", err)
	}
	if own {
		el := time.Since(start)
		rate := float64(total) / el.Seconds()
		res.IngestChunksPerS = &rate
		secs := el.Seconds()
		res.IngestSeconds = &secs
		pr.logf("[%s] ingested %d chunks in %s (%.0f chunks/s)\n", name, total, el.Round(time.Millisecond), rate)
	}
	if b, ok, err := sys.BytesPerChunk(ctx); err != nil {
		return nil, nil, fmt.Errorf("storage: %w", err)
	} else if ok && own {
		res.BytesPerChunk = &b
	}
	if c, ok := sys.(interface {
		CompactedBytesPerChunk(context.Context) (float64, error)
	}); ok && own {
		pr.logf("[%s] VACUUM FULL to measure compacted storage\n", name)
		b, err := c.CompactedBytesPerChunk(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("compacted storage: %w", err)
		}
		res.CompactedBytesPerChunk = &b
	}

	// A store with the in-memory path: how its first query fares on a
	// cold tenant (ranked in SQL while the tenant loads), and when the
	// loads the warm-up starts are done; the run is measured after.
	var cst interface{ CacheStats() postgres.CacheStats }
	switch c := sys.(type) {
	case *cordonSystem:
		cst = c.st
	case *httpSystem:
		cst = c
	}
	if cst != nil && cst.CacheStats().Budget == 0 {
		cst = nil
	}
	var coldStart time.Time
	if cst != nil {
		q := queries[0]
		q.Principal.Tenant = g.TenantName(0)
		coldStart = time.Now()
		if _, err := sys.Query(ctx, q); err != nil {
			return nil, nil, fmt.Errorf("cold query of tenant %s: %w", q.Principal.Tenant, err)
		}
		v := ms(time.Since(coldStart))
		res.ColdFirstQueryMS = &v
	}
	if opts.WarmTenants {
		for t := range g.Config().Tenants {
			q := queries[0]
			q.Principal.Tenant = g.TenantName(t)
			if _, err := sys.Query(ctx, q); err != nil {
				return nil, nil, fmt.Errorf("warm-up query of tenant %s: %w", q.Principal.Tenant, err)
			}
		}
	}
	for i := range min(opts.Warmup, len(queries)) {
		if _, err := sys.Query(ctx, queries[i]); err != nil {
			return nil, nil, fmt.Errorf("warm-up query %d: %w", i, err)
		}
	}
	var cache0 postgres.CacheStats
	if cst != nil {
		stop := pr.every(func() string {
			st := cst.CacheStats()
			return fmt.Sprintf("[%s] loading tenants into memory: %d loaded, %d loading, %s", name, st.Loads, st.Loading, time.Since(coldStart).Round(time.Second))
		})
		for cst.CacheStats().Loading > 0 {
			select {
			case <-ctx.Done():
				stop()
				return nil, nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		stop()
		v := time.Since(coldStart).Seconds()
		res.LoadedAfterS = &v
		cache0 = cst.CacheStats()
		pr.logf("[%s] cold tenant: first query %.1f ms (SQL); loads done %.2f s after it (%d loads, %.2f s of loading)\n",
			name, *res.ColdFirstQueryMS, v, cache0.Loads, cache0.LoadTime.Seconds())
	}
	// The http system's server: its stats, and its CPU when it runs in a
	// process of its own.
	h, _ := sys.(*httpSystem)
	var srv0 serverStats
	if h != nil {
		srv0 = h.stats()
	}
	cpu0 := readCPU(dbName)
	lat, lists, wall, err := runQueries(ctx, name, sys, queries, opts.Concurrency, pr)
	if err != nil {
		return nil, nil, err
	}
	cpu1 := readCPU(dbName)
	perQuery := func(d time.Duration) *float64 {
		v := ms(d) / float64(len(queries))
		return &v
	}
	res.CPUMsPerQuery = perQuery(cpu1.process - cpu0.process)
	if cpu0.dbSeen && cpu1.dbSeen {
		res.DBCPUMsPerQuery = perQuery(cpu1.db - cpu0.db)
	}
	if h != nil {
		srv1 := h.stats()
		if h.srv.Separate() {
			res.ClientCPUMsPerQuery = res.CPUMsPerQuery
			res.CPUMsPerQuery = perQuery(srv1.CPU - srv0.CPU)
			res.ServerProcess = true
		}
		res.Connections = &srv1.Connections
		if a, a0 := srv1.Audit, srv0.Audit; a.Commits > a0.Commits {
			r := float64(a.Records-a0.Records) / float64(a.Commits-a0.Commits)
			res.AuditRecordsPerCommit = &r
		}
		if h.statsErr != nil {
			return nil, nil, h.statsErr
		}
	}
	res.P50 = ms(Percentile(lat, 50))
	res.P95 = ms(Percentile(lat, 95))
	res.P99 = ms(Percentile(lat, 99))
	res.QPS = float64(len(queries)) / wall.Seconds()
	if cst != nil {
		st := cst.CacheStats()
		res.MemoryBudgetBytes, res.MemoryUsedBytes = &st.Budget, &st.Bytes
		res.Cache = &CacheResult{
			Tenants: st.Tenants, Loads: st.Loads, LoadFailures: st.LoadFailures, LoadS: st.LoadTime.Seconds(),
			Evictions: st.Evictions, Declined: st.LoadsDeclined, PeakBytes: st.PeakBytes,
			MemoryAnswers: st.MemoryAnswers - cache0.MemoryAnswers, SQLAnswers: st.SQLAnswers - cache0.SQLAnswers,
		}
	}
	pr.logf("[%s] %d queries, %d clients: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, %.0f qps\n",
		name, len(queries), opts.Concurrency, res.P50, res.P95, res.P99, res.QPS)
	if n := min(opts.Serial, len(queries)); n > 0 {
		lat, _, _, err := runQueries(ctx, name+" serial", sys, queries[:n], 1, pr)
		if err != nil {
			return nil, nil, err
		}
		p50, p95, p99 := ms(Percentile(lat, 50)), ms(Percentile(lat, 95)), ms(Percentile(lat, 99))
		res.SerialP50, res.SerialP95, res.SerialP99 = &p50, &p95, &p99
		pr.logf("[%s] %d queries, 1 client: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", name, n, p50, p95, p99)
	}
	if h, ok := sys.(*httpSystem); ok && opts.Mix != nil {
		// After the retrieve runs: the mix's writes change the corpus.
		m, err := h.runMix(ctx, opts.Mix, queries, lists, opts.Concurrency, pr)
		if err != nil {
			return nil, nil, fmt.Errorf("mix: %w", err)
		}
		res.Mix = m
		pr.logf("[%s] mix %s: %d requests, %d clients, %.0f requests/s\n", name, m.Mix, m.Requests, opts.Concurrency, m.QPS)
	}
	return res, lists, nil
}

// runQueries runs queries with conc clients and returns each query's latency
// and top-10 list, and the wall time.
func runQueries(ctx context.Context, name string, sys System, queries []Query, conc int, pr *progress) ([]time.Duration, [][]string, time.Duration, error) {
	lat := make([]time.Duration, len(queries))
	lists := make([][]string, len(queries))
	var next, finished atomic.Int64
	var firstErr error
	var mu sync.Mutex
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qstart := time.Now()
	stop := pr.every(func() string {
		n := finished.Load()
		return fmt.Sprintf("[%s] query %d/%d, %.0f qps", name, n, len(queries), float64(n)/time.Since(qstart).Seconds())
	})
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(queries) || qctx.Err() != nil {
					return
				}
				t0 := time.Now()
				l, err := sys.Query(qctx, queries[i])
				lat[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("query %d (%q, tenant %s): %w", i, queries[i].Text, queries[i].Principal.Tenant, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				lists[i] = l
				finished.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(qstart)
	stop()
	return lat, lists, wall, firstErr
}

// sampleHeap samples the Go heap (live and not yet collected objects) every
// 50ms until the returned function is called, which returns the peak.
func sampleHeap() (stop func() int64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Int64
	read := func() {
		metrics.Read(sample)
		if v := int64(sample[0].Value.Uint64()); v > peak.Load() {
			peak.Store(v)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		read()
		return peak.Load()
	}
}

// progress writes a one-line display, redrawn every second.
type progress struct {
	w  io.Writer
	mu sync.Mutex
}

func (p *progress) logf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// every redraws line() each second until the returned stop is called.
func (p *progress) every(line func() string) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if s := line(); s != "" {
					p.mu.Lock()
					fmt.Fprintf(p.w, "\r\033[K%s", s)
					p.mu.Unlock()
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// createDatabase creates a fresh database on the server of adminURL and
// returns its URL and a function that drops it.
func createDatabase(ctx context.Context, adminURL string) (string, func(), error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	name := fmt.Sprintf("cordon_bench_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop := func() {
		ctx := context.WithoutCancel(ctx)
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, `DROP DATABASE IF EXISTS `+quoteIdent(name)+` WITH (FORCE)`) //nolint:errcheck // best effort
	}
	return u.String(), drop, nil
}

func databaseName(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "?"
	}
	return u.Path[1:]
}

func serverVersion(ctx context.Context, dbURL string) string {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var pg, vec string
	_ = conn.QueryRow(ctx, `SELECT current_setting('server_version'), coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'), '')`).Scan(&pg, &vec)
	return "PostgreSQL " + pg + ", pgvector " + vec
}

// maxRSS is the peak resident set size of this process, in bytes.
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}

// CPUOverCordon is the CPU per query of system h over that of c, each its
// CPUMsPerQuery plus its DBCPUMsPerQuery, as a ratio and as the ms a query
// h adds; nil when either was not measured, or PostgreSQL's CPU was
// measured for one only.
func CPUOverCordon(h, c *SystemResult) (ratio, added *float64) {
	if h.CPUMsPerQuery == nil || c.CPUMsPerQuery == nil || (h.DBCPUMsPerQuery == nil) != (c.DBCPUMsPerQuery == nil) {
		return nil, nil
	}
	hc, cc := *h.CPUMsPerQuery, *c.CPUMsPerQuery
	if h.DBCPUMsPerQuery != nil {
		hc, cc = hc+*h.DBCPUMsPerQuery, cc+*c.DBCPUMsPerQuery
	}
	if !(cc > 0) {
		return nil, nil
	}
	r, a := hc/cc, hc-cc
	return &r, &a
}
