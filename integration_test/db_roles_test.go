package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// Roles are cluster-wide, shared by every test process on the server. Each
// test makes its own roles with a unique name (the process id and a
// counter) and drops them when it ends, except the role named exactly
// "cordon" (the README's example), which is created when missing and never
// dropped: other test processes may be using it at the same time. It owns
// only objects inside the per-test databases, which are dropped with them.
var roleCounter atomic.Int64

// uniqueRole returns a fresh role name with prefix.
func uniqueRole(prefix string) string {
	return fmt.Sprintf("%s%d_%d", prefix, os.Getpid(), roleCounter.Add(1))
}

// loginRole creates a non-superuser LOGIN role (the test server trusts
// loopback connections, so no password is needed). keep marks a shared
// role that may already exist and is never dropped.
// Create roles before the test's database: cleanups run last in, first
// out, so the database (and every object and grant of the role in it) is
// dropped before the role.
func loginRole(t *testing.T, name string, keep bool) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, requireServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `CREATE ROLE `+pgx.Identifier{name}.Sanitize()+` LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`)
	var pe *pgconn.PgError
	if keep && errors.As(err, &pe) && pe.Code == "42710" { // duplicate_object
		var super bool
		if err := c.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, name).Scan(&super); err != nil || super {
			t.Fatalf("role %s exists and is a superuser (%v): the test needs a non-superuser", name, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("create role %s: %v", name, err)
	}
	if !keep {
		t.Cleanup(func() {
			ctx := context.Background()
			c, err := pgx.Connect(ctx, serverURL)
			if err != nil {
				return
			}
			defer c.Close(ctx)
			_, _ = c.Exec(ctx, `DROP ROLE IF EXISTS `+pgx.Identifier{name}.Sanitize())
		})
	}
}

// asRole returns dbURL connecting as role.
func asRole(dbURL, role string) string {
	u, _ := url.Parse(dbURL)
	u.User = url.User(role)
	return u.String()
}

