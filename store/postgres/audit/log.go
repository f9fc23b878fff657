// Package audit keeps each tenant's audit log in its schema's audit table:
// a hash chain of records (who asked what, under which policy, what came
// back, from which index version), appended with group commit (group.go)
// and verified in one snapshot. Rows are keyed with HMAC-SHA-256 when a
// keyring is given, else chained with SHA-256. The Postgres store holds one
// Log and appends through it; the server and the CLI use its value types.
package audit

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
)

// Lookup resolves a registered tenant's schema; found is false for a
// tenant that is not registered.
type Lookup func(ctx context.Context, db pgexec.DBTX, tenant string) (schema string, found bool, err error)

// Log appends to and verifies the audit logs of the database behind its
// pool. Safe for concurrent use; one per store.
type Log struct {
	pool *pgxpool.Pool
	keys *Keyring
	// schema names a tenant's schema, validating the tenant's name;
	// lookup resolves a registered one.
	schema func(tenant string) (string, error)
	lookup Lookup
	groups auditGroups
}

// New returns the audit logs of the database behind pool, keyed with keys
// (nil: rows are written unkeyed and keyed ones cannot be verified);
// schema names a tenant's schema and lookup resolves a registered tenant
// (the store's own, so both agree on every tenant).
func New(pool *pgxpool.Pool, keys *Keyring, schema func(tenant string) (string, error), lookup Lookup) *Log {
	return &Log{pool: pool, keys: keys, schema: schema, lookup: lookup}
}
