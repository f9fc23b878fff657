// Package pgtest gives the tests of store/postgres and its packages a
// migrated database of their own on the server CORDON_TEST_DATABASE_URL
// names.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// Database creates a migrated database for one test on the server named by
// CORDON_TEST_DATABASE_URL and drops it afterwards, returning its URL.
// Without a server it skips loudly, or fails where a database is required
// (CI, CORDON_REQUIRE_DB).
func Database(t testing.TB) string {
	t.Helper()
	base := os.Getenv("CORDON_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") != "" || os.Getenv("CORDON_REQUIRE_DB") != "" {
			t.Fatal("PostgreSQL is required here: set CORDON_TEST_DATABASE_URL")
		}
		t.Skip("SKIPPING database test: CORDON_TEST_DATABASE_URL is not set (run 'make test', which starts a throwaway PostgreSQL)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	name := fmt.Sprintf("cordon_pg_%d_%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_")))
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
	if _, err := migrate.Up(ctx, u.String()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return u.String()
}
