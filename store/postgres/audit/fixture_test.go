package audit

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
)

// newTestLog is a Log over a pool of at most maxConns connections to
// dbURL (configured by configure, when given), keyed with keys. Tenants
// resolve as the store resolves them: cordon_t_<name> for a valid name,
// registered when cordon.tenants has its row.
func newTestLog(t *testing.T, dbURL string, keys *Keyring, maxConns int32, configure func(*pgxpool.Config)) *Log {
	t.Helper()
	cfg, err := pgexec.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := func(tenant string) (string, error) {
		if err := cordontype.ValidateTenant(tenant); err != nil {
			return "", err
		}
		return "cordon_t_" + tenant, nil
	}
	lookup := func(ctx context.Context, db pgexec.DBTX, tenant string) (string, bool, error) {
		var s string
		err := db.QueryRow(ctx, `SELECT schema_name FROM cordon.tenants WHERE name = $1`, tenant).Scan(&s)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", false, nil
		}
		return s, err == nil, err
	}
	return New(pool, keys, schema, lookup)
}

// createTenant registers tenant with the index settings of a default
// tenant (the audit log reads none of them).
func createTenant(t *testing.T, l *Log, tenant string) {
	t.Helper()
	var created bool
	err := l.pool.QueryRow(context.Background(), `SELECT cordon.create_tenant($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		tenant, 256, 1.5, 0.75, 200, 40, analysis.TokenizerVersion, "entitled", "hash").Scan(&created)
	if err != nil || !created {
		t.Fatalf("create tenant %q: created %v, %v", tenant, created, err)
	}
}
