package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

var _ retrieval.Store = (*Store)(nil)

// DBTX is the query surface shared by a pool and a transaction, so one query
// path serves both.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Options configure a Store.
type Options struct {
	// AutoCreate, when set, makes Put create an unknown tenant with these
	// settings (the replay CLI uses the script's config). When nil, Put to an
	// unknown tenant fails with ErrTenantNotFound.
	AutoCreate *index.Settings
	// MaxConns bounds the pool (0: pgxpool's default).
	MaxConns int32
	// CacheBytes, when > 0, enables the in-memory query path: each queried
	// tenant's index is kept in process memory (package memindex) within
	// this budget, kept coherent with Postgres through the tenant's change
	// log, and ranked in Go. A tenant that does not fit is ranked in SQL;
	// both paths give the same results. 0 ranks every query in SQL.
	CacheBytes int64
	// AuditKeys keys the audit chains (see AppendAudit and VerifyAudit):
	// rows are written with the active key and verified with every key.
	// Nil writes unkeyed rows and cannot verify keyed ones.
	AuditKeys *AuditKeyring
}

// Store is the Postgres store. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	opts  Options
	cache *cache // nil when Options.CacheBytes == 0
}

func parseConfig(url string) (*pgxpool.Config, error) {
	if url == "" {
		return nil, errors.New("no database URL: pass --database-url or set CORDON_DATABASE_URL (e.g. postgres://user@127.0.0.1:5432/db?sslmode=disable)")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	return cfg, nil
}

// Open connects to url. The migrations must have been applied (Migrate);
// Open checks that they were.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.AutoCreate != nil {
		if err := opts.AutoCreate.Validate(); err != nil {
			return nil, err
		}
	}
	if opts.AuditKeys != nil {
		if err := opts.AuditKeys.Validate(); err != nil {
			return nil, err
		}
	}
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := pgxvec.RegisterTypes(ctx, c); err != nil {
			return vectorTypeError(ctx, c, err)
		}
		return nil
	}
	// A connection goes back to the pool only when it is idle outside any
	// transaction; one left mid-transaction or broken is closed instead.
	// Cordon never changes session state (no SET, no search_path), so an idle
	// connection is a clean one.
	cfg.AfterRelease = func(c *pgx.Conn) bool {
		return !c.IsClosed() && c.PgConn().TxStatus() == 'I'
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", classify(err))
	}
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('cordon.tenants') IS NOT NULL`).Scan(&ok); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", classify(err))
	}
	if !ok {
		pool.Close()
		return nil, errors.New("the database has no Cordon schema: run 'cordon migrate --database-url URL' (or goose -dir migrations -table public.goose_db_version postgres URL up) first")
	}
	st := &Store{pool: pool, opts: opts}
	if opts.CacheBytes > 0 {
		st.cache = newCache(opts.CacheBytes)
	}
	return st, nil
}

// vectorTypeError explains why the vector type was not found: the
// extension is missing, or it lives in a schema off the role's search_path.
func vectorTypeError(ctx context.Context, c *pgx.Conn, err error) error {
	var db, role, schema string
	if qerr := c.QueryRow(ctx, `SELECT current_database(), current_user,
		coalesce((SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'), '')`).
		Scan(&db, &role, &schema); qerr != nil {
		return err
	}
	if schema == "" {
		return fmt.Errorf("%w: the vector extension is not installed in database %q: ask a superuser (your DBA) to run CREATE EXTENSION vector; in it, then run 'cordon migrate'", err, db)
	}
	return fmt.Errorf("%w: the vector extension is installed in schema %q of database %q, which is not on role %q's search_path: ask your DBA to add it (ALTER ROLE ... SET search_path) or to install the extension in schema public", err, schema, db, role)
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for operational checks (readiness, stats).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// classify marks connection failures with ErrUnavailable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// SchemaName maps a validated tenant name to its schema. The migrations'
// cordon.tenants CHECK constraint pins the same mapping.
func SchemaName(tenant string) (string, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return "", err
	}
	return "cordon_t_" + tenant, nil
}

// tenantInfo is a registry row.
type tenantInfo struct {
	name     string
	schema   string
	settings index.Settings
	tables   tables
}

// tables holds a tenant's quoted, schema-qualified table names.
type tables struct {
	schema                                      string
	documents, chunks, postings, stats, changes string
	labelStats                                  string
	segments                                    string
	// blockSeq is the postings block sequence's quoted name, passed to
	// nextval as a regclass parameter.
	blockSeq string
}

func tablesFor(schema string) tables {
	q := func(t string) string { return pgx.Identifier{schema, t}.Sanitize() }
	return tables{schema: schema, documents: q("documents"), chunks: q("chunks"), postings: q("postings"), stats: q("stats"),
		changes: q("changes"), segments: q("segments"), blockSeq: q("postings_block"), labelStats: q("label_stats")}
}

// lookupTenant reads a tenant's registry row. found is false when the tenant is
// not registered.
func lookupTenant(ctx context.Context, db DBTX, tenant string) (t tenantInfo, found bool, err error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return t, false, err
	}
	var tok string
	err = db.QueryRow(ctx, `
		SELECT schema_name, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics
		FROM cordon.tenants WHERE name = $1`, tenant).Scan(
		&t.schema, &t.settings.Dims, &t.settings.BM25.K1, &t.settings.BM25.B,
		&t.settings.Chunking.MaxWords, &t.settings.Chunking.OverlapWords, &tok, &t.settings.Statistics)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("look up tenant %q: %w", tenant, classify(err))
	}
	if want, _ := SchemaName(tenant); t.schema != want {
		return t, false, fmt.Errorf("tenant %q: registry names schema %q, want %q", tenant, t.schema, want)
	}
	if tok != analysis.TokenizerVersion {
		return t, false, fmt.Errorf("tenant %q was indexed with tokenizer %s but this binary has %s: re-index the tenant (drop, create, re-ingest)", tenant, tok, analysis.TokenizerVersion)
	}
	t.tables = tablesFor(t.schema)
	t.name = tenant
	return t, true, nil
}

