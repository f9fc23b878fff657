package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/cordon-rag/cordon/migrations"
)

// newProvider opens a goose provider over url with a Postgres session
// advisory lock: of two deploys migrating at once, one migrates and the other
// waits, then finds nothing to do.
func newProvider(url string) (*goose.Provider, *sql.DB, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, db, nil
}

// MigrationResult is one applied migration.
type MigrationResult struct {
	Version int64
	Source  string
}

// Migrate applies every pending migration and returns what it applied.
func Migrate(ctx context.Context, url string) ([]MigrationResult, error) {
	p, db, err := newProvider(url)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	defer p.Close()
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", classify(err))
	}
	out := make([]MigrationResult, len(res))
	for i, r := range res {
		out[i] = MigrationResult{Version: r.Source.Version, Source: r.Source.Path}
	}
	return out, nil
}

// MigrateDownTo rolls migrations back to version (0 removes everything Cordon
// created, tenant schemas included).
func MigrateDownTo(ctx context.Context, url string, version int64) error {
	p, db, err := newProvider(url)
	if err != nil {
		return err
	}
	defer db.Close()
	defer p.Close()
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, classify(err))
	}
	return nil
}

// MigrateUpTo applies migrations up to and including version.
func MigrateUpTo(ctx context.Context, url string, version int64) error {
	p, db, err := newProvider(url)
	if err != nil {
		return err
	}
	defer db.Close()
	defer p.Close()
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate up to %d: %w", version, classify(err))
	}
	return nil
}

// MigrationStatus reports the database's version and the newest known one.
func MigrationStatus(ctx context.Context, url string) (current, latest int64, err error) {
	p, db, err := newProvider(url)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	defer p.Close()
	current, latest, err = p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migration status: %w", classify(err))
	}
	return current, latest, nil
}
