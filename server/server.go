package server

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// Config configures a Server. Zero durations and limits take the defaults of
// [DefaultConfig].
type Config struct {
	// MaxBodyBytes bounds a JSON request that is not a document.
	MaxBodyBytes int64
	// MaxDocumentBytes bounds a PUT document body (text up to 10 MiB, and
	// JSON escaping can double it).
	MaxDocumentBytes int64
	// MaxBatchBytes bounds a whole NDJSON batch.
	MaxBatchBytes int64

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout bounds how long a graceful shutdown waits for
	// in-flight requests.
	ShutdownTimeout time.Duration
	// RequestTimeout bounds one request's work, database included.
	RequestTimeout time.Duration

	// MetricsTenantLabels adds a tenant label to the retrieval counters
	// served by [Server.ServeMetrics]. Off by default: the series would name
	// every tenant, and their number grows with the tenants.
	MetricsTenantLabels bool

	// Reranker, when set, serves the policy's rerank kind "model" (in
	// cordon serve, a rerank.Breaker over a rerank.Client); every call is
	// counted in the metrics. Nil: a request asking for "model" is a 400.
	Reranker rerank.Reranker
	// RerankBudget is the rerank_budget_ms of a request that does not set
	// one (default 300ms; rounded up to whole milliseconds, at most
	// retrieval.MaxRerankBudgetMS); RerankBudgetTenant overrides it per
	// tenant.
	RerankBudget       time.Duration
	RerankBudgetTenant map[string]time.Duration
	// DenseFallbackTenants are the tenants whose requests fall back to a
	// lexical-only retrieve when the query cannot be embedded: for them the
	// service profile's dense_fallback is "lexical" (a request may still
	// say "none"); for every other tenant it is "none".
	DenseFallbackTenants []string

	// Limits bound the costly policy fields of a retrieve (top_n,
	// rerank_depth, limit, prf_docs, prf_terms); a request over one is a
	// 400 naming it. A zero field takes [retrieval.DefaultLimits]' value.
	Limits retrieval.Limits
	// TenantRequests bounds one tenant's requests in progress at once
	// among those that cost database and CPU time: retrieve, ground,
	// assemble, document PUT and DELETE, and documents:batch (0 takes
	// [DefaultTenantRequests] of the store's pool: half the pool, so one
	// tenant never holds all of it). TenantQueue more wait for one to
	// finish (0 takes the default, 4 x TenantRequests; a negative value
	// queues none), and any beyond are refused with 429 and Retry-After.
	TenantRequests int
	TenantQueue    int
	// MaxChunkIDs bounds the chunk_ids of one ground or assemble request
	// (0 and anything above postgres.MaxLoadChunks take MaxLoadChunks,
	// 1,000); a request over it is a 400 naming the limit.
	MaxChunkIDs int

	Logger *slog.Logger
	// Now is the server clock; now_tick defaults to Now().Unix().
	Now func() time.Time
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes:      1 << 20,
		MaxDocumentBytes:  32 << 20,
		MaxBatchBytes:     256 << 20,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ShutdownTimeout:   30 * time.Second,
		RequestTimeout:    30 * time.Second,
		RerankBudget:      retrieval.DefaultRerankBudgetMS * time.Millisecond,
		Limits:            retrieval.DefaultLimits(),
		MaxChunkIDs:       postgres.MaxLoadChunks,
	}
}

// DefaultTenantRequests is Config.TenantRequests' default over a database
// pool of poolConns connections: half the pool (at least 1), so that one
// tenant's requests, each holding at most one connection at a time, leave
// the other half to the other tenants; and at most 2 x GOMAXPROCS, as the
// requests also need CPU. poolConns 0 (unknown) bounds by CPU alone.
func DefaultTenantRequests(poolConns int) int {
	n := 2 * runtime.GOMAXPROCS(0)
	if poolConns > 0 {
		n = min(n, max(1, poolConns/2))
	}
	return n
}

