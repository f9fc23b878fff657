package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// waitUsers polls until tenant has n retrieves running or waiting (the
// test's deadline ends a hang).
func waitUsers(t *testing.T, g *tenantGate, tenant string, n int) {
	t.Helper()
	for g.users(tenant) != n {
		if t.Context().Err() != nil {
			t.Fatalf("gave up waiting for %d users of %s (have %d)", n, tenant, g.users(tenant))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTenantGate: limit retrieves of a tenant run, queue more wait and
// enter in turn as slots free, any beyond are refused at once; other
// tenants are not affected; a waiter whose context ends leaves the queue;
// an idle tenant leaves no entry.
func TestTenantGate(t *testing.T) {
	ctx := context.Background()
	g := newTenantGate(2, 1)
	r1, err := g.enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := g.enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// The third waits for a slot.
	entered := make(chan func(), 1)
	go func() {
		r, err := g.enter(ctx, "a")
		if err != nil {
			r = nil
		}
		entered <- r
	}()
	waitUsers(t, g, "a", 3)
	// The fourth finds two running and one waiting: refused.
	if _, err := g.enter(ctx, "a"); !errors.Is(err, errTenantBusy) {
		t.Fatalf("fourth of a: got %v, want errTenantBusy", err)
	}
	// Another tenant has slots of its own.
	rb, err := g.enter(ctx, "b")
	if err != nil {
		t.Fatalf("tenant b: %v", err)
	}
	select {
	case <-entered:
		t.Fatal("the waiter entered while both slots were held")
	default:
	}
	r1()
	r1() // a second release gives back nothing more
	r3 := <-entered
	if r3 == nil {
		t.Fatal("the waiter did not enter once a slot was free")
	}
	if n := g.users("a"); n != 2 {
		t.Fatalf("users of a: %d, want 2 (a double release freed a slot)", n)
	}
	// A waiter whose context ends leaves the queue and takes no slot.
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := g.enter(cctx, "a")
		left <- err
	}()
	waitUsers(t, g, "a", 3)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: got %v, want context.Canceled", err)
	}
	if n := g.users("a"); n != 2 {
		t.Fatalf("users of a after the cancelled waiter: %d, want 2", n)
	}
	r2()
	r3()
	rb()
	g.mu.Lock()
	n := len(g.tenants)
	g.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d tenants remembered with nothing in progress, want 0", n)
	}
}

// TestTenantGateNoQueue: with no queue, the one past the limit is refused.
func TestTenantGateNoQueue(t *testing.T) {
	g := newTenantGate(1, 0)
	r, err := g.enter(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer r()
	if _, err := g.enter(context.Background(), "a"); !errors.Is(err, errTenantBusy) {
		t.Fatalf("got %v, want errTenantBusy", err)
	}
}

// TestRetrieveTenantLimit: a retrieve of a tenant whose slots and queue are
// taken is a 429 with Retry-After, counted in the metrics, while another
// tenant's retrieve gets past the gate (to the policy check, a 400 here:
// the test server has no store).
func TestRetrieveTenantLimit(t *testing.T) {
	srv := newRerankServer(t, Config{TenantRetrieves: 1, TenantQueue: -1})
	release, err := srv.retrieves.enter(context.Background(), "wholesale")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	call := func(tenant string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/tenants/"+tenant+"/retrieve", strings.NewReader(`{"query": "hold", "policy": {"top_n": 0}}`))
		req.Header.Set("Authorization", "Bearer "+tenantToken(t, tenant, RoleReader))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec
	}
	busy := call("wholesale")
	if busy.Code != http.StatusTooManyRequests || busy.Header().Get("Retry-After") != "1" || !strings.Contains(busy.Body.String(), `"code":"too_many_requests"`) {
		t.Fatalf("wholesale at its limit: %d %v %s, want 429 too_many_requests with Retry-After 1", busy.Code, busy.Header(), busy.Body)
	}
	if other := call("retail"); other.Code != http.StatusBadRequest || !strings.Contains(other.Body.String(), "top_n 0") {
		t.Fatalf("retail: %d %s, want past the gate to the 400 of top_n 0", other.Code, other.Body)
	}
	if m := scrape(t, srv); !strings.Contains(m, "cordon_retrieves_refused_total 1\n") {
		t.Errorf("metrics lack cordon_retrieves_refused_total 1")
	}

	// With a queue, a retrieve whose deadline passes while it waits is a
	// 503 that says so, counted as a timeout.
	queued := newRerankServer(t, Config{TenantRetrieves: 1, TenantQueue: 1, RequestTimeout: 50 * time.Millisecond})
	release2, err := queued.retrieves.enter(context.Background(), "wholesale")
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	srv = queued
	late := call("wholesale")
	if late.Code != http.StatusServiceUnavailable || late.Header().Get("Retry-After") != "1" || !strings.Contains(late.Body.String(), "ran out of time waiting for other retrieves") {
		t.Fatalf("a retrieve whose deadline passed in the queue: %d %s, want 503 saying so", late.Code, late.Body)
	}
	if m := scrape(t, queued); !strings.Contains(m, "cordon_request_timeouts_total 1\n") || !strings.Contains(m, "cordon_retrieves_refused_total 0\n") {
		t.Errorf("metrics lack cordon_request_timeouts_total 1 and cordon_retrieves_refused_total 0")
	}
}

// tenantToken is testToken for another tenant.
func tenantToken(t *testing.T, tenant string, roles ...string) string {
	t.Helper()
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "u", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Tenant: tenant, Roles: roles}
	s, err := MintHS256(testHS256Secret, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
