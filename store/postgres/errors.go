package postgres

import (
	"errors"

	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
)

var (
	// ErrTenantNotFound is returned by Put and CreateTenant's callers when the
	// tenant is not registered (and the store does not auto-create tenants).
	ErrTenantNotFound = pgexec.ErrTenantNotFound
	// ErrTenantSettings is returned by CreateTenant when the tenant exists with
	// other index settings.
	ErrTenantSettings = errors.New("tenant exists with other index settings")
	// ErrOwnerRequired is returned when the connected role lacks a privilege
	// that only Cordon's owner role has, as when a least-privilege service
	// role creates a tenant.
	ErrOwnerRequired = errors.New("this needs Cordon's owner role")
	// ErrNotServiceRole is returned by Open when the connected role may not
	// read Cordon's schema: it owns nothing and was never made a service
	// role (GrantServiceRole, 'cordon tenant grant ROLE').
	ErrNotServiceRole = errors.New("the database role has no grants on Cordon's schema")
	// ErrUnavailable wraps failures to reach the database.
	ErrUnavailable = pgexec.ErrUnavailable
	// ErrChunkNotFound is returned by [Store.LoadChunks] when one of the
	// asked chunks does not exist or the principal may not see it. Which
	// one, and why, is deliberately not said: existence must not leak.
	ErrChunkNotFound = errors.New("chunk not found")
	// ErrNoCitus is returned by [Store.DistributeTenant] when the
	// database is not a Citus coordinator with worker nodes.
	ErrNoCitus = errors.New("not a Citus coordinator with worker nodes")
	// ErrNotReady is returned by [Store.Ready] when the database is
	// reachable but its migrations or tenant schemas are behind this
	// binary.
	ErrNotReady = errors.New("database not ready")
	// ErrSchemaTooNew is returned by every operation on a tenant whose
	// registry row says that it needs a binary built with later
	// migrations than this one's (cordon.tenants.reader_min): this binary
	// does not answer from a layout it does not understand.
	ErrSchemaTooNew = errors.New("the database's schema is newer than this binary understands")
	// ErrSchemaBehind is returned when the database's migrations are
	// older than this binary's: run 'cordon migrate'.
	ErrSchemaBehind = errors.New("the database's schema is older than this binary")
	// errTooBig ends a cache load or refresh whose bytes do not fit the
	// budget.
	errTooBig = errors.New("tenant exceeds the cache budget")
	// errChunkRow is wrapped by a cache load that cannot decode a stored
	// chunk row.
	errChunkRow = errors.New("stored chunk row: unexpected binary format")
	// errPlacementMoved is returned by checkPlacement when the tenant's stats
	// were not read from the placement of the snapshot's first statement.
	errPlacementMoved = errors.New("the tenant moved to another node during the read")
	// errArrayFormat is wrapped by the postings arrays' binary decoders.
	errArrayFormat = errors.New("postings array: unexpected binary format")
	// errNoTenant makes inSnapshot roll back when the tenant is not registered.
	errNoTenant = errors.New("tenant not registered")
	// ErrReembed is wrapped by re-embedding steps that the tenant's state does
	// not allow; the message says which step comes next.
	ErrReembed = errors.New("re-embedding")
	// errModelsChanged is returned by putTx when the tenant's embedding models
	// are no longer the ones the batch was embedded with.
	errModelsChanged = errors.New("the tenant's embedding models changed during the write: embed again")
)
