package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
)

// stubReranker answers every call with err (nil: zero scores).
type stubReranker struct{ err error }

func (s stubReranker) Name() string  { return "stub" }
func (s stubReranker) Model() string { return "stub-model" }
func (s stubReranker) Score(_ context.Context, _ string, texts []string) ([]float64, error) {
	if s.err != nil {
		return nil, s.err
	}
	return make([]float64, len(texts)), nil
}

func newRerankServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	v, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: testHS256Secret})
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg, nil, v)
}

// TestRerankPolicyValidation: the model reranker's policy fields are
// checked before anything is ranked, with errors that say what to do.
func TestRerankPolicyValidation(t *testing.T) {
	without := newTestServer(t)
	with := newRerankServer(t, Config{Reranker: stubReranker{}})
	reader := testToken(t, RoleReader)
	tests := []struct {
		name string
		srv  *Server
		body string
		part string
	}{
		{"model without a reranker", without, `{"query": "hold", "policy": {"rerank": "model"}}`,
			`rerank \"model\" needs a model reranker, and this retriever has none: start the server with --reranker-url`},
		{"unknown kind without a reranker", without, `{"query": "hold", "policy": {"rerank": "colbert"}}`,
			`rerank \"colbert\" must be \"overlap\" or \"idf_overlap\"`},
		{"unknown kind with a reranker", with, `{"query": "hold", "policy": {"rerank": "colbert"}}`,
			`rerank \"colbert\" must be \"overlap\", \"idf_overlap\" or \"model\"`},
		{"budget 0", with, `{"query": "hold", "policy": {"rerank": "model", "rerank_budget_ms": 0}}`, "rerank_budget_ms 0 must be in [1, 60000]"},
		{"budget over a minute", with, `{"query": "hold", "policy": {"rerank_budget_ms": 60001}}`, "rerank_budget_ms 60001 must be in [1, 60000]"},
		{"budget not an integer", with, `{"query": "hold", "policy": {"rerank_budget_ms": 2.5}}`, "rerank_budget_ms"},
		{"budget as a string", with, `{"query": "hold", "policy": {"rerank_budget_ms": "300ms"}}`, "rerank_budget_ms"},
		{"floor not a number", with, `{"query": "hold", "policy": {"rerank_min_score": "high"}}`, "rerank_min_score"},
		{"floor in another case", with, `{"query": "hold", "policy": {"Rerank_Min_Score": 0.5}}`, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/tenants/wholesale/retrieve", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+reader)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			tt.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"bad_request"`) || !strings.Contains(rec.Body.String(), tt.part) {
				t.Fatalf("got %d %s, want 400 bad_request mentioning %s", rec.Code, rec.Body.String(), tt.part)
			}
		})
	}
}

