package integration_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"

	"github.com/cordon-rag/cordon/cordontest"
	"github.com/cordon-rag/cordon/internal/dockertest"
)

// serverURL is the admin URL of the test server; serverErr says why there is
// none.
var (
	serverURL string
	serverErr error
	dbCounter atomic.Int64
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	var cleanup func()
	serverURL, cleanup, serverErr = testServer(ctx)
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	os.Exit(code)
}

// testServer finds a PostgreSQL with pgvector: the env var first, then a
// container started through testcontainers (package cordontest, no Cordon
// server) when a Docker engine answers. The container trusts every
// connection, as scripts/db.sh's cluster does on loopback: the tests log in
// as roles without passwords and replicate from it.
func testServer(ctx context.Context) (string, func(), error) {
	if u := os.Getenv("CORDON_TEST_DATABASE_URL"); u != "" {
		return u, nil, nil
	}
	if err := dockertest.Check(ctx); err != nil {
		return "", nil, fmt.Errorf("no CORDON_TEST_DATABASE_URL, and %w", err)
	}
	opts := append(dockertest.Options(), cordontest.WithoutServer(),
		testcontainers.WithEnv(map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"}))
	c, err := cordontest.Run(ctx, dockertest.PostgresImage(), opts...)
	stop := func() { _ = testcontainers.TerminateContainer(c) }
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("start the PostgreSQL container: %w", err)
	}
	// Tests that re-execute this binary (and may kill it) share the
	// container instead of each starting, and leaking, one of their own.
	if err := os.Setenv("CORDON_TEST_DATABASE_URL", c.DatabaseURL()); err != nil {
		stop()
		return "", nil, err
	}
	return c.DatabaseURL(), stop, nil
}

// requireServer returns the server URL or ends the test: skipping loudly on a
// developer machine without a database, failing where one is required (CI,
// CORDON_REQUIRE_DB, or CORDON_REQUIRE_DOCKER when the container path is
// the one under test).
func requireServer(t testing.TB) string {
	t.Helper()
	if serverErr != nil {
		if os.Getenv("CI") != "" || os.Getenv("CORDON_REQUIRE_DB") != "" || dockertest.Required() {
			t.Fatalf("PostgreSQL is required here: %v", serverErr)
		}
		t.Skipf("SKIPPING integration test: %v (run 'make test', which starts a throwaway PostgreSQL)", serverErr)
	}
	return serverURL
}

// newDatabase creates an empty database for one test and drops it afterwards.
// It returns the database's URL.
func newDatabase(t testing.TB) string {
	t.Helper()
	if citusBase != "" {
		return newCitusDatabase(t, citusBase, true)
	}
	base := requireServer(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	name := fmt.Sprintf("cordon_it_%d_%d", os.Getpid(), dbCounter.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse server URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// exec runs SQL on db for test setup.
func execSQL(t *testing.T, dbURL, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", firstLine(sql), err)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
