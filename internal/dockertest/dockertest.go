// Package dockertest is how Cordon's own tests find a Docker engine and
// the images to run on it, from the environment:
//
//	CORDON_REQUIRE_DOCKER=1     no engine is a failure, not a skip (CI)
//	CORDON_TEST_IMAGE           PostgreSQL + pgvector image (default pgvector/pgvector:pg16)
//	CORDON_TEST_NETWORK=host    run containers on the host's network (an engine without a bridge)
//	CORDON_TEST_CORDON_IMAGE    Cordon's image for the image smoke test (e.g. cordon:local)
//
// testcontainers-go reads DOCKER_HOST and TESTCONTAINERS_RYUK_DISABLED
// itself. 'make test/containers' sets all of these (docs/running.md,
// "Container tests").
package dockertest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/cordon-rag/cordon/cordontest"
)

// Required reports whether tests must have an engine (CORDON_REQUIRE_DOCKER).
func Required() bool {
	v := os.Getenv("CORDON_REQUIRE_DOCKER")
	return v != "" && v != "0"
}

// Check says why no Docker engine can be used, or nil when one answers.
func Check(ctx context.Context) error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer p.Close()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Health(hctx); err != nil {
		return fmt.Errorf("the Docker engine does not answer: %w", err)
	}
	return nil
}

// Require ends the test when no engine answers: it fails when one is
// required, and skips loudly otherwise.
func Require(t testing.TB) {
	t.Helper()
	err := Check(context.Background())
	if err == nil {
		return
	}
	if Required() {
		t.Fatalf("a Docker engine is required here (CORDON_REQUIRE_DOCKER): %v", err)
	}
	t.Skipf("SKIPPING container test: %v (make test/containers starts one)", err)
}

// PostgresImage is the PostgreSQL + pgvector image to run.
func PostgresImage() string {
	return cmp.Or(os.Getenv("CORDON_TEST_IMAGE"), "pgvector/pgvector:pg16")
}

// CordonImage is Cordon's image to smoke-test; empty when none is named.
func CordonImage() string { return os.Getenv("CORDON_TEST_CORDON_IMAGE") }

// Options are the cordontest options the environment asks for.
func Options() []testcontainers.ContainerCustomizer {
	if os.Getenv("CORDON_TEST_NETWORK") == "host" {
		return []testcontainers.ContainerCustomizer{cordontest.WithHostNetwork()}
	}
	return nil
}
