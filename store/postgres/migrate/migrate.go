// Package migrate applies Cordon's schema migrations (package migrations)
// with goose and reports which are applied. Deploy pipelines run it
// (cordon migrate) before the service starts; the store checks the
// database's version at Open and in Ready.
package migrate

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/cordon-rag/cordon/migrations"
	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
)

// VersionTable is goose's migration bookkeeping table. It is
// schema-qualified so that neither the role's name nor its search_path
// moves it: under the default search_path "$user", public, a role named
// like a schema the migrations create (cordon, cordon_t_<tenant>) would
// otherwise find that schema as its current_schema() once it exists, and
// goose would create and read a second, empty table there. The stock goose
// CLI must be given the same name (-table public.goose_db_version, or
// GOOSE_TABLE).
const VersionTable = "public.goose_db_version"

// newProvider opens a goose provider over url with a Postgres session
// advisory lock: of two deploys migrating at once, one migrates and the other
// waits, then finds nothing to do.
func newProvider(ctx context.Context, url string) (*goose.Provider, *sql.DB, error) {
	cfg, err := pgexec.ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	if err := checkBookkeeping(ctx, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker), goose.WithTableName(VersionTable))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, db, nil
}

// checkBookkeeping refuses to migrate a database that has Cordon's schema
// but no public.goose_db_version (goose would re-apply every migration),
// and removes the empty goose_db_version tables that an unqualified table
// name left in Cordon's own schemas.
func checkBookkeeping(ctx context.Context, db *sql.DB) error {
	var haveTable, haveCordon bool
	err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass('cordon.tenants') IS NOT NULL`, VersionTable).
		Scan(&haveTable, &haveCordon)
	if err != nil {
		return fmt.Errorf("migration bookkeeping: %w", pgexec.Classify(err))
	}
	if !haveTable {
		if !haveCordon {
			return nil // a fresh database: goose creates the table
		}
		var where []string
		rows, err := db.QueryContext(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE tablename = 'goose_db_version' ORDER BY 1`)
		if err != nil {
			return fmt.Errorf("migration bookkeeping: %w", pgexec.Classify(err))
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return fmt.Errorf("migration bookkeeping: %w", pgexec.Classify(err))
			}
			where = append(where, s)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("migration bookkeeping: %w", pgexec.Classify(err))
		}
		if len(where) == 0 {
			return fmt.Errorf("the database has Cordon's schema but no migration bookkeeping (%s): it was not migrated by goose; migrate a fresh database", VersionTable)
		}
		return fmt.Errorf("the database has Cordon's schema but its migration bookkeeping is not in %s (found %s, created under another search_path): move the one that lists Cordon's migrations with ALTER TABLE ... SET SCHEMA public, then migrate again",
			VersionTable, strings.Join(where, ", "))
	}
	// A stray table holds at most goose's initial version-0 row: nothing
	// was ever applied through it.
	_, err = db.ExecContext(ctx, `
DO $do$
DECLARE
    r record;
    applied boolean;
BEGIN
    FOR r IN SELECT schemaname FROM pg_tables
             WHERE tablename = 'goose_db_version' AND (schemaname = 'cordon' OR schemaname LIKE 'cordon\_t\_%')
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.goose_db_version WHERE version_id > 0)', r.schemaname) INTO applied;
        IF NOT applied THEN
            EXECUTE format('DROP TABLE IF EXISTS %I.goose_db_version', r.schemaname);
        END IF;
    END LOOP;
END
$do$`)
	if err != nil {
		return fmt.Errorf("migration bookkeeping: %w", pgexec.Classify(err))
	}
	return nil
}

// Result is one applied migration.
type Result struct {
	Version int64
	Source  string
}

// Up applies every pending migration and returns what it applied.
func Up(ctx context.Context, url string) ([]Result, error) {
	p, db, err := newProvider(ctx, url)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	defer p.Close()
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", migrationError(url, err))
	}
	out := make([]Result, len(res))
	for i, r := range res {
		out[i] = Result{Version: r.Source.Version, Source: r.Source.Path}
	}
	return out, nil
}

// DownTo rolls migrations back to version (0 removes everything Cordon
// created, tenant schemas included).
func DownTo(ctx context.Context, url string, version int64) error {
	p, db, err := newProvider(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	defer p.Close()
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, migrationError(url, err))
	}
	return nil
}

// UpTo applies migrations up to and including version.
func UpTo(ctx context.Context, url string, version int64) error {
	p, db, err := newProvider(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	defer p.Close()
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate up to %d: %w", version, migrationError(url, err))
	}
	return nil
}

