package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
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
values a request may give (400 beyond, naming the flag). At most
--tenant-retrieves retrieves of one tenant run at once and
--tenant-retrieve-queue more wait; any beyond are refused with 429 and
Retry-After, while other tenants are still served.

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

func runServe(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	d := server.DefaultConfig()
	listen := cmdline.EnvString(fs, env, "listen", "CORDON_LISTEN", "127.0.0.1:8080", "address to listen on")
	dbURL := cmdline.DatabaseFlag(fs)
	jwksFile := cmdline.EnvString(fs, env, "jwks-file", "CORDON_JWKS_FILE", "", "JSON Web Key Set file (RS256, ES256, EdDSA)")
	jwksURL := cmdline.EnvString(fs, env, "jwks-url", "CORDON_JWKS_URL", "", "JSON Web Key Set URL, refreshed in the background")
	oidc := cmdline.EnvString(fs, env, "oidc-issuer", "CORDON_OIDC_ISSUER", "", "OIDC issuer whose discovery document names the JWKS")
	issuer := cmdline.EnvString(fs, env, "jwt-issuer", "CORDON_JWT_ISSUER", "", "required iss claim")
	audience := cmdline.EnvString(fs, env, "jwt-audience", "CORDON_JWT_AUDIENCE", "", "required aud claim")
	claimTenant := cmdline.EnvString(fs, env, "claim-tenant", "CORDON_CLAIM_TENANT", "", "claim name or dotted path holding the tenant (default: tenant)")
	claimClearance := cmdline.EnvString(fs, env, "claim-clearance", "CORDON_CLAIM_CLEARANCE", "", "claim name or dotted path holding the clearance (default: clearance)")
	claimBarriers := cmdline.EnvString(fs, env, "claim-barriers", "CORDON_CLAIM_BARRIERS", "", "claim name or dotted path holding the barriers (default: barriers)")
	claimRoles := cmdline.EnvString(fs, env, "claim-roles", "CORDON_CLAIM_ROLES", "", "claim name or dotted path holding the roles, e.g. realm_access.roles (default: roles)")
	migrate := fs.Bool("migrate", cmdline.EnvBool(env, "CORDON_MIGRATE"), "apply pending migrations before serving ($CORDON_MIGRATE=1)")
	metricsAddr := cmdline.EnvString(fs, env, "metrics-addr", "CORDON_METRICS_ADDR", "", "address of the Prometheus /metrics listener, apart from the API's (empty: no metrics)")
	metricsTenants := fs.Bool("metrics-tenant-labels", cmdline.EnvBool(env, "CORDON_METRICS_TENANT_LABELS"), "label the retrieval counters with the tenant ($CORDON_METRICS_TENANT_LABELS=1)")
	auditKeyFile := cmdline.EnvString(fs, env, "audit-key-file", "CORDON_AUDIT_KEY_FILE", "", "audit keyring file, one 'KEY_ID BASE64_KEY' per line")
	auditKeyID := cmdline.EnvString(fs, env, "audit-key-id", "CORDON_AUDIT_KEY_ID", "", "key id to write audit records with (default: the keyring's only key)")
	auditUnkeyed := fs.Bool("audit-unkeyed", cmdline.EnvBool(env, "CORDON_AUDIT_UNKEYED"), "development only: chain audit records without a key ($CORDON_AUDIT_UNKEYED=1)")
	var errs []error
	i64 := func(name, envName string, def int64, usage string) *int64 {
		p, err := cmdline.EnvInt64(fs, env, name, envName, def, usage)
		if err != nil {
			errs = append(errs, err)
			p = new(int64)
		}
		return p
	}
	dur := func(name, envName string, def time.Duration, usage string) *time.Duration {
		p, err := cmdline.EnvDuration(fs, env, name, envName, def, usage)
		if err != nil {
			errs = append(errs, err)
			p = new(time.Duration)
		}
		return p
	}
	maxConns := i64("max-conns", "CORDON_MAX_CONNS", 0, "database pool size (0: pgxpool's default)")
	var replicaURLs cmdline.RepeatFlag
	fs.Var(&replicaURLs, "replica-url", "URL of a streaming replica to serve reads from (repeatable; default: the comma-separated $CORDON_REPLICA_URLS)")
	replicaMaxLag := dur("replica-max-lag", "CORDON_REPLICA_MAX_LAG", 0, "serve reads without a consistency token from a replica only while it is at most this far behind the primary (0: any healthy replica)")
	cacheBytes := cmdline.EnvString(fs, env, "cache-bytes", "CORDON_CACHE_BYTES", cmdline.CacheAuto, "memory budget of the in-memory query path in bytes; auto: a quarter of the memory this process may use (cgroup limit, else physical memory); 0: rank every query in SQL")
	maxBody := i64("max-body-bytes", "CORDON_MAX_BODY_BYTES", d.MaxBodyBytes, "limit of a JSON request body")
	maxDoc := i64("max-document-bytes", "CORDON_MAX_DOCUMENT_BYTES", d.MaxDocumentBytes, "limit of a document PUT body")
	maxBatch := i64("max-batch-bytes", "CORDON_MAX_BATCH_BYTES", d.MaxBatchBytes, "limit of an NDJSON batch body")
	readHeader := dur("read-header-timeout", "CORDON_READ_HEADER_TIMEOUT", d.ReadHeaderTimeout, "time to read request headers")
	read := dur("read-timeout", "CORDON_READ_TIMEOUT", d.ReadTimeout, "time to read a whole request")
	write := dur("write-timeout", "CORDON_WRITE_TIMEOUT", d.WriteTimeout, "time to write a response")
	idle := dur("idle-timeout", "CORDON_IDLE_TIMEOUT", d.IdleTimeout, "keep-alive idle time")
	reqTimeout := dur("request-timeout", "CORDON_REQUEST_TIMEOUT", d.RequestTimeout, "bound of one request's work, database included")
	shutdown := dur("shutdown-timeout", "CORDON_SHUTDOWN_TIMEOUT", d.ShutdownTimeout, "time in-flight requests get on SIGTERM")
	embedding := cmdline.AddEmbedFlags(fs)
	leeway := dur("jwt-leeway", "CORDON_JWT_LEEWAY", server.DefaultLeeway, "clock skew tolerated on a token's exp, nbf and iat (at most "+server.MaxLeeway.String()+")")
	reranker := cmdline.AddRerankerFlags(fs, env, &errs)
	rerankBudget := cmdline.EnvString(fs, env, "rerank-budget", "CORDON_RERANK_BUDGET", d.RerankBudget.String(), "model reranker latency budget of a request that sets no rerank_budget_ms")
	var fallbackTenants cmdline.RepeatFlag
	fs.Var(&fallbackTenants, "dense-fallback-tenant", "NAME: a tenant whose retrieves run lexical-only when the query cannot be embedded (policy dense_fallback \"lexical\" by default; repeatable; default: the comma-separated $CORDON_DENSE_FALLBACK_TENANTS)")
	var tenantBudgets cmdline.RepeatFlag
	fs.Var(&tenantBudgets, "rerank-budget-tenant", "NAME=DURATION: one tenant's rerank budget (repeatable; default: the comma-separated $CORDON_RERANK_BUDGET_TENANTS)")
	var limits retrieval.Limits
	limitFlags := []struct {
		name string
		v    *int64
		dst  *int
	}{
		{"max-top-n", i64("max-top-n", "CORDON_MAX_TOP_N", int64(d.Limits.TopN), "largest policy top_n a retrieve may ask for"), &limits.TopN},
		{"max-rerank-depth", i64("max-rerank-depth", "CORDON_MAX_RERANK_DEPTH", int64(d.Limits.RerankDepth), "largest policy rerank_depth"), &limits.RerankDepth},
		{"max-limit", i64("max-limit", "CORDON_MAX_LIMIT", int64(d.Limits.Limit), "largest policy limit"), &limits.Limit},
		{"max-prf-docs", i64("max-prf-docs", "CORDON_MAX_PRF_DOCS", int64(d.Limits.PRFDocs), "largest policy prf_docs"), &limits.PRFDocs},
		{"max-prf-terms", i64("max-prf-terms", "CORDON_MAX_PRF_TERMS", int64(d.Limits.PRFTerms), "largest policy prf_terms"), &limits.PRFTerms},
	}
	tenantRetrieves := i64("tenant-retrieves", "CORDON_TENANT_RETRIEVES", int64(d.TenantRetrieves), "retrieves of one tenant in progress at once (default: 2 x GOMAXPROCS)")
	tenantQueue := i64("tenant-retrieve-queue", "CORDON_TENANT_RETRIEVE_QUEUE", -1, "retrieves of one tenant that wait for one in progress before the next is refused with 429 (-1: 4 x --tenant-retrieves; 0: none wait)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0]
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: serve takes no arguments", cmdline.ErrUsage)
	}
	if *leeway < 0 || *leeway > server.MaxLeeway {
		return fmt.Errorf("%w: --jwt-leeway %v: want between 0s and %v", cmdline.ErrUsage, *leeway, server.MaxLeeway)
	}
	claimPaths := server.ClaimPaths{Tenant: *claimTenant, Clearance: *claimClearance, Barriers: *claimBarriers, Roles: *claimRoles}
	if err := claimPaths.Validate(); err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	models, err := embedding.Registry()
	if err != nil {
		return err
	}
	embedWarning, err := embedding.Probe(ctx, models)
	if err != nil {
		return err
	}
	keys, err := serveAuditKeys(*auditKeyFile, *auditKeyID, *auditUnkeyed)
	if err != nil {
		return err
	}
	for _, f := range limitFlags {
		if *f.v < 1 || *f.v > retrieval.MaxLimit {
			return fmt.Errorf("%w: --%s %d: want 1 to %d", cmdline.ErrUsage, f.name, *f.v, retrieval.MaxLimit)
		}
		*f.dst = int(*f.v)
	}
	// A request that sets none of these fields takes the service
	// profile's values, which must be within the limits.
	var le *retrieval.LimitError
	if err := retrieval.New(nil, retrieval.WithLimits(limits)).Validate(retrieval.ServicePolicy()); errors.As(err, &le) {
		return fmt.Errorf("%w: --max-%s %d is below the service profile's %s %d, which every request that sets no %s takes",
			cmdline.ErrUsage, strings.ReplaceAll(le.Field, "_", "-"), le.Max, le.Field, le.Value, le.Field)
	}
	if *tenantRetrieves < 1 || *tenantRetrieves > 10000 {
		return fmt.Errorf("%w: --tenant-retrieves %d: want 1 to 10000", cmdline.ErrUsage, *tenantRetrieves)
	}
	if *tenantQueue < -1 || *tenantQueue > 100000 {
		return fmt.Errorf("%w: --tenant-retrieve-queue %d: want -1 (4 x --tenant-retrieves) or 0 to 100000", cmdline.ErrUsage, *tenantQueue)
	}
	if *tenantQueue == -1 {
		*tenantQueue = 4 * *tenantRetrieves
	}
	queue := int(*tenantQueue)
	if queue == 0 {
		queue = -1 // server.Config: none wait
	}
	budget, err := cmdline.ParseBudget("--rerank-budget", *rerankBudget)
	if err != nil {
		return err
	}
	if len(tenantBudgets) == 0 {
		tenantBudgets = cmdline.SplitList(env.Getenv("CORDON_RERANK_BUDGET_TENANTS"))
	}
	budgets, err := parseTenantBudgets(tenantBudgets)
	if err != nil {
		return err
	}
	if len(fallbackTenants) == 0 {
		fallbackTenants = cmdline.SplitList(env.Getenv("CORDON_DENSE_FALLBACK_TENANTS"))
	}
	for _, name := range fallbackTenants {
		if err := cordontype.ValidateTenant(name); err != nil {
			return fmt.Errorf("%w: --dense-fallback-tenant %q: %w", cmdline.ErrUsage, name, err)
		}
	}
	log := cmdline.Logger(env)
	rr, err := reranker.Build(env, log)
	if err != nil {
		return err
	}
	cacheBudgetBytes, cacheRule, err := cmdline.CacheBudget("--cache-bytes", *cacheBytes, 1)
	if err != nil {
		return err
	}
	url := cmdline.DatabaseURL(env, *dbURL)
	secret := env.Getenv("CORDON_JWT_HS256_SECRET")
	secretState := "unset"
	if secret != "" {
		secretState = "set (redacted)"
	}
	attrs := []any{"listen", *listen, "database_url", cmdline.RedactURL(url), "jwt_hs256_secret", secretState,
		"jwks_file", *jwksFile, "jwks_url", *jwksURL, "oidc_issuer", *oidc, "jwt_issuer", *issuer, "jwt_audience", *audience,
		"jwt_leeway", leeway.String(), "claim_tenant", *claimTenant, "claim_clearance", *claimClearance,
		"claim_barriers", *claimBarriers, "claim_roles", *claimRoles,
		"migrate", *migrate, "max_conns", *maxConns, "replica_max_lag", replicaMaxLag.String(), "cache_bytes", cacheBudgetBytes, "cache_budget_rule", cacheRule, "max_body_bytes", *maxBody, "max_document_bytes", *maxDoc,
		"max_batch_bytes", *maxBatch, "read_header_timeout", readHeader.String(), "read_timeout", read.String(),
		"write_timeout", write.String(), "idle_timeout", idle.String(), "request_timeout", reqTimeout.String(),
		"shutdown_timeout", shutdown.String(), "metrics_addr", *metricsAddr, "metrics_tenant_labels", *metricsTenants,
		"audit_key_file", *auditKeyFile, "audit_key_id", keys.Active, "audit_unkeyed", *auditUnkeyed}
	attrs = append(attrs, embedding.LogAttrs()...)
	attrs = append(attrs, reranker.LogAttrs(env)...)
	attrs = append(attrs, "rerank_budget", budget.String(), "rerank_budget_tenants", strings.Join(tenantBudgets, ","),
		"dense_fallback_tenants", strings.Join(fallbackTenants, ","))
	for _, f := range limitFlags {
		attrs = append(attrs, strings.ReplaceAll(f.name, "-", "_"), *f.dst)
	}
	log.Info("config", append(attrs, "tenant_retrieves", *tenantRetrieves, "tenant_retrieve_queue", *tenantQueue)...)
	if embedWarning != "" {
		log.Warn("the embedding server did not answer a probe; tenants on its model fail with 503 until it does", "error", embedWarning)
	}
	if *auditUnkeyed {
		log.Warn("audit records are chained without a key (--audit-unkeyed): anyone who can write the database can rewrite the audit log undetected; development only")
	}
	if w := auditKeyFileWarning(*auditKeyFile); *auditKeyFile != "" && w != "" {
		log.Warn(w)
	}
	verifier, err := server.NewVerifier(ctx, server.AuthConfig{HS256Secret: secret, JWKSFile: *jwksFile, JWKSURL: *jwksURL,
		OIDCIssuer: *oidc, Issuer: *issuer, Audience: *audience, Leeway: *leeway, Claims: claimPaths})
	if err != nil {
		return err
	}
	if *migrate {
		res, err := postgres.Migrate(ctx, url)
		if err != nil {
			return err
		}
		for _, r := range res {
			log.Info("migrated", "version", r.Version, "source", r.Source)
		}
	}
	if *maxConns < 0 || *maxConns > 10000 {
		return fmt.Errorf("%w: --max-conns %d out of range", cmdline.ErrUsage, *maxConns)
	}
	if *replicaMaxLag < 0 {
		return fmt.Errorf("%w: --replica-max-lag %v must be >= 0", cmdline.ErrUsage, *replicaMaxLag)
	}
	if len(replicaURLs) == 0 {
		for _, u := range strings.Split(env.Getenv("CORDON_REPLICA_URLS"), ",") {
			if u = strings.TrimSpace(u); u != "" {
				replicaURLs = append(replicaURLs, u)
			}
		}
	}
	st, err := postgres.Open(ctx, url, postgres.Options{MaxConns: int32(*maxConns), CacheBytes: cacheBudgetBytes, CacheLoadInBackground: true, AuditKeys: keys, Replicas: replicaURLs, ReplicaMaxLag: *replicaMaxLag, Models: models})
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	var mln net.Listener
	if *metricsAddr != "" {
		if mln, err = net.Listen("tcp", *metricsAddr); err != nil {
			return fmt.Errorf("metrics listen: %w", err)
		}
		defer mln.Close()
	}
	srv := server.New(server.Config{
		MaxBodyBytes: *maxBody, MaxDocumentBytes: *maxDoc, MaxBatchBytes: *maxBatch,
		ReadHeaderTimeout: *readHeader, ReadTimeout: *read, WriteTimeout: *write, IdleTimeout: *idle,
		RequestTimeout: *reqTimeout, ShutdownTimeout: *shutdown, MetricsTenantLabels: *metricsTenants, Logger: log,
		Models:   models,
		Reranker: rr, RerankBudget: budget, RerankBudgetTenant: budgets, DenseFallbackTenants: fallbackTenants,
		Limits: limits, TenantRetrieves: int(*tenantRetrieves), TenantQueue: queue,
	}, st, verifier)
	// Both listeners stop together: when one fails, the other shuts down.
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
func serveAuditKeys(file, id string, unkeyed bool) (*postgres.AuditKeyring, error) {
	switch {
	case file != "" && unkeyed:
		return nil, fmt.Errorf("%w: --audit-key-file and --audit-unkeyed exclude each other", cmdline.ErrUsage)
	case unkeyed:
		if id != "" {
			return nil, fmt.Errorf("%w: --audit-key-id needs --audit-key-file, not --audit-unkeyed", cmdline.ErrUsage)
		}
		return &postgres.AuditKeyring{}, nil
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
