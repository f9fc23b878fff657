package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

func serveCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "serve",
		Summary: "run the JSON-over-HTTP API over PostgreSQL",
		Usage: `Usage: cordon serve [flags]

Serves Cordon's HTTP API (see server/openapi.yaml, also at GET /openapi.yaml)
over the Postgres store until SIGTERM or SIGINT, then finishes in-flight
requests and exits. Every flag has a CORDON_* environment variable; the flag
wins. The configuration is logged at start with secrets redacted.

Audit records are chained with HMAC-SHA256 under a key the database never
holds: --audit-key-file names a keyring file with one 'KEY_ID BASE64_KEY'
per line (at least 32 bytes of key), --audit-key-id the key to write with
(default: the file's only key). Serve refuses to start without one, unless
--audit-unkeyed (development only: the chain is then plain SHA-256, which
anyone who can write the database can recompute).

Queries are ranked from an in-memory index of each tenant, kept coherent
with the database, within --cache-bytes: by default (auto) a quarter of the
memory this process may use (the cgroup v2 memory.max or v1
memory.limit_in_bytes of its control group, else the machine's memory),
shared by the tenants, least recently used evicted first. A tenant's first
query is ranked in SQL while the tenant loads in the background; a tenant
larger than the budget is always ranked in SQL; results are the same
either way. --cache-bytes 0 ranks every query in SQL. The budget and its
source are logged at start (cache_bytes, cache_budget_rule).

Metrics are served only with --metrics-addr, on a listener of their own
(never on the API's), with aggregate counters unless --metrics-tenant-labels.

Tokens: 'Authorization: Bearer <JWT>' with claims sub, exp (required),
tenant, clearance, barriers, roles (reader, writer, auditor, admin; other
roles are ignored). Keys come from exactly one of CORDON_JWT_HS256_SECRET
(development and tests; environment only, never a flag), --jwks-file,
--jwks-url or --oidc-issuer. --claim-tenant, --claim-clearance,
--claim-barriers and --claim-roles read those claims from an identity
provider's names, dotted paths into nested objects included (Keycloak:
--claim-roles realm_access.roles); a mapped claim must be in every token.
--jwt-leeway is the clock skew tolerated on exp, nbf and iat.

` + cmdline.RerankerUsage + `--rerank-budget is the model call's latency budget for a request that sets
no rerank_budget_ms (--rerank-budget-tenant NAME=DURATION, repeatable, for
one tenant); a call that misses it is shed like rerank off, and the
request still succeeds. --dense-fallback-tenant NAME (repeatable) makes
the tenant's retrieves run lexical-only, with "dense" in degraded, while its
embedding model cannot embed the query (policy dense_fallback "lexical" by
default for it); other tenants answer 503 then unless a request asks.

What one retrieve may cost is bounded: --max-top-n, --max-rerank-depth,
--max-limit, --max-prf-docs and --max-prf-terms are the largest policy
values a request may give (400 beyond, naming the flag); a ground or
assemble names at most --max-chunk-ids chunks. At most --tenant-requests
costly requests of one tenant (retrieve, ground, assemble, document PUT,
DELETE and batch) run at once, by default half the database pool (at most
2 x GOMAXPROCS), so one tenant never holds the whole pool; --tenant-queue
more wait; any beyond are refused with 429 and Retry-After, while other
tenants are still served. (--tenant-retrieves and --tenant-retrieve-queue
are the old names of the two.)

Examples:
  export CORDON_DATABASE_URL=postgres://cordon@127.0.0.1:5432/cordon
  export CORDON_JWT_HS256_SECRET=$(head -c 32 /dev/urandom | base64)
  echo "k1 $(head -c 32 /dev/urandom | base64)" > audit.keys
  cordon serve --listen 127.0.0.1:8080 --metrics-addr 127.0.0.1:9090 --audit-key-file audit.keys --migrate
  cordon serve --oidc-issuer https://login.example.com/realms/bank --jwt-audience cordon --claim-roles realm_access.roles
  cordon serve --audit-key-file audit.keys --reranker-url http://127.0.0.1:8081 --reranker-model BAAI/bge-reranker-base --rerank-budget 250ms --rerank-budget-tenant wholesale=500ms
`,
		Run: runServe,
	}
}

