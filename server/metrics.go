package server

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/internal/version"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// metrics are the service's Prometheus collectors, on a registry of their own
// (so two servers in one process, as in tests, do not collide). They are
// served on a listener of their own ([Server.ServeMetrics]), never on the
// API's: the funnel counters are what non-auditors must not see.
//
// # Label values
//
// No label takes a value a caller chooses: every series is a new histogram
// or counter kept for the life of the process, so a value taken from a
// request would let anyone who reaches the API grow the metrics without
// bound. Each label comes from a fixed set:
//
//   - route: a registered route pattern, else "unmatched" ([metrics.request]);
//   - method: one of [httpMethods], else "other";
//   - code: a status code [http.StatusText] knows, else "other";
//   - stage: retrieval's degraded stages ([retrieval.DegradedStages]);
//   - outcome: [rerank.Outcomes], [embed.Outcomes] for the embedding
//     provider's calls;
//   - replica: a configured read replica's place in --replica-url's order
//     (from 1), with reason (lag, failed) and outcome (served, behind,
//     failed, lagging) on the replica series ([metrics.registerReplicas]);
//   - tenant (with Config.MetricsTenantLabels only): the tenant of a
//     verified token whose retrieval was audited, so a tenant that exists
//     (a retrieval over one that does not has no audit chain and is not
//     counted), never the URL's text on its own.
//
// # Series at 0 from the start
//
// A counter whose labels come from a known, finite set has every series
// created at registration, so a rate or an alert over it reads 0 before
// the first event rather than no data: the degraded stages, the rerank and
// embedding outcomes, the refused requests' op and reason. Not so the
// latency histogram (routes by methods by codes would be thousands of
// series, most never used) nor, with tenant labels, the per-tenant
// counters (the tenants are not known up front).
type metrics struct {
	reg *prometheus.Registry
	// routes are the route patterns a request's route label may name.
	routes []string
	// tenantLabels adds a tenant label to the retrieval counters; off by
	// default (Config.MetricsTenantLabels), since per-tenant series name
	// every tenant and grow with their number.
	tenantLabels  bool
	latency       *prometheus.HistogramVec
	retrievals    *prometheus.CounterVec
	considered    *prometheus.CounterVec
	exclEnt       *prometheus.CounterVec
	exclFresh     *prometheus.CounterVec
	degraded      *prometheus.CounterVec
	auditFailures prometheus.Counter
	// The model reranker's calls, by outcome, and their latency.
	rerankCalls   *prometheus.CounterVec
	rerankLatency prometheus.Histogram
	// requestsRefused counts requests refused before their work, by op
	// and reason (admit, loadChunks); retrievesRefused, its retrieves
	// refused by the tenant limit, the series before it (kept for
	// dashboards); timeouts, requests whose deadline passed before they
	// were answered.
	requestsRefused  *prometheus.CounterVec
	retrievesRefused prometheus.Counter
	timeouts         prometheus.Counter
	unknownTenant    prometheus.Counter
}

