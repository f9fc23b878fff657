package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// Audit records of several tenants share transactions (see
// store/postgres/auditgroup.go). These tests hold the one committer on a
// batch of tenant "held" (a trigger that waits for a gate), queue records
// of other tenants behind it, so that they form one shared batch when the
// gate opens, and then check who is answered what.

// sharedTenants creates the tenants in a fresh database, appends one record
// to each with a keyed store (so the store knows every head, which a shared
// batch needs) and returns the database's URL and the store.
func sharedTenants(t *testing.T, tenants ...string) (string, *postgres.Store) {
	t.Helper()
	return sharedTenantsKeyed(t, testKeyring("k1"), tenants...)
}

// sharedTenantsKeyed is sharedTenants with the store's audit keys (nil:
// unkeyed chains).
func sharedTenantsKeyed(t *testing.T, keys *audit.Keyring, tenants ...string) (string, *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	dbURL := migrated(t)
	st := openStore(t, dbURL, postgres.Options{MaxConns: 16, AuditKeys: keys})
	for _, tn := range tenants {
		if _, err := st.CreateTenant(ctx, tn, index.DefaultSettings()); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendAudit(ctx, tn, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: "first"}); err != nil {
			t.Fatal(err)
		}
	}
	return dbURL, st
}

// tenantGate installs on tenant's audit table a trigger that holds an
// insert of query 'hold' until the returned function opens the gate, and
// raises on query 'boom'.
func tenantGate(t *testing.T, dbURL, tenant string) (open func()) {
	t.Helper()
	schema, err := postgres.SchemaName(tenant)
	if err != nil {
		t.Fatal(err)
	}
	gate := pgx.Identifier{"public", "gate_" + tenant}.Sanitize()
	fn := pgx.Identifier{"public", "gate_" + tenant + "_fn"}.Sanitize()
	execSQL(t, dbURL, fmt.Sprintf(`CREATE TABLE %[1]s (open boolean);
		CREATE FUNCTION %[2]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.query = 'boom' THEN RAISE EXCEPTION 'injected audit failure'; END IF;
			IF NEW.query = 'hold' THEN
				WHILE NOT EXISTS (SELECT 1 FROM %[1]s WHERE open) LOOP PERFORM pg_sleep(0.01); END LOOP;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER gate BEFORE INSERT ON %[3]s FOR EACH ROW EXECUTE FUNCTION %[2]s()`,
		gate, fn, pgx.Identifier{schema, "audit"}.Sanitize()))
	return func() { execSQL(t, dbURL, `INSERT INTO `+gate+` VALUES (true)`) }
}

// checkChain verifies tenant's chain and that its seqs are exactly 1..want.
func checkChain(t *testing.T, st *postgres.Store, dbURL, tenant string, want int64) {
	t.Helper()
	sum, err := st.VerifyAudit(context.Background(), tenant)
	if err != nil {
		t.Fatalf("verify %s: %v", tenant, err)
	}
	schema, _ := postgres.SchemaName(tenant)
	n := queryInt(t, dbURL, `SELECT count(DISTINCT seq) FROM `+pgx.Identifier{schema, "audit"}.Sanitize()+` WHERE seq BETWEEN 1 AND $1`, want)
	if sum.Rows != want || n != want {
		t.Fatalf("tenant %s: the chain has %d rows (%d of seq 1..%d), want %d", tenant, sum.Rows, n, want, want)
	}
}