// CreateTenant registers tenant with settings and creates its schema. It is
// idempotent: created is false when the tenant already existed with the same
// settings; other settings give ErrTenantSettings.
func (s *Store) CreateTenant(ctx context.Context, tenant string, settings index.Settings) (created bool, err error) {
	return createTenant(ctx, s.pool, tenant, settings)
}

func createTenant(ctx context.Context, db DBTX, tenant string, st index.Settings) (bool, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return false, err
	}
	if err := st.Validate(); err != nil {
		return false, err
	}
	var created bool
	err := db.QueryRow(ctx, `SELECT cordon.create_tenant($1, $2, $3, $4, $5, $6, $7, $8)`,
		tenant, st.Dims, st.BM25.K1, st.BM25.B, st.Chunking.MaxWords, st.Chunking.OverlapWords,
		analysis.TokenizerVersion, string(st.Statistics)).Scan(&created)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "CD001" {
		return false, fmt.Errorf("%w: %s", ErrTenantSettings, pe.Message)
	}
	if errors.As(err, &pe) && pe.Code == "42501" {
		return false, fmt.Errorf("%w: the database role may not create tenant %q (%s): create it as the owner role, with 'cordon tenant create %s'",
			ErrOwnerRequired, tenant, pe.Message, tenant)
	}
	if err != nil {
		return false, fmt.Errorf("create tenant %q: %w", tenant, classify(err))
	}
	return created, nil
}

// DropTenant removes a tenant's schema and registry row. It reports whether the
// tenant existed.
func (s *Store) DropTenant(ctx context.Context, tenant string) (bool, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return false, err
	}
	var dropped bool
	if err := s.pool.QueryRow(ctx, `SELECT cordon.drop_tenant($1)`, tenant).Scan(&dropped); err != nil {
		return false, fmt.Errorf("drop tenant %q: %w", tenant, classify(err))
	}
	return dropped, nil
}