func newMetrics(pool func() *pgxpool.Pool, auditStats func() (audit.Stats, bool), tenantLabels bool) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), tenantLabels: tenantLabels}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cordon_http_request_duration_seconds",
		Help:    "HTTP request latency by route pattern, method and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method", "code"})
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	var tl []string
	per := ""
	if tenantLabels {
		tl, per = []string{"tenant"}, ", per tenant"
	}
	m.retrievals = counter("cordon_retrievals_total", "Retrievals served"+per+".", tl...)
	m.considered = counter("cordon_retrieval_considered_total", "Ranked candidates before the pre-filter (SPEC 5 'considered')"+per+".", tl...)
	m.exclEnt = counter("cordon_retrieval_excluded_by_entitlement_total", "Candidates removed by classification or barriers"+per+".", tl...)
	m.exclFresh = counter("cordon_retrieval_excluded_by_freshness_total", "Candidates removed by the freshness contract"+per+".", tl...)
	m.degraded = counter("cordon_retrieval_degraded_total", "Retrievals with a shed stage, per stage"+per+".", append([]string{"stage"}, tl...)...)
	if !tenantLabels {
		// Aggregate counters exist (at 0) from the start.
		for _, c := range []*prometheus.CounterVec{m.retrievals, m.considered, m.exclEnt, m.exclFresh} {
			c.WithLabelValues()
		}
		// So do the degraded stages' series: an alert on their rate
		// sees 0 before the first shed stage, not no data.
		for _, stage := range retrieval.DegradedStages {
			m.degraded.WithLabelValues(stage)
		}
	}
	m.auditFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "cordon_audit_append_failures_total", Help: "Audit records that could not be written (the request failed)."})
	m.rerankCalls = counter("cordon_rerank_model_calls_total", "Model reranker calls (rerank \"model\") by outcome: ok, timeout, error, breaker_open; all but ok shed the stage.", "outcome")
	for _, o := range rerank.Outcomes {
		m.rerankCalls.WithLabelValues(string(o))
	}
	m.rerankLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cordon_rerank_model_duration_seconds",
		Help:    "Model reranker call latency, every outcome (a timeout lasts its budget, a refusal by the open breaker about 0).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .2, .3, .5, 1, 2.5, 5},
	})
	m.reg.MustRegister(m.latency, m.retrievals, m.considered, m.exclEnt, m.exclFresh, m.degraded, m.auditFailures,
		m.rerankCalls, m.rerankLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The build, as 'cordon version' prints it: a constant 1 whose labels
	// say what is running (the Prometheus build_info convention).
	info := version.Get()
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "cordon_build_info",
		Help:        "The running build: version, VCS revision and Go version as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	}, func() float64 { return 1 }))
	gauge := func(name, help string, f func(s *pgxpool.Stat) float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			p := pool()
			if p == nil {
				return 0
			}
			return f(p.Stat())
		}))
	}
	counterFunc := func(name, help string, f func(s *pgxpool.Stat) float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			p := pool()
			if p == nil {
				return 0
			}
			return f(p.Stat())
		}))
	}
	// The audit appends' group commit, from the store's counters.
	auditValue := func(f func(a audit.Stats) int64) func() float64 {
		return func() float64 {
			if a, ok := auditStats(); ok {
				return float64(f(a))
			}
			return 0
		}
	}
	for _, c := range []struct {
		name, help string
		f          func(a audit.Stats) int64
	}{
		{"cordon_audit_records_total", "Audit records committed.", func(a audit.Stats) int64 { return a.Records }},
		{"cordon_audit_commits_total", "Transactions audit records were committed in (records / commits is the mean batch).", func(a audit.Stats) int64 { return a.Commits }},
		{"cordon_audit_shared_commits_total", "Audit transactions that held records of more than one tenant.", func(a audit.Stats) int64 { return a.SharedCommits }},
		{"cordon_audit_shared_redone_total", "Shared audit transactions that failed and were written again tenant by tenant.", func(a audit.Stats) int64 { return a.SharedRedone }},
		{"cordon_audit_stale_heads_total", "Audit batches whose known chain head was stale (another process appended, or the tenant was dropped or created again).", func(a audit.Stats) int64 { return a.StaleHeads }},
	} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, auditValue(c.f)))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cordon_audit_queued_records", Help: "Audit records waiting for a batch."},
		auditValue(func(a audit.Stats) int64 { return a.Queued })))
	// How long records wait in their queue for a batch: a record never
	// waits without a committer, so the oldest wait stays within one
	// batch of its tenant (see store/postgres/auditgroup.go); alert on it.
	auditSeconds := func(f func(a audit.Stats) time.Duration) func() float64 {
		return func() float64 {
			if a, ok := auditStats(); ok {
				return f(a).Seconds()
			}
			return 0
		}
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cordon_audit_oldest_queued_seconds", Help: "How long the oldest audit record queued now has waited for its batch (0: none queued)."},
		auditSeconds(func(a audit.Stats) time.Duration { return a.OldestQueued })))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cordon_audit_queue_wait_max_seconds", Help: "The longest any audit record waited in its queue for a batch since start."},
		auditSeconds(func(a audit.Stats) time.Duration { return a.WaitMax })))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cordon_audit_queue_wait_seconds_total", Help: "Time audit records waited in their queue for a batch (divided by cordon_audit_queue_waited_records_total: the mean wait)."},
		auditSeconds(func(a audit.Stats) time.Duration { return a.WaitTotal })))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cordon_audit_queue_waited_records_total", Help: "Audit records taken from their queue into a batch."},
		auditValue(func(a audit.Stats) int64 { return a.Waited })))
	gauge("cordon_db_pool_acquired_conns", "Connections in use.", func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) })
	gauge("cordon_db_pool_idle_conns", "Idle connections.", func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) })
	gauge("cordon_db_pool_total_conns", "Open connections.", func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) })
	gauge("cordon_db_pool_max_conns", "The pool's bound.", func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) })
	counterFunc("cordon_db_pool_acquires_total", "Connection acquisitions.", func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) })
	counterFunc("cordon_db_pool_empty_acquires_total", "Acquisitions that had to wait for a connection.", func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) })
	counterFunc("cordon_db_pool_acquire_wait_seconds_total", "Time spent waiting for connections.", func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() })
	m.retrievesRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "cordon_retrieves_refused_total",
		Help: "Retrieves refused with 429 because their tenant had --tenant-requests in progress and --tenant-queue waiting (cordon_requests_refused_total{op=\"retrieve\",reason=\"tenant_limit\"})."})
	m.requestsRefused = counter("cordon_requests_refused_total", "Requests refused before their work, by operation and reason: tenant_limit (429: the tenant had --tenant-requests in progress and --tenant-queue waiting), queue_timeout (503: the deadline passed while waiting), chunk_ids (400: over --max-chunk-ids).", "op", "reason")
	// Every series exists from the start, at 0.
	for _, op := range admittedOps {
		m.requestsRefused.WithLabelValues(op, reasonTenantLimit)
		m.requestsRefused.WithLabelValues(op, reasonQueueTimeout)
	}
	m.requestsRefused.WithLabelValues(opGround, reasonChunkIDs)
	m.requestsRefused.WithLabelValues(opAssemble, reasonChunkIDs)
	m.timeouts = prometheus.NewCounter(prometheus.CounterOpts{Name: "cordon_request_timeouts_total",
		Help: "Requests whose deadline (--request-timeout) passed before they were answered, audit appends cut short included (answered 503; not audit failures)."})
	m.unknownTenant = prometheus.NewCounter(prometheus.CounterOpts{Name: "cordon_unknown_tenant_requests_total",
		Help: "Requests with a valid token whose tenant claim names no existing tenant (answered as an empty tenant; a mapping error at the identity provider, most likely)."})
	m.reg.MustRegister(m.requestsRefused, m.retrievesRefused, m.timeouts, m.unknownTenant)
	return m
}

