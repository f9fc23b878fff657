package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/internal/redact/redacttest"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/server"
)

// fakeTEI answers /rerank like text-embeddings-inference. Healthy, it
// scores the i-th of n texts i/n, so the model's order is the reverse of
// the order sent (the fused order); mode "fail" answers 500, "slow" waits
// for the caller to give up.
type fakeTEI struct {
	mode  atomic.Value // string
	calls atomic.Int32
	stop  chan struct{} // closed at the end of the test
}

func (f *fakeTEI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	switch f.mode.Load() {
	case "fail":
		http.Error(w, `{"error":"model crashed"}`, http.StatusInternalServerError)
		return
	case "slow":
		// Read the body first: the server notices a client that hung up
		// only once the body is consumed.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-f.stop:
		}
		return
	}
	var req struct {
		Texts []string `json:"texts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/rerank" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var out []map[string]any
	for i := range req.Texts {
		out = append(out, map[string]any{"index": i, "score": float64(i) / float64(len(req.Texts))})
	}
	_ = json.NewEncoder(w).Encode(out)
}

// TestServerModelRerank: rerank "model" through the HTTP API with a
// text-embeddings-inference server behind a breaker: the model's order,
// then a timeout, an error and the open breaker, each shed exactly as
// enable_rerank false, each counted in the metrics and named in the audit
// record with the provider, model and outcome.
func TestServerModelRerank(t *testing.T) {
	fake := &fakeTEI{stop: make(chan struct{})}
	fake.mode.Store("ok")
	tei := httptest.NewServer(fake)
	t.Cleanup(tei.Close)
	t.Cleanup(func() { close(fake.stop) })
	client, err := rerank.New(rerank.Config{URL: tei.URL, API: rerank.TEI, Model: "bge-reranker-base"})
	if err != nil {
		t.Fatal(err)
	}
	breaker, err := rerank.NewBreaker(client, rerank.BreakerConfig{Failures: 2, CoolDown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a := startAPIServer(t, serverOpts{metrics: true, cfg: server.Config{Reranker: breaker, RerankBudget: 5 * time.Second,
		RerankBudgetTenant: map[string]time.Duration{"wholesale": 2 * time.Second}}})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	const path = "/v1/tenants/wholesale/retrieve"
	body := func(policy map[string]any) map[string]any {
		p := map[string]any{"rerank": "model", "rerank_blend": 0, "max_chunks_per_doc": 0, "limit": 10}
		for k, v := range policy {
			p[k] = v
		}
		return map[string]any{"query": "treasury hold approval settlement payments", "now_tick": 120, "policy": p}
	}
	results := func(r resp) (string, []string) {
		t.Helper()
		var m struct {
			Results  json.RawMessage `json:"results"`
			Degraded []string        `json:"degraded"`
		}
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatal(err)
		}
		return string(m.Results), m.Degraded
	}
	off := a.want(t, a.call(t, "POST", path, reader, body(map[string]any{"enable_rerank": false})), http.StatusOK)
	fusedIDs := resultIDs(t, off.json(t))
	offResults, _ := results(off)
	if len(fusedIDs) < 2 {
		t.Fatalf("fused %v: want at least two chunks to reorder", fusedIDs)
	}
	if fake.calls.Load() != 0 {
		t.Fatalf("enable_rerank false called the model")
	}

	// Healthy: the model's order, the reverse of the fused one.
	ok := a.want(t, a.call(t, "POST", path, reader, body(nil)), http.StatusOK)
	want := slices.Clone(fusedIDs)
	slices.Reverse(want)
	if got := resultIDs(t, ok.json(t)); !slices.Equal(got, want) {
		t.Fatalf("model order %v, want %v (the fused order %v reversed)", got, want, fusedIDs)
	}
	if _, deg := results(ok); len(deg) != 0 {
		t.Fatalf("degraded %v, want none", deg)
	}

	// Shed three ways; each result is the enable_rerank=false one, byte
	// for byte.
	shed := func(mode string, policy map[string]any) {
		t.Helper()
		fake.mode.Store(mode)
		r := a.want(t, a.call(t, "POST", path, reader, body(policy)), http.StatusOK)
		got, deg := results(r)
		if got != offResults || !slices.Equal(deg, []string{"rerank"}) {
			t.Fatalf("%s: results %s degraded %v, want the enable_rerank=false results %s and [rerank]", mode, got, deg, offResults)
		}
	}
	shed("slow", map[string]any{"rerank_budget_ms": 50}) // timeout: failure 1
	shed("fail", nil)                                    // error: failure 2, the breaker opens
	calls := fake.calls.Load()
	shed("ok", nil) // refused by the open breaker, the model not called
	if fake.calls.Load() != calls {
		t.Fatalf("the open breaker let a call through")
	}

	// The audit records, in order: off, ok, timeout, error, breaker_open.
	conn, err := pgx.Connect(context.Background(), a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT policy, degraded FROM cordon_t_wholesale.audit WHERE op = 'retrieve' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		policy   string
		degraded []string
	}
	var recs []rec
	for rows.Next() {
		var r rec
		if err := rows.Scan(&r.policy, &r.degraded); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	reranker := func(outcome string, shed bool) string {
		return fmt.Sprintf(`"reranker":{"provider":"tei","model":"bge-reranker-base","outcome":%q,"shed":%v}`, outcome, shed)
	}
	wantRecs := []struct {
		parts    []string
		degraded []string
	}{
		{[]string{`"enable_rerank":false`, `"rerank":"model"`, `"rerank_budget_ms":2000`}, []string{"rerank"}},
		{[]string{`"rerank":"model"`, `"rerank_min_score":0`, `"rerank_budget_ms":2000`, reranker("ok", false)}, []string{}},
		{[]string{`"rerank_budget_ms":50`, reranker("timeout", true)}, []string{"rerank"}},
		{[]string{`"rerank_budget_ms":2000`, reranker("error", true)}, []string{"rerank"}},
		{[]string{reranker("breaker_open", true)}, []string{"rerank"}},
	}
	if len(recs) != len(wantRecs) {
		t.Fatalf("%d retrieve records, want %d", len(recs), len(wantRecs))
	}
	for i, w := range wantRecs {
		for _, p := range w.parts {
			if !strings.Contains(recs[i].policy, p) {
				t.Errorf("record %d policy %s lacks %s", i+1, recs[i].policy, p)
			}
		}
		if !slices.Equal(recs[i].degraded, w.degraded) {
			t.Errorf("record %d degraded %v, want %v", i+1, recs[i].degraded, w.degraded)
		}
	}
	if strings.Contains(recs[0].policy, `"reranker"`) {
		t.Errorf("enable_rerank false names a model run: %s", recs[0].policy)
	}

	m := a.get(t, a.metricsURL+"/metrics")
	for _, line := range []string{
		`cordon_rerank_model_calls_total{outcome="ok"} 1`,
		`cordon_rerank_model_calls_total{outcome="timeout"} 1`,
		`cordon_rerank_model_calls_total{outcome="error"} 1`,
		`cordon_rerank_model_calls_total{outcome="breaker_open"} 1`,
		`cordon_rerank_model_duration_seconds_count 4`,
		`cordon_retrieval_degraded_total{stage="rerank"} 4`,
	} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestServerRerankKeyNotLogged: a model server that answers 401 with the
// API key echoed in any encoding (in a JSON string with "/" escaped as "\/",
// as a provider did; percent- or HTML-encoded, base64, hex) sheds the stage,
// and the request's log line says why (rerank_shed) without the key in any
// encoding.
func TestServerRerankKeyNotLogged(t *testing.T) {
	const key = "rk-9fQ2/x+Lw7=Zp_Tc"
	var encoding atomic.Int32 // index into redacttest.Encodings
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		e := redacttest.Encodings[encoding.Load()]
		fmt.Fprintf(w, `{"error":"invalid key %s"}`, e.Encode(r.Header.Get("Authorization")))
	}))
	t.Cleanup(provider.Close)
	client, err := rerank.New(rerank.Config{URL: provider.URL, API: rerank.TEI, Model: "bge-reranker-base", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a := startAPIServer(t, serverOpts{cfg: server.Config{Reranker: client, Logger: slog.New(slog.NewJSONHandler(logs, nil))}})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	for i, e := range redacttest.Encodings {
		encoding.Store(int32(i))
		r := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader,
			map[string]any{"query": "treasury hold approval", "policy": map[string]any{"rerank": "model"}}), http.StatusOK)
		if !strings.Contains(string(r.body), `"degraded":["rerank"]`) {
			t.Fatalf("%s: the model's 401 did not shed the stage: %s", e.Name, r.body)
		}
	}
	if n := strings.Count(logs.String(), `"rerank_shed":"error: rerank tei POST /rerank: reranker answered with an error status: status 401`); n != len(redacttest.Encodings) {
		t.Fatalf("%d rerank_shed lines naming the 401, want %d:\n%s", n, len(redacttest.Encodings), logs)
	}
	if name, form, leak := redacttest.Leak(logs.String(), key); leak {
		t.Fatalf("the log holds the key (%s %q):\n%s", name, form, logs)
	}
}