// serveConfig is cordon serve's configuration: every flag, registered once
// (register), checked and resolved once (resolve), and logged once with its
// secrets redacted (logAttrs).
type serveConfig struct {
	listen, dbURL                             string
	jwksFile, jwksURL, oidcIssuer             string
	issuer, audience                          string
	leeway                                    time.Duration
	claims                                    server.ClaimPaths
	migrate                                   bool
	metricsAddr                               string
	metricsTenantLabels                       bool
	auditKeyFile, auditKeyID                  string
	auditUnkeyed                              bool
	maxConns                                  int64
	replicaURLs                               cmdline.RepeatFlag
	replicaMaxLag                             time.Duration
	cacheBytes                                string
	maxBody, maxDoc, maxBatch                 int64
	readHeader, read, write, idle, reqTimeout time.Duration
	shutdown                                  time.Duration
	embedding                                 *cmdline.EmbedFlags
	reranker                                  *cmdline.RerankerFlags
	rerankBudget                              string
	fallbackTenants, tenantBudgets            cmdline.RepeatFlag
	limits                                    []limitFlag
	tenantRequests, tenantQueue               int64
	maxChunkIDs                               int64

	// envErrs are the environment's values the flags refused.
	envErrs []error

	// Resolved by resolve.
	url         string
	secret      string // $CORDON_JWT_HS256_SECRET, never logged
	keys        *audit.Keyring
	policyLimit retrieval.Limits
	queue       int // server.Config.TenantQueue: -1 when none wait, 0 for 4 x the requests
	budget      time.Duration
	budgets     map[string]time.Duration
	cacheBudget int64
	cacheRule   string
}

// limitFlag is one --max-* policy limit and the field of retrieval.Limits
// it sets.
type limitFlag struct {
	name  string
	value int64
	field func(*retrieval.Limits) *int
}