// refuse counts a request of op refused for reason.
func (m *metrics) refuse(op, reason string) {
	m.requestsRefused.WithLabelValues(op, reason).Inc()
	if op == opRetrieve && reason == reasonTenantLimit {
		m.retrievesRefused.Inc()
	}
}

// httpMethods are the request methods the latency histogram names (RFC
// 9110's and PATCH); any other token a caller sends as a method is counted
// as "other".
var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

// request observes one API request's latency. pattern is the route the
// mux chose (r.Pattern): a route outside m.routes, the catch-all included,
// is "unmatched".
func (m *metrics) request(pattern, method string, code int, d time.Duration) {
	route := "unmatched"
	if slices.Contains(m.routes, pattern) {
		route = pattern
	}
	if !slices.Contains(httpMethods, method) {
		method = "other"
	}
	status := "other"
	if http.StatusText(code) != "" {
		status = strconv.Itoa(code)
	}
	m.latency.WithLabelValues(route, method, status).Observe(d.Seconds())
}

// rerankCall counts one model reranker call.
func (m *metrics) rerankCall(o rerank.Outcome, d time.Duration) {
	m.rerankCalls.WithLabelValues(string(o)).Inc()
	m.rerankLatency.Observe(d.Seconds())
}

// retrieval counts one served retrieval.
func (m *metrics) retrieval(tenant string, considered, exclEnt, exclFresh int, degraded []string) {
	var tl []string
	if m.tenantLabels {
		tl = []string{tenant}
	}
	m.retrievals.WithLabelValues(tl...).Inc()
	m.considered.WithLabelValues(tl...).Add(float64(considered))
	m.exclEnt.WithLabelValues(tl...).Add(float64(exclEnt))
	m.exclFresh.WithLabelValues(tl...).Add(float64(exclFresh))
	for _, d := range degraded {
		m.degraded.WithLabelValues(append([]string{d}, tl...)...).Inc()
	}
}

