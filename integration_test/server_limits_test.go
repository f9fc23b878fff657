package integration_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/server"
)

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
