package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// retrieveOut is the part of a retrieve response these tests read.
type retrieveOut struct {
	Results  json.RawMessage `json:"results"`
	Degraded []string        `json:"degraded"`
}

func decodeRetrieve(t *testing.T, r resp) retrieveOut {
	t.Helper()
	var out retrieveOut
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("retrieve response %s: %v", r.body, err)
	}
	return out
}

// lastRetrievePolicy is the policy column of tenant's newest retrieve
// record.
func lastRetrievePolicy(t *testing.T, dbURL, schema string) (policy string, degraded []string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, `SELECT policy, degraded FROM `+schema+`.audit WHERE op = 'retrieve' ORDER BY seq DESC LIMIT 1`).Scan(&policy, &degraded); err != nil {
		t.Fatal(err)
	}
	return policy, degraded
}

// TestServerRerankBudgetBeyondRequestDeadline: a model reranker slower than
// the request's whole time, asked with a budget longer than it, is shed in
// time for the audit append: the retrieve answers 200 with the
// enable_rerank=false results and "rerank" in degraded, its audit record
// names the timeout, and nothing counts as an audit failure or a timeout.
func TestServerRerankBudgetBeyondRequestDeadline(t *testing.T) {
	fake := &fakeTEI{stop: make(chan struct{})}
	fake.mode.Store("slow") // answers only once the caller gives up
	tei := httptest.NewServer(fake)
	t.Cleanup(tei.Close)
	t.Cleanup(func() { close(fake.stop) })
	client, err := rerank.New(rerank.Config{URL: tei.URL, API: rerank.TEI, Model: "bge-reranker-base"})
	if err != nil {
		t.Fatal(err)
	}
	breaker, err := rerank.NewBreaker(client, rerank.BreakerConfig{Failures: 5, CoolDown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a := startAPIServer(t, serverOpts{metrics: true, cfg: server.Config{Reranker: breaker, RequestTimeout: 3 * time.Second}})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	const path = "/v1/tenants/wholesale/retrieve"
	body := func(policy map[string]any) map[string]any {
		return map[string]any{"query": "treasury hold approval settlement payments", "now_tick": 120, "policy": policy}
	}
	off := decodeRetrieve(t, a.want(t, a.call(t, "POST", path, reader, body(map[string]any{"rerank": "model", "enable_rerank": false})), http.StatusOK))
	r := a.call(t, "POST", path, reader, body(map[string]any{"rerank": "model", "rerank_budget_ms": 5000}))
	a.want(t, r, http.StatusOK)
	got := decodeRetrieve(t, r)
	if string(got.Results) != string(off.Results) || !slices.Equal(got.Degraded, []string{"rerank"}) {
		t.Fatalf("results %s degraded %v, want the enable_rerank=false results %s and [rerank]", got.Results, got.Degraded, off.Results)
	}
	if fake.calls.Load() != 1 {
		t.Fatalf("the model was called %d times, want 1", fake.calls.Load())
	}
	policy, degraded := lastRetrievePolicy(t, a.dbURL, "cordon_t_wholesale")
	for _, want := range []string{`"rerank_budget_ms":5000`, `"reranker":{"provider":"tei","model":"bge-reranker-base","outcome":"timeout","shed":true}`} {
		if !strings.Contains(policy, want) {
			t.Errorf("audit record policy %s lacks %s", policy, want)
		}
	}
	if !slices.Equal(degraded, []string{"rerank"}) {
		t.Errorf("audit record degraded %v, want [rerank]", degraded)
	}
	m := a.get(t, a.metricsURL+"/metrics")
	for _, line := range []string{
		"cordon_audit_append_failures_total 0",
		"cordon_request_timeouts_total 0",
		`cordon_rerank_model_calls_total{outcome="timeout"} 1`,
	} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestServerAuditDeadlineIsATimeout: a retrieve whose deadline passes while
// its audit record waits behind a held batch of its tenant answers 503,
// writes no record, and is counted as a timeout, not as an audit failure.
func TestServerAuditDeadlineIsATimeout(t *testing.T) {
	a := startAPIServer(t, serverOpts{metrics: true, cfg: server.Config{RequestTimeout: 2 * time.Second}})
	a.seed(t)
	execSQL(t, a.dbURL, `CREATE TABLE public.audit_gate (open boolean);
		CREATE FUNCTION public.audit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.query = 'hold the chain' THEN
				WHILE NOT EXISTS (SELECT 1 FROM public.audit_gate WHERE open) LOOP PERFORM pg_sleep(0.01); END LOOP;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER hold BEFORE INSERT ON cordon_t_wholesale.audit FOR EACH ROW EXECUTE FUNCTION public.audit_hold()`)
	held := make(chan error, 1)
	go func() {
		_, err := a.store.AppendAudit(context.Background(), "wholesale", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: "hold the chain"})
		held <- err
	}()
	waitFor(t, "the held audit batch", func() bool {
		return queryInt(t, a.dbURL, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`) == 1
	})
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	r := a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury approval"})
	if r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" || !strings.Contains(string(r.body), "ran out of time") || r.header.Get("Retry-After") == "" {
		t.Errorf("retrieve behind a held audit batch: %d %s, want 503 unavailable saying it ran out of time", r.status, r.body)
	}
	execSQL(t, a.dbURL, `INSERT INTO public.audit_gate VALUES (true)`)
	if err := <-held; err != nil {
		t.Fatalf("the held append: %v", err)
	}
	m := a.get(t, a.metricsURL+"/metrics")
	for _, line := range []string{"cordon_audit_append_failures_total 0", "cordon_request_timeouts_total 1"} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	// The next retrieve is written after the held batch; the one that ran
	// out of time never is.
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "settlement window"}), http.StatusOK)
	if n := queryInt(t, a.dbURL, `SELECT count(*) FROM cordon_t_wholesale.audit WHERE query = 'treasury approval'`); n != 0 {
		t.Errorf("%d records of the retrieve that answered 503, want 0", n)
	}
	if n := queryInt(t, a.dbURL, `SELECT count(*) FROM cordon_t_wholesale.audit WHERE query = 'settlement window'`); n != 1 {
		t.Errorf("%d records of the retrieve that answered 200, want 1", n)
	}
}

// heldReranker holds every call until release is closed (or the call's
// context ends), and says on entered when a call has arrived.
type heldReranker struct {
	entered chan struct{}
	release chan struct{}
}

func (h *heldReranker) Name() string  { return "held" }
func (h *heldReranker) Model() string { return "held-model" }
func (h *heldReranker) Score(ctx context.Context, _ string, texts []string) ([]float64, error) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
		return make([]float64, len(texts)), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestServerTenantRetrieveLimit: with one retrieve of a tenant allowed at a
// time and none waiting, a second retrieve of that tenant, while the first
// is held inside the reranker, is a 429 with Retry-After, counted in the
// metrics, while another tenant is still served; once the first is done,
// the tenant is served again.
func TestServerTenantRetrieveLimit(t *testing.T) {
	held := &heldReranker{entered: make(chan struct{}, 1), release: make(chan struct{})}
	a := startAPIServer(t, serverOpts{metrics: true, cfg: server.Config{Reranker: held, TenantRequests: 1, TenantQueue: -1}})
	a.seed(t)
	wholesale := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	retail := tok(t, "bob", "tenant=retail", "reader")
	type result struct {
		r   resp
		err error
	}
	first := make(chan result, 1)
	go func() {
		r, err := a.try("POST", "/v1/tenants/wholesale/retrieve", wholesale,
			map[string]any{"query": "treasury hold approval", "policy": map[string]any{"rerank": "model", "rerank_budget_ms": 60000}})
		first <- result{r, err}
	}()
	select {
	case <-held.entered:
	case res := <-first:
		t.Fatalf("the first retrieve did not reach the reranker: %v %d %s", res.err, res.r.status, res.r.body)
	}
	busy := a.call(t, "POST", "/v1/tenants/wholesale/retrieve", wholesale, map[string]any{"query": "settlement"})
	if busy.status != http.StatusTooManyRequests || busy.errCode(t) != "too_many_requests" || busy.header.Get("Retry-After") != "1" {
		t.Fatalf("second wholesale retrieve: %d %v %s, want 429 too_many_requests with Retry-After 1", busy.status, busy.header, busy.body)
	}
	other := decodeRetrieve(t, a.want(t, a.call(t, "POST", "/v1/tenants/retail/retrieve", retail, map[string]any{"query": "treasury hold"}), http.StatusOK))
	if string(other.Results) == "[]" {
		t.Fatalf("retail found nothing: %s", other.Results)
	}
	close(held.release)
	res := <-first
	if res.err != nil || res.r.status != http.StatusOK {
		t.Fatalf("the held retrieve: %v %d %s, want 200", res.err, res.r.status, res.r.body)
	}
	if d := decodeRetrieve(t, res.r).Degraded; len(d) != 0 {
		t.Fatalf("the held retrieve was degraded %v, want the model's scores", d)
	}
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", wholesale, map[string]any{"query": "settlement"}), http.StatusOK)
	if m := a.get(t, a.metricsURL+"/metrics"); !strings.Contains(m, "cordon_retrieves_refused_total 1\n") {
		t.Errorf("/metrics lacks cordon_retrieves_refused_total 1")
	}
}

// TestServerPolicyLimits: the costly policy fields are bounded by the
// server's limits end to end: at a limit the retrieve is served, above it
// the answer is a 400 naming the field, the limit and the flag.
func TestServerPolicyLimits(t *testing.T) {
	lim := retrieval.DefaultLimits()
	lim.TopN = 300
	a := startAPIServer(t, serverOpts{cfg: server.Config{Limits: lim}})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	const path = "/v1/tenants/wholesale/retrieve"
	atLimits := map[string]any{"top_n": 300, "rerank_depth": lim.RerankDepth, "limit": lim.Limit, "prf_docs": lim.PRFDocs, "prf_terms": lim.PRFTerms}
	a.want(t, a.call(t, "POST", path, reader, map[string]any{"query": "treasury hold", "policy": atLimits}), http.StatusOK)
	tests := []struct {
		policy map[string]any
		want   string
	}{
		{map[string]any{"top_n": 301}, "policy top_n 301 must be at most 300: this server's limit on what one retrieve may cost (cordon serve --max-top-n)"},
		{map[string]any{"prf_docs": 10000, "prf_terms": 10000}, "policy prf_docs 10000 must be at most 50"},
		{map[string]any{"prf_terms": lim.PRFTerms + 1}, "(cordon serve --max-prf-terms)"},
		{map[string]any{"rerank_depth": lim.RerankDepth + 1}, "(cordon serve --max-rerank-depth)"},
		{map[string]any{"limit": lim.Limit + 1}, "(cordon serve --max-limit)"},
	}
	for _, tt := range tests {
		r := a.call(t, "POST", path, reader, map[string]any{"query": "treasury hold", "policy": tt.policy})
		if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusBadRequest || r.errCode(t) != "bad_request" || !strings.Contains(e["message"].(string), tt.want) {
			t.Errorf("policy %v: %d %s, want 400 bad_request with %q", tt.policy, r.status, r.body, tt.want)
		}
	}
}