// register declares every serve flag on fs, its default from the
// environment where it has a CORDON_* variable.
func (c *serveConfig) register(fs *flag.FlagSet, env Env) {
	d := server.DefaultConfig()
	str := func(p *string, name, envName, def, usage string) {
		cmdline.EnvStringVar(fs, env, p, name, envName, def, usage)
	}
	i64 := func(p *int64, name, envName string, def int64, usage string) {
		if err := cmdline.EnvInt64Var(fs, env, p, name, envName, def, usage); err != nil {
			c.envErrs = append(c.envErrs, err)
		}
	}
	dur := func(p *time.Duration, name, envName string, def time.Duration, usage string) {
		if err := cmdline.EnvDurationVar(fs, env, p, name, envName, def, usage); err != nil {
			c.envErrs = append(c.envErrs, err)
		}
	}
	str(&c.listen, "listen", "CORDON_LISTEN", "127.0.0.1:8080", "address to listen on")
	cmdline.DatabaseFlagVar(fs, &c.dbURL)
	str(&c.jwksFile, "jwks-file", "CORDON_JWKS_FILE", "", "JSON Web Key Set file (RS256, ES256, EdDSA)")
	str(&c.jwksURL, "jwks-url", "CORDON_JWKS_URL", "", "JSON Web Key Set URL, refreshed in the background")
	str(&c.oidcIssuer, "oidc-issuer", "CORDON_OIDC_ISSUER", "", "OIDC issuer whose discovery document names the JWKS")
	str(&c.issuer, "jwt-issuer", "CORDON_JWT_ISSUER", "", "required iss claim")
	str(&c.audience, "jwt-audience", "CORDON_JWT_AUDIENCE", "", "required aud claim")
	str(&c.claims.Tenant, "claim-tenant", "CORDON_CLAIM_TENANT", "", "claim name or dotted path holding the tenant (default: tenant)")
	str(&c.claims.Clearance, "claim-clearance", "CORDON_CLAIM_CLEARANCE", "", "claim name or dotted path holding the clearance (default: clearance)")
	str(&c.claims.Barriers, "claim-barriers", "CORDON_CLAIM_BARRIERS", "", "claim name or dotted path holding the barriers (default: barriers)")
	str(&c.claims.Roles, "claim-roles", "CORDON_CLAIM_ROLES", "", "claim name or dotted path holding the roles, e.g. realm_access.roles (default: roles)")
	fs.BoolVar(&c.migrate, "migrate", cmdline.EnvBool(env, "CORDON_MIGRATE"), "apply pending migrations before serving ($CORDON_MIGRATE=1)")
	str(&c.metricsAddr, "metrics-addr", "CORDON_METRICS_ADDR", "", "address of the Prometheus /metrics listener, apart from the API's (empty: no metrics)")
	fs.BoolVar(&c.metricsTenantLabels, "metrics-tenant-labels", cmdline.EnvBool(env, "CORDON_METRICS_TENANT_LABELS"), "label the retrieval counters with the tenant ($CORDON_METRICS_TENANT_LABELS=1)")
	str(&c.auditKeyFile, "audit-key-file", "CORDON_AUDIT_KEY_FILE", "", "audit keyring file, one 'KEY_ID BASE64_KEY' per line")
	str(&c.auditKeyID, "audit-key-id", "CORDON_AUDIT_KEY_ID", "", "key id to write audit records with (default: the keyring's only key)")
	fs.BoolVar(&c.auditUnkeyed, "audit-unkeyed", cmdline.EnvBool(env, "CORDON_AUDIT_UNKEYED"), "development only: chain audit records without a key ($CORDON_AUDIT_UNKEYED=1)")
	i64(&c.maxConns, "max-conns", "CORDON_MAX_CONNS", 0, "database pool size (0: pgxpool's default)")
	fs.Var(&c.replicaURLs, "replica-url", "URL of a streaming replica to serve reads from (repeatable; default: the comma-separated $CORDON_REPLICA_URLS)")
	dur(&c.replicaMaxLag, "replica-max-lag", "CORDON_REPLICA_MAX_LAG", 0, "serve reads without a consistency token from a replica only while it is at most this far behind the primary (0: any healthy replica)")
	str(&c.cacheBytes, "cache-bytes", "CORDON_CACHE_BYTES", cmdline.CacheAuto, "memory budget of the in-memory query path in bytes; auto: a quarter of the memory this process may use (cgroup limit, else physical memory); 0: rank every query in SQL")
	i64(&c.maxBody, "max-body-bytes", "CORDON_MAX_BODY_BYTES", d.MaxBodyBytes, "limit of a JSON request body")
	i64(&c.maxDoc, "max-document-bytes", "CORDON_MAX_DOCUMENT_BYTES", d.MaxDocumentBytes, "limit of a document PUT body")
	i64(&c.maxBatch, "max-batch-bytes", "CORDON_MAX_BATCH_BYTES", d.MaxBatchBytes, "limit of an NDJSON batch body")
	dur(&c.readHeader, "read-header-timeout", "CORDON_READ_HEADER_TIMEOUT", d.ReadHeaderTimeout, "time to read request headers")
	dur(&c.read, "read-timeout", "CORDON_READ_TIMEOUT", d.ReadTimeout, "time to read a whole request")
	dur(&c.write, "write-timeout", "CORDON_WRITE_TIMEOUT", d.WriteTimeout, "time to write a response")
	dur(&c.idle, "idle-timeout", "CORDON_IDLE_TIMEOUT", d.IdleTimeout, "keep-alive idle time")
	dur(&c.reqTimeout, "request-timeout", "CORDON_REQUEST_TIMEOUT", d.RequestTimeout, "bound of one request's work, database included")
	dur(&c.shutdown, "shutdown-timeout", "CORDON_SHUTDOWN_TIMEOUT", d.ShutdownTimeout, "time in-flight requests get on SIGTERM")
	c.embedding = cmdline.AddEmbedFlags(fs)
	dur(&c.leeway, "jwt-leeway", "CORDON_JWT_LEEWAY", server.DefaultLeeway, "clock skew tolerated on a token's exp, nbf and iat (at most "+server.MaxLeeway.String()+")")
	c.reranker = cmdline.AddRerankerFlags(fs, env, &c.envErrs)
	str(&c.rerankBudget, "rerank-budget", "CORDON_RERANK_BUDGET", d.RerankBudget.String(), "model reranker latency budget of a request that sets no rerank_budget_ms")
	fs.Var(&c.fallbackTenants, "dense-fallback-tenant", "NAME: a tenant whose retrieves run lexical-only when the query cannot be embedded (policy dense_fallback \"lexical\" by default; repeatable; default: the comma-separated $CORDON_DENSE_FALLBACK_TENANTS)")
	fs.Var(&c.tenantBudgets, "rerank-budget-tenant", "NAME=DURATION: one tenant's rerank budget (repeatable; default: the comma-separated $CORDON_RERANK_BUDGET_TENANTS)")
	c.limits = []limitFlag{
		{name: "max-top-n", field: func(l *retrieval.Limits) *int { return &l.TopN }},
		{name: "max-rerank-depth", field: func(l *retrieval.Limits) *int { return &l.RerankDepth }},
		{name: "max-limit", field: func(l *retrieval.Limits) *int { return &l.Limit }},
		{name: "max-prf-docs", field: func(l *retrieval.Limits) *int { return &l.PRFDocs }},
		{name: "max-prf-terms", field: func(l *retrieval.Limits) *int { return &l.PRFTerms }},
	}
	for i, usage := range []string{"largest policy top_n a retrieve may ask for", "largest policy rerank_depth", "largest policy limit", "largest policy prf_docs", "largest policy prf_terms"} {
		f := &c.limits[i]
		def := d.Limits
		envName := "CORDON_" + strings.ToUpper(strings.ReplaceAll(f.name, "-", "_"))
		i64(&f.value, f.name, envName, int64(*f.field(&def)), usage)
	}
	i64(&c.maxChunkIDs, "max-chunk-ids", "CORDON_MAX_CHUNK_IDS", int64(d.MaxChunkIDs), fmt.Sprintf("most chunk_ids one ground or assemble may name (1 to %d)", postgres.MaxLoadChunks))
	// The old names first, so that the new names' variables win when both
	// are set; on the command line the last flag given wins.
	i64(&c.tenantRequests, "tenant-retrieves", "CORDON_TENANT_RETRIEVES", 0, "old name of --tenant-requests")
	i64(&c.tenantQueue, "tenant-retrieve-queue", "CORDON_TENANT_RETRIEVE_QUEUE", -1, "old name of --tenant-queue")
	i64(&c.tenantRequests, "tenant-requests", "CORDON_TENANT_REQUESTS", c.tenantRequests, "costly requests (retrieve, ground, assemble, document writes) of one tenant in progress at once (0: half the database pool, at most 2 x GOMAXPROCS; less than the pool)")
	i64(&c.tenantQueue, "tenant-queue", "CORDON_TENANT_QUEUE", c.tenantQueue, "requests of one tenant that wait for one in progress before the next is refused with 429 (-1: 4 x --tenant-requests; 0: none wait)")
}