// ownedDatabase makes a fresh database owned by a new non-superuser role
// (the usual "existing Postgres" setup: a DBA creates the database for the
// application's role), with the vector extension created by the
// superuser unless noVector. It returns the superuser's and the owner's
// URLs.
func ownedDatabase(t *testing.T, owner string, keep, noVector bool) (superURL, ownerURL string) {
	t.Helper()
	loginRole(t, owner, keep)
	superURL = newDatabase(t)
	db := strings.TrimPrefix(mustParse(t, superURL).Path, "/")
	execSQL(t, superURL, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` OWNER TO `+pgx.Identifier{owner}.Sanitize())
	if !noVector {
		execSQL(t, superURL, `CREATE EXTENSION vector`)
	}
	return superURL, asRole(superURL, owner)
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// versionTables lists the goose_db_version tables in the database.
func versionTables(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var s string
	if err := c.QueryRow(ctx, `SELECT coalesce(string_agg(schemaname, ',' ORDER BY schemaname), '') FROM pg_tables WHERE tablename = 'goose_db_version'`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrateAsRoleNamedLikeCordonSchema runs migrations the way users do,
// as a non-superuser owner role whose name is that of a schema the
// migrations create: with the default search_path "$user", public the
// role's own schema becomes current_schema() once it exists. Bookkeeping
// must stay in public.goose_db_version through migrate, status, tenant
// creation, readiness, the stock goose CLI and down/up.
func TestMigrateAsRoleNamedLikeCordonSchema(t *testing.T) {
	goose := gooseCLI(t)
	tenantSuffix := fmt.Sprintf("r%d", os.Getpid())
	for _, tc := range []struct {
		name, role, tenant string
		keep               bool
	}{
		{"cordon", "cordon", "wholesale", true},
		{"cordon_t_tenant", "cordon_t_" + tenantSuffix, tenantSuffix, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			superURL, ownerURL := ownedDatabase(t, tc.role, tc.keep, false)
			env := map[string]string{"CORDON_DATABASE_URL": ownerURL}
			cordon := func(args ...string) string {
				t.Helper()
				code, out, errs := runCLI(t, env, args...)
				if code != 0 {
					t.Fatalf("cordon %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
				}
				return out
			}
			stock := func(args ...string) (string, error) {
				t.Helper()
				cmd := exec.Command(goose, append([]string{"-dir", "../migrations", "-table", "public.goose_db_version", "postgres", ownerURL}, args...)...)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			want := fmt.Sprintf("database at version %d (latest %d)", latestVersion, latestVersion)

			// status on a fresh database only reads.
			if out := cordon("migrate", "status"); !strings.Contains(out, fmt.Sprintf("database at version 0 (latest %d)", latestVersion)) {
				t.Fatalf("status of a fresh database: %q", out)
			}
			if got := versionTables(t, superURL); got != "" {
				t.Fatalf("migrate status created goose_db_version in %q", got)
			}
			if out := cordon("migrate"); !strings.Contains(out, want) || strings.Count(out, "applied ") != latestVersion {
				t.Fatalf("first migrate: %q, want %d applied and %q", out, latestVersion, want)
			}
			if out := cordon("migrate"); !strings.Contains(out, want) || strings.Contains(out, "applied ") {
				t.Fatalf("second migrate: %q, want nothing applied and %q", out, want)
			}
			if out := cordon("migrate", "status"); !strings.Contains(out, want) {
				t.Fatalf("status: %q, want %q", out, want)
			}
			cordon("tenant", "create", tc.tenant)
			if out := cordon("migrate"); !strings.Contains(out, want) || strings.Contains(out, "applied ") {
				t.Fatalf("migrate after creating tenant %s: %q", tc.tenant, out)
			}
			if got := versionTables(t, superURL); got != "public" {
				t.Fatalf("goose_db_version tables in schemas %q, want only public", got)
			}

			// The service: store and readiness, as the same role.
			st, err := postgres.Open(ctx, ownerURL, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Ready(ctx); err != nil {
				t.Fatalf("ready: %v", err)
			}
			if _, err := st.Put(ctx, cordontype.Document{Tenant: tc.tenant, DocID: "d1", Text: "wire hold release", Classification: cordontype.Public}); err != nil {
				t.Fatal(err)
			}
			st.Close()

			// The stock goose CLI agrees, given the documented table name.
			out, err := stock("status")
			if err != nil || strings.Contains(out, "Pending") || !strings.Contains(out, "00009_") {
				t.Fatalf("goose status: %v\n%s", err, out)
			}
			if out, err := stock("up"); err != nil {
				t.Fatalf("goose up: %v\n%s", err, out)
			}
			if got := versionTables(t, superURL); got != "public" {
				t.Fatalf("after goose up, goose_db_version tables in %q", got)
			}

			// Down to 0 and up again, with cordon and the stock CLI.
			if err := migrate.DownTo(ctx, ownerURL, 0); err != nil {
				t.Fatalf("down to 0: %v", err)
			}
			if v := version(t, ownerURL); v != 0 {
				t.Fatalf("after down, version %d", v)
			}
			if out, err := stock("up"); err != nil {
				t.Fatalf("goose up after down: %v\n%s", err, out)
			}
			if out := cordon("migrate", "status"); !strings.Contains(out, want) {
				t.Fatalf("status after goose up: %q", out)
			}
			cordon("tenant", "create", tc.tenant)
			st, err = postgres.Open(ctx, ownerURL, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Ready(ctx); err != nil {
				t.Fatalf("ready after down and up: %v", err)
			}

			// The stock CLI's default, unqualified table name resolves
			// through the search_path: it works while no goose_db_version
			// exists in the role's own schema...
			plain := func(args ...string) string {
				t.Helper()
				out, _ := exec.Command(goose, append([]string{"-dir", "../migrations", "postgres", ownerURL}, args...)...).CombinedOutput()
				return string(out)
			}
			if out := plain("status"); strings.Contains(out, "Pending") || !strings.Contains(out, "00009_") {
				t.Fatalf("goose status without -table:\n%s", out)
			}
			// ...but a stray one there (what 'cordon migrate status' used
			// to create) hides public's: everything looks pending. The next
			// 'cordon migrate' removes the stray.
			execSQL(t, ownerURL, `CREATE TABLE goose_db_version (id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
				version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp NOT NULL DEFAULT now())`)
			execSQL(t, ownerURL, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true)`)
			if got := versionTables(t, superURL); got == "public" {
				t.Fatalf("the stray table is in public: the role's own schema is not current")
			}
			if out := plain("status"); !strings.Contains(out, "Pending") {
				t.Fatalf("goose status without -table with a stray table:\n%s", out)
			}
			if out := cordon("migrate"); !strings.Contains(out, want) {
				t.Fatalf("migrate after the stray: %q", out)
			}
			if got := versionTables(t, superURL); got != "public" {
				t.Fatalf("after cordon migrate, goose_db_version tables in %q, want only public", got)
			}
			if err := st.Ready(ctx); err != nil {
				t.Fatalf("ready after the stray: %v", err)
			}
			if out := plain("status"); strings.Contains(out, "Pending") {
				t.Fatalf("goose status without -table after cordon migrate:\n%s", out)
			}
		})
	}
}

// TestLeastPrivilegeServiceRole deploys with the owner/service split of
// docs/running.md and docs/security.md: a non-superuser owner migrates and creates tenants,
// registers a service role once, and the service connects as that role,
// which owns nothing.
func TestLeastPrivilegeServiceRole(t *testing.T) {
	ctx := context.Background()
	owner, svc := uniqueRole("cordon_own_"), uniqueRole("cordon_svc_")
	loginRole(t, svc, false)
	superURL, ownerURL := ownedDatabase(t, owner, false, false)
	svcURL := asRole(superURL, svc)
	env := map[string]string{"CORDON_DATABASE_URL": ownerURL}
	cordon := func(args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("cordon %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	cordon("migrate")
	cordon("tenant", "create", "retail") // before the grant
	cordon("tenant", "grant", svc)
	cordon("tenant", "create", "wholesale") // after it
	if out := cordon("tenant", "list"); !strings.Contains(out, "service roles: "+svc) {
		t.Fatalf("tenant list does not show the service role: %q", out)
	}

	a := startAPIServer(t, serverOpts{dbURL: ownerURL, storeURL: svcURL})
	a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusOK)
	for _, tn := range []string{"wholesale", "retail"} {
		w := tok(t, "w", "tenant="+tn, "writer")
		a.want(t, a.call(t, "PUT", "/v1/tenants/"+tn+"/documents/pay-1", w,
			map[string]any{"text": "# Payments\nPMT-771 hold release requires dual approval.", "classification": "internal"}), http.StatusOK)
		a.want(t, a.call(t, "PUT", "/v1/tenants/"+tn+"/documents/pay-2", w,
			map[string]any{"text": "# Payments\nSettlement is T+1.", "classification": "public"}), http.StatusOK)
		a.want(t, a.call(t, "DELETE", "/v1/tenants/"+tn+"/documents/pay-2", w, nil), http.StatusOK)
		r := tok(t, "r", "tenant="+tn, "clearance=internal", "reader")
		ids := resultIDs(t, a.want(t, a.call(t, "POST", "/v1/tenants/"+tn+"/retrieve", r, map[string]any{"query": "PMT-771 hold"}), http.StatusOK).json(t))
		if len(ids) == 0 {
			t.Fatalf("%s: retrieve found nothing", tn)
		}
		a.want(t, a.call(t, "POST", "/v1/tenants/"+tn+"/ground", r, map[string]any{"claims": []string{"PMT-771 hold"}, "chunk_ids": ids}), http.StatusOK)
		a.want(t, a.call(t, "POST", "/v1/tenants/"+tn+"/assemble", r, map[string]any{"question": "q", "chunk_ids": ids, "budget_tokens": 500}), http.StatusOK)
		if sum, err := a.store.VerifyAudit(ctx, tn); err != nil || sum.Rows != 3 {
			t.Fatalf("%s: audit as the service role = %+v, %v; want 3 rows", tn, sum, err)
		}
	}

	// Tenant administration needs the owner: a clear 403, nothing written.
	admin := tok(t, "root", "admin")
	r := a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "fresh"}), http.StatusForbidden)
	if msg := string(r.body); r.errCode(t) != "forbidden" || !strings.Contains(msg, "cordon tenant create fresh") || !strings.Contains(msg, "owner role") {
		t.Fatalf("create tenant as the service role: %s", msg)
	}
	if n := queryInt(t, superURL, `SELECT count(*) FROM pg_namespace WHERE nspname = 'cordon_t_fresh'`); n != 0 {
		t.Fatalf("a refused create left schema cordon_t_fresh")
	}
	r = a.want(t, a.call(t, "PATCH", "/v1/tenants/wholesale", admin, map[string]string{"bm25_statistics": "tenant"}), http.StatusForbidden)
	if msg := string(r.body); !strings.Contains(msg, "cordon tenant set") {
		t.Fatalf("PATCH tenant as the service role: %s", msg)
	}

	// The audit log is append-only for the service role.
	c, err := pgx.Connect(ctx, svcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, tn := range []string{"wholesale", "retail"} {
		for _, q := range []string{
			`UPDATE cordon_t_%s.audit SET query = 'x'`,
			`DELETE FROM cordon_t_%s.audit`,
			`TRUNCATE cordon_t_%s.audit`,
			`ALTER TABLE cordon_t_%s.audit DISABLE TRIGGER audit_append_only`,
		} {
			q = fmt.Sprintf(q, tn)
			_, err := c.Exec(ctx, q)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42501" {
				t.Errorf("%s as the service role: %v, want permission denied (42501)", q, err)
			}
		}
	}

	// A table that a later tenant upgrade adds is granted too.
	execSQL(t, ownerURL, `CREATE FUNCTION cordon.tenant_upgrade_99(s text) RETURNS void LANGUAGE plpgsql AS $fn$
		BEGIN EXECUTE format('CREATE TABLE %I.later (x int)', s); END $fn$`)
	execSQL(t, ownerURL, `CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer LANGUAGE sql STABLE AS $fn$ SELECT 99 $fn$`)
	execSQL(t, ownerURL, `UPDATE cordon.tenants SET schema_version = 98`)
	execSQL(t, ownerURL, `SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants`)
	if n := queryInt(t, svcURL, `SELECT count(*) FROM cordon_t_wholesale.later`); n != 0 {
		t.Fatalf("later table holds %d rows", n)
	}

	// Revoking takes the grants back.
	cordon("tenant", "revoke", svc)
	_, err = c.Exec(ctx, `SELECT count(*) FROM cordon_t_wholesale.documents`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("read after revoke: %v, want permission denied", err)
	}
	// And the owner cannot make itself its own service role.
	if code, _, errs := runCLI(t, env, "tenant", "grant", owner); code == 0 || !strings.Contains(errs, "another role") {
		t.Fatalf("grant to the owner itself: exit %d %s", code, errs)
	}
}

// TestMigrateWithoutVectorExtension: an owner role that may not create the
// vector extension gets a message saying what to ask the DBA, and nothing
// of Cordon's schema is left half-made.
func TestMigrateWithoutVectorExtension(t *testing.T) {
	ctx := context.Background()
	owner := uniqueRole("cordon_own_")
	superURL, ownerURL := ownedDatabase(t, owner, false, true)
	db := strings.TrimPrefix(mustParse(t, superURL).Path, "/")
	code, out, errs := runCLI(t, map[string]string{"CORDON_DATABASE_URL": ownerURL}, "migrate")
	msg := out + errs
	if code == 0 || !strings.Contains(msg, "ask a superuser") || !strings.Contains(msg, "CREATE EXTENSION vector") ||
		!strings.Contains(msg, fmt.Sprintf("database %q", db)) || !strings.Contains(msg, fmt.Sprintf("role %q", owner)) {
		t.Fatalf("migrate without the extension: exit %d: %s", code, msg)
	}
	if n := queryInt(t, superURL, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cordon%'`); n != 0 {
		t.Fatalf("a failed migrate left %d cordon schemas", n)
	}
	if v := version(t, ownerURL); v != 0 {
		t.Fatalf("version %d after a failed migrate", v)
	}
	// Opening the store says the same, not "vector type not found".
	_, err := postgres.Open(ctx, ownerURL, postgres.Options{})
	if err == nil || !strings.Contains(err.Error(), "CREATE EXTENSION vector") || !strings.Contains(err.Error(), fmt.Sprintf("database %q", db)) {
		t.Fatalf("open without the extension: %v", err)
	}
	// Once the DBA has created it, the same role migrates.
	execSQL(t, superURL, `CREATE EXTENSION vector`)
	if _, err := migrate.Up(ctx, ownerURL); err != nil {
		t.Fatalf("migrate after CREATE EXTENSION: %v", err)
	}
	st, err := postgres.Open(ctx, ownerURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateTenant(ctx, "wholesale", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateWithoutCreateRights: a role that is not the database's owner
// is told which right it lacks, first on schema public, then on the
// database.
func TestMigrateWithoutCreateRights(t *testing.T) {
	ctx := context.Background()
	role := uniqueRole("cordon_own_")
	loginRole(t, role, false)
	superURL := newDatabase(t)
	execSQL(t, superURL, `CREATE EXTENSION vector`)
	roleURL := asRole(superURL, role)
	_, err := migrate.Up(ctx, roleURL)
	if err == nil || !strings.Contains(err.Error(), "may not create public.goose_db_version") || !strings.Contains(err.Error(), "OWNER TO") {
		t.Fatalf("migrate without CREATE on schema public: %v", err)
	}
	execSQL(t, superURL, `GRANT CREATE ON SCHEMA public TO `+role)
	_, err = migrate.Up(ctx, roleURL)
	if err == nil || !strings.Contains(err.Error(), "may not create schemas in database") {
		t.Fatalf("migrate without CREATE on the database: %v", err)
	}
	if n := queryInt(t, superURL, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cordon%'`); n != 0 {
		t.Fatalf("a failed migrate left %d cordon schemas", n)
	}
	db := strings.TrimPrefix(mustParse(t, superURL).Path, "/")
	execSQL(t, superURL, `GRANT CREATE ON DATABASE `+pgx.Identifier{db}.Sanitize()+` TO `+role)
	if _, err := migrate.Up(ctx, roleURL); err != nil {
		t.Fatalf("migrate with both rights: %v", err)
	}
}

// TestMigrateRefusesBookkeepingElsewhere: a database migrated under a
// search_path that put goose's table in another schema is refused with
// that schema named, not migrated again from version 1.
func TestMigrateRefusesBookkeepingElsewhere(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	execSQL(t, dbURL, `CREATE SCHEMA app`)
	execSQL(t, dbURL, `ALTER TABLE public.goose_db_version SET SCHEMA app`)
	_, err := migrate.Up(ctx, dbURL)
	if err == nil || !strings.Contains(err.Error(), "app.goose_db_version") || !strings.Contains(err.Error(), "SET SCHEMA public") {
		t.Fatalf("migrate with the bookkeeping in schema app: %v", err)
	}
	execSQL(t, dbURL, `ALTER TABLE app.goose_db_version SET SCHEMA public`)
	if res, err := migrate.Up(ctx, dbURL); err != nil || len(res) != 0 {
		t.Fatalf("migrate after moving it back: applied %d, %v", len(res), err)
	}
}

// TestUngrantedServiceRolesNameTheFix: a service role never granted fails
// at start, and the service role dropping a tenant fails, each with a
// message naming the owner's command that fixes it (as creating a tenant
// does); 'cordon migrate --service-role' grants in the migration step.
func TestUngrantedServiceRolesNameTheFix(t *testing.T) {
	ctx := context.Background()
	owner, svc := uniqueRole("cordon_own_"), uniqueRole("cordon_svc_")
	loginRole(t, svc, false)
	superURL, ownerURL := ownedDatabase(t, owner, false, false)
	svcURL := asRole(superURL, svc)
	ownerEnv := map[string]string{"CORDON_DATABASE_URL": ownerURL}
	svcEnv := map[string]string{"CORDON_DATABASE_URL": svcURL}
	cordon := func(env map[string]string, args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("cordon %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	cordon(ownerEnv, "migrate")
	cordon(ownerEnv, "tenant", "create", "retail")

	// Not granted: the store refuses to open, naming the grant.
	_, err := postgres.Open(ctx, svcURL, postgres.Options{})
	if !errors.Is(err, postgres.ErrNotServiceRole) || !strings.Contains(err.Error(), "cordon tenant grant "+svc) ||
		!strings.Contains(err.Error(), "cordon migrate --service-role "+svc) {
		t.Fatalf("open as an ungranted service role: %v", err)
	}
	code, _, errs := runCLI(t, map[string]string{"CORDON_DATABASE_URL": svcURL, "CORDON_JWT_HS256_SECRET": strings.Repeat("k", 32)},
		"serve", "--audit-unkeyed", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "cordon tenant grant "+svc) || strings.Contains(errs, "SQLSTATE 42501)\n") {
		t.Fatalf("serve as an ungranted service role: exit %d: %s", code, errs)
	}

	// A role that does not exist is named with what creates it.
	code, _, errs = runCLI(t, ownerEnv, "migrate", "--service-role", "cordon_no_such_role")
	if code != 1 || !strings.Contains(errs, "CREATE ROLE cordon_no_such_role") {
		t.Fatalf("migrate --service-role for a missing role: exit %d: %s", code, errs)
	}

	// The migration step grants.
	if out := cordon(ownerEnv, "migrate", "--service-role", svc); !strings.Contains(out, "granted service role "+svc) {
		t.Fatalf("migrate --service-role: %q", out)
	}
	if out := cordon(ownerEnv, "tenant", "list"); !strings.Contains(out, "service roles: "+svc) {
		t.Fatalf("tenant list after migrate --service-role: %q", out)
	}

	// Dropping a tenant as the service role names the owner's command.
	code, _, errs = runCLI(t, svcEnv, "tenant", "drop", "--yes", "retail")
	if code != 1 || !strings.Contains(errs, "owner role") || !strings.Contains(errs, "cordon tenant drop --yes retail") {
		t.Fatalf("tenant drop as the service role: exit %d: %s", code, errs)
	}
	st, err := postgres.Open(ctx, svcURL, postgres.Options{})
	if err != nil {
		t.Fatalf("open as the granted role: %v", err)
	}
	defer st.Close()
	if ok, err := st.TenantExists(ctx, "retail"); !ok || err != nil {
		t.Fatalf("the granted role does not see tenant retail: %v, %v", ok, err)
	}
	if _, err := st.DropTenant(ctx, "retail"); !errors.Is(err, postgres.ErrOwnerRequired) {
		t.Fatalf("DropTenant as the service role: %v, want ErrOwnerRequired", err)
	}
	if n := queryInt(t, superURL, `SELECT count(*) FROM pg_namespace WHERE nspname = 'cordon_t_retail'`); n != 1 {
		t.Fatalf("a refused drop removed the schema")
	}
}
