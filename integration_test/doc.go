// Package integration holds Cordon's tests against a real PostgreSQL with
// pgvector: differential replays against the reference store, cross-tenant
// probes, migrations (embedded and stock goose CLI), concurrency and faults.
//
// The database comes from CORDON_TEST_DATABASE_URL (make test starts a
// throwaway cluster and sets it), else from testcontainers-go when a Docker
// engine is reachable (image pgvector/pgvector). Without either the tests skip
// loudly, except when CI or CORDON_REQUIRE_DB is set: then they fail.
package integration
