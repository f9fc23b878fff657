package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cordon-rag/cordon/analysis"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// rewriteAudit rewrites a tenant's audit rows from seq from on, as a
// database superuser can (bypassing the append-only trigger): change edits
// each row, then its prev_hash and hash are recomputed with hash, so the
// rewritten chain links up.
func rewriteAudit(t *testing.T, dbURL, schema string, from int64, change func(r *audit.Record), hash func(prev []byte, r audit.Record) []byte) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := pgx.Identifier{schema, "audit"}.Sanitize()
	rows, err := conn.Query(ctx, `SELECT seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
		excluded_by_freshness, degraded, index_version, request_id, key_id, prev_hash, hash FROM `+table+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	for rows.Next() {
		var r audit.Record
		if err := rows.Scan(&r.Seq, &r.At, &r.Sub, &r.Op, &r.Query, &r.Policy, &r.ChunkIDs, &r.Considered,
			&r.ExcludedByEntitlement, &r.ExcludedByFreshness, &r.Degraded, &r.IndexVersion, &r.RequestID,
			&r.KeyID, &r.PrevHash, &r.Hash); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	prev := make([]byte, 32)
	for _, r := range recs {
		if r.Seq >= from {
			change(&r)
			r.PrevHash = prev
			r.Hash = hash(prev, r)
			if _, err := tx.Exec(ctx, `UPDATE `+table+` SET query = $2, chunk_ids = $3, key_id = $4, prev_hash = $5, hash = $6 WHERE seq = $1`,
				r.Seq, r.Query, r.ChunkIDs, r.KeyID, r.PrevHash, r.Hash); err != nil {
				t.Fatal(err)
			}
		}
		prev = r.Hash
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// writeHead runs 'cordon audit head' and returns the head and the file it
// was saved to (an anchor for 'verify --anchor').
func writeHead(t *testing.T, dbURL, keyFile, tenant string) (audit.Head, string) {
	t.Helper()
	code, out := auditCLI(t, dbURL, keyFile, "head", "--tenant", tenant)
	var h audit.Head
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
		t.Fatalf("cordon audit head = %d %q", code, out)
	}
	p := filepath.Join(t.TempDir(), tenant+"-head.json")
	if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return h, p
}

// TestServerAuditKeyedChain: a database superuser who rewrites an audit row
// and recomputes every later hash (without the service's key) is caught by
// verify, whether the forged rows keep their key id or claim to be unkeyed;
// a whole chain rewritten unkeyed is caught by an anchored head and by
// --require-keyed.
func TestServerAuditKeyedChain(t *testing.T) {
	ctx := context.Background()
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	keyFile := keyringFile(t, a.keys)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	for i := 0; i < 5; i++ {
		a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": fmt.Sprintf("treasury hold %d", i)}), http.StatusOK)
	}
	sum, err := a.store.VerifyAudit(ctx, "wholesale")
	if err != nil || sum.Rows != 5 || sum.Unkeyed != 0 || strings.Join(sum.KeyIDs, ",") != "k1" {
		t.Fatalf("verify = %+v, %v; want 5 rows keyed with k1", sum, err)
	}
	head, _ := writeHead(t, a.dbURL, keyFile, "wholesale")
	if head.Tenant != "wholesale" || head.Seq != 5 || head.Hash != sum.Head || head.KeyID != "k1" || head.At.IsZero() {
		t.Fatalf("head = %+v, want seq 5, hash %s, key k1", head, sum.Head)
	}
	code, out := auditCLI(t, a.dbURL, keyFile, "verify", "--tenant", "wholesale", "--require-keyed")
	if code != 0 || !strings.Contains(out, "5 records, chain intact, keyed with key ids k1") {
		t.Fatalf("cordon audit verify = %d %q", code, out)
	}

	// The attack: rewrite row 2, recompute every later hash.
	rewriteAudit(t, a.dbURL, "cordon_t_wholesale", 2, func(r *audit.Record) {
		if r.Seq == 2 {
			r.Query = "forged"
		}
	}, audit.Hash)
	var br *audit.Break
	if _, err := a.store.VerifyAudit(ctx, "wholesale"); !errors.As(err, &br) || br.Seq != 2 {
		t.Fatalf("verify after rewriting seq 2 and re-hashing = %v, want a break at seq 2", err)
	}
	code, out = auditCLI(t, a.dbURL, keyFile, "verify", "--tenant", "wholesale")
	if code != 1 || !strings.Contains(out, "breaks at seq 2") {
		t.Fatalf("cordon audit verify after the rewrite = %d %q", code, out)
	}

	// The same with the forged rows claiming to be unkeyed.
	rr := tok(t, "bob", "tenant=retail", "reader")
	for i := 0; i < 4; i++ {
		a.want(t, a.call(t, "POST", "/v1/tenants/retail/retrieve", rr, map[string]any{"query": "card"}), http.StatusOK)
	}
	retailHead, anchor := writeHead(t, a.dbURL, keyFile, "retail")
	if retailHead.Seq != 4 {
		t.Fatalf("retail head = %+v", retailHead)
	}
	unkey := func(r *audit.Record) { r.KeyID = ""; r.ChunkIDs = []string{} }
	rewriteAudit(t, a.dbURL, "cordon_t_retail", 3, unkey, audit.Hash)
	if _, err := a.store.VerifyAudit(ctx, "retail"); !errors.As(err, &br) || br.Seq != 3 || !strings.Contains(br.Reason, "unkeyed row follows keyed rows") {
		t.Fatalf("verify after rewriting seq 3.. unkeyed = %v, want a break at seq 3", err)
	}
	// Rewritten unkeyed from the first row, the chain links up again: only
	// an anchored head or --require-keyed tells.
	rewriteAudit(t, a.dbURL, "cordon_t_retail", 1, unkey, audit.Hash)
	if sum, err := a.store.VerifyAudit(ctx, "retail"); err != nil || sum.Unkeyed != 4 {
		t.Fatalf("verify of a chain rewritten unkeyed = %+v, %v; want 4 unkeyed rows", sum, err)
	}
	code, out = auditCLI(t, a.dbURL, keyFile, "verify", "--tenant", "retail")
	if code != 0 || !strings.Contains(out, "UNKEYED") {
		t.Fatalf("cordon audit verify of an unkeyed chain = %d %q, want it reported UNKEYED", code, out)
	}
	code, out = auditCLI(t, a.dbURL, keyFile, "verify", "--tenant", "retail", "--anchor", anchor)
	if code != 1 || !strings.Contains(out, "breaks at seq 4") || !strings.Contains(out, "anchored head") {
		t.Fatalf("cordon audit verify --anchor after a rewrite = %d %q", code, out)
	}
	code, out = auditCLI(t, a.dbURL, keyFile, "verify", "--tenant", "retail", "--require-keyed")
	if code != 1 || !strings.Contains(out, "4 unkeyed records") {
		t.Fatalf("cordon audit verify --require-keyed of an unkeyed chain = %d %q", code, out)
	}
}

// TestServerAuditKeyRotation: rows written with an older key verify with
// that key; a keyring without it reports which row and key id it cannot
// verify; a wrong key under the right id is a key mismatch, not a break,
// while a modified row under the right key is a break; a store without a key
// cannot continue a keyed chain; an anchored head catches the removal of
// the newest rows.
func TestServerAuditKeyRotation(t *testing.T) {
	ctx := context.Background()
	a := startAPIServerScoped(t, serverOpts{auditKeys: testKeyring("k1")})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	retrieve := func(a *apiServer) {
		t.Helper()
		a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold"}), http.StatusOK)
	}
	retrieve(a)
	retrieve(a)
	a.close()
	// Rotate: k2 writes, k1 stays in the keyring for the old rows.
	b := startAPIServer(t, serverOpts{dbURL: a.dbURL, auditKeys: testKeyring("k2", "k1")})
	retrieve(b)
	retrieve(b)
	sum, err := b.store.VerifyAudit(ctx, "wholesale")
	if err != nil || sum.Rows != 4 || strings.Join(sum.KeyIDs, ",") != "k1,k2" || sum.Last.KeyID != "k2" {
		t.Fatalf("verify after rotation = %+v, %v; want 4 rows keyed with k1 and k2, head k2", sum, err)
	}
	both := keyringFile(t, b.keys)
	code, out := auditCLI(t, b.dbURL, both, "verify", "--tenant", "wholesale")
	if code != 0 || !strings.Contains(out, "4 records, chain intact, keyed with key ids k1, k2") {
		t.Fatalf("cordon audit verify after rotation = %d %q", code, out)
	}

	tests := []struct {
		name    string
		keys    *audit.Keyring
		wantErr func(err error) bool
		cliOut  []string // "" keyFile when keys is nil
	}{
		{"without the retired key", testKeyring("k2"), func(err error) bool {
			var uk *audit.UnknownKeyError
			return errors.As(err, &uk) && uk.Seq == 1 && uk.KeyID == "k1"
		}, []string{"UNVERIFIABLE", `seq 1 is keyed with key id "k1", which is not in the keyring`}},
		{"without any key", nil, func(err error) bool {
			var uk *audit.UnknownKeyError
			return errors.As(err, &uk) && uk.Seq == 1 && uk.KeyID == "k1"
		}, []string{"UNVERIFIABLE", "no keyring given"}},
		// A wrong key is not tampering: no row of its id verifies, and the
		// links hold.
		{"another key under the old id", &audit.Keyring{Keys: map[string][]byte{"k1": testKeyring("other").Keys["other"], "k2": b.keys.Keys["k2"]}},
			func(err error) bool {
				var mm *audit.KeyMismatchError
				return errors.As(err, &mm) && mm.KeyID == "k1" && mm.Seq == 1 && mm.Rows == 2
			}, []string{"KEY MISMATCH", `none of the 2 records keyed with key id "k1" (from seq 1)`}},
		{"another key under the new id", &audit.Keyring{Keys: map[string][]byte{"k1": b.keys.Keys["k1"], "k2": testKeyring("other").Keys["other"]}},
			func(err error) bool {
				var mm *audit.KeyMismatchError
				return errors.As(err, &mm) && mm.KeyID == "k2" && mm.Seq == 3 && mm.Rows == 2
			}, []string{"KEY MISMATCH", `key id "k2" (from seq 3)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t, b.dbURL, postgres.Options{AuditKeys: tt.keys})
			if _, err := st.VerifyAudit(ctx, "wholesale"); !tt.wantErr(err) {
				t.Fatalf("verify = %v", err)
			}
			kf := ""
			if tt.keys != nil {
				kf = keyringFile(t, tt.keys)
			}
			code, out := auditCLI(t, b.dbURL, kf, "verify", "--tenant", "wholesale")
			if code != 1 {
				t.Errorf("cordon audit verify exit %d, want 1: %q", code, out)
			}
			for _, w := range tt.cliOut {
				if !strings.Contains(out, w) {
					t.Errorf("cordon audit verify output lacks %q: %q", w, out)
				}
			}
		})
	}

	// A store without a key never continues a keyed chain.
	unkeyed := openStore(t, b.dbURL, postgres.Options{})
	if _, err := unkeyed.AppendAudit(ctx, "wholesale", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); !errors.Is(err, audit.ErrKeyRequired) {
		t.Fatalf("unkeyed append to a keyed chain = %v, want ErrAuditKeyRequired", err)
	}

	// Removing the newest row leaves a valid chain; the anchor tells.
	_, anchor := writeHead(t, b.dbURL, both, "wholesale")
	execSQL(t, b.dbURL, `BEGIN; SET LOCAL session_replication_role = replica; DELETE FROM cordon_t_wholesale.audit WHERE seq = 4; COMMIT`)
	if _, err := b.store.VerifyAudit(ctx, "wholesale"); err != nil {
		t.Fatalf("verify without the anchor after removing the newest row = %v", err)
	}
	code, out = auditCLI(t, b.dbURL, both, "verify", "--tenant", "wholesale", "--anchor", anchor)
	if code != 1 || !strings.Contains(out, "the chain ends at seq 3 but a head at seq 4 was anchored") {
		t.Fatalf("cordon audit verify --anchor after removing the newest row = %d %q", code, out)
	}

	// --json says which: ok, a wrong key, tampering.
	verifyJSON := func(keyFile string) (int, map[string]any) {
		t.Helper()
		code, stdout, _ := runCLI(t, nil, "audit", "verify", "--tenant", "wholesale", "--json", "--database-url", b.dbURL, "--audit-key-file", keyFile)
		var v map[string]any
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("audit verify --json: %v: %q", err, stdout)
		}
		return code, v
	}
	if code, v := verifyJSON(both); code != 0 || v["status"] != "ok" || v["records"] != float64(3) || fmt.Sprint(v["key_ids"]) != "[k1 k2]" {
		t.Fatalf("verify --json = %d %v", code, v)
	}
	wrong := keyringFile(t, &audit.Keyring{Keys: map[string][]byte{"k1": testKeyring("other").Keys["other"], "k2": b.keys.Keys["k2"]}})
	if code, v := verifyJSON(wrong); code != 1 || v["status"] != "key_mismatch" || v["key_id"] != "k1" || v["seq"] != float64(1) {
		t.Fatalf("verify --json with a wrong k1 = %d %v", code, v)
	}
	// The first row of k1 modified, the right keys: the second row of k1
	// verifies, so the first was tampered with.
	execSQL(t, b.dbURL, `BEGIN; SET LOCAL session_replication_role = replica; UPDATE cordon_t_wholesale.audit SET query = 'forged' WHERE seq = 1; COMMIT`)
	var br *audit.Break
	if _, err := b.store.VerifyAudit(ctx, "wholesale"); !errors.As(err, &br) || br.Seq != 1 {
		t.Fatalf("verify after modifying seq 1 = %v, want a break at seq 1", err)
	}
	if code, v := verifyJSON(both); code != 1 || v["status"] != "broken" || v["seq"] != float64(1) {
		t.Fatalf("verify --json after modifying seq 1 = %d %v", code, v)
	}
	code, out = auditCLI(t, b.dbURL, both, "verify", "--tenant", "wholesale")
	if code != 1 || !strings.Contains(out, "BROKEN") || !strings.Contains(out, "tampered with at seq 1") {
		t.Fatalf("cordon audit verify after modifying seq 1 = %d %q", code, out)
	}
}

// TestServerAuditAppendFailure: an audit record that cannot be written for
// any reason but bad input fails its request with 503, never 500, and the
// failures are counted.
func TestServerAuditAppendFailure(t *testing.T) {
	a := startAPIServer(t, serverOpts{metrics: true})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	tests := []struct {
		name       string
		fault, fix string
	}{
		{"an insert trigger raises",
			`CREATE FUNCTION cordon_t_wholesale.explode() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'injected audit failure'; END $$;
			CREATE TRIGGER explode BEFORE INSERT ON cordon_t_wholesale.audit FOR EACH ROW EXECUTE FUNCTION cordon_t_wholesale.explode()`,
			`DROP TRIGGER explode ON cordon_t_wholesale.audit; DROP FUNCTION cordon_t_wholesale.explode()`},
		{"a check constraint refuses",
			`ALTER TABLE cordon_t_wholesale.audit ADD CONSTRAINT injected CHECK (op = 'never') NOT VALID`,
			`ALTER TABLE cordon_t_wholesale.audit DROP CONSTRAINT injected`},
	}
	failures := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			execSQL(t, a.dbURL, tt.fault)
			for _, call := range []struct {
				path string
				body map[string]any
			}{
				{"/v1/tenants/wholesale/retrieve", map[string]any{"query": "PMT-771 hold"}},
				{"/v1/tenants/wholesale/ground", map[string]any{"claims": []string{"hold"}, "chunk_ids": []string{"pay-001::0"}}},
				{"/v1/tenants/wholesale/assemble", map[string]any{"question": "q", "chunk_ids": []string{"pay-001::0"}, "budget_tokens": 500}},
			} {
				r := a.call(t, "POST", call.path, reader, call.body)
				if r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" || r.header.Get("Retry-After") == "" {
					t.Errorf("%s with a failing audit append: %d %s, want 503 unavailable", call.path, r.status, r.body)
				}
				if strings.Contains(string(r.body), "injected") {
					t.Errorf("%s: the response carries the database's message: %s", call.path, r.body)
				}
				failures++
			}
			execSQL(t, a.dbURL, tt.fix)
			a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold"}), http.StatusOK)
		})
	}
	m := a.get(t, a.metricsURL+"/metrics")
	if want := fmt.Sprintf("cordon_audit_append_failures_total %d\n", failures); !strings.Contains(m, want) {
		t.Errorf("metrics lack %q", want)
	}

	// A service without a key cannot continue the keyed chain: 503 too.
	u := startAPIServer(t, serverOpts{dbURL: a.dbURL, unkeyed: true})
	r := u.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold"})
	if r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" {
		t.Fatalf("retrieve by an unkeyed service over a keyed chain: %d %s, want 503", r.status, r.body)
	}
	if _, err := a.store.VerifyAudit(context.Background(), "wholesale"); err != nil {
		t.Fatalf("the chain after the failures: %v", err)
	}
}

// TestMigrateAuditKeyID: audit rows written before migration 8 keep
// verifying (unkeyed) after it; keyed rows continue the chain and seal the
// unkeyed prefix; the migration goes down and up again.
func TestMigrateAuditKeyID(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)
	if err := migrate.UpTo(ctx, dbURL, 7); err != nil {
		t.Fatal(err)
	}
	// Created as a binary of migration 7 created tenants.
	d := index.DefaultSettings()
	execSQL(t, dbURL, fmt.Sprintf(`SELECT cordon.create_tenant('wholesale', %d, %v, %v, %d, %d, '%s', 'entitled')`,
		d.Dims, d.BM25.K1, d.BM25.B, d.Chunking.MaxWords, d.Chunking.OverlapWords, analysis.TokenizerVersion))
	// Rows as tenant schema version 6 wrote them: no key_id, plain SHA-256.
	prev := make([]byte, 32)
	for seq := int64(1); seq <= 3; seq++ {
		r := audit.Record{Seq: seq, At: testTime(seq), Sub: "s", Op: "retrieve", Query: fmt.Sprint("q", seq), Policy: "{}",
			ChunkIDs: []string{}, Degraded: []string{}, RequestID: "r"}
		h := audit.Hash(prev, r)
		execSQL(t, dbURL, `INSERT INTO cordon_t_wholesale.audit (seq, at, sub, op, query, policy, chunk_ids, considered,
			excluded_by_entitlement, excluded_by_freshness, degraded, index_version, request_id, prev_hash, hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0, 0, $8, 0, $9, $10, $11)`,
			r.Seq, r.At, r.Sub, r.Op, r.Query, r.Policy, r.ChunkIDs, r.Degraded, r.RequestID, prev, h)
		prev = h
	}
	if err := migrate.UpTo(ctx, dbURL, 8); err != nil {
		t.Fatal(err)
	}
	if v := queryInt(t, dbURL, `SELECT schema_version FROM cordon.tenants WHERE name = 'wholesale'`); v != 7 {
		t.Fatalf("tenant schema version %d after migration 8, want 7", v)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	keys := testKeyring("k1")
	st := openStore(t, dbURL, postgres.Options{AuditKeys: keys})
	if sum, err := st.VerifyAudit(ctx, "wholesale"); err != nil || sum.Rows != 3 || sum.Unkeyed != 3 {
		t.Fatalf("verify of the pre-migration rows = %+v, %v; want 3 unkeyed rows", sum, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := st.AppendAudit(ctx, "wholesale", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := st.VerifyAudit(ctx, "wholesale"); err != nil || sum.Rows != 5 || sum.Unkeyed != 3 || strings.Join(sum.KeyIDs, ",") != "k1" {
		t.Fatalf("verify after keyed appends = %+v, %v; want 3 unkeyed then k1", sum, err)
	}
	code, out := auditCLI(t, dbURL, keyringFile(t, keys), "verify", "--tenant", "wholesale")
	if code != 0 || !strings.Contains(out, "records 1-3 unkeyed") {
		t.Fatalf("cordon audit verify = %d %q", code, out)
	}
	// Rewriting an unkeyed row before the first keyed one is caught: the
	// keyed row 4 seals the prefix.
	rewriteAudit(t, dbURL, "cordon_t_wholesale", 2, func(r *audit.Record) {
		if r.Seq == 2 {
			r.Query = "forged"
		}
	}, func(prev []byte, r audit.Record) []byte {
		if r.KeyID == "" {
			return audit.Hash(prev, r)
		}
		return r.Hash // the key is unknown to whoever rewrites
	})
	var br *audit.Break
	if _, err := st.VerifyAudit(ctx, "wholesale"); !errors.As(err, &br) || br.Seq != 4 {
		t.Fatalf("verify after rewriting the unkeyed prefix = %v, want a break at seq 4", err)
	}
	st.Close()

	if err := migrate.DownTo(ctx, dbURL, 7); err != nil {
		t.Fatalf("down to 7: %v", err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'cordon_t_wholesale' AND table_name = 'audit' AND column_name = 'key_id'`); n != 0 {
		t.Fatalf("key_id column after down to 7")
	}
	if v := queryInt(t, dbURL, `SELECT schema_version FROM cordon.tenants WHERE name = 'wholesale'`); v != 6 {
		t.Fatalf("tenant schema version %d after down to 7, want 6", v)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_wholesale.audit WHERE key_id = ''`); n != 5 {
		t.Fatalf("%d rows with an empty key id after up again, want 5", n)
	}
}

func testTime(seq int64) time.Time { return time.Date(2024, 1, 1, 0, 0, int(seq), 0, time.UTC) }

// get fetches url (on any of the server's listeners) and returns the body
// of a 200.
func (a *apiServer) get(t *testing.T, url string) string {
	t.Helper()
	res, err := a.client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, res.StatusCode, err, b)
	}
	return string(b)
}

// TestServerAuditVerifyAll: 'cordon audit verify --all' verifies every
// tenant's log, one line (or JSON object) per tenant and a summary, and
// fails when any tenant's log fails; --json says which.
func TestServerAuditVerifyAll(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	keyFile := keyringFile(t, a.keys)
	wr := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	rr := tok(t, "bob", "tenant=retail", "reader")
	for i := 0; i < 3; i++ {
		a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", wr, map[string]any{"query": "treasury hold"}), http.StatusOK)
		a.want(t, a.call(t, "POST", "/v1/tenants/retail/retrieve", rr, map[string]any{"query": "card"}), http.StatusOK)
	}
	verifyAllJSON := func() (int, map[string]any) {
		t.Helper()
		code, stdout, stderr := runCLI(t, nil, "audit", "verify", "--all", "--json", "--database-url", a.dbURL, "--audit-key-file", keyFile)
		var v map[string]any
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("audit verify --all --json: %v: %q %q", err, stdout, stderr)
		}
		return code, v
	}
	statuses := func(v map[string]any) string {
		var s []string
		for _, e := range v["tenants"].([]any) {
			m := e.(map[string]any)
			s = append(s, fmt.Sprintf("%s=%s", m["tenant"], m["status"]))
		}
		return strings.Join(s, " ")
	}

	code, out := auditCLI(t, a.dbURL, keyFile, "verify", "--all")
	for _, w := range []string{"ok: tenant retail: 3 records, chain intact", "ok: tenant wholesale: 3 records, chain intact", "2 tenants: 2 ok, 0 failed"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Fatalf("cordon audit verify --all = %d %q, want exit 0 and %q", code, out, w)
		}
	}
	if code, v := verifyAllJSON(); code != 0 || v["status"] != "ok" || v["ok"] != float64(2) || v["failed"] != float64(0) || statuses(v) != "retail=ok wholesale=ok" {
		t.Fatalf("verify --all --json = %d %v", code, v)
	}

	execSQL(t, a.dbURL, `BEGIN; SET LOCAL session_replication_role = replica; UPDATE cordon_t_retail.audit SET query = 'forged' WHERE seq = 2; COMMIT`)
	code, out = auditCLI(t, a.dbURL, keyFile, "verify", "--all")
	for _, w := range []string{"BROKEN: tenant retail", "ok: tenant wholesale: 3 records", "2 tenants: 1 ok, 1 failed", "the audit logs of 1 of 2 tenants failed verification: retail (broken)"} {
		if code != 1 || !strings.Contains(out, w) {
			t.Fatalf("cordon audit verify --all after tampering = %d %q, want exit 1 and %q", code, out, w)
		}
	}
	code, v := verifyAllJSON()
	if code != 1 || v["status"] != "failed" || v["ok"] != float64(1) || v["failed"] != float64(1) || statuses(v) != "retail=broken wholesale=ok" {
		t.Fatalf("verify --all --json after tampering = %d %v", code, v)
	}
	if seq := v["tenants"].([]any)[0].(map[string]any)["seq"]; seq != float64(2) {
		t.Fatalf("retail's break at seq %v, want 2", seq)
	}
}
