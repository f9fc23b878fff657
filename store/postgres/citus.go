package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/cordontype"
)

// Tenants on Citus (migrations/00013_citus.sql): on a coordinator with
// workers, cordon.create_tenant distributes each new tenant's schema, and
// DistributeTenant distributes one created before (or before the workers
// were added). Every other statement is the same on a cluster: Citus
// routes a statement on one tenant's tables and the reference table
// cordon.tenants to the tenant's worker.

// DistributeTenant makes tenant's schema a Citus distributed schema, which
// moves its tables, data included, to one worker node; Citus picks the
// worker. The tenant is blocked for writes (and its reads wait) while its
// data is copied. It reports false when the schema was distributed already,
// [ErrTenantNotFound] for an unknown tenant and [ErrNoCitus] where the
// database is not a Citus coordinator with workers.
func (s *Store) DistributeTenant(ctx context.Context, tenant string) (bool, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return false, err
	}
	var done bool
	err := s.pool.QueryRow(ctx, `SELECT cordon.distribute_tenant($1)`, tenant).Scan(&done)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "CD003":
		return false, fmt.Errorf("distribute tenant %q: %w", tenant, ErrNoCitus)
	case errors.As(err, &pe) && pe.Code == "CD004":
		return false, fmt.Errorf("distribute tenant %q: %w", tenant, ErrTenantNotFound)
	case err != nil:
		return false, fmt.Errorf("distribute tenant %q: %w", tenant, classify(err))
	}
	return done, nil
}

// Placement says where a tenant's tables are on a Citus cluster.
type Placement struct {
	// Distributed is false for a tenant whose schema is a regular one (on
	// the coordinator, or on a plain PostgreSQL).
	Distributed bool
	// Node is the host:port of the worker holding every table of the
	// tenant ("" unless Distributed).
	Node string
	// ColocationID is the tenant's Citus colocation group: moving one of
	// its shards moves them all (citus_move_shard_placement).
	ColocationID int64
	// Tables counts the tenant's distributed tables.
	Tables int
}

// TenantPlacement reports where tenant's tables are. On a database without
// Citus the tenant is not distributed. A distributed tenant whose tables
// are on more than one node is an error: Citus keeps a distributed
// schema's tables together.
func (s *Store) TenantPlacement(ctx context.Context, tenant string) (Placement, error) {
	var p Placement
	schema, err := SchemaName(tenant)
	if err != nil {
		return p, err
	}
	var citus bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return p, fmt.Errorf("placement of tenant %q: %w", tenant, classify(err))
	}
	if !citus {
		return p, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT format('%s:%s', s.nodename, s.nodeport), s.colocation_id, count(*)
		FROM citus_shards s
		JOIN pg_class c ON c.oid = s.table_name
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE s.citus_table_type = 'schema' AND n.nspname = $1
		GROUP BY 1, 2 ORDER BY 1`, schema)
	if err != nil {
		return p, fmt.Errorf("placement of tenant %q: %w", tenant, classify(err))
	}
	type row struct {
		node   string
		coloc  int64
		tables int
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.node, &x.coloc, &x.tables)
		return x, err
	})
	if err != nil {
		return p, fmt.Errorf("placement of tenant %q: %w", tenant, classify(err))
	}
	switch len(got) {
	case 0:
		return p, nil
	case 1:
		return Placement{Distributed: true, Node: got[0].node, ColocationID: got[0].coloc, Tables: got[0].tables}, nil
	}
	return p, fmt.Errorf("placement of tenant %q: its tables are on %d nodes (%s, %s, ...)", tenant, len(got), got[0].node, got[1].node)
}

// A read on Citus takes its REPEATABLE READ snapshot on the worker that
// holds the tenant when its first statement runs. A tenant move
// (citus_move_shard_placement) switches the coordinator's metadata when it
// ends, and from then on every statement is routed to the new placement,
// including the later statements of a transaction that began on the old
// one, in another snapshot: one answer would mix two placements' states.
// The switch happens once and never goes back, so a read that finds its
// last statement answered by the placement of its first was answered by
// that placement throughout. checkPlacement is that last statement; a read
// that fails it is taken again.

// placementCheck is what a snapshot read that met a tenant move calls
// before it is taken again: nil (no check) without Citus. It counts the
// read and drops the tenant's cached index, which that read may have
// refreshed from both placements.
func (s *Store) placementCheck() func(tenantInfo) {
	if !s.citus {
		return nil
	}
	return func(t tenantInfo) {
		s.movedReads.Add(1)
		if s.cache != nil {
			s.cache.forget(t.schema)
		}
	}
}

// MovedReads counts the reads taken again because their tenant moved to
// another Citus worker while they ran (0 without Citus).
func (s *Store) MovedReads() int64 { return s.movedReads.Load() }

// nodeSQL is the address of the server that runs a statement, pushed down
// to the worker with the rest of a routed statement.
const nodeSQL = `coalesce(host(inet_server_addr()), '') || ':' || coalesce(inet_server_port(), 0)::text`

// maxPlacementAttempts bounds the reads taken again after moves.
const maxPlacementAttempts = 3

// checkPlacement reads the stats table's OID and node again, as the
// statement routed last: errPlacementMoved when they are not st's.
func checkPlacement(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow) error {
	var oid int64
	var node string
	if err := tx.QueryRow(ctx, `SELECT s.tableoid::bigint, `+nodeSQL+` FROM `+t.tables.stats+` s`).Scan(&oid, &node); err != nil {
		return classify(err)
	}
	if oid != st.oid || node != st.node {
		return errPlacementMoved
	}
	return nil
}
