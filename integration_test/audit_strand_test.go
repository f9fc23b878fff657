package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// A record must never wait for a batch while no committer runs (see
// store/postgres/auditgroup.go). These tests would hang a request until
// its deadline if one did; strandLimit is that deadline: far above any
// batch of a healthy database, so reaching it means a record was left
// without a committer, not that the machine was slow.
const strandLimit = 20 * time.Second

// TestAuditRecordNotStranded: a tenant's batch written on a goroutine of
// its own (one of a batch of several tenants) ends after the committer
// stopped, while a record of that tenant waits. The end of the batch must
// start a committer for it; before, the record waited for the next
// request, of any tenant, to come.
func TestAuditRecordNotStranded(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	st := openStore(t, dbURL, postgres.Options{MaxConns: 16})
	// Tenants the store knows no head of, so a batch of two of them is
	// written as two transactions on goroutines of their own.
	for _, tn := range []string{"held", "x", "y"} {
		if _, err := st.CreateTenant(ctx, tn, index.DefaultSettings()); err != nil {
			t.Fatal(err)
		}
	}
	openHeld := tenantGate(t, dbURL, "held")
	openX := tenantGate(t, dbURL, "x")

	held := holdCommitter(t, st, dbURL)
	res := queueAppends(t, st, [][2]string{{"x", "hold"}, {"y", "y1"}})
	openHeld()
	if err := <-held; err != nil {
		t.Fatalf("held: %v", err)
	}
	// y commits; x's batch is held in the database by its trigger.
	if r := <-res; r.tenant != "y" || r.err != nil {
		t.Fatalf("first answer: %s %v, want y's success", r.tenant, r.err)
	}
	waitFor(t, "x's held insert", func() bool {
		return queryInt(t, dbURL, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`) == 1
	})
	second := make(chan error, 1)
	go func() {
		_, err := st.AppendAudit(ctx, "x", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: "x2"})
		second <- err
	}()
	waitFor(t, "x2 to queue", func() bool { return st.AuditStats().Queued == 1 })
	openX()
	if r := <-res; r.tenant != "x" || r.err != nil {
		t.Fatalf("x's held record: %s %v", r.tenant, r.err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("x2: %v", err)
		}
	case <-time.After(strandLimit):
		t.Fatalf("x2 was left queued with no committer (queued %d, oldest %v)", st.AuditStats().Queued, st.AuditStats().OldestQueued)
	}
	checkChain(t, st, dbURL, "x", 2)
	checkChain(t, st, dbURL, "y", 1)
	if a := st.AuditStats(); a.Queued != 0 || a.OldestQueued != 0 || a.Waited != 4 || a.WaitMax <= 0 {
		t.Fatalf("stats after the run: %+v, want nothing queued and 4 records waited", a)
	}
}

// strandTenants are the tenants both processes append to.
const strandTenants = "s0,s1,s2,s3,s4,s5,s6,s7,s8,s9"

// TestAuditNoStrandTwoProcesses: two processes append to the same ten
// tenants, one of whose triggers refuses some records: the other process's
// appends make this one's chain heads stale, so its batches of several
// tenants are written again tenant by tenant on goroutines of their own,
// the path that left records without a committer. Rounds of concurrent
// appends, each round waiting for all of its answers: a stranded record is
// never picked up by a later request of its round, so it shows as an
// append that does not answer.
func TestAuditNoStrandTwoProcesses(t *testing.T) {
	if u := os.Getenv(auditChildEnv); u != "" {
		auditChild(u)
		return
	}
	ctx := context.Background()
	tenants := strings.Split(strandTenants, ",")
	// Unkeyed chains: the other process appends without a key.
	dbURL, st := sharedTenantsKeyed(t, nil, tenants...)
	tenantGate(t, dbURL, "s0") // raises on query 'boom'
	child := startAuditChild(t, "TestAuditNoStrandTwoProcesses", dbURL, strandTenants)
	child.waitAnswers(t, 50)

	const rounds, perRound = 400, 8
	rng := rand.New(rand.NewPCG(1, 2))
	var failed []string
	for r := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range perRound {
			// Two tenants a round, each taking four appends that arrive
			// spread over a few milliseconds: records of a tenant queue
			// while its batch is in flight.
			tenant := tenants[(r*2+i%2)%len(tenants)]
			stagger := time.Duration(rng.IntN(3000)) * time.Microsecond
			query := fmt.Sprintf("r%d-%d", r, i)
			if tenant == "s0" && i%2 == 0 {
				query = "boom"
			}
			wg.Go(func() {
				time.Sleep(stagger)
				actx, cancel := context.WithTimeout(ctx, strandLimit)
				defer cancel()
				_, err := st.AppendAudit(actx, tenant, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: query})
				switch {
				case query == "boom" && err == nil:
					err = errors.New("the refused record was accepted")
				case query == "boom" && !errors.Is(err, context.DeadlineExceeded):
					err = nil // refused, as the trigger says
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("round %d %s %s: %v", r, tenant, query, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(failed) > 0 {
			t.Fatalf("%d appends failed, first: %s (stats %+v)", len(failed), failed[0], st.AuditStats())
		}
	}
	child.kill(t)
	a := st.AuditStats()
	if a.StaleHeads == 0 {
		t.Fatalf("no stale heads: the other process did not interleave (stats %+v)", a)
	}
	if a.Queued != 0 {
		t.Fatalf("%d records still queued after every answer", a.Queued)
	}
	for _, tn := range tenants {
		if _, err := st.VerifyAudit(ctx, tn); err != nil {
			t.Fatalf("verify %s: %v", tn, err)
		}
	}
	t.Logf("%d rounds: stats %+v; mean wait %v", rounds, a, a.WaitTotal/time.Duration(max(a.Waited, 1)))
}