// defaults fills c's zero values; poolConns is the store's pool size (0:
// unknown), which bounds the per-tenant requests.
func (c *Config) defaults(poolConns int) {
	d := DefaultConfig()
	set := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.MaxBodyBytes, d.MaxBodyBytes)
	set(&c.MaxDocumentBytes, d.MaxDocumentBytes)
	set(&c.MaxBatchBytes, d.MaxBatchBytes)
	setD(&c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	setD(&c.ReadTimeout, d.ReadTimeout)
	setD(&c.WriteTimeout, d.WriteTimeout)
	setD(&c.IdleTimeout, d.IdleTimeout)
	setD(&c.ShutdownTimeout, d.ShutdownTimeout)
	setD(&c.RequestTimeout, d.RequestTimeout)
	setD(&c.RerankBudget, d.RerankBudget)
	for _, l := range []struct{ v, def *int }{{&c.Limits.TopN, &d.Limits.TopN}, {&c.Limits.RerankDepth, &d.Limits.RerankDepth},
		{&c.Limits.Limit, &d.Limits.Limit}, {&c.Limits.PRFDocs, &d.Limits.PRFDocs}, {&c.Limits.PRFTerms, &d.Limits.PRFTerms}} {
		if *l.v <= 0 {
			*l.v = *l.def
		}
	}
	if c.TenantRequests <= 0 {
		c.TenantRequests = DefaultTenantRequests(poolConns)
	}
	if c.MaxChunkIDs <= 0 || c.MaxChunkIDs > postgres.MaxLoadChunks {
		c.MaxChunkIDs = postgres.MaxLoadChunks
	}
	switch {
	case c.TenantQueue == 0:
		c.TenantQueue = 4 * c.TenantRequests
	case c.TenantQueue < 0:
		c.TenantQueue = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Server is Cordon's HTTP API over a [Store].
type Server struct {
	cfg   Config
	store Store
	// pipeline ranks retrieves (newRetriever).
	pipeline *retrieval.Retriever
	verifier *Verifier
	metrics  *metrics
	// reranker is Config.Reranker with its calls counted; nil without one.
	reranker rerank.Reranker
	// admission bounds each tenant's costly requests in progress (admit).
	admission *tenantGate
	// errBusy answers a request refused by admission.
	errBusy *apiError
	// html bounds the HTML conversions in progress.
	html    htmlGate
	handler http.Handler
	// routes lists "METHOD /pattern" for every API route (the OpenAPI test
	// compares them with openapi.yaml).
	routes []string
}

//go:embed openapi.yaml
var openAPI []byte

// New returns a Server over st (in cordon serve, a *postgres.Store),
// authenticating with v.
func New(cfg Config, st Store, v *Verifier) *Server {
	poolConns := 0
	if st != nil {
		if p := st.Pool(); p != nil {
			poolConns = int(p.Config().MaxConns)
		}
	}
	cfg.defaults(poolConns)
	s := &Server{cfg: cfg, store: st, verifier: v,
		admission: newTenantGate(cfg.TenantRequests, cfg.TenantQueue), errBusy: errTooManyRequests(cfg.TenantRequests, cfg.TenantQueue),
		html: newHTMLGate()}
	cfg.Logger.Info("tenant admission", "tenant_requests", cfg.TenantRequests, "tenant_queue", cfg.TenantQueue,
		"db_pool_conns", poolConns, "max_chunk_ids", cfg.MaxChunkIDs)
	s.metrics = newMetrics(func() *pgxpool.Pool {
		if st == nil { // tests of what is decided before the store
			return nil
		}
		return st.Pool()
	}, func() (audit.Stats, bool) {
		if st == nil {
			return audit.Stats{}, false
		}
		return st.AuditStats(), true
	}, cfg.MetricsTenantLabels)
	s.metrics.registerCache(func() (postgres.CacheStats, bool) {
		if st == nil {
			return postgres.CacheStats{}, false
		}
		return st.CacheStats(), true
	})
	s.metrics.registerReplicas(func() (postgres.ReadStats, bool) {
		if st == nil {
			return postgres.ReadStats{}, false
		}
		return st.ReadStats(), true
	})
	if cfg.Reranker != nil {
		s.reranker = rerank.Observe(cfg.Reranker, s.metrics.rerankCall)
	}
	s.pipeline = s.newRetriever()
	// The embedding providers (the store's: it embeds documents and
	// queries with them) report to this server's metrics (to the last
	// server made over them, when several share a registry).
	// Without providers the series exist too, at zero.
	var models *embed.Registry
	if st != nil {
		models = st.Models()
	}
	models.Observe(s.metrics.registerEmbed())
	mux := http.NewServeMux()
	handle := func(method, pattern string, h http.HandlerFunc) {
		mux.Handle(method+" "+pattern, h)
		s.routes = append(s.routes, method+" "+pattern)
	}
	handle("POST", "/v1/tenants", s.auth(RoleAdmin, false, s.createTenant))
	handle("PATCH", "/v1/tenants/{tenant}", s.auth(RoleAdmin, false, s.updateTenant))
	handle("PUT", "/v1/tenants/{tenant}/documents/{doc_id...}", s.auth(RoleWriter, true, s.admit(opPut, s.putDocument)))
	handle("DELETE", "/v1/tenants/{tenant}/documents/{doc_id...}", s.auth(RoleWriter, true, s.admit(opDelete, s.deleteDocument)))
	handle("POST", "/v1/tenants/{tenant}/documents:batch", s.auth(RoleWriter, true, s.admit(opBatch, s.batchDocuments)))
	handle("POST", "/v1/tenants/{tenant}/retrieve", s.auth(RoleReader, true, s.admit(opRetrieve, s.retrieve)))
	handle("POST", "/v1/tenants/{tenant}/ground", s.auth(RoleReader, true, s.admit(opGround, s.ground)))
	handle("POST", "/v1/tenants/{tenant}/assemble", s.auth(RoleReader, true, s.admit(opAssemble, s.assemble)))
	handle("GET", "/healthz", s.healthz)
	handle("GET", "/readyz", s.readyz)
	handle("GET", "/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openAPI)
	})
	// The latency histogram names these patterns and no others.
	s.metrics.routes = s.Routes()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.pathKnown(mux, r) {
			writeError(w, errf(http.StatusMethodNotAllowed, "method_not_allowed", "method %s is not allowed here", r.Method))
			return
		}
		writeError(w, errNotFound)
	})
	s.handler = s.middleware(mux)
	return s
}