// resolve checks the flags and derives what serve runs with: the database
// URL, the audit keyring, the policy limits, the retrieve queue, the rerank
// budgets and the cache budget. It opens nothing; every error is a usage
// error but a keyring file that cannot be read.
func (c *serveConfig) resolve(env Env) error {
	if len(c.envErrs) > 0 {
		return c.envErrs[0]
	}
	if c.leeway < 0 || c.leeway > server.MaxLeeway {
		return fmt.Errorf("%w: --jwt-leeway %v: want between 0s and %v", cmdline.ErrUsage, c.leeway, server.MaxLeeway)
	}
	if err := c.claims.Validate(); err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	if c.maxConns < 0 || c.maxConns > 10000 {
		return fmt.Errorf("%w: --max-conns %d out of range", cmdline.ErrUsage, c.maxConns)
	}
	if c.replicaMaxLag < 0 {
		return fmt.Errorf("%w: --replica-max-lag %v must be >= 0", cmdline.ErrUsage, c.replicaMaxLag)
	}
	var err error
	if c.keys, err = serveAuditKeys(c.auditKeyFile, c.auditKeyID, c.auditUnkeyed); err != nil {
		return err
	}
	if err := c.resolveRetrieveLimits(); err != nil {
		return err
	}
	if c.budget, err = cmdline.ParseBudget("--rerank-budget", c.rerankBudget); err != nil {
		return err
	}
	if len(c.tenantBudgets) == 0 {
		c.tenantBudgets = cmdline.SplitList(env.Getenv("CORDON_RERANK_BUDGET_TENANTS"))
	}
	if c.budgets, err = parseTenantBudgets(c.tenantBudgets); err != nil {
		return err
	}
	if len(c.fallbackTenants) == 0 {
		c.fallbackTenants = cmdline.SplitList(env.Getenv("CORDON_DENSE_FALLBACK_TENANTS"))
	}
	for _, name := range c.fallbackTenants {
		if err := cordontype.ValidateTenant(name); err != nil {
			return fmt.Errorf("%w: --dense-fallback-tenant %q: %w", cmdline.ErrUsage, name, err)
		}
	}
	if len(c.replicaURLs) == 0 {
		c.replicaURLs = cmdline.SplitList(env.Getenv("CORDON_REPLICA_URLS"))
	}
	if c.cacheBudget, c.cacheRule, err = cmdline.CacheBudget("--cache-bytes", c.cacheBytes, 1); err != nil {
		return err
	}
	c.url = cmdline.DatabaseURL(env, c.dbURL)
	c.secret = env.Getenv("CORDON_JWT_HS256_SECRET")
	return nil
}

