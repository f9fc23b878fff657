package server

import (
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
)

// TestDenseFallbackTenants: a tenant named in Config.DenseFallbackTenants
// falls back to lexical-only by default, under both profiles; a request
// may still say "none"; other tenants do not fall back unless asked.
func TestDenseFallbackTenants(t *testing.T) {
	s := newRerankServer(t, Config{DenseFallbackTenants: []string{"wholesale"}})
	none, lexical := string(retrieval.FallbackNone), string(retrieval.FallbackLexical)
	tests := []struct {
		name   string
		tenant string
		patch  *retrieval.PolicyPatch
		want   retrieval.DenseFallback
	}{
		{"named tenant", "wholesale", nil, retrieval.FallbackLexical},
		{"named tenant, request says none", "wholesale", &retrieval.PolicyPatch{DenseFallback: &none}, retrieval.FallbackNone},
		{"other tenant", "retail", nil, retrieval.FallbackNone},
		{"other tenant, request asks", "retail", &retrieval.PolicyPatch{DenseFallback: &lexical}, retrieval.FallbackLexical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash, model := s.requestPolicies(tt.tenant, tt.patch)
			if hash.DenseFallback != tt.want || model.DenseFallback != tt.want {
				t.Fatalf("dense_fallback %q and %q, want %q", hash.DenseFallback, model.DenseFallback, tt.want)
			}
		})
	}
}
