package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

var (
	_ retrieval.Store         = (*Store)(nil)
	_ retrieval.QueryEmbedder = (*Store)(nil)
)

// DBTX is the query surface shared by a pool and a transaction, so one query
// path serves both.
type DBTX = pgexec.DBTX

// The execution helpers are pgexec's, shared with package migrate.
var (
	// classify marks connection failures with ErrUnavailable.
	classify = pgexec.Classify
	// inTxOn runs fn in a transaction begun on db, committing when fn
	// returns nil.
	inTxOn      = pgexec.InTx
	parseConfig = pgexec.ParseConfig
)

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
	// CacheLoadInBackground, with CacheBytes, makes a query whose tenant is
	// not in memory start loading it in the background and be ranked in
	// SQL without waiting (one load per tenant at a time, two at once);
	// later queries answer from memory once it is loaded. A tenant far
	// behind its change log is reloaded the same way. Without it, such a
	// query loads the tenant itself and waits. Results are the same
	// either way.
	CacheLoadInBackground bool
	// AuditKeys keys the audit chains (see AppendAudit and VerifyAudit):
	// rows are written with the active key and verified with every key.
	// Nil writes unkeyed rows and cannot verify keyed ones.
	AuditKeys *audit.Keyring
	// Replicas are URLs of streaming replicas (hot standbys) of the
	// database: the query path's reads (RankVersion, Rank, IDF, LoadChunks)
	// go to them, everything else to the primary; see WithConsistency for
	// reading one's own writes. Each gets a pool like the primary's.
	Replicas []string
	// Models serves the embedding models of tenants whose dense side is
	// not hashing: document vectors at write time (and during a
	// re-embedding, the target model's). Nil serves none: a write to such a
	// tenant fails with embed.ErrUnknownModel.
	Models *embed.Registry
	// ReplicaMaxLag, when > 0, bounds how far behind the primary a replica
	// may be to serve a read without a consistency token: a monitor
	// samples the primary's and the replicas' WAL positions (four times
	// within the bound), and a replica not known to hold every commit
	// older than the bound is skipped. 0 lets any healthy replica serve
	// such reads (the monitor then samples every second, for ReadStats'
	// Lag).
	ReplicaMaxLag time.Duration
	// ReplicaBackoff is how long a replica that failed a read is skipped
	// (0: DefaultReplicaBackoff).
	ReplicaBackoff time.Duration
	// ChunkScan makes the SQL path read the chunks table where column
	// blocks (migration 00014) hold what it needs, as it does for a tenant
	// whose blocks are not built yet: slower, with the same results. The
	// differential tests run both.
	ChunkScan bool

	// tracer, when set, traces every statement of the pool's connections;
	// the package's tests count round trips with it.
	tracer pgx.QueryTracer
	// loadHook, when set, runs in each background load after its snapshot
	// read the stats row, before the documents; the package's tests hold
	// loads there.
	loadHook func(tenant string)
	// cacheNoTexts, when set, makes the cache keep no chunk texts for any
	// tenant (see cache.build); the package's tests read texts by row id
	// with it.
	cacheNoTexts bool
	// fillHook, when set, runs after the cached index answered a query
	// outside a snapshot and before its hits' texts are read (tests).
	fillHook func(tenant string)
	// sqlHook, when set, runs before a query is ranked on the SQL path
	// (tests).
	sqlHook func(tenant string)
	// evictMinIdle, when not 0, replaces evictMinIdle (negative: any
	// tenant no query is reading may be evicted); the package's tests set
	// it.
	evictMinIdle time.Duration
	// poolConfig, when set, changes the pool's configuration last; the
	// package's tests count round trips on the wire with it.
	poolConfig func(*pgxpool.Config)
}

// Store is the Postgres store. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	opts  Options
	cache *cache // nil when Options.CacheBytes == 0
	audit *audit.Log
	// writes groups concurrent batches of a tenant into one transaction.
	writes writeGroups

	replicas     []*replica
	lag          *lagMonitor // nil without replicas
	nextReplica  atomic.Uint32
	primaryReads atomic.Int64
	// citus is set when the database has the Citus extension: snapshot
	// reads then check that one placement answered them all (citus.go).
	citus bool
	// movedReads counts the snapshot reads taken again because their
	// tenant moved to another node while they ran.
	movedReads atomic.Int64
	// models is each tenant's embedding model (tenant name -> embed.Spec)
	// as the read path's last lookup of it read it (TenantModel).
	models sync.Map
	// builds runs the column block builds of tenants written before
	// migration 00014 (columns.go), in the background.
	builds colBuilds
}

