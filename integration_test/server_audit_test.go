package integration_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/cordon-rag/cordon/analysis"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// auditCLI runs 'cordon audit ACTION ...' against dbURL with keyFile
// ("" for none) and returns the exit code and stdout + stderr.
func auditCLI(t *testing.T, dbURL, keyFile string, args ...string) (int, string) {
	t.Helper()
	argv := append([]string{"audit"}, args...)
	argv = append(argv, "--database-url", dbURL)
	if keyFile != "" {
		argv = append(argv, "--audit-key-file", keyFile)
	}
	code, stdout, stderr := runCLI(t, nil, argv...)
	return code, stdout + stderr
}

func auditVerifyCLI(t *testing.T, a *apiServer, tenant string) (int, string) {
	t.Helper()
	return auditCLI(t, a.dbURL, keyringFile(t, a.keys), "verify", "--tenant", tenant)
}

// TestServerAuditChain checks that retrieve, ground and assemble append
// hash-chained records, that the service cannot rewrite them, and that
// 'cordon audit verify' finds a tampered and a deleted row.
func TestServerAuditChain(t *testing.T) {
	ctx := context.Background()
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	res := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold", "now_tick": 120}), http.StatusOK).json(t)
	ids := resultIDs(t, res)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, map[string]any{"claims": []string{"PMT-771 hold"}, "chunk_ids": ids}), http.StatusOK)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/assemble", reader, map[string]any{"question": "q", "chunk_ids": ids, "budget_tokens": 500}), http.StatusOK)
	for i := 0; i < 3; i++ {
		a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": fmt.Sprintf("treasury %d", i)}), http.StatusOK)
	}
	// A request refused before it ran leaves no record.
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, `{"query": 1}`), http.StatusBadRequest)

	sum, err := a.store.VerifyAudit(ctx, "wholesale")
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if sum.Rows != 6 || len(sum.Head) != 64 {
		t.Fatalf("verify = %+v, want 6 rows and a head hash", sum)
	}
	code, out := auditVerifyCLI(t, a, "wholesale")
	if code != 0 || !strings.Contains(out, "6 records, chain intact") {
		t.Fatalf("cordon audit verify = %d %q", code, out)
	}

	conn, err := pgx.Connect(ctx, a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var sub, op, query, policy string
	var chunkIDs []string
	var considered, version int64
	if err := conn.QueryRow(ctx, `SELECT sub, op, query, policy, chunk_ids, considered, index_version FROM cordon_t_wholesale.audit WHERE seq = 1`).
		Scan(&sub, &op, &query, &policy, &chunkIDs, &considered, &version); err != nil {
		t.Fatal(err)
	}
	if sub != "alice" || op != "retrieve" || query != "PMT-771 hold" || !strings.Contains(policy, `"now_tick":120`) ||
		strings.Join(chunkIDs, ",") != strings.Join(ids, ",") || considered == 0 || version == 0 {
		t.Fatalf("record 1 = %s %s %q %s %v %d %d", sub, op, query, policy, chunkIDs, considered, version)
	}
	var ops []string
	rows, _ := conn.Query(ctx, `SELECT op FROM cordon_t_wholesale.audit ORDER BY seq`)
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		ops = append(ops, o)
	}
	if strings.Join(ops, ",") != "retrieve,ground,assemble,retrieve,retrieve,retrieve" {
		t.Fatalf("ops = %v", ops)
	}

	// The append-only trigger refuses changes, even from the owner.
	for _, sql := range []string{`UPDATE cordon_t_wholesale.audit SET query = 'x' WHERE seq = 2`, `DELETE FROM cordon_t_wholesale.audit WHERE seq = 2`} {
		_, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "CD002" {
			t.Fatalf("%s: err %v, want the append-only trigger's CD002", sql, err)
		}
	}

	// A superuser bypassing the trigger is caught by the chain.
	tamper := func(sql string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tamper(`UPDATE cordon_t_wholesale.audit SET chunk_ids = '{}' WHERE seq = 2`)
	_, err = a.store.VerifyAudit(ctx, "wholesale")
	var br *audit.Break
	if !errors.As(err, &br) || br.Seq != 2 {
		t.Fatalf("verify after tampering with seq 2 = %v, want a break at seq 2", err)
	}
	code, out = auditVerifyCLI(t, a, "wholesale")
	if code != 1 || !strings.Contains(out, "breaks at seq 2") {
		t.Fatalf("cordon audit verify after tampering = %d %q", code, out)
	}

	// Deleting a row in the middle is caught too (on a second tenant's
	// clean chain).
	rr := tok(t, "bob", "tenant=retail", "reader")
	for i := 0; i < 4; i++ {
		a.want(t, a.call(t, "POST", "/v1/tenants/retail/retrieve", rr, map[string]any{"query": "card"}), http.StatusOK)
	}
	if _, err := a.store.VerifyAudit(ctx, "retail"); err != nil {
		t.Fatal(err)
	}
	tamper(`DELETE FROM cordon_t_retail.audit WHERE seq = 3`)
	if _, err := a.store.VerifyAudit(ctx, "retail"); !errors.As(err, &br) || br.Seq != 4 {
		t.Fatalf("verify after deleting seq 3 = %v, want a break at seq 4", err)
	}
	// Re-hashing a forged row without the rest of the chain is caught at
	// the next row.
	tamper(`UPDATE cordon_t_retail.audit SET query = 'forged' WHERE seq = 1`)
	if _, err := a.store.VerifyAudit(ctx, "retail"); !errors.As(err, &br) || br.Seq != 1 {
		t.Fatalf("verify after forging seq 1 = %v, want a break at seq 1", err)
	}
}