// resolveRetrieveLimits checks the --max-* policy limits, the chunk id cap
// and the per-tenant request limits.
func (c *serveConfig) resolveRetrieveLimits() error {
	for _, f := range c.limits {
		if f.value < 1 || f.value > retrieval.MaxLimit {
			return fmt.Errorf("%w: --%s %d: want 1 to %d", cmdline.ErrUsage, f.name, f.value, retrieval.MaxLimit)
		}
		*f.field(&c.policyLimit) = int(f.value)
	}
	// A request that sets none of these fields takes the service
	// profile's values, which must be within the limits.
	var le *retrieval.LimitError
	if err := c.policyLimit.Check(retrieval.ServicePolicy()); errors.As(err, &le) {
		return fmt.Errorf("%w: --max-%s %d is below the service profile's %s %d, which every request that sets no %s takes",
			cmdline.ErrUsage, strings.ReplaceAll(le.Field, "_", "-"), le.Max, le.Field, le.Value, le.Field)
	}
	if c.maxChunkIDs < 1 || c.maxChunkIDs > postgres.MaxLoadChunks {
		return fmt.Errorf("%w: --max-chunk-ids %d: want 1 to %d", cmdline.ErrUsage, c.maxChunkIDs, postgres.MaxLoadChunks)
	}
	if c.tenantRequests < 0 || c.tenantRequests > 10000 {
		return fmt.Errorf("%w: --tenant-requests %d: want 0 (half the database pool) or 1 to 10000", cmdline.ErrUsage, c.tenantRequests)
	}
	if err := c.checkPool(c.maxConns); err != nil {
		return err
	}
	if c.tenantQueue < -1 || c.tenantQueue > 100000 {
		return fmt.Errorf("%w: --tenant-queue %d: want -1 (4 x --tenant-requests) or 0 to 100000", cmdline.ErrUsage, c.tenantQueue)
	}
	if c.tenantQueue == -1 && c.tenantRequests > 0 {
		c.tenantQueue = 4 * c.tenantRequests
	}
	switch c.queue = int(c.tenantQueue); c.queue {
	case -1:
		c.queue = 0 // server.Config: 4 x the resolved TenantRequests
	case 0:
		c.queue = -1 // server.Config: none wait
	}
	return nil
}