// pathKnown reports whether some route serves r's path with another method.
func (s *Server) pathKnown(mux *http.ServeMux, r *http.Request) bool {
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := mux.Handler(probe); p != "/" && p != "" {
			return true
		}
	}
	return false
}

// Handler is the server's http.Handler, middleware included.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes returns "METHOD /pattern" for every route.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

// MetricsHandler serves the Prometheus metrics at GET /metrics and nothing
// else. It is not part of [Server.Handler]: the metrics are for the
// monitoring network, not for API callers.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}

// Serve serves the API on ln until ctx ends, then shuts down gracefully: it
// stops accepting, lets in-flight requests finish (up to ShutdownTimeout)
// and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.handler, true)
}

// ServeMetrics serves [Server.MetricsHandler] on ln (a listener apart from
// the API's) until ctx ends, as [Server.Serve] does.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.MetricsHandler(), false)
}

// serve serves h on ln until ctx ends. Only the API listener logs its
// shutdown: both listeners stop on the same signal, and one line says so.
func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler, logShutdown bool) error {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if logShutdown {
		s.cfg.Logger.Info("shutting down: finishing in-flight requests", "timeout", s.cfg.ShutdownTimeout.String())
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

type ctxKey int

const requestIDKey ctxKey = 0

// requestID returns the request's id.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// validRequestID accepts a caller's X-Request-Id when it is short and plain.
func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// requestLog collects what the handlers learn for the access log line.
type requestLog struct {
	sub, tenant string
	err         error
	// shed says why the model reranker was shed ("" when it was not).
	shed string
	// denseShed says why the dense side was shed (dense_fallback
	// "lexical"; "" when it was not).
	denseShed string
	// unknownTenant is set when the token's tenant does not exist.
	unknownTenant bool
	// refused is the reason a request was refused before its work
	// (a reason* of cordon_requests_refused_total; "" when it was not).
	refused string
}

const requestLogKey ctxKey = 1

func logInfo(ctx context.Context) *requestLog {
	l, _ := ctx.Value(requestLogKey).(*requestLog)
	if l == nil {
		return &requestLog{}
	}
	return l
}

// middleware adds a request id, a per-request timeout, panic recovery,
// latency metrics and one structured log line per request.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		rl := &requestLog{}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		ctx = context.WithValue(context.WithValue(ctx, requestIDKey, id), requestLogKey, rl)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.cfg.Logger.Error("panic", "request_id", id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, errInternal)
				}
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			route := r.Pattern
			if route == "" || route == "/" {
				route = "unmatched"
			}
			d := time.Since(start)
			s.metrics.request(r.Pattern, r.Method, status, d)
			if status >= 500 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				s.metrics.timeouts.Inc()
			}
			level := slog.LevelInfo
			if rl.err != nil && status >= 500 {
				level = slog.LevelError
			}
			if !s.cfg.Logger.Enabled(ctx, level) {
				return
			}
			attrs := []any{"request_id", id, "method", r.Method, "route", route, "status", status,
				"duration_ms", float64(d.Microseconds()) / 1000}
			if rl.sub != "" {
				attrs = append(attrs, "sub", rl.sub, "tenant", rl.tenant)
			}
			if rl.unknownTenant {
				attrs = append(attrs, "unknown_tenant", true)
			}
			if rl.shed != "" {
				attrs = append(attrs, "rerank_shed", rl.shed)
			}
			if rl.denseShed != "" {
				attrs = append(attrs, "dense_shed", rl.denseShed)
			}
			if rl.refused != "" {
				attrs = append(attrs, "refused", rl.refused)
			}
			if rl.err != nil {
				attrs = append(attrs, "error", rl.err.Error())
			}
			s.cfg.Logger.Log(ctx, level, "request", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
}

