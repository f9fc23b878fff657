package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

const latestVersion = 18

func version(t *testing.T, dbURL string) int64 {
	t.Helper()
	cur, latest, err := migrate.Status(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if latest != latestVersion {
		t.Fatalf("latest known version = %d, want %d", latest, latestVersion)
	}
	return cur
}

func queryInt(t *testing.T, dbURL, sql string, args ...any) int64 {
	t.Helper()
	return queryOne[int64](t, dbURL, sql, args...)
}

// queryOne runs sql on a connection of its own and scans its one value.
func queryOne[T any](t *testing.T, dbURL, sql string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v T
	if err := c.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
	return v
}

func TestMigrateUpIdempotentDownAndUp(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)
	if v := version(t, dbURL); v != 0 {
		t.Fatalf("empty database at version %d, want 0", v)
	}
	res, err := migrate.Up(ctx, dbURL)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if len(res) != latestVersion {
		t.Fatalf("up applied %d migrations, want %d", len(res), latestVersion)
	}
	res, err = migrate.Up(ctx, dbURL)
	if err != nil || len(res) != 0 {
		t.Fatalf("second up applied %d migrations (err %v), want a no-op", len(res), err)
	}
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTenant(ctx, "wholesale", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := migrate.DownTo(ctx, dbURL, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	if v := version(t, dbURL); v != 0 {
		t.Fatalf("after down, version %d, want 0", v)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cordon%'`); n != 0 {
		t.Fatalf("down to 0 left %d cordon schemas", n)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if v := version(t, dbURL); v != latestVersion {
		t.Fatalf("version %d, want %d", v, latestVersion)
	}
}

// TestConcurrentMigrate runs several migrations at once: the session lock lets
// exactly one apply each migration.
func TestConcurrentMigrate(t *testing.T) {
	dbURL := newDatabase(t)
	const n = 4
	applied := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := migrate.Up(context.Background(), dbURL)
			applied[i], errs[i] = len(res), err
		}()
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	if total != latestVersion {
		t.Fatalf("migrators applied %d migrations in all (%v), want each of the %d exactly once", total, applied, latestVersion)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`); n != latestVersion {
		t.Fatalf("goose_db_version has %d rows, want %d", n, latestVersion)
	}
}

// TestTenantSchemaUpgrade creates tenants at schema version 1, then applies the
// later migrations: every existing tenant schema must be upgraded.
func TestTenantSchemaUpgrade(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)
	if err := migrate.UpTo(ctx, dbURL, 1); err != nil {
		t.Fatal(err)
	}
	tenants := []string{"wholesale", "retail", "compliance"}
	for _, name := range tenants {
		// Version 1 has no create_tenant function yet: register the way
		// version 1 allows.
		execSQL(t, dbURL, `INSERT INTO cordon.tenants (name, schema_name, dims, k1, b, max_words, overlap_words, tokenizer_version)
			VALUES ($1, 'cordon_t_' || $1, 256, 1.5, 0.75, 200, 40, 'x')`, name)
		execSQL(t, dbURL, `SELECT cordon.apply_tenant_upgrades($1)`, name)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon.tenants WHERE schema_version = 1`); n != 3 {
		t.Fatalf("%d tenants at schema version 1, want 3", n)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	for _, name := range tenants {
		n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = 'cordon_t_' || $1 AND
			      ((table_name = 'stats' AND column_name = 'version') OR (table_name = 'documents' AND column_name = 'content_hash'))`, name)
		if n != 2 {
			t.Errorf("tenant %s: %d of the 2 version-2 columns exist after the upgrade", name, n)
		}
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon.tenants WHERE schema_version >= 2`); n != 3 {
		t.Fatalf("%d tenants at schema version 2 after the upgrade, want 3", n)
	}
	// And back: down to 1 removes the columns from every tenant.
	if err := migrate.DownTo(ctx, dbURL, 1); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.columns WHERE table_schema LIKE 'cordon_t_%' AND column_name IN ('version', 'content_hash')`); n != 0 {
		t.Fatalf("down to 1 left %d version-2 columns", n)
	}
}

// gooseCLI builds the stock goose CLI once (Postgres driver only) into
// .tmp/goosebin and returns its path.
func gooseCLI(t *testing.T) string {
	t.Helper()
	gobin, err := filepath.Abs("../.tmp/goosebin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(gobin, "goose")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the goose CLI: %v", err)
	}
	cmd := exec.Command(goBin, "install",
		"-tags", "no_clickhouse no_libsql no_mssql no_mysql no_sqlite3 no_vertica no_ydb no_starrocks no_duckdb",
		"github.com/pressly/goose/v3/cmd/goose@v3.30.1")
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the goose CLI: %v\n%s", err, out)
	}
	return bin
}

// TestStockGooseCLI runs the stock goose CLI against migrations/, as users'
// deploy pipelines do, and checks that Cordon agrees with the result.
func TestStockGooseCLI(t *testing.T) {
	dbURL := newDatabase(t)
	goose := gooseCLI(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goose, append([]string{"-dir", "../migrations", "-table", "public.goose_db_version", "postgres", dbURL}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("goose %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("up")
	if v := version(t, dbURL); v != latestVersion {
		t.Fatalf("after goose up, version %d, want %d", v, latestVersion)
	}
	if out := run("status"); !strings.Contains(out, "00006_block_postings.sql") {
		t.Fatalf("goose status does not list the migrations:\n%s", out)
	}
	// Cordon works on a database migrated by the stock CLI.
	ctx := context.Background()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTenant(ctx, "retail", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	run("down-to", "0")
	if v := version(t, dbURL); v != 0 {
		t.Fatalf("after goose down-to 0, version %d, want 0", v)
	}
	if res, err := migrate.Up(ctx, dbURL); err != nil || len(res) != latestVersion {
		t.Fatalf("cordon migrate after goose down: applied %d, err %v", len(res), err)
	}
}

// TestBlockPostingsMigrationKeepsResults writes documents (replacing and
// deleting some, so blocks hold postings of chunks that are gone), then
// migrates down to row-per-posting storage and up to blocks again: every
// retrieval must stay identical to the reference's, and the downgrade must
// keep exactly the live postings.
func TestBlockPostingsMigrationKeepsResults(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	m := newMirror(t, dbURL, cordontype.Principal{Tenant: "mig", Clearance: cordontype.Confidential})
	words := []string{"wire", "hold", "release", "ledger", "swap", "margin", "tx4096", "desk", "limit", "breach"}
	for i := range 30 {
		var text strings.Builder
		for j := range 12 + i%7 {
			text.WriteString(words[(i*j+j*j+i)%len(words)] + " ")
		}
		m.put(cordontype.Document{Tenant: "mig", DocID: fmt.Sprintf("d%d", i%20), Text: text.String(), Classification: cordontype.Classification(i % 3)})
	}
	m.del("d3")
	m.del("d7")
	live := livePostings(t, dbURL, "cordon_t_mig")
	all := queryInt(t, dbURL, `SELECT coalesce(sum(n), 0)::bigint FROM cordon_t_mig.postings`)
	if all <= live {
		t.Fatalf("blocks hold %d postings, %d live: the test needs postings of deleted chunks", all, live)
	}
	check := func(step string) {
		t.Helper()
		m.check(step, "wire hold", "tx4096 ledger breach", "desk limit margin swap", "nothing")
	}
	check("blocks")
	if err := migrate.DownTo(ctx, dbURL, 5); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_mig.postings`); n != live {
		t.Fatalf("down to rows: %d postings rows, want the %d live postings", n, live)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_mig.postings WHERE block <> 0`); n != 0 {
		t.Fatalf("up to blocks: %d blocks not from the upgrade", n)
	}
	check("rows to blocks")
	// Writes after the upgrade merge into the upgraded blocks.
	m.put(cordontype.Document{Tenant: "mig", DocID: "new", Text: "wire hold release after the upgrade", Classification: cordontype.Public})
	check("after a write")
}

// TestMigrateStatusListsMigrations: 'migrate status' lists every migration
// with when it was applied, as goose status does, in text and --json, on a
// fresh database, a migrated one and one rolled back part of the way.
func TestMigrateStatusListsMigrations(t *testing.T) {
	dbURL := newDatabase(t)
	env := map[string]string{"CORDON_DATABASE_URL": dbURL}
	type status struct {
		Version    int64 `json:"version"`
		Latest     int64 `json:"latest"`
		Pending    int   `json:"pending"`
		Migrations []struct {
			Version   int64      `json:"version"`
			Name      string     `json:"name"`
			Applied   bool       `json:"applied"`
			AppliedAt *time.Time `json:"applied_at"`
		} `json:"migrations"`
	}
	statusJSON := func() status {
		t.Helper()
		code, out, errs := runCLI(t, env, "migrate", "status", "--json")
		if code != 0 {
			t.Fatalf("migrate status --json: exit %d: %s", code, errs)
		}
		var s status
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("migrate status --json: %v: %s", err, out)
		}
		if s.Latest != latestVersion || len(s.Migrations) != latestVersion {
			t.Fatalf("latest %d, %d migrations; want %d", s.Latest, len(s.Migrations), latestVersion)
		}
		for i, m := range s.Migrations {
			if m.Version != int64(i+1) || !strings.HasPrefix(m.Name, fmt.Sprintf("%05d_", i+1)) || !strings.HasSuffix(m.Name, ".sql") {
				t.Fatalf("migration %d: %+v", i, m)
			}
			if m.Applied != (m.AppliedAt != nil) {
				t.Fatalf("migration %d: applied %v but applied_at %v", m.Version, m.Applied, m.AppliedAt)
			}
		}
		return s
	}
	applied := func(s status) (n int) {
		for _, m := range s.Migrations {
			if m.Applied {
				n++
			}
		}
		return n
	}

	if s := statusJSON(); s.Version != 0 || s.Pending != latestVersion || applied(s) != 0 {
		t.Fatalf("fresh database: version %d, pending %d, applied %d", s.Version, s.Pending, applied(s))
	}
	if code, _, errs := runCLI(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	s := statusJSON()
	if s.Version != latestVersion || s.Pending != 0 || applied(s) != latestVersion {
		t.Fatalf("migrated: version %d, pending %d, applied %d", s.Version, s.Pending, applied(s))
	}
	if at := s.Migrations[0].AppliedAt; at.IsZero() {
		t.Fatalf("applied_at %v", at)
	}
	if err := migrate.DownTo(context.Background(), dbURL, latestVersion-2); err != nil {
		t.Fatal(err)
	}
	s = statusJSON()
	if s.Version != latestVersion-2 || s.Pending != 2 || s.Migrations[latestVersion-1].Applied || !s.Migrations[latestVersion-3].Applied {
		t.Fatalf("after down-to %d: %+v", latestVersion-2, s)
	}
	code, out, _ := runCLI(t, env, "migrate", "status")
	last := fmt.Sprintf("%05d", latestVersion)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("database at version %d (latest %d)", latestVersion-2, latestVersion)) {
		t.Fatalf("migrate status: %s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, last+" ") && !strings.HasSuffix(line, " pending") {
			t.Fatalf("migration %s not pending: %q", last, line)
		}
		if strings.HasPrefix(line, "00001 ") && strings.HasSuffix(line, "pending") {
			t.Fatalf("migration 1 pending: %q", line)
		}
	}
	if !strings.Contains(out, last+"    ") {
		t.Fatalf("migrate status does not list migration %s:\n%s", last, out)
	}
}