// checkPool refuses a --tenant-requests that would let one tenant hold the
// whole pool of poolConns connections: --max-conns when given (resolve),
// else pgxpool's default size, known once the store is open (runServe).
func (c *serveConfig) checkPool(poolConns int64) error {
	if c.tenantRequests > 0 && poolConns > 1 && c.tenantRequests >= poolConns {
		return fmt.Errorf("%w: --tenant-requests %d would let one tenant hold the whole database pool of %d connections: give at most %d, or a larger --max-conns",
			cmdline.ErrUsage, c.tenantRequests, poolConns, poolConns-1)
	}
	return nil
}

// logAttrs is the configuration for the "config" log line: the database
// URL's password, the HS256 secret and the reranker key redacted.
func (c *serveConfig) logAttrs(env Env) []any {
	secretState := "unset"
	if c.secret != "" {
		secretState = "set (redacted)"
	}
	attrs := []any{"listen", c.listen, "database_url", cmdline.RedactURL(c.url), "jwt_hs256_secret", secretState,
		"jwks_file", c.jwksFile, "jwks_url", c.jwksURL, "oidc_issuer", c.oidcIssuer, "jwt_issuer", c.issuer, "jwt_audience", c.audience,
		"jwt_leeway", c.leeway.String(), "claim_tenant", c.claims.Tenant, "claim_clearance", c.claims.Clearance,
		"claim_barriers", c.claims.Barriers, "claim_roles", c.claims.Roles,
		"migrate", c.migrate, "max_conns", c.maxConns, "replica_max_lag", c.replicaMaxLag.String(), "cache_bytes", c.cacheBudget, "cache_budget_rule", c.cacheRule, "max_body_bytes", c.maxBody, "max_document_bytes", c.maxDoc,
		"max_batch_bytes", c.maxBatch, "read_header_timeout", c.readHeader.String(), "read_timeout", c.read.String(),
		"write_timeout", c.write.String(), "idle_timeout", c.idle.String(), "request_timeout", c.reqTimeout.String(),
		"shutdown_timeout", c.shutdown.String(), "metrics_addr", c.metricsAddr, "metrics_tenant_labels", c.metricsTenantLabels,
		"audit_key_file", c.auditKeyFile, "audit_key_id", c.keys.Active, "audit_unkeyed", c.auditUnkeyed}
	attrs = append(attrs, c.embedding.LogAttrs()...)
	attrs = append(attrs, c.reranker.LogAttrs(env)...)
	attrs = append(attrs, "rerank_budget", c.budget.String(), "rerank_budget_tenants", strings.Join(c.tenantBudgets, ","),
		"dense_fallback_tenants", strings.Join(c.fallbackTenants, ","))
	for _, f := range c.limits {
		attrs = append(attrs, strings.ReplaceAll(f.name, "-", "_"), *f.field(&c.policyLimit))
	}
	return append(attrs, "max_chunk_ids", c.maxChunkIDs, "tenant_requests", c.tenantRequests, "tenant_queue", c.tenantQueue)
}

