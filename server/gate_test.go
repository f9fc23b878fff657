package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
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
// the test server has no store); a retrieve whose deadline passes in the
// queue is a 503.
func TestRetrieveTenantLimit(t *testing.T) {
	srv := newRerankServer(t, Config{TenantRequests: 1, TenantQueue: -1})
	release, err := srv.admission.enter(context.Background(), "wholesale")
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
	queued := newRerankServer(t, Config{TenantRequests: 1, TenantQueue: 1, RequestTimeout: 50 * time.Millisecond})
	release2, err := queued.admission.enter(context.Background(), "wholesale")
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	srv = queued
	late := call("wholesale")
	if late.Code != http.StatusServiceUnavailable || late.Header().Get("Retry-After") != "1" || !strings.Contains(late.Body.String(), "ran out of time waiting for other requests of this tenant") {
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

// TestDefaultTenantRequests: by default a tenant may hold half the
// database pool (at least one connection), and at most 2 x GOMAXPROCS
// requests in progress.
func TestDefaultTenantRequests(t *testing.T) {
	cpu := 2 * runtime.GOMAXPROCS(0)
	tests := []struct {
		name string
		pool int
		want int
	}{
		{"pool unknown", 0, cpu},
		{"pool of one", 1, 1},
		{"pool of two", 2, 1},
		{"pool of five", 5, min(cpu, 2)},
		{"large pool", 4 * cpu, cpu},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultTenantRequests(tt.pool); got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
	srv := newRerankServer(t, Config{})
	if srv.cfg.TenantRequests != cpu || srv.cfg.TenantQueue != 4*cpu || srv.cfg.MaxChunkIDs != 1000 {
		t.Fatalf("defaults without a store: tenant requests %d, queue %d, chunk ids %d; want %d, %d, 1000",
			srv.cfg.TenantRequests, srv.cfg.TenantQueue, srv.cfg.MaxChunkIDs, cpu, 4*cpu)
	}
}

// TestAdmissionEveryCostlyOperation: the tenant limit counts retrieve,
// ground, assemble, document PUT, DELETE and batch together: with the
// tenant's one slot taken, each is a 429 naming the limit and its flags
// before its body is read, counted by operation, while another tenant's
// requests get past the gate (to a 400 here: no store); a request without
// a valid token takes no slot.
func TestAdmissionEveryCostlyOperation(t *testing.T) {
	var logs bytes.Buffer
	srv := newRerankServer(t, Config{TenantRequests: 1, TenantQueue: -1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	release, err := srv.admission.enter(context.Background(), "wholesale")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	call := func(tenant, method, path, role, body, contentType string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/v1/tenants/"+tenant+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tenantToken(t, tenant, role))
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec
	}
	tests := []struct {
		op, method, path, role, body, contentType string
	}{
		{opRetrieve, "POST", "/retrieve", RoleReader, `{"query": "hold", "policy": {"top_n": 0}}`, "application/json"},
		{opGround, "POST", "/ground", RoleReader, `{"claims": ["hold"]}`, "application/json"},
		{opAssemble, "POST", "/assemble", RoleReader, `{"question": "hold", "budget_tokens": 100}`, "application/json"},
		{opPut, "PUT", "/documents/d1", RoleWriter, `{"text": "hold"}`, "application/json"},
		{opDelete, "DELETE", "/documents/%00", RoleWriter, ``, ""},
		{opBatch, "POST", "/documents:batch", RoleWriter, "", "application/x-ndjson"},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			busy := call("wholesale", tt.method, tt.path, tt.role, tt.body, tt.contentType)
			if busy.Code != http.StatusTooManyRequests || busy.Header().Get("Retry-After") != "1" ||
				!strings.Contains(busy.Body.String(), `"code":"too_many_requests"`) ||
				!strings.Contains(busy.Body.String(), "1 requests in progress and 0 waiting") ||
				!strings.Contains(busy.Body.String(), "--tenant-requests, --tenant-queue") {
				t.Fatalf("wholesale at its limit: %d %v %s, want 429 too_many_requests naming the limit, with Retry-After 1", busy.Code, busy.Header(), busy.Body)
			}
			if other := call("retail", tt.method, tt.path, tt.role, tt.body, tt.contentType); other.Code != http.StatusBadRequest {
				t.Fatalf("retail: %d %s, want past the gate to a 400", other.Code, other.Body)
			}
		})
	}
	// No token: a 401, and the tenant's slot is not taken by it.
	req := httptest.NewRequest("POST", "/v1/tenants/retail/ground", strings.NewReader(`{}`))
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || srv.admission.users("retail") != 0 {
		t.Fatalf("no token: %d, retail's users %d; want 401 and 0", rec.Code, srv.admission.users("retail"))
	}
	m := scrape(t, srv)
	for _, op := range admittedOps {
		want := fmt.Sprintf("cordon_requests_refused_total{op=%q,reason=\"tenant_limit\"} 1\n", op)
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", strings.TrimSpace(want))
		}
		if want := fmt.Sprintf("cordon_requests_refused_total{op=%q,reason=\"queue_timeout\"} 0\n", op); !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", strings.TrimSpace(want))
		}
	}
	if !strings.Contains(m, "cordon_retrieves_refused_total 1\n") {
		t.Errorf("metrics lack cordon_retrieves_refused_total 1")
	}
	// The limits are logged at start, and each refusal says why.
	for _, want := range []string{`"msg":"tenant admission","tenant_requests":1,"tenant_queue":0,"db_pool_conns":0,"max_chunk_ids":1000`,
		`"route":"POST /v1/tenants/{tenant}/ground","status":429`, `"refused":"tenant_limit"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s: %s", want, logs.String())
		}
	}
}

// TestMaxChunkIDs: a ground or assemble naming more chunks than the cap
// (Config.MaxChunkIDs, at most postgres.MaxLoadChunks) is a 400 naming the
// cap and its flag, counted by operation, before the store is asked.
func TestMaxChunkIDs(t *testing.T) {
	ids := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q", fmt.Sprintf("c%d", i))
		}
		return "[" + b.String() + "]"
	}
	tests := []struct {
		name string
		cfg  Config
		path string
		body string
		want string
	}{
		{"ground over a cap of 2", Config{MaxChunkIDs: 2}, "/ground", `{"claims": ["x"], "chunk_ids": ` + ids(3) + `}`, "3 chunk_ids: at most 2"},
		{"assemble over a cap of 2", Config{MaxChunkIDs: 2}, "/assemble", `{"question": "x", "budget_tokens": 10, "chunk_ids": ` + ids(3) + `}`, "3 chunk_ids: at most 2"},
		{"ground over the default", Config{}, "/ground", `{"claims": ["x"], "chunk_ids": ` + ids(1001) + `}`, "1001 chunk_ids: at most 1000"},
		{"a cap above the store's takes the store's", Config{MaxChunkIDs: 5000}, "/ground", `{"claims": ["x"], "chunk_ids": ` + ids(1001) + `}`, "1001 chunk_ids: at most 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRerankServer(t, tt.cfg)
			req := httptest.NewRequest("POST", "/v1/tenants/wholesale"+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+testToken(t, RoleReader))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.want) || !strings.Contains(rec.Body.String(), "(cordon serve --max-chunk-ids)") {
				t.Fatalf("got %d %s, want 400 with %q naming --max-chunk-ids", rec.Code, rec.Body, tt.want)
			}
			op := strings.TrimPrefix(tt.path, "/")
			if m := scrape(t, srv); !strings.Contains(m, fmt.Sprintf("cordon_requests_refused_total{op=%q,reason=\"chunk_ids\"} 1\n", op)) {
				t.Errorf("metrics lack the refusal of %s for chunk_ids", op)
			}
		})
	}
}
