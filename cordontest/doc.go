// Package cordontest runs Cordon for your tests: PostgreSQL with pgvector in
// a container started by testcontainers-go, Cordon's schema migrated into
// it, and Cordon's HTTP API serving on loopback. It hands back the API's
// URL, the database's URL, bearer tokens for any principal and an
// [net/http.Client] that sends them, in the style of testcontainers-go's
// modules:
//
//	c, err := cordontest.Run(ctx, "pgvector/pgvector:pg16", cordontest.WithTenants("acme"))
//	testcontainers.CleanupContainer(t, c)
//	if err != nil {
//		t.Fatal(err)
//	}
//	tok, err := c.Token(cordontest.Principal{Subject: "alice", Tenant: "acme", Roles: []string{"reader", "writer"}})
//	resp, err := c.Client(tok).Post(c.URL()+"/v1/tenants/acme/retrieve", "application/json", body)
//
// # Where Cordon runs
//
// By default Cordon serves in your test process, from the version of this
// module your go.mod names: no image of Cordon is needed. [WithCordonImage]
// runs it from an image instead (deploy/Dockerfile, e.g. cordon:local), as
// deploy/compose.yaml does: a one-shot 'cordon migrate' container, then
// 'cordon serve'. [WithoutServer] starts only the migrated database.
//
// Tokens are HS256, signed with a secret Run generates and the server
// verifies; audit records are chained with a generated key. Tenants named
// with [WithTenants] are created through the API before Run returns.
//
// # Networking
//
// On an engine with a bridge network, containers publish their ports on
// the Docker host's loopback. On an engine without one (dockerd
// --bridge=none) Run runs them in the host's network namespace instead,
// each server on a free loopback port, by itself: testcontainers-go would
// otherwise create a bridge network of its own, reaper_default, and leave it
// behind. That needs the engine on this machine (a Unix socket) and Ryuk
// disabled (TESTCONTAINERS_RYUK_DISABLED=true: Ryuk runs on the bridge);
// otherwise Run returns [ErrNoBridge], saying which, before it starts
// anything. [WithHostNetwork] asks for the host's network on any engine.
// Nothing is sent to a container's private address on the host's network.
//
// # Images
//
// Any image with the official postgres image's environment
// (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, PGPORT) and pgvector
// installed works: pgvector/pgvector:pg16 or :pg15, or cordon-pg:15, which
// scripts/docker-images.sh builds from Debian's archive where no image
// registry is reachable. testcontainers-go pulls an image that is not
// present; Ryuk, its reaper, needs its own image (set
// TESTCONTAINERS_RYUK_DISABLED=true where it cannot be pulled;
// [Container.Terminate] removes what Run started either way).
package cordontest
