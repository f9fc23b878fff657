package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// The operations admit counts, the op label of
// cordon_requests_refused_total.
const (
	opRetrieve = "retrieve"
	opGround   = "ground"
	opAssemble = "assemble"
	opPut      = "put"
	opDelete   = "delete"
	opBatch    = "batch"
)

// admittedOps are every op, in the order the metrics list them.
var admittedOps = []string{opRetrieve, opGround, opAssemble, opPut, opDelete, opBatch}

// Why a request was refused before its work, the reason label of
// cordon_requests_refused_total.
const (
	// reasonTenantLimit: the tenant had Config.TenantRequests in progress
	// and Config.TenantQueue waiting (429).
	reasonTenantLimit = "tenant_limit"
	// reasonQueueTimeout: the request's deadline passed, or its caller
	// left, while it waited in its tenant's queue (503).
	reasonQueueTimeout = "queue_timeout"
	// reasonChunkIDs: a ground or assemble named more than
	// Config.MaxChunkIDs chunks (400).
	reasonChunkIDs = "chunk_ids"
)

// admit runs h once the tenant's admission lets the request in: at most
// Config.TenantRequests of a tenant's costly requests run at once, whatever
// their operation, and Config.TenantQueue more wait. Each holds at most one
// database connection at a time, so with the default limit (half the pool)
// one tenant's requests leave the rest of the pool, and the process, to the
// other tenants. The gate is passed before the body is read: a refusal
// costs the token check and the discarding of the unread body, no
// decoding and no database work.
func (s *Server) admit(op string, h func(http.ResponseWriter, *http.Request, Identity)) func(http.ResponseWriter, *http.Request, Identity) {
	return func(w http.ResponseWriter, r *http.Request, id Identity) {
		release, err := s.admission.enter(r.Context(), id.Tenant)
		if err != nil {
			reason, e := reasonQueueTimeout, fmt.Errorf("%w: %w", errQueueTimedOut, err)
			if errors.Is(err, errTenantBusy) {
				reason, e = reasonTenantLimit, s.errBusy
			}
			s.metrics.refuse(op, reason)
			logInfo(r.Context()).refused = reason
			s.fail(w, r, e)
			return
		}
		defer release()
		h(w, r, id)
	}
}

// tenantGate bounds each tenant's requests: at most limit run at once, at
// most queue more wait (in arrival order) for one of them to finish, and
// any beyond are refused at once. One tenant's callers then hold at most
// limit of the process's workers and database connections, whatever they
// send, and the others' requests are not queued behind them.
type tenantGate struct {
	limit, queue int

	mu      sync.Mutex
	tenants map[string]*tenantSlots
}

// tenantSlots are one tenant's: slots holds a token per running request;
// users counts the running and the waiting. A tenant with no users has no
// entry, so the map holds only tenants with requests in progress.
type tenantSlots struct {
	slots chan struct{}
	users int
}

func newTenantGate(limit, queue int) *tenantGate {
	return &tenantGate{limit: limit, queue: queue, tenants: make(map[string]*tenantSlots)}
}

// enter waits for one of tenant's slots and returns the function that
// gives it back. It returns errTenantBusy at once when limit requests of
// the tenant run and queue wait, and ctx's error when ctx ends first.
func (g *tenantGate) enter(ctx context.Context, tenant string) (release func(), err error) {
	g.mu.Lock()
	t := g.tenants[tenant]
	if t == nil {
		t = &tenantSlots{slots: make(chan struct{}, g.limit)}
		g.tenants[tenant] = t
	}
	if t.users >= g.limit+g.queue {
		g.mu.Unlock()
		return nil, errTenantBusy
	}
	t.users++
	g.mu.Unlock()
	select {
	case t.slots <- struct{}{}:
		var once sync.Once
		return func() {
			once.Do(func() {
				<-t.slots
				g.leave(tenant, t)
			})
		}, nil
	case <-ctx.Done():
		g.leave(tenant, t)
		return nil, ctx.Err()
	}
}

// leave counts one user of t out, and forgets the tenant once it has none.
func (g *tenantGate) leave(tenant string, t *tenantSlots) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t.users--
	if t.users == 0 {
		delete(g.tenants, tenant)
	}
}

// users returns how many of tenant's requests run or wait.
func (g *tenantGate) users(tenant string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tenants[tenant]; t != nil {
		return t.users
	}
	return 0
}