// holdCommitter starts an append of query 'hold' to tenant "held" and
// returns once its insert is held inside the database, with the channel
// its result arrives on.
func holdCommitter(t *testing.T, st *postgres.Store, dbURL string) <-chan error {
	t.Helper()
	held := make(chan error, 1)
	go func() {
		_, err := st.AppendAudit(context.Background(), "held", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: "hold"})
		held <- err
	}()
	waitFor(t, "the held commit", func() bool {
		return queryInt(t, dbURL, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`) == 1
	})
	return held
}

type appendResult struct {
	tenant, query string
	err           error
}

// queueAppends starts one append per (tenant, query) pair, in order, each
// once the one before is queued behind the held committer.
func queueAppends(t *testing.T, st *postgres.Store, pairs [][2]string) <-chan appendResult {
	t.Helper()
	out := make(chan appendResult, len(pairs))
	before := st.AuditStats().Queued
	for i, p := range pairs {
		go func() {
			_, err := st.AppendAudit(context.Background(), p[0], audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: p[1]})
			out <- appendResult{p[0], p[1], err}
		}()
		waitFor(t, "the append to queue", func() bool { return st.AuditStats().Queued == before+int64(i+1) })
	}
	return out
}

// TestAuditSharedCommit: records of several tenants queued together commit
// in one transaction, each chained on its own tenant's head.
func TestAuditSharedCommit(t *testing.T) {
	dbURL, st := sharedTenants(t, "held", "alpha", "beta", "gamma")
	open := tenantGate(t, dbURL, "held")
	held := holdCommitter(t, st, dbURL)
	res := queueAppends(t, st, [][2]string{{"alpha", "a1"}, {"beta", "b1"}, {"alpha", "a2"}, {"gamma", "g1"}, {"beta", "b2"}})
	s0 := st.AuditStats()
	open()
	for range 5 {
		if r := <-res; r.err != nil {
			t.Fatalf("append %s/%s: %v", r.tenant, r.query, r.err)
		}
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	s1 := st.AuditStats()
	// The held commit, then one shared transaction for the five records.
	if got := s1.Commits - s0.Commits; got != 2 {
		t.Errorf("%d commits for the held record and five queued ones of three tenants, want 2 (stats %+v)", got, s1)
	}
	if s1.SharedCommits-s0.SharedCommits != 1 || s1.SharedRedone != s0.SharedRedone {
		t.Errorf("stats %+v after %+v: want one shared commit, none redone", s1, s0)
	}
	checkChain(t, st, dbURL, "held", 2)
	checkChain(t, st, dbURL, "alpha", 3)
	checkChain(t, st, dbURL, "beta", 3)
	checkChain(t, st, dbURL, "gamma", 2)
	// Queue order is chain order within a tenant.
	for tenant, want := range map[string][]string{"alpha": {"first", "a1", "a2"}, "beta": {"first", "b1", "b2"}} {
		schema, _ := postgres.SchemaName(tenant)
		var got []string
		for seq := int64(1); seq <= 3; seq++ {
			var q string
			c, err := pgx.Connect(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			err = c.QueryRow(context.Background(), `SELECT query FROM `+pgx.Identifier{schema, "audit"}.Sanitize()+` WHERE seq = $1`, seq).Scan(&q)
			c.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, q)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("tenant %s: chain order %q, want %q", tenant, got, want)
		}
	}
}

// TestAuditSharedFailureIsolated: in a shared batch, one tenant's failing
// insert (a trigger that raises) fails only that tenant's requests; the
// other tenants' records are written again on their own and succeed.
func TestAuditSharedFailureIsolated(t *testing.T) {
	dbURL, st := sharedTenants(t, "held", "alpha", "beta")
	open := tenantGate(t, dbURL, "held")
	tenantGate(t, dbURL, "alpha") // raises on 'boom'
	held := holdCommitter(t, st, dbURL)
	res := queueAppends(t, st, [][2]string{{"beta", "b1"}, {"alpha", "a1"}, {"alpha", "boom"}, {"beta", "b2"}})
	open()
	for range 4 {
		r := <-res
		var pe *pgconn.PgError
		switch {
		case r.tenant == "alpha" && (!errors.As(r.err, &pe) || pe.Code != "P0001"):
			t.Errorf("append %s/%s: %v, want the trigger's P0001 (the tenant's batch fails as one)", r.tenant, r.query, r.err)
		case r.tenant == "beta" && r.err != nil:
			t.Errorf("append %s/%s: %v, want success: another tenant's failure is not its own", r.tenant, r.query, r.err)
		}
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if s := st.AuditStats(); s.SharedRedone != 1 {
		t.Errorf("stats %+v: want the one shared transaction redone", s)
	}
	checkChain(t, st, dbURL, "alpha", 1)
	checkChain(t, st, dbURL, "beta", 3)
	// Both chains go on.
	for _, tn := range []string{"alpha", "beta"} {
		if _, err := st.AppendAudit(context.Background(), tn, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	checkChain(t, st, dbURL, "alpha", 2)
	checkChain(t, st, dbURL, "beta", 4)
}

// TestAuditSharedStallIsolated: in a shared batch, one tenant's insert that
// does not finish (held by its trigger) holds the other tenants up for at
// most the shared statement timeout: they are answered while it is still
// held, and it commits once released.
func TestAuditSharedStallIsolated(t *testing.T) {
	dbURL, st := sharedTenants(t, "held", "alpha", "beta")
	openHeld := tenantGate(t, dbURL, "held")
	openAlpha := tenantGate(t, dbURL, "alpha")
	held := holdCommitter(t, st, dbURL)
	res := queueAppends(t, st, [][2]string{{"alpha", "hold"}, {"beta", "b1"}, {"beta", "b2"}})
	openHeld()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-res
		if r.tenant != "beta" || r.err != nil {
			t.Fatalf("append %s/%s answered first with %v, want tenant beta's appends to succeed while alpha's is held", r.tenant, r.query, r.err)
		}
	}
	// alpha's record is still held (in its own transaction by now), and
	// beta's chain goes on meanwhile.
	if _, err := st.AppendAudit(context.Background(), "beta", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		t.Fatalf("alpha's held append answered before its gate opened: %v", r.err)
	default:
	}
	openAlpha()
	if r := <-res; r.tenant != "alpha" || r.err != nil {
		t.Fatalf("append %s/%s: %v, want alpha's held append to commit once released", r.tenant, r.query, r.err)
	}
	if s := st.AuditStats(); s.SharedRedone != 1 {
		t.Errorf("stats %+v: want the one shared transaction redone after its statement timeout", s)
	}
	checkChain(t, st, dbURL, "alpha", 2)
	checkChain(t, st, dbURL, "beta", 4)
	checkChain(t, st, dbURL, "held", 2)
}

// TestAuditSharedConcurrent: appends from 8 goroutines spread over 6
// tenants, each goroutine waiting for its answer before the next: every
// answered record is in its tenant's chain at the seq it was answered
// with, every chain is linear, and records share transactions.
func TestAuditSharedConcurrent(t *testing.T) {
	tenants := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
	dbURL, st := sharedTenants(t, tenants...)
	const workers, each = 8, 40
	var mu sync.Mutex
	answered := map[string]map[int64]string{} // tenant -> seq -> request id
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tn := tenants[(w*7+i)%len(tenants)]
				id := fmt.Sprintf("w%d-%d", w, i)
				r, err := st.AppendAudit(context.Background(), tn, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: id})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if answered[tn] == nil {
					answered[tn] = map[int64]string{}
				}
				if prev, dup := answered[tn][r.Seq]; dup {
					t.Errorf("tenant %s: seq %d answered to %s and %s (a fork)", tn, r.Seq, prev, id)
				}
				answered[tn][r.Seq] = id
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, tn := range tenants {
		n := len(answered[tn])
		total += n
		checkChain(t, st, dbURL, tn, int64(1+n))
		schema, _ := postgres.SchemaName(tn)
		for seq, id := range answered[tn] {
			got := queryInt(t, dbURL, `SELECT count(*) FROM `+pgx.Identifier{schema, "audit"}.Sanitize()+` WHERE seq = $1 AND request_id = $2`, seq, id)
			if got != 1 {
				t.Fatalf("tenant %s: request %s was answered seq %d, which the table does not hold for it", tn, id, seq)
			}
		}
	}
	if total != workers*each {
		t.Fatalf("%d answers, want %d", total, workers*each)
	}
	if s := st.AuditStats(); s.Commits >= s.Records || s.SharedRedone != 0 {
		t.Errorf("stats %+v: want fewer commits than records, none redone", s)
	}
}

// TestAuditKillMidSharedBatch kills a process while a shared batch (records
// of two tenants in one transaction) sleeps in its COMMIT: of each tenant,
// exactly the answered records are stored, with the seq and hash each
// request was given, and both chains verify. Nothing of the killed batch
// is visible, in either tenant.
func TestAuditKillMidSharedBatch(t *testing.T) {
	if u := os.Getenv(auditChildEnv); u != "" {
		auditChild(u)
		return
	}
	// Unkeyed, as the child appends (a keyed chain is never continued
	// unkeyed).
	dbURL, st := sharedTenantsKeyed(t, nil, "acme", "beta")
	child := startAuditChild(t, "TestAuditKillMidSharedBatch", dbURL, "acme,beta")
	child.waitAnswers(t, 200)
	// A transaction that inserted into both tenants' tables (a shared one)
	// sleeps in its COMMIT, its inserts done: beta's statement trigger
	// marks the transaction, acme's deferred trigger sleeps when marked.
	execSQL(t, dbURL, `CREATE FUNCTION public.mark_beta() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM set_config('cordon_test.beta', 'y', true); RETURN NULL; END $$;
		CREATE TRIGGER mark AFTER INSERT ON cordon_t_beta.audit FOR EACH STATEMENT EXECUTE FUNCTION public.mark_beta()`)
	slowCommits(t, dbURL, `current_setting('cordon_test.beta', true) = 'y'`)
	killMidCommit(t, dbURL, child)
	execSQL(t, dbURL, `DROP TRIGGER mark ON cordon_t_beta.audit`)

	answered := child.answered
	if child.enq-len(answered) < 2 {
		t.Fatalf("%d appends in flight at the kill, want a batch of several", child.enq-len(answered))
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	stored := 0
	for _, tn := range []string{"acme", "beta"} {
		sum, err := st.VerifyAudit(ctx, tn)
		if err != nil {
			t.Fatalf("verify %s after the kill: %v", tn, err)
		}
		rows, err := c.Query(ctx, `SELECT seq, encode(hash, 'hex'), request_id FROM cordon_t_`+tn+`.audit WHERE seq > 1 ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(1) // the record sharedTenants appended
		for rows.Next() {
			var seq int64
			var h, req string
			if err := rows.Scan(&seq, &h, &req); err != nil {
				t.Fatal(err)
			}
			n++
			if got, ok := answered[req]; !ok {
				t.Errorf("tenant %s: seq %d (request %s) is stored but was never answered: part of the killed batch is visible", tn, seq, req)
			} else if got != fmt.Sprintf("%d %s", seq, h) {
				t.Errorf("tenant %s: request %s was answered %q, stored as seq %d hash %s", tn, req, got, seq, h)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if sum.Rows != n {
			t.Fatalf("tenant %s: verify saw %d rows, %d stored", tn, sum.Rows, n)
		}
		stored += int(n - 1)
	}
	if stored != len(answered) {
		t.Fatalf("%d records stored, %d answered: an answered record is missing", stored, len(answered))
	}
	t.Logf("%d answered, %d in flight at the kill; child stderr: %q", len(answered), child.enq-len(answered), child.stderr.String())
}

// TestAuditSharedTenantGone: a tenant dropped (or dropped and created
// again) while its records wait in a shared batch: its requests fail with
// ErrTenantNotFound (or, created again, start its new chain at seq 1), and
// the other tenant's records of the batch commit.
func TestAuditSharedTenantGone(t *testing.T) {
	for _, again := range []bool{false, true} {
		t.Run(fmt.Sprintf("created again %v", again), func(t *testing.T) {
			ctx := context.Background()
			dbURL, st := sharedTenants(t, "held", "alpha", "beta")
			open := tenantGate(t, dbURL, "held")
			held := holdCommitter(t, st, dbURL)
			res := queueAppends(t, st, [][2]string{{"alpha", "a1"}, {"beta", "b1"}})
			if _, err := st.DropTenant(ctx, "beta"); err != nil {
				t.Fatal(err)
			}
			if again {
				if _, err := st.CreateTenant(ctx, "beta", index.DefaultSettings()); err != nil {
					t.Fatal(err)
				}
			}
			open()
			for range 2 {
				r := <-res
				switch {
				case r.tenant == "alpha" && r.err != nil:
					t.Errorf("alpha: %v, want success", r.err)
				case r.tenant == "beta" && again && r.err != nil:
					t.Errorf("beta created again: %v, want its new chain's first record", r.err)
				case r.tenant == "beta" && !again && !errors.Is(r.err, postgres.ErrTenantNotFound):
					t.Errorf("beta dropped: %v, want ErrTenantNotFound", r.err)
				}
			}
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			checkChain(t, st, dbURL, "alpha", 2)
			if again {
				checkChain(t, st, dbURL, "beta", 1)
			}
			// Dropped, beta's table is gone and the shared transaction
			// fails; created again, beta's insert finds another head and
			// writes nothing while alpha's commits.
			s := st.AuditStats()
			if (!again && s.SharedRedone != 1) || (again && (s.SharedCommits != 1 || s.StaleHeads != 1)) {
				t.Errorf("stats %+v: want the shared transaction redone (dropped) or committed with one stale head (created again)", s)
			}
		})
	}
}