// registerCache adds the gauges and counters of the store's in-memory query
// path (postgres.CacheStats), read at each scrape.
func (m *metrics) registerCache(stats func() (postgres.CacheStats, bool)) {
	value := func(f func(c postgres.CacheStats) float64) func() float64 {
		return func() float64 {
			if c, ok := stats(); ok {
				return f(c)
			}
			return 0
		}
	}
	for _, g := range []struct {
		name, help string
		f          func(c postgres.CacheStats) float64
	}{
		{"cordon_cache_budget_bytes", "Memory budget of the in-memory query path (--cache-bytes; 0: off).", func(c postgres.CacheStats) float64 { return float64(c.Budget) }},
		{"cordon_cache_bytes", "Bytes the in-memory indexes and the loads in progress hold, by the store's accounting; never above the budget.", func(c postgres.CacheStats) float64 { return float64(c.Bytes) }},
		{"cordon_cache_tenants", "Tenants with an index in memory.", func(c postgres.CacheStats) float64 { return float64(c.Tenants) }},
		{"cordon_cache_loads_in_progress", "Tenants being loaded in the background (their queries are ranked in SQL meanwhile).", func(c postgres.CacheStats) float64 { return float64(c.Loading) }},
	} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, value(g.f)))
	}
	for _, c := range []struct {
		name, help string
		labels     prometheus.Labels
		f          func(c postgres.CacheStats) float64
	}{
		{"cordon_cache_loads_total", "Tenants loaded into memory whole.", nil, func(c postgres.CacheStats) float64 { return float64(c.Loads) }},
		{"cordon_cache_load_failures_total", "Loads that ended without an index (the tenant did not fit the budget, or an error).", nil, func(c postgres.CacheStats) float64 { return float64(c.LoadFailures) }},
		{"cordon_cache_load_seconds_total", "Time spent loading tenants, failed loads included.", nil, func(c postgres.CacheStats) float64 { return c.LoadTime.Seconds() }},
		{"cordon_cache_evictions_total", "Indexes dropped, least recently used first, to make room for others.", nil, func(c postgres.CacheStats) float64 { return float64(c.Evictions) }},
		{"cordon_cache_loads_declined_total", "Loads not started because the tenant would not fit without evicting tenants queried in the last 30 s (the budget is smaller than the tenants in use).", nil, func(c postgres.CacheStats) float64 { return float64(c.LoadsDeclined) }},
		{"cordon_cache_answers_total", "Store queries by the path that answered: memory, or sql while the in-memory path is on.", prometheus.Labels{"path": "memory"}, func(c postgres.CacheStats) float64 { return float64(c.MemoryAnswers) }},
		{"cordon_cache_answers_total", "Store queries by the path that answered: memory, or sql while the in-memory path is on.", prometheus.Labels{"path": "sql"}, func(c postgres.CacheStats) float64 { return float64(c.SQLAnswers) }},
	} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help, ConstLabels: c.labels}, value(c.f)))
	}
}

