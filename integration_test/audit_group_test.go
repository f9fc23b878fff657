package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// auditTenant creates tenant "acme" in a fresh database and returns the
// database's URL and a store on it.
func auditTenant(t *testing.T, keys *audit.Keyring) (string, *postgres.Store) {
	t.Helper()
	dbURL := migrated(t)
	st := openStore(t, dbURL, postgres.Options{MaxConns: 16, AuditKeys: keys})
	if _, err := st.CreateTenant(context.Background(), "acme", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	return dbURL, st
}

// storedAudit reads tenant acme's audit rows: seq -> hex hash, and
// request id -> seq.
func storedAudit(t *testing.T, dbURL string) (map[int64]string, map[string]int64) {
	t.Helper()
	return storedAuditOf(t, dbURL, "acme")
}

// checkLinear verifies the chain and that its seqs are exactly 1..want.
func checkLinear(t *testing.T, st *postgres.Store, dbURL string, want int64) map[int64]string {
	t.Helper()
	sum, err := st.VerifyAudit(context.Background(), "acme")
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	bySeq, _ := storedAudit(t, dbURL)
	if sum.Rows != want || int64(len(bySeq)) != want {
		t.Fatalf("the chain has %d rows (%d stored), want %d", sum.Rows, len(bySeq), want)
	}
	for seq := int64(1); seq <= want; seq++ {
		if _, ok := bySeq[seq]; !ok {
			t.Fatalf("seq %d is missing", seq)
		}
	}
	return bySeq
}

// TestAuditGroupCommitConcurrent: concurrent appends to one tenant, from
// two stores as from two service processes, share transactions, and the
// chain stays linear: seqs 1..N without gaps or duplicates, every returned
// record is the stored row.
func TestAuditGroupCommitConcurrent(t *testing.T) {
	ctx := context.Background()
	keys := testKeyring("k1")
	dbURL, st := auditTenant(t, keys)
	st2 := openStore(t, dbURL, postgres.Options{MaxConns: 16, AuditKeys: keys})
	const workers, each = 32, 15
	var mu sync.Mutex
	got := map[int64]audit.Record{}
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				on := st
				if g%2 == 1 {
					on = st2
				}
				r, err := on.AppendAudit(ctx, "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: fmt.Sprintf("r-%d-%d", g, i)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := got[r.Seq]; dup {
					errs <- fmt.Errorf("seq %d returned to %s and %s", r.Seq, prev.RequestID, r.RequestID)
				}
				got[r.Seq] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bySeq := checkLinear(t, st, dbURL, workers*each)
	_, byReq := storedAudit(t, dbURL)
	for seq, r := range got {
		if fmt.Sprintf("%x", r.Hash) != bySeq[seq] || byReq[r.RequestID] != seq {
			t.Fatalf("returned record %s seq %d hash %x differs from the stored row (seq %d, hash %s)", r.RequestID, seq, r.Hash, byReq[r.RequestID], bySeq[seq])
		}
	}
	s1, s2 := st.AuditStats(), st2.AuditStats()
	records, commits := s1.Records+s2.Records, s1.Commits+s2.Commits
	if records != workers*each || commits >= records || s1.Queued+s2.Queued != 0 {
		t.Fatalf("stats %+v and %+v: want %d records in fewer commits, none queued", s1, s2, workers*each)
	}
	t.Logf("%d records in %d commits, %d of them in one round trip; %d stale heads",
		records, commits, s1.FastCommits+s2.FastCommits, s1.StaleHeads+s2.StaleHeads)
	// Whether the concurrent appends interleaved across the stores is up
	// to the scheduler; appends taking turns always do. Each store's known
	// head goes stale whenever the other committed in between, and the
	// batch is written on the head read again.
	before := s1.StaleHeads + s2.StaleHeads
	for i, on := range []*postgres.Store{st, st2, st, st2} {
		if _, err := on.AppendAudit(ctx, "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: fmt.Sprintf("turn-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if stale := st.AuditStats().StaleHeads + st2.AuditStats().StaleHeads - before; stale < 3 {
		t.Fatalf("%d of the 4 appends taking turns found their store's head stale, want at least 3", stale)
	}
	checkLinear(t, st, dbURL, workers*each+4)
}

// TestAuditStaleHead: a store that knows its tenant's chain head appends
// in one round trip; when the head changed behind it (another process
// appended, the tenant was dropped, created again, or its registry row
// changed), the append finds out under the lock, writes nothing on the old
// head, and does what an append without a known head does.
func TestAuditStaleHead(t *testing.T) {
	ctx := context.Background()
	rec := audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}
	appendN := func(t *testing.T, st *postgres.Store, n int) {
		t.Helper()
		for range n {
			if _, err := st.AppendAudit(ctx, "acme", rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	recreate := func(t *testing.T, other *postgres.Store) {
		t.Helper()
		if _, err := other.DropTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.CreateTenant(ctx, "acme", index.DefaultSettings()); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		keys *audit.Keyring // of the store whose head goes stale
		// meanwhile changes the chain behind the store's back; other is
		// another store (keyed), as another process.
		meanwhile func(t *testing.T, dbURL string, other *postgres.Store)
		wantSeq   int64            // of the next append; 0 when it fails
		wantErr   func(error) bool // when it fails
	}{
		{"another process appended", testKeyring("k1"),
			func(t *testing.T, _ string, other *postgres.Store) { appendN(t, other, 3) }, 6, nil},
		{"the tenant was dropped", testKeyring("k1"),
			func(t *testing.T, _ string, other *postgres.Store) {
				if _, err := other.DropTenant(ctx, "acme"); err != nil {
					t.Fatal(err)
				}
			}, 0, func(err error) bool { return errors.Is(err, postgres.ErrTenantNotFound) }},
		{"the tenant was dropped and created again", testKeyring("k1"),
			func(t *testing.T, _ string, other *postgres.Store) { recreate(t, other) }, 1, nil},
		{"the tenant was created again and its new chain reached the known seq", testKeyring("k1"),
			func(t *testing.T, _ string, other *postgres.Store) { recreate(t, other); appendN(t, other, 2) }, 3, nil},
		{"the registry names another schema", testKeyring("k1"),
			func(t *testing.T, dbURL string, _ *postgres.Store) {
				execSQL(t, dbURL, `DO $$
					DECLARE c name;
					BEGIN
						SELECT conname INTO STRICT c FROM pg_constraint
						WHERE conrelid = 'cordon.tenants'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%cordon_t_%';
						EXECUTE format('ALTER TABLE cordon.tenants DROP CONSTRAINT %I', c);
					END $$;
					UPDATE cordon.tenants SET schema_name = 'cordon_t_other' WHERE name = 'acme'`)
			}, 0, func(err error) bool {
				return err != nil && strings.Contains(err.Error(), `registry names schema "cordon_t_other"`)
			}},
		{"another process keyed the chain of a store without a key", nil,
			func(t *testing.T, _ string, other *postgres.Store) { appendN(t, other, 1) },
			0, func(err error) bool { return errors.Is(err, audit.ErrKeyRequired) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dbURL, st := auditTenant(t, tt.keys)
			other := openStore(t, dbURL, postgres.Options{AuditKeys: testKeyring("k1")})
			appendN(t, st, 2)
			if s := st.AuditStats(); s.FastCommits != 1 {
				t.Fatalf("stats %+v after two appends: want the second in one round trip", s)
			}
			tt.meanwhile(t, dbURL, other)
			before := st.AuditStats()
			r, err := st.AppendAudit(ctx, "acme", rec)
			s := st.AuditStats()
			if s.StaleHeads != before.StaleHeads+1 || s.FastCommits != before.FastCommits {
				t.Errorf("stats %+v, then %+v: want one stale head and no commit in one round trip", before, s)
			}
			if tt.wantSeq == 0 {
				if !tt.wantErr(err) {
					t.Fatalf("append: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Seq != tt.wantSeq {
				t.Fatalf("the append has seq %d, want %d", r.Seq, tt.wantSeq)
			}
			checkLinear(t, st, dbURL, tt.wantSeq)
			// The head is known again.
			appendN(t, st, 1)
			if s2 := st.AuditStats(); s2.FastCommits != s.FastCommits+1 {
				t.Errorf("stats %+v after one more append: want it in one round trip", s2)
			}
			checkLinear(t, st, dbURL, tt.wantSeq+1)
		})
	}
}

// TestServerAuditConcurrentRetrieve: concurrent retrieves over HTTP are
// each audited once, in one unbroken chain, and records that queue while a
// batch is written share the next commit. The test holds the tenant's
// audit lock (the advisory lock every audit transaction takes) until
// records have queued behind the first batch, so the sharing does not
// depend on how fast the machine commits; it works on Citus too, where
// the tables take no triggers.
func TestServerAuditConcurrentRetrieve(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	ctx := context.Background()
	before, err := a.store.VerifyAudit(ctx, "wholesale")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := pgx.Connect(ctx, a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	schema, err := postgres.SchemaName("wholesale")
	if err != nil {
		t.Fatal(err)
	}
	// The key of store/postgres/audit's auditLockKey.
	key := "cordon.audit:" + schema
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, key); err != nil {
		t.Fatal(err)
	}
	const clients, each = 16, 8
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": fmt.Sprintf("PMT-771 hold %d", i)}), http.StatusOK)
			}
		}()
	}
	waitFor(t, "records to queue behind the first batch", func() bool { return a.store.AuditStats().Queued >= 2 })
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, key); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	sum, err := a.store.VerifyAudit(ctx, "wholesale")
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if sum.Rows != before.Rows+clients*each {
		t.Fatalf("%d audit rows, want %d", sum.Rows, before.Rows+clients*each)
	}
	if s := a.store.AuditStats(); s.Commits >= s.Records {
		t.Fatalf("stats %+v: want fewer commits than records", s)
	}
	if code, out := auditVerifyCLI(t, a, "wholesale"); code != 0 {
		t.Fatalf("cordon audit verify = %d %q", code, out)
	}
}

// auditGate installs on tenant acme's audit table a trigger that holds an
// insert of query 'hold' until the gate opens, raises on query 'boom' and
// refuses nothing else. It returns open, which opens the gate, and drop,
// which removes the trigger.
func auditGate(t *testing.T, dbURL string) (open, drop func()) {
	t.Helper()
	execSQL(t, dbURL, `CREATE TABLE public.audit_gate (open boolean);
		CREATE FUNCTION public.audit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.query = 'boom' THEN RAISE EXCEPTION 'injected audit failure'; END IF;
			IF NEW.query = 'hold' THEN
				WHILE NOT EXISTS (SELECT 1 FROM public.audit_gate WHERE open) LOOP PERFORM pg_sleep(0.01); END LOOP;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER hold BEFORE INSERT ON cordon_t_acme.audit FOR EACH ROW EXECUTE FUNCTION public.audit_hold()`)
	return func() { execSQL(t, dbURL, `INSERT INTO public.audit_gate VALUES (true)`) },
		func() { execSQL(t, dbURL, `DROP TRIGGER hold ON cordon_t_acme.audit`) }
}

// waitFor polls cond until it holds (the test's deadline ends a hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if t.Context().Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuditBatchFailure: records queued behind a held commit form one
// batch. When the batch's transaction fails, every waiter gets the error
// and nothing of the batch is written; a value the database refuses fails
// only its own record; the chain stays intact.
func TestAuditBatchFailure(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		queries  []string
		wantFail map[string]bool // query -> whether its append fails
		wantPG   string          // the SQLSTATE of the failures
	}{
		{"a trigger raises on one record: the whole batch fails",
			[]string{"a", "b", "boom", "c", "d", "e"},
			map[string]bool{"a": true, "b": true, "boom": true, "c": true, "d": true, "e": true}, "P0001"},
		{"a value the database refuses fails only its record",
			[]string{"a", "b", "nul\x00", "c", "d", "e"},
			map[string]bool{"nul\x00": true}, "22021"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dbURL, st := auditTenant(t, testKeyring("k1"))
			open, drop := auditGate(t, dbURL)
			held := make(chan error, 1)
			go func() {
				_, err := st.AppendAudit(ctx, "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: "hold"})
				held <- err
			}()
			waitFor(t, "the held commit", func() bool {
				return queryInt(t, dbURL, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`) == 1
			})
			errs := make([]error, len(tt.queries))
			var wg sync.WaitGroup
			for i, q := range tt.queries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = st.AppendAudit(ctx, "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: q})
				}()
			}
			waitFor(t, "the batch to queue", func() bool { return st.AuditStats().Queued == int64(len(tt.queries)) })
			open()
			wg.Wait()
			if err := <-held; err != nil {
				t.Fatalf("the held append: %v", err)
			}
			failed := 0
			for i, q := range tt.queries {
				var pe *pgconn.PgError
				switch {
				case tt.wantFail[q] && (!errors.As(errs[i], &pe) || pe.Code != tt.wantPG):
					t.Errorf("append %q: %v, want SQLSTATE %s", q, errs[i], tt.wantPG)
				case !tt.wantFail[q] && errs[i] != nil:
					t.Errorf("append %q: %v, want success", q, errs[i])
				}
				if errs[i] != nil {
					failed++
				}
			}
			drop()
			written := int64(1 + len(tt.queries) - failed)
			checkLinear(t, st, dbURL, written)
			if _, err := st.AppendAudit(ctx, "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
				t.Fatal(err)
			}
			checkLinear(t, st, dbURL, written+1)
		})
	}
}

// auditChildEnv names the database of the child process of
// TestAuditKillMidBatch; the test binary re-executed with it set appends
// from 8 goroutines and prints each answer.
const auditChildEnv = "CORDON_TEST_AUDIT_CHILD_DB"

// auditChildTenantsEnv lists the tenants the child appends to, comma
// separated (default acme); each goroutine takes them in turn.
const auditChildTenantsEnv = "CORDON_TEST_AUDIT_CHILD_TENANTS"

// auditChild appends from 8 goroutines until killed, printing
// "enq REQUEST_ID" before each append and "ok REQUEST_ID SEQ HASH" after
// each success: a printed "ok" is an answered request. A request id is
// "TENANT/G-I".
func auditChild(dbURL string) {
	tenants := []string{"acme"}
	if v := os.Getenv(auditChildTenantsEnv); v != "" {
		tenants = strings.Split(v, ",")
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 4})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(w, format+"\n", args...)
		w.Flush()
		mu.Unlock()
	}
	for g := range 8 {
		go func() {
			for i := 0; ; i++ {
				tenant := tenants[(g+i)%len(tenants)]
				req := fmt.Sprintf("%s/%d-%d", tenant, g, i)
				say("enq %s", req)
				r, err := st.AppendAudit(ctx, tenant, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: req})
				if err != nil {
					say("err %s %v", req, err)
					continue
				}
				say("ok %s %d %x", req, r.Seq, r.Hash)
			}
		}()
	}
	select {}
}

// auditChildRun is a running child of auditChild and what it printed.
type auditChildRun struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	eof    chan struct{} // closed once every printed line is read
	mu     sync.Mutex
	// answered maps a request id to "SEQ HASH"; enq counts the appends
	// begun. Read them under mu, or after kill.
	answered map[string]string
	enq      int
}

// startAuditChild re-executes the test binary as test (whose first step
// calls auditChild) appending to dbURL's tenants (comma separated; "" is
// acme) and reads what it prints.
func startAuditChild(t *testing.T, test, dbURL, tenants string) *auditChildRun {
	t.Helper()
	c := &auditChildRun{eof: make(chan struct{}), answered: map[string]string{}}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$")
	c.cmd.Env = append(os.Environ(), auditChildEnv+"="+dbURL, auditChildTenantsEnv+"="+tenants)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	go func() {
		defer close(c.eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			c.mu.Lock()
			switch f[0] {
			case "enq":
				c.enq++
			case "ok":
				c.answered[f[1]] = f[2] + " " + f[3]
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// waitAnswers waits until the child answered n requests.
func (c *auditChildRun) waitAnswers(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the child's first %d answers", n), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.answered) >= n
	})
}

// kill kills the child and returns once everything it printed is read.
func (c *auditChildRun) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.eof
	_ = c.cmd.Wait()
}

// slowCommits makes the COMMIT of each transaction that inserted into
// acme's audit table and for which the SQL condition cond holds sleep for
// 60 s, its inserts done (a deferred constraint trigger): a batch whose
// waiters were released before the commit ended would be answered then.
func slowCommits(t *testing.T, dbURL, cond string) {
	t.Helper()
	execSQL(t, dbURL, `CREATE FUNCTION public.audit_slow() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (`+cond+`) AND current_setting('cordon_test.slept', true) IS DISTINCT FROM 'y' THEN
				PERFORM set_config('cordon_test.slept', 'y', true);
				PERFORM pg_sleep(60);
			END IF;
			RETURN NEW;
		END $$;
		CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON cordon_t_acme.audit DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION public.audit_slow()`)
}

// killMidCommit waits for a commit asleep in slowCommits' trigger, kills
// the child, ends the killed process's transaction and drops the trigger.
func killMidCommit(t *testing.T, dbURL string, child *auditChildRun) {
	t.Helper()
	waitFor(t, "a batch in flight", func() bool {
		return queryInt(t, dbURL, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`) == 1
	})
	child.kill(t)
	// The killed process's connection is gone; ending its backend stands
	// for the database noticing that (an ended commit is rolled back).
	execSQL(t, dbURL, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`)
	waitFor(t, "the killed process's transaction to end", func() bool {
		return queryInt(t, dbURL, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`) == 0
	})
	execSQL(t, dbURL, `DROP TRIGGER slow ON cordon_t_acme.audit`)
}

// TestAuditKillMidBatch kills a process while a batch of its appends is in
// flight (held in the batch's transaction by a sleeping trigger): every
// answered record is stored with the hash its request was given, nothing
// of the killed batch is visible and the chain verifies.
func TestAuditKillMidBatch(t *testing.T) {
	if u := os.Getenv(auditChildEnv); u != "" {
		auditChild(u)
		return
	}
	dbURL, st := auditTenant(t, nil)
	child := startAuditChild(t, "TestAuditKillMidBatch", dbURL, "")
	child.waitAnswers(t, 200)
	// From now on each transaction sleeps in its COMMIT (a deferred
	// constraint trigger), its inserts done: a batch's waiters released
	// before the commit ends would be answered here.
	slowCommits(t, dbURL, `true`)
	// Every row committed from here on went through the trigger.
	before := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_acme.audit`)
	killMidCommit(t, dbURL, child)

	answered := child.answered
	inFlight := child.enq - len(answered)
	if inFlight < 2 {
		t.Fatalf("%d appends in flight at the kill, want a batch of several", inFlight)
	}
	bySeq, byReq := storedAudit(t, dbURL)
	sum, err := st.VerifyAudit(context.Background(), "acme")
	if err != nil {
		t.Fatalf("verify after the kill: %v", err)
	}
	if sum.Rows != int64(len(bySeq)) {
		t.Fatalf("verify saw %d rows, %d stored", sum.Rows, len(bySeq))
	}
	for req, sh := range answered {
		seq, _ := strconv.ParseInt(strings.Fields(sh)[0], 10, 64)
		if byReq[req] != seq || bySeq[seq] != strings.Fields(sh)[1] {
			t.Fatalf("answered request %s (seq %s) is not stored as answered", req, sh)
		}
	}
	if int64(len(bySeq)) != before {
		t.Fatalf("%d rows stored, %d before the batch that was killed: it is partly visible", len(bySeq), before)
	}
	t.Logf("%d answered, %d in flight at the kill, %d rows stored; child stderr: %q", len(answered), inFlight, len(bySeq), child.stderr.String())
}

// TestAuditAppendTenantGone: an append for a tenant that is not registered
// (never created, or dropped) fails with ErrTenantNotFound and writes
// nothing; a tenant created again under the same name starts a new chain
// at seq 1.
func TestAuditAppendTenantGone(t *testing.T) {
	ctx := context.Background()
	dbURL, st := auditTenant(t, testKeyring("k1"))
	rec := audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}
	if _, err := st.AppendAudit(ctx, "nobody", rec); !errors.Is(err, postgres.ErrTenantNotFound) {
		t.Fatalf("append for a tenant never created: %v, want ErrTenantNotFound", err)
	}
	for range 3 {
		if _, err := st.AppendAudit(ctx, "acme", rec); err != nil {
			t.Fatal(err)
		}
	}
	checkLinear(t, st, dbURL, 3)
	if _, err := st.DropTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendAudit(ctx, "acme", rec); !errors.Is(err, postgres.ErrTenantNotFound) {
		t.Fatalf("append for a dropped tenant: %v, want ErrTenantNotFound", err)
	}
	if _, err := st.CreateTenant(ctx, "acme", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	r, err := st.AppendAudit(ctx, "acme", rec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1 {
		t.Fatalf("the first record of the new tenant has seq %d, want 1", r.Seq)
	}
	checkLinear(t, st, dbURL, 1)
}

// TestAuditAppendTableMissing: a registered tenant whose audit table is
// gone fails the append (a request would get a 503), never as a tenant
// that does not exist (for which a request is answered unaudited).
func TestAuditAppendTableMissing(t *testing.T) {
	dbURL, st := auditTenant(t, testKeyring("k1"))
	execSQL(t, dbURL, `DROP TABLE cordon_t_acme.audit`)
	_, err := st.AppendAudit(context.Background(), "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"})
	var pe *pgconn.PgError
	if errors.Is(err, postgres.ErrTenantNotFound) || !errors.As(err, &pe) || pe.Code != "42P01" {
		t.Fatalf("append without the audit table: %v, want SQLSTATE 42P01 (not ErrTenantNotFound)", err)
	}
}

// TestAuditHeadReadUsesIndex: the chain head is read with the primary key
// even on a connection whose first append found the table empty after a
// VACUUM (statistics of an empty table): the appends after it read no
// rows by a sequential scan, where a plan cached on those statistics
// would sort the whole table for every batch. With plan_cache_mode
// force_generic_plan every statement runs the plan made at its first
// execution after the statistics changed, on both paths of a batch (the
// head read before the insert, and the head compared in the insert).
func TestAuditHeadReadUsesIndex(t *testing.T) {
	for _, mode := range []string{"auto", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			dbURL := migrated(t)
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("plan_cache_mode", mode) // a run-time parameter of the connection
			u.RawQuery = q.Encode()
			st, err := postgres.Open(ctx, u.String(), postgres.Options{MaxConns: 1, AuditKeys: testKeyring("k1")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.CreateTenant(ctx, "acme", index.DefaultSettings()); err != nil {
				t.Fatal(err)
			}
			const n = 300
			for i := range n {
				if i < 2 {
					// Statistics of an empty table, then of a table of
					// one row: the plans are made again at the next
					// append, on a known head the second time.
					execSQL(t, dbURL, `VACUUM ANALYZE cordon_t_acme.audit`)
				}
				if _, err := st.AppendAudit(ctx, "acme", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
					t.Fatal(err)
				}
			}
			if a := st.AuditStats(); a.FastCommits != n-1 {
				t.Fatalf("stats %+v: want every append but the first in one round trip", a)
			}
			// The store's one backend ends, and its statistics with it.
			st.Close()
			var read int64
			waitFor(t, "the closed backend's statistics", func() bool {
				c, err := pgx.Connect(ctx, dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(ctx)
				var inserted int64
				if err := c.QueryRow(ctx, `SELECT n_tup_ins, seq_tup_read FROM pg_stat_user_tables WHERE relid = 'cordon_t_acme.audit'::regclass`).Scan(&inserted, &read); err != nil {
					t.Fatal(err)
				}
				return inserted == n
			})
			if read != 0 {
				t.Fatalf("%d audit rows read by sequential scans over %d appends, want 0", read, n)
			}
		})
	}
}
