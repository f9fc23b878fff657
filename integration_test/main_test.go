package integration_test

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
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
// testcontainers container when Docker answers.
func testServer(ctx context.Context) (string, func(), error) {
	if u := os.Getenv("CORDON_TEST_DATABASE_URL"); u != "" {
		return u, nil, nil
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "", nil, fmt.Errorf("no CORDON_TEST_DATABASE_URL and no Docker engine: %w", err)
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Health(hctx); err != nil {
		return "", nil, fmt.Errorf("no CORDON_TEST_DATABASE_URL and the Docker engine is not reachable: %w", err)
	}
	c, err := tcpostgres.Run(ctx, cmp.Or(os.Getenv("CORDON_TEST_IMAGE"), "pgvector/pgvector:pg16"),
		tcpostgres.WithDatabase("cordon_test"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		// Postgres logs "ready" once for the init server and once for the
		// real one; waiting for the second avoids connecting mid-restart.
		testcontainers.WithWaitStrategy(wait.ForLog("database system is ready to accept connections").
			WithOccurrence(2).WithStartupTimeout(2*time.Minute)),
	)
	if err != nil {
		return "", nil, fmt.Errorf("start pgvector container: %w", err)
	}
	u, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", nil, err
	}
	return u, func() { _ = testcontainers.TerminateContainer(c) }, nil
}

// requireServer returns the server URL or ends the test: skipping loudly on a
// developer machine without a database, failing where one is required (CI).
func requireServer(t testing.TB) string {
	t.Helper()
	if serverErr != nil {
		if os.Getenv("CI") != "" || os.Getenv("CORDON_REQUIRE_DB") != "" {
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
