package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

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
	// reembed is the re-embedding state ("none", "backfill", "cutover")
	// and next the model of the second vector slot (nil in "none"):
	// writes store vectors of both.
	reembed string
	next    *embed.Spec
	// readerMin is the lowest migration a binary must have to read and
	// write the tenant (cordon.tenants.reader_min, migration 00016).
	readerMin int64
}

// incarnation names one life of a tenant: cordon.tenants.incarnation, a
// number a sequence draws when the tenant is created and never draws
// again, and on Citus the node that holds the tenant's schema (empty
// elsewhere), so that a tenant moved to another worker is reloaded rather
// than continued from a change log read on the other node.
type incarnation struct {
	id   int64
	node string
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

// statsRow is a tenant's one-row stats table as one statement saw it.
type statsRow struct {
	// version counts the tenant's committed writes.
	version int64
	// nChunks and sumLen are N and the length sum under the tenant scope.
	nChunks, sumLen int64
	// maxAbs bounds every vector component (the dense side's exactness
	// check).
	maxAbs int32
	// incarnation names the life of the tenant this row belongs to (and,
	// on Citus, its node): the in-memory path serves an index only for the
	// incarnation it was built from.
	incarnation incarnation
	// oid is the stats table's OID, which checkPlacement reads again on
	// Citus to detect a move during a read.
	oid int64
	// node is the address of the server that read the stats row (on
	// Citus, the tenant's worker): "host:port", host empty over a socket.
	node string
	// colsOK says the column blocks hold every chunk (migration 00014):
	// the SQL path reads them instead of the chunks table.
	colsOK bool
}

// lookupTenant reads a tenant's registry row and checks that this binary's
// tokenizer indexed it; found is false when the tenant is not registered.
// With st not nil, the same statement reads the tenant's stats row into
// st, so a query learns all it needs of the tenant in one round trip. An
// unregistered tenant has no schema, so that statement fails (undefined
// table) rather than finding no row: in a transaction, the caller must roll
// back.
func lookupTenant(ctx context.Context, db DBTX, tenant string, st *statsRow) (t tenantInfo, found bool, err error) {
	schema, err := SchemaName(tenant)
	if err != nil {
		return t, false, err
	}
	var tok string
	var nextModel *string
	var nextDims *int
	sql := `SELECT t.schema_name, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics,
		t.embed_model, t.reembed_state, t.next_model, t.next_dims, t.reader_min`
	from := ` FROM cordon.tenants t`
	dest := []any{&t.schema, &t.settings.Dims, &t.settings.BM25.K1, &t.settings.BM25.B,
		&t.settings.Chunking.MaxWords, &t.settings.Chunking.OverlapWords, &tok, &t.settings.Statistics,
		&t.settings.Model, &t.reembed, &nextModel, &nextDims, &t.readerMin}
	if st != nil {
		sql += `, t.incarnation, s.version, s.n_chunks, s.sum_len, s.max_abs, s.tableoid::bigint, ` + nodeSQL + `, s.cols_ok`
		from += `, ` + tablesFor(schema).stats + ` s`
		dest = append(dest, &st.incarnation.id, &st.version, &st.nChunks, &st.sumLen, &st.maxAbs, &st.oid, &st.node, &st.colsOK)
	}
	err = db.QueryRow(ctx, sql+from+` WHERE t.name = $1`, tenant).Scan(dest...)
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || st != nil && errors.As(err, &pe) && pe.Code == "42P01" {
		return t, false, nil
	}
	if errors.As(err, &pe) && pe.Code == "42703" {
		// An undefined column: the registry predates this binary's
		// migrations.
		return t, false, fmt.Errorf("%w: look up tenant %q: %s: the database's migrations are older than this binary's (%d): run 'cordon migrate'",
			ErrSchemaBehind, tenant, pe.Message, migrate.Latest())
	}
	if err != nil {
		return t, false, fmt.Errorf("look up tenant %q: %w", tenant, classify(err))
	}
	if t.readerMin > migrate.Latest() {
		return t, false, fmt.Errorf("%w: tenant %q needs a binary built with migration %d or later, and this one has migrations up to %d: roll out the newer release (CHANGELOG.md names the releases that need a stop)",
			ErrSchemaTooNew, tenant, t.readerMin, migrate.Latest())
	}
	if nextModel != nil && nextDims != nil {
		t.next = &embed.Spec{Model: *nextModel, Dims: *nextDims}
	}
	if t.schema != schema {
		return t, false, fmt.Errorf("tenant %q: registry names schema %q, want %q", tenant, t.schema, schema)
	}
	analyzer, fields, rules, ok := analysis.AnalyzerOf(tok)
	if !ok {
		return t, false, fmt.Errorf("tenant %q was indexed with tokenizer %s but this binary has %s: re-index the tenant (drop, create, re-ingest)",
			tenant, tok, strings.Join(analysis.Versions(), ", "))
	}
	t.settings.Analyzer, t.settings.Fields, t.settings.FieldRules = analyzer, fields, rules
	t.tables = tablesFor(t.schema)
	t.name = tenant
	return t, true, nil
}

// TenantExists reports whether tenant is registered.
func (s *Store) TenantExists(ctx context.Context, tenant string) (bool, error) {
	_, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	return found, err
}

// WriteModels returns the embedding models a write to tenant embeds with:
// the tenant's model and, while it re-embeds, the second slot's. A tenant
// that is not registered wraps [ErrTenantNotFound].
func (s *Store) WriteModels(ctx context.Context, tenant string) ([]embed.Spec, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %q (create it with 'cordon tenant create %s')", ErrTenantNotFound, tenant, tenant)
	}
	out := []embed.Spec{t.settings.Spec()}
	if t.next != nil {
		out = append(out, *t.next)
	}
	return out, nil
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
	err := db.QueryRow(ctx, `SELECT cordon.create_tenant($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		tenant, st.Dims, st.BM25.K1, st.BM25.B, st.Chunking.MaxWords, st.Chunking.OverlapWords,
		st.TokenizerVersion(), string(st.Statistics), st.Spec().Model).Scan(&created)
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
	var err error
	for attempt := 1; ; attempt++ {
		err = s.pool.QueryRow(ctx, `SELECT cordon.drop_tenant($1)`, tenant).Scan(&dropped)
		// DROP SCHEMA takes the tenant's tables one by one, in an order
		// that reads and writes in flight may hold the other way round:
		// PostgreSQL then rolls one side back, and a drop that lost is
		// run again.
		if !isTransientConflict(err) || attempt == maxPlacementAttempts {
			break
		}
	}
	if err == nil && dropped && s.cache != nil {
		schema, _ := SchemaName(tenant) // validated above
		s.cache.forget(schema)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return false, fmt.Errorf("%w: the database role may not drop tenant %q (%s): drop it as the owner role, with 'cordon tenant drop --yes %s'",
			ErrOwnerRequired, tenant, pe.Message, tenant)
	}
	if err != nil {
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

// TenantInfo describes a registered tenant.
type TenantInfo struct {
	Name     string
	Schema   string
	Settings index.Settings
	Chunks   int64
	// Reembed is the re-embedding state: "none", "backfill" or "cutover".
	Reembed string
	// Tokenizer is the recorded tokenizer version (analysis.Version).
	Tokenizer string
}

// Tenants lists registered tenants in name order.
func (s *Store) Tenants(ctx context.Context) ([]TenantInfo, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT name, schema_name, dims, k1, b, max_words, overlap_words, bm25_statistics, embed_model, reembed_state, tokenizer_version
		FROM cordon.tenants ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", classify(err))
	}
	var out []TenantInfo
	for rows.Next() {
		var t TenantInfo
		if err := rows.Scan(&t.Name, &t.Schema, &t.Settings.Dims, &t.Settings.BM25.K1, &t.Settings.BM25.B,
			&t.Settings.Chunking.MaxWords, &t.Settings.Chunking.OverlapWords, &t.Settings.Statistics,
			&t.Settings.Model, &t.Reembed, &t.Tokenizer); err != nil {
			rows.Close()
			return nil, err
		}
		t.Settings.Analyzer, t.Settings.Fields, t.Settings.FieldRules, _ = analysis.AnalyzerOf(t.Tokenizer) // "" when this binary has it not
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