// registerReplicas adds the series of the store's read replicas
// (postgres.ReadStats), read at each scrape: one set per replica configured
// when the metrics are made (none without replicas). The replica label is
// the replica's place in --replica-url's order, from 1, never its URL,
// which may hold credentials.
func (m *metrics) registerReplicas(stats func() (postgres.ReadStats, bool)) {
	rs, ok := stats()
	if !ok {
		return
	}
	for i := range rs.Replicas {
		labels := prometheus.Labels{"replica": strconv.Itoa(i + 1)}
		value := func(f func(r postgres.ReplicaStats) float64) func() float64 {
			return func() float64 {
				if rs, ok := stats(); ok && i < len(rs.Replicas) {
					return f(rs.Replicas[i])
				}
				return 0
			}
		}
		with := func(name, value string) prometheus.Labels {
			return prometheus.Labels{"replica": labels["replica"], name: value}
		}
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cordon_replica_lag_seconds",
			Help:        "How far behind the primary the replica is known to be at most: the time since it was last seen to hold every commit (sampled every second, or four times within --replica-max-lag), counted from the start until it is first seen to catch up.",
			ConstLabels: labels}, value(func(r postgres.ReplicaStats) float64 { return r.Lag.Seconds() })))
		excluded := "1 while the replica is out of the rotation, by reason: lag (further behind than --replica-max-lag: reads without a consistency token skip it), failed (a read failed on it: skipped for the backoff)."
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cordon_replica_excluded", Help: excluded, ConstLabels: with("reason", "lag")},
			value(func(r postgres.ReplicaStats) float64 { return bool01(r.OverLag) })))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cordon_replica_excluded", Help: excluded, ConstLabels: with("reason", "failed")},
			value(func(r postgres.ReplicaStats) float64 { return bool01(!r.Healthy) })))
		reads := "Query path reads routed to the replica, by outcome: served (it answered), behind (a consistency token it had not replayed), failed (it failed; the primary answered), lagging (a read without a token skipped under --replica-max-lag). Reads it did not serve went to another replica or the primary."
		for _, o := range []struct {
			outcome string
			f       func(r postgres.ReplicaStats) float64
		}{
			{"served", func(r postgres.ReplicaStats) float64 { return float64(r.Served) }},
			{"behind", func(r postgres.ReplicaStats) float64 { return float64(r.Behind) }},
			{"failed", func(r postgres.ReplicaStats) float64 { return float64(r.Failed) }},
			{"lagging", func(r postgres.ReplicaStats) float64 { return float64(r.Lagging) }},
		} {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cordon_replica_reads_total", Help: reads, ConstLabels: with("outcome", o.outcome)}, value(o.f)))
		}
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// embedMetrics count what the embedding provider does (the --embed-*
// server, for queries and writes alike): [embed.Observer] over Prometheus
// collectors.
type embedMetrics struct {
	calls   *prometheus.CounterVec
	latency prometheus.Histogram
	retries prometheus.Counter
	batch   prometheus.Histogram
	texts   prometheus.Counter
}

var _ embed.Observer = (*embedMetrics)(nil)

// registerEmbed adds the embedding provider's metrics and returns the
// observer that feeds them.
func (m *metrics) registerEmbed() *embedMetrics {
	e := &embedMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cordon_embed_calls_total",
			Help: "Embedding provider calls (one query, or one write's chunks) by outcome: ok, timeout, error, canceled."}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cordon_embed_duration_seconds",
			Help:    "Embedding provider call latency, every outcome, batches, retries and backoff included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "cordon_embed_retries_total",
			Help: "Embedding requests sent again after a transient failure (--embed-retries)."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cordon_embed_batch_texts",
			Help:    "Texts per embedding request (a call is split into requests of at most --embed-batch texts).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048},
		}),
		texts: prometheus.NewCounter(prometheus.CounterOpts{Name: "cordon_embed_texts_total",
			Help: "Texts the embedding provider returned vectors for."}),
	}
	for _, o := range embed.Outcomes {
		e.calls.WithLabelValues(string(o))
	}
	m.reg.MustRegister(e.calls, e.latency, e.retries, e.batch, e.texts)
	return e
}

// Call implements [embed.Observer].
func (e *embedMetrics) Call(o embed.Outcome, d time.Duration) {
	e.calls.WithLabelValues(string(o)).Inc()
	e.latency.Observe(d.Seconds())
}

// Batch implements [embed.Observer].
func (e *embedMetrics) Batch(n int) { e.batch.Observe(float64(n)) }

// Begin implements [embed.Observer]: the call is counted once it ends.
func (e *embedMetrics) Begin(int) {}

// Embedded implements [embed.Observer].
func (e *embedMetrics) Embedded(n int) { e.texts.Add(float64(n)) }

// Retry implements [embed.Observer].
func (e *embedMetrics) Retry() { e.retries.Inc() }