// SetStatistics changes a tenant's BM25 statistics scope. Scores change
// with the next query; nothing is re-indexed (the label-set counters serve
// both scopes). It reports whether the tenant exists.
func (s *Store) SetStatistics(ctx context.Context, tenant string, scope bm25.Scope) (bool, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return false, err
	}
	if _, err := bm25.ParseScope(string(scope)); err != nil {
		return false, fmt.Errorf("%w: %w", cordontype.ErrInvalid, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE cordon.tenants SET bm25_statistics = $2 WHERE name = $1`, tenant, string(scope))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return false, fmt.Errorf("%w: the database role may not change tenant %q (%s): change it as the owner role, with 'cordon tenant set --bm25-statistics %s %s'",
			ErrOwnerRequired, tenant, pe.Message, scope, tenant)
	}
	if err != nil {
		return false, fmt.Errorf("set bm25_statistics of tenant %q: %w", tenant, classify(err))
	}
	return tag.RowsAffected() == 1, nil
}

// GrantServiceRole registers role as a service role: it is granted what
// serving needs on every tenant schema now, and on every tenant created or
// upgraded later (see migrations/00009_service_roles.sql). It needs the
// owner role.
func (s *Store) GrantServiceRole(ctx context.Context, role string) error {
	if role == "" {
		return fmt.Errorf("%w: no role name", cordontype.ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx, `SELECT cordon.grant_service_role($1)`, role); err != nil {
		return fmt.Errorf("grant service role %q: %w", role, classify(err))
	}
	return nil
}

// RevokeServiceRole unregisters a service role and revokes its grants. It
// reports whether role was registered.
func (s *Store) RevokeServiceRole(ctx context.Context, role string) (bool, error) {
	var found bool
	if err := s.pool.QueryRow(ctx, `SELECT cordon.revoke_service_role($1)`, role).Scan(&found); err != nil {
		return false, fmt.Errorf("revoke service role %q: %w", role, classify(err))
	}
	return found, nil
}

// ServiceRoles lists the registered service roles.
func (s *Store) ServiceRoles(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT role_name FROM cordon.service_roles ORDER BY role_name`)
	if err != nil {
		return nil, fmt.Errorf("list service roles: %w", classify(err))
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list service roles: %w", classify(err))
	}
	return roles, nil
}

// TenantInfo describes a registered tenant.
type TenantInfo struct {
	Name     string
	Schema   string
	Settings index.Settings
	Chunks   int64
}

// Tenants lists registered tenants in name order.
func (s *Store) Tenants(ctx context.Context) ([]TenantInfo, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT name, schema_name, dims, k1, b, max_words, overlap_words, bm25_statistics
		FROM cordon.tenants ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", classify(err))
	}
	var out []TenantInfo
	for rows.Next() {
		var t TenantInfo
		if err := rows.Scan(&t.Name, &t.Schema, &t.Settings.Dims, &t.Settings.BM25.K1, &t.Settings.BM25.B,
			&t.Settings.Chunking.MaxWords, &t.Settings.Chunking.OverlapWords, &t.Settings.Statistics); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tenants: %w", classify(err))
	}
	for i := range out {
		st := tablesFor(out[i].Schema).stats
		if err := s.pool.QueryRow(ctx, `SELECT n_chunks FROM `+st).Scan(&out[i].Chunks); err != nil {
			return nil, fmt.Errorf("tenant %q stats: %w", out[i].Name, classify(err))
		}
	}
	return out, nil
}

// metadataJSON renders document metadata for the jsonb column.
func metadataJSON(m map[string]any) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("%w: metadata: %w", cordontype.ErrInvalid, err)
	}
	return string(b), nil
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return classify(tx.Commit(ctx))
}