// Open connects to url. The migrations must have been applied (migrate.Up);
// Open checks that they were.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.AutoCreate != nil {
		if err := opts.AutoCreate.Validate(); err != nil {
			return nil, err
		}
		// As the memory store: tenants created with a model no provider
		// serves could take no write, so the store is refused up front.
		if err := opts.Models.Check(opts.AutoCreate.Spec()); err != nil {
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
	configure(cfg, opts)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", classify(err))
	}
	var ok, citus bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('cordon.tenants') IS NOT NULL,
		EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&ok, &citus); err != nil {
		pool.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			role := cfg.ConnConfig.User
			return nil, fmt.Errorf("%w: role %q may not read schema cordon (%s): make it a service role as the owner role (the one that runs 'cordon migrate'): 'cordon tenant grant %s', or 'cordon migrate --service-role %s'",
				ErrNotServiceRole, role, pe.Message, role, role)
		}
		return nil, fmt.Errorf("connect: %w", classify(err))
	}
	if !ok {
		pool.Close()
		return nil, errors.New("the database has no Cordon schema: run 'cordon migrate --database-url URL' (or goose -dir migrations -table public.goose_db_version postgres URL up) first")
	}
	replicas, err := openReplicas(ctx, opts.Replicas, func(c *pgxpool.Config) { configure(c, opts) })
	if err != nil {
		pool.Close()
		return nil, err
	}
	st := &Store{pool: pool, opts: opts, replicas: replicas, citus: citus,
		audit: audit.New(pool, opts.AuditKeys, SchemaName, auditLookup)}
	st.builds.ctx, st.builds.cancel = context.WithCancel(context.Background())
	if opts.CacheBytes > 0 {
		st.cache = newCache(opts.CacheBytes, opts.CacheLoadInBackground, opts.evictMinIdle)
		st.cache.hook = opts.loadHook
		st.cache.dropTexts = opts.cacheNoTexts
	}
	st.startLagMonitor()
	return st, nil
}

// configure applies opts to a pool's configuration (the primary's and each
// replica's).
func configure(cfg *pgxpool.Config, opts Options) {
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.tracer != nil {
		cfg.ConnConfig.Tracer = opts.tracer
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
	if opts.poolConfig != nil {
		opts.poolConfig(cfg)
	}
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

// Close stops background loads and closes the pools.
func (s *Store) Close() {
	s.builds.close()
	if s.cache != nil {
		s.cache.close()
	}
	s.lag.close()
	s.pool.Close()
	closeReplicas(s.replicas)
}

// Pool exposes the pool for operational checks (readiness, stats).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// inTx runs fn in a transaction on the primary, committing when it returns
// nil.
func (s *Store) inTx(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	return inTxOn(ctx, s.pool, opts, fn)
}

// Ready checks that the database answers, that its migrations are those of
// this binary, and that every tenant schema is at the latest version. A
// connection failure wraps [ErrUnavailable]; anything behind wraps
// [ErrNotReady].
func (s *Store) Ready(ctx context.Context) error {
	current, err := migrate.DatabaseVersion(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("readiness: %w", classify(err))
	}
	latest := migrate.Latest()
	if current < latest {
		return fmt.Errorf("%w: database at migration %d, this binary needs %d: run 'cordon migrate'", ErrNotReady, current, latest)
	}
	if current > latest {
		// Newer migrations: this binary serves the tenants they left
		// readable by it (cordon.tenants.reader_min) and refuses the rest.
		var n int64
		var first string
		if err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(min(name), '') FROM cordon.tenants WHERE reader_min > $1`, latest).Scan(&n, &first); err != nil {
			return fmt.Errorf("readiness: %w", classify(err))
		}
		if n > 0 {
			return fmt.Errorf("%w: database at migration %d, this binary has migrations up to %d, and %d tenants (%s first) need a newer binary: roll out the newer release",
				ErrNotReady, current, latest, n, first)
		}
	}
	var behind int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM cordon.tenants WHERE schema_version <> cordon.tenant_latest_version()`).Scan(&behind); err != nil {
		return fmt.Errorf("readiness: %w", classify(err))
	}
	if behind > 0 {
		return fmt.Errorf("%w: %d tenant schemas are not at the latest version", ErrNotReady, behind)
	}
	return nil
}