// auth wraps a tenant-scoped (or admin) handler: 401 without a valid token,
// 404 when the path's tenant is not the token's (whether or not it exists,
// before the body is read), 403 when the role is missing for one's own
// tenant.
func (s *Server) auth(role string, tenantScoped bool, h func(w http.ResponseWriter, r *http.Request, id Identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		authz := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(authz, "Bearer ")
		if !ok {
			tok, ok = strings.CutPrefix(authz, "bearer ")
		}
		if !ok || strings.TrimSpace(tok) == "" {
			writeError(w, errUnauthorized)
			return
		}
		id, err := s.verifier.Verify(strings.TrimSpace(tok))
		if err != nil {
			logInfo(r.Context()).err = err
			writeInvalidToken(w, err)
			return
		}
		rl := logInfo(r.Context())
		rl.sub, rl.tenant = id.Sub, id.Tenant
		if tenantScoped && (id.Tenant == "" || r.PathValue("tenant") != id.Tenant) {
			writeError(w, errNotFound)
			return
		}
		if !id.Has(role) {
			writeError(w, errf(http.StatusForbidden, "forbidden", "this operation needs the %s role", role))
			return
		}
		if v := r.Header.Get(ConsistencyHeader); v != "" {
			tok, err := postgres.ParseToken(v)
			if err != nil {
				s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "%s: %s", ConsistencyHeader, err.Error()))
				return
			}
			r = r.WithContext(postgres.WithConsistency(r.Context(), tok))
		}
		h(w, r, id)
	}
}

// ConsistencyHeader carries a consistency token. With read replicas, a
// write's response has it (the primary's WAL position after the write);
// a request that sends it back reads from a replica only once the replica
// has replayed past it, else from the primary, so it sees that write.
const ConsistencyHeader = "Cordon-Consistency"

// setConsistency puts the primary's position, a token covering the write
// just made, in w's ConsistencyHeader. Only a store with replicas needs
// one; a failure to read it leaves the header out (reads carrying no token
// may then miss the write for as long as a replica lags).
func (s *Server) setConsistency(w http.ResponseWriter, r *http.Request) {
	if !s.store.HasReplicas() {
		return
	}
	// Also after the request's deadline: writes before it were committed.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	tok, err := s.store.Position(ctx)
	if err != nil {
		logInfo(r.Context()).err = err
		return
	}
	w.Header().Set(ConsistencyHeader, tok.String())
}

// fail writes err as a response and remembers it for the log.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(err)
	logInfo(r.Context()).err = err
	writeError(w, ae)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ready(ctx); err != nil {
		logInfo(r.Context()).err = err
		msg := "the database is unavailable"
		if errors.Is(err, postgres.ErrNotReady) {
			msg = "the database schema is not one this binary serves (the log says why): run 'cordon migrate', or roll out the newer release"
		}
		writeError(w, errf(http.StatusServiceUnavailable, "not_ready", "%s", msg))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
