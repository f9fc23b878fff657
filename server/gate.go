package server

import (
	"context"
	"sync"
)

// tenantGate bounds each tenant's retrieves: at most limit run at once, at
// most queue more wait (in arrival order) for one of them to finish, and
// any beyond are refused at once. One tenant's callers then hold at most
// limit of the process's workers, whatever they send, and the others'
// requests are not queued behind them.
type tenantGate struct {
	limit, queue int

	mu      sync.Mutex
	tenants map[string]*tenantSlots
}

// tenantSlots are one tenant's: slots holds a token per running retrieve;
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
// gives it back. It returns errTenantBusy at once when limit retrieves of
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

// users returns how many of tenant's retrieves run or wait.
func (g *tenantGate) users(tenant string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tenants[tenant]; t != nil {
		return t.users
	}
	return 0
}