// TestServerAuditGrants applies the grants docs/security.md gives a
// service role and checks that the role can serve (insert and read audit
// rows) but not rewrite the audit log.
func TestServerAuditGrants(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateTenant(ctx, "wholesale", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("cordon_svc_%d", os.Getpid())
	execSQL(t, dbURL, `DROP ROLE IF EXISTS `+role)
	execSQL(t, dbURL, `CREATE ROLE `+role+` LOGIN`)
	grants, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	sql := between(t, string(grants), "```sql grants", "```")
	sql = strings.ReplaceAll(sql, "cordon_service", role)
	sql = strings.ReplaceAll(sql, "cordon_t_TENANT", "cordon_t_wholesale")
	execSQL(t, dbURL, sql)
	t.Cleanup(func() {
		execSQL(t, dbURL, `DROP OWNED BY `+role)
		execSQL(t, dbURL, `DROP ROLE IF EXISTS `+role)
	})

	u, _ := url.Parse(dbURL)
	u.User = url.User(role)
	svc, err := postgres.Open(ctx, u.String(), postgres.Options{})
	if err != nil {
		t.Fatalf("open as the service role: %v", err)
	}
	defer svc.Close()
	if _, err := svc.Put(ctx, cordontype.Document{Tenant: "wholesale", DocID: "d1", Text: "service role writes", Classification: cordontype.Public}); err != nil {
		t.Fatalf("the service role cannot put: %v", err)
	}
	if _, _, err := svc.LoadChunks(ctx, cordontype.Principal{Tenant: "wholesale"}, []string{"d1::0"}); err != nil {
		t.Fatalf("the service role cannot read: %v", err)
	}
	if _, err := svc.Delete(ctx, "wholesale", "d1"); err != nil {
		t.Fatalf("the service role cannot delete documents: %v", err)
	}
	if _, err := svc.AppendAudit(ctx, "wholesale", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
		t.Fatalf("the service role cannot append: %v", err)
	}
	if _, err := svc.VerifyAudit(ctx, "wholesale"); err != nil {
		t.Fatalf("the service role cannot verify: %v", err)
	}
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{
		`UPDATE cordon_t_wholesale.audit SET query = 'x'`,
		`DELETE FROM cordon_t_wholesale.audit`,
		`TRUNCATE cordon_t_wholesale.audit`,
		`ALTER TABLE cordon_t_wholesale.audit DISABLE TRIGGER audit_append_only`,
	} {
		_, err := c.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as the service role: %v, want permission denied (42501)", q, err)
		}
	}
}

func between(t *testing.T, s, start, end string) string {
	t.Helper()
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("no %q block", start)
	}
	s = s[i+len(start):]
	j := strings.Index(s, end)
	if j < 0 {
		t.Fatalf("unterminated %q block", start)
	}
	return s[:j]
}

// TestServerAuditUpgradesExistingTenants: tenants created before migration
// 4 get the audit table when it is applied, and lose it when it is undone.
func TestServerAuditUpgradesExistingTenants(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)
	if err := migrate.UpTo(ctx, dbURL, 3); err != nil {
		t.Fatal(err)
	}
	// Created as migration 3's create_tenant creates tenants (this binary's
	// store calls the later signature).
	execSQL(t, dbURL, `SELECT cordon.create_tenant('wholesale', 256, 1.5, 0.75, 200, 40, $1)`, analysis.TokenizerVersion)
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'cordon_t_wholesale' AND table_name = 'audit'`); n != 0 {
		t.Fatalf("audit table before migration 4")
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'cordon_t_wholesale' AND table_name = 'audit'`); n != 1 {
		t.Fatalf("no audit table after migration 4")
	}
	if n := queryInt(t, dbURL, `SELECT schema_version FROM cordon.tenants WHERE name = 'wholesale'`); n < 3 {
		t.Fatalf("schema_version %d, want >= 3", n)
	}
	if err := migrate.DownTo(ctx, dbURL, 3); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'cordon_t_wholesale' AND table_name = 'audit'`); n != 0 {
		t.Fatalf("audit table after down to 3")
	}
}