// serverConfig is the server's configuration.
func (c *serveConfig) serverConfig(log *slog.Logger, rr rerank.Reranker) server.Config {
	return server.Config{
		MaxBodyBytes: c.maxBody, MaxDocumentBytes: c.maxDoc, MaxBatchBytes: c.maxBatch,
		ReadHeaderTimeout: c.readHeader, ReadTimeout: c.read, WriteTimeout: c.write, IdleTimeout: c.idle,
		RequestTimeout: c.reqTimeout, ShutdownTimeout: c.shutdown, MetricsTenantLabels: c.metricsTenantLabels, Logger: log,
		Reranker: rr, RerankBudget: c.budget, RerankBudgetTenant: c.budgets, DenseFallbackTenants: c.fallbackTenants,
		Limits: c.policyLimit, TenantRequests: int(c.tenantRequests), TenantQueue: c.queue, MaxChunkIDs: int(c.maxChunkIDs),
	}
}

func runServe(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	var cfg serveConfig
	fs := cmdline.NewFlagSet(c)
	cfg.register(fs, env)
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if len(cfg.envErrs) > 0 {
		return cfg.envErrs[0]
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: serve takes no arguments", cmdline.ErrUsage)
	}
	if err := cfg.resolve(env); err != nil {
		return err
	}
	models, err := cfg.embedding.Registry()
	if err != nil {
		return err
	}
	embedWarning, err := cfg.embedding.Probe(ctx, models)
	if err != nil {
		return err
	}
	log := cmdline.Logger(env)
	rr, err := cfg.reranker.Build(env, log)
	if err != nil {
		return err
	}
	log.Info("config", cfg.logAttrs(env)...)
	logServeWarnings(log, &cfg, embedWarning)
	verifier, err := server.NewVerifier(ctx, server.AuthConfig{HS256Secret: cfg.secret, JWKSFile: cfg.jwksFile, JWKSURL: cfg.jwksURL,
		OIDCIssuer: cfg.oidcIssuer, Issuer: cfg.issuer, Audience: cfg.audience, Leeway: cfg.leeway, Claims: cfg.claims})
	if err != nil {
		return err
	}
	if cfg.migrate {
		res, err := migrate.Up(ctx, cfg.url)
		if err != nil {
			return err
		}
		for _, r := range res {
			log.Info("migrated", "version", r.Version, "source", r.Source)
		}
	}
	st, err := postgres.Open(ctx, cfg.url, postgres.Options{MaxConns: int32(cfg.maxConns), CacheBytes: cfg.cacheBudget, CacheLoadInBackground: true,
		AuditKeys: cfg.keys, Replicas: cfg.replicaURLs, ReplicaMaxLag: cfg.replicaMaxLag, Models: models})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := cfg.checkPool(int64(st.Pool().Config().MaxConns)); err != nil {
		return err
	}
	if cfg.cacheBudget > 0 {
		if warm, _, err := st.WarmCache(ctx); err != nil {
			log.Warn("could not find the tenants used most recently; each tenant loads on its first query instead", "error", err)
		} else if len(warm) > 0 {
			log.Info("loading the tenants used most recently into memory, most recent first, while serving", "tenants", len(warm))
		}
	}
	ln, mln, err := serveListen(cfg.listen, cfg.metricsAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if mln != nil {
		defer mln.Close()
	}
	srv := server.New(cfg.serverConfig(log, rr), st, verifier)
	return serveUntilDone(ctx, env, log, srv, ln, mln)
}

// logServeWarnings warns of what serve runs with but should not: an
// embedding server that did not answer, an unkeyed audit chain, a keyring
// file others may read.
func logServeWarnings(log *slog.Logger, cfg *serveConfig, embedWarning string) {
	if embedWarning != "" {
		log.Warn("the embedding server did not answer a probe; tenants on its model fail with 503 until it does", "error", embedWarning)
	}
	if cfg.auditUnkeyed {
		log.Warn("audit records are chained without a key (--audit-unkeyed): anyone who can write the database can rewrite the audit log undetected; development only")
	}
	if w := auditKeyFileWarning(cfg.auditKeyFile); cfg.auditKeyFile != "" && w != "" {
		log.Warn(w)
	}
}

// serveListen opens the API's listener and, when metricsAddr is set, the
// metrics listener (else nil).
func serveListen(listen, metricsAddr string) (ln, mln net.Listener, err error) {
	if ln, err = net.Listen("tcp", listen); err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	if metricsAddr != "" {
		if mln, err = net.Listen("tcp", metricsAddr); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("metrics listen: %w", err)
		}
	}
	return ln, mln, nil
}