// Status reports the database's version and the newest known one.
// It only reads: a database never migrated is at version 0.
func Status(ctx context.Context, url string) (current, latest int64, err error) {
	err = readOnly(ctx, url, func(tx pgx.Tx) error {
		current, err = DatabaseVersion(ctx, tx)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("migration status: %w", err)
	}
	return current, Latest(), nil
}

// State is one migration embedded in this binary, as the database
// records it.
type State struct {
	Version int64
	// Name is the migration's file, e.g. 00001_control_and_tenant_schema.sql.
	Name string
	// AppliedAt is when goose applied it (its tstamp, read in the session's
	// time zone); nil while it is pending.
	AppliedAt *time.Time
}

// List lists every migration embedded in this binary, in version
// order, with when the database applied it, as the stock goose CLI's
// status does. It only reads: on a database never migrated every one is
// pending.
func List(ctx context.Context, url string) ([]State, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []State
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, State{Version: v, Name: n})
	}
	slices.SortFunc(out, func(a, b State) int { return cmp.Compare(a.Version, b.Version) })
	applied := map[int64]time.Time{}
	err = readOnly(ctx, url, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, VersionTable).Scan(&exists); err != nil {
			return pgexec.Classify(err)
		}
		if !exists {
			return nil
		}
		// A version's newest row says whether it is applied now (goose
		// records a roll-back as a row with is_applied false, or deletes the
		// row).
		rows, err := tx.Query(ctx, `SELECT DISTINCT ON (version_id) version_id, is_applied, tstamp::timestamptz
			FROM `+VersionTable+` WHERE version_id > 0 ORDER BY version_id, id DESC`)
		if err != nil {
			return pgexec.Classify(err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int64
			var ok bool
			var at time.Time
			if err := rows.Scan(&v, &ok, &at); err != nil {
				return err
			}
			if ok {
				applied[v] = at
			}
		}
		return pgexec.Classify(rows.Err())
	})
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	for i := range out {
		if at, ok := applied[out[i].Version]; ok {
			out[i].AppliedAt = &at
		}
	}
	return out, nil
}

// readOnly runs fn in a read-only transaction on a connection of its own.
func readOnly(ctx context.Context, url string, fn func(tx pgx.Tx) error) error {
	cfg, err := pgexec.ParseConfig(url)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return pgexec.Classify(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return pgexec.Classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	return fn(tx)
}

// DatabaseVersion is the version goose last applied, read from
// VersionTable (0 when there is none).
func DatabaseVersion(ctx context.Context, db pgexec.DBTX) (int64, error) {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, VersionTable).Scan(&exists); err != nil {
		return 0, pgexec.Classify(err)
	}
	if !exists {
		return 0, nil
	}
	var v int64
	err := db.QueryRow(ctx, `SELECT coalesce((SELECT version_id FROM `+VersionTable+` ORDER BY id DESC LIMIT 1), 0)`).Scan(&v)
	return v, pgexec.Classify(err)
}

// migrationError explains the failures a least-privilege role meets: the
// vector extension, which only a superuser can create.
func migrationError(url string, err error) error {
	err = pgexec.Classify(err)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	db, role := "", ""
	if cfg, cerr := pgexec.ParseConfig(url); cerr == nil {
		db, role = cfg.ConnConfig.Database, cfg.ConnConfig.User
	}
	msg := pe.Message
	switch {
	case pe.Code == "42501" && strings.Contains(msg, `extension "vector"`):
		return fmt.Errorf("%w: role %q may not create the vector extension: ask a superuser (your DBA) to run CREATE EXTENSION vector; in database %q, then run the migration again", err, role, db)
	case strings.Contains(msg, "vector.control") || strings.Contains(msg, `extension "vector" is not available`):
		return fmt.Errorf("%w: the PostgreSQL server has no pgvector: ask your DBA to install pgvector and to run CREATE EXTENSION vector; in database %q, then run the migration again", err, db)
	case pe.Code == "42501" && strings.Contains(msg, "schema public"):
		return fmt.Errorf("%w: role %q may not create %s: ask your DBA to make it the owner of database %q (ALTER DATABASE ... OWNER TO ...) or to GRANT CREATE ON SCHEMA public to it", err, role, VersionTable, db)
	case pe.Code == "42501" && strings.Contains(msg, "database"):
		return fmt.Errorf("%w: role %q may not create schemas in database %q: ask your DBA to make it the database's owner or to GRANT CREATE ON DATABASE to it", err, role, db)
	}
	return err
}

// Latest is the newest migration version embedded in this binary. Every
// query's tenant lookup compares against it, so it is worked out once.
func Latest() int64 { return latest() }

var latest = sync.OnceValue(func() int64 {
	names, _ := fs.Glob(migrations.FS, "*.sql")
	var newest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err == nil && v > newest {
			newest = v
		}
	}
	return newest
})