func TestRerankBudgetPerTenant(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		tenant string
		want   int
	}{
		{"default", Config{}, "wholesale", retrieval.DefaultRerankBudgetMS},
		{"server budget", Config{RerankBudget: 250 * time.Millisecond}, "wholesale", 250},
		{"tenant budget", Config{RerankBudget: 250 * time.Millisecond, RerankBudgetTenant: map[string]time.Duration{"wholesale": 1500 * time.Millisecond}}, "wholesale", 1500},
		{"another tenant's budget", Config{RerankBudget: 250 * time.Millisecond, RerankBudgetTenant: map[string]time.Duration{"retail": time.Second}}, "wholesale", 250},
		{"rounded up to a millisecond", Config{RerankBudget: 1500 * time.Microsecond}, "wholesale", 2},
		{"at most a minute", Config{RerankBudget: time.Hour}, "wholesale", retrieval.MaxRerankBudgetMS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRerankServer(t, tt.cfg)
			if got := s.rerankBudgetMS(tt.tenant); got != tt.want {
				t.Fatalf("got %d ms, want %d", got, tt.want)
			}
			// A request's own budget wins over the tenant's, for both
			// kinds of tenant.
			rt := s.retriever()
			pol, model := s.requestPolicies(tt.tenant, &retrieval.PolicyPatch{RerankBudgetMS: new(int)})
			if rt.Validate(pol) == nil || rt.Validate(model) == nil {
				t.Fatalf("budget 0 accepted: %+v", pol)
			}
			own := 42
			pol, model = s.requestPolicies(tt.tenant, &retrieval.PolicyPatch{RerankBudgetMS: &own})
			if err := rt.Validate(pol); err != nil || pol.RerankBudgetMS != 42 || model.RerankBudgetMS != 42 {
				t.Fatalf("own budget: got %d and %d, %v; want 42", pol.RerankBudgetMS, model.RerankBudgetMS, err)
			}
			if pol, model = s.requestPolicies(tt.tenant, nil); pol.RerankBudgetMS != tt.want || model.RerankBudgetMS != tt.want {
				t.Fatalf("no budget in the request: got %d and %d, want %d", pol.RerankBudgetMS, model.RerankBudgetMS, tt.want)
			}
		})
	}
}

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// TestRerankMetrics: every model call is counted by outcome and timed; the
// series exist at 0 before any call.
func TestRerankMetrics(t *testing.T) {
	fail := &switchable{}
	s := newRerankServer(t, Config{Reranker: fail})
	m := scrape(t, s)
	for _, o := range []string{"ok", "timeout", "error", "breaker_open"} {
		if line := fmt.Sprintf(`cordon_rerank_model_calls_total{outcome=%q} 0`, o); !strings.Contains(m, line) {
			t.Errorf("metrics lack %s before any call", line)
		}
	}
	ctx := context.Background()
	_, _ = s.reranker.Score(ctx, "q", []string{"a"})
	fail.err = errors.New("model down")
	_, _ = s.reranker.Score(ctx, "q", []string{"a"})
	_, _ = s.reranker.Score(ctx, "q", []string{"a"})
	fail.err = fmt.Errorf("rerank tei: %w", rerank.ErrBreakerOpen)
	_, _ = s.reranker.Score(ctx, "q", []string{"a"})
	fail.err = fmt.Errorf("rerank tei POST /rerank: %w", context.DeadlineExceeded)
	_, _ = s.reranker.Score(ctx, "q", []string{"a"})
	m = scrape(t, s)
	for _, line := range []string{
		`cordon_rerank_model_calls_total{outcome="ok"} 1`,
		`cordon_rerank_model_calls_total{outcome="error"} 2`,
		`cordon_rerank_model_calls_total{outcome="breaker_open"} 1`,
		`cordon_rerank_model_calls_total{outcome="timeout"} 1`,
		`cordon_rerank_model_duration_seconds_count 5`,
	} {
		if !strings.Contains(m, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	// Without a reranker the series still exist, at 0.
	if m := scrape(t, newTestServer(t)); !strings.Contains(m, `cordon_rerank_model_calls_total{outcome="ok"} 0`) || !strings.Contains(m, "cordon_rerank_model_duration_seconds_count 0") {
		t.Errorf("a server without a reranker lacks the zero series")
	}
}

type switchable struct{ err error }

func (s *switchable) Name() string  { return "tei" }
func (s *switchable) Model() string { return "m" }
func (s *switchable) Score(_ context.Context, _ string, texts []string) ([]float64, error) {
	if s.err != nil {
		return nil, s.err
	}
	return make([]float64, len(texts)), nil
}

func TestAuditModel(t *testing.T) {
	if auditModel(nil) != nil {
		t.Fatal("no model run must leave the reranker out of the audit record")
	}
	got := auditModel(&retrieval.ModelRun{Provider: "tei", Model: "bge", Outcome: rerank.Timeout, Shed: true, Err: errors.New("secret detail")})
	if *got != (modelAudit{Provider: "tei", Model: "bge", Outcome: "timeout", Shed: true}) {
		t.Fatalf("got %+v", got)
	}
}