// serveUntilDone serves the API on ln and the metrics on mln (when not
// nil) until ctx ends or either fails; both stop together.
func serveUntilDone(ctx context.Context, env Env, log *slog.Logger, srv *server.Server, ln, mln net.Listener) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	n := 1
	go func() { errc <- srv.Serve(sctx, ln) }()
	if mln != nil {
		n++
		go func() { errc <- srv.ServeMetrics(sctx, mln) }()
		log.Info("metrics listening", "addr", mln.Addr().String())
		fmt.Fprintf(env.Stdout, "metrics on http://%s/metrics\n", mln.Addr())
	}
	log.Info("listening", "addr", ln.Addr().String())
	fmt.Fprintf(env.Stdout, "listening on http://%s\n", ln.Addr())
	var first error
	for range n {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
		cancel()
	}
	if first != nil {
		return first
	}
	log.Info("stopped")
	return nil
}

// serveAuditKeys loads the keyring serve writes audit records with, or
// refuses to run without one unless unkeyed chains were asked for.
func serveAuditKeys(file, id string, unkeyed bool) (*audit.Keyring, error) {
	switch {
	case file != "" && unkeyed:
		return nil, fmt.Errorf("%w: --audit-key-file and --audit-unkeyed exclude each other", cmdline.ErrUsage)
	case unkeyed:
		if id != "" {
			return nil, fmt.Errorf("%w: --audit-key-id needs --audit-key-file, not --audit-unkeyed", cmdline.ErrUsage)
		}
		return &audit.Keyring{}, nil
	case file == "":
		return nil, fmt.Errorf("%w: no audit key: pass --audit-key-file FILE ($CORDON_AUDIT_KEY_FILE; lines 'KEY_ID BASE64_KEY', e.g. echo \"k1 $(head -c 32 /dev/urandom | base64)\" > audit.keys), or --audit-unkeyed for development", cmdline.ErrUsage)
	}
	keys, err := loadAuditKeyring(file, id)
	if err != nil {
		return nil, err
	}
	if keys.Active == "" {
		return nil, fmt.Errorf("%w: %s holds several keys: name the one to write with (--audit-key-id, $CORDON_AUDIT_KEY_ID)", cmdline.ErrUsage, file)
	}
	return keys, nil
}

// parseTenantBudgets reads NAME=DURATION pairs.
func parseTenantBudgets(pairs []string) (map[string]time.Duration, error) {
	out := make(map[string]time.Duration, len(pairs))
	for _, p := range pairs {
		name, val, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%w: --rerank-budget-tenant %q: want NAME=DURATION, e.g. wholesale=500ms", cmdline.ErrUsage, p)
		}
		if err := cordontype.ValidateTenant(name); err != nil {
			return nil, fmt.Errorf("%w: --rerank-budget-tenant %q: %w", cmdline.ErrUsage, p, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: --rerank-budget-tenant: tenant %s given twice", cmdline.ErrUsage, name)
		}
		d, err := cmdline.ParseBudget("--rerank-budget-tenant "+name, val)
		if err != nil {
			return nil, err
		}
		out[name] = d
	}
	return out, nil
}
