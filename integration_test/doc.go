// Package integration holds Cordon's tests against a real PostgreSQL with
// pgvector: differential replays against the reference store, cross-tenant
// probes, migrations (embedded and stock goose CLI), concurrency and faults.
//
// The database comes from CORDON_TEST_DATABASE_URL (make test starts a
// throwaway cluster and sets it), else from a container started through
// testcontainers-go (package cordontest) when a Docker engine is reachable:
// image pgvector/pgvector:pg16, or CORDON_TEST_IMAGE (make test/containers
// runs them so, on cordon-pg:15 and the host's network). Without either the
// tests skip loudly, except when CI, CORDON_REQUIRE_DB or
// CORDON_REQUIRE_DOCKER is set: then they fail.
package integration
