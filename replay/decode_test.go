package replay

import (
	"context"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
)

func TestIntRejectsNonIntegers(t *testing.T) {
	tests := []struct {
		raw  string
		want int64
		ok   bool
	}{
		{"2", 2, true}, {"-7", -7, true}, {"2.0", 0, false}, {"1e3", 0, false},
		{`"2"`, 0, false}, {"9223372036854775808", 0, false}, {"true", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var i Int
			err := i.UnmarshalJSON([]byte(tt.raw))
			if (err == nil) != tt.ok || (tt.ok && i.V != tt.want) {
				t.Errorf("Int(%s) = %d, err %v; want %d, ok %v", tt.raw, i.V, err, tt.want, tt.ok)
			}
		})
	}
}

// TestStepDecodingSharesTheAPIRules: a step is scanned as a request body is
// (jsonstrict), so nesting past the depth limit and a key repeated deep
// inside free-form metadata are refused, while the replay wording stays.
func TestStepDecodingSharesTheAPIRules(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	tests := []struct {
		name    string
		step    string
		wantErr string
	}{
		{"deep metadata", `{"op":"put","document":{"tenant":"w","doc_id":"d","text":"x","classification":"public","metadata":` + deep + `}}`, "nests deeper than 64 levels"},
		{"nested duplicate in metadata", `{"op":"put","document":{"tenant":"w","doc_id":"d","text":"x","classification":"public","metadata":{"a":{"k":1,"k":2}}}}`, `duplicate key "document.metadata.a.k"`},
		{"case variant", `{"op":"put","document":{"Tenant":"w"}}`, `unknown field "document.Tenant"`},
		{"type error wording", `{"op":"ground","claims":"x"}`, `field "claims": string is not a list`},
		{"integer wording", `{"op":"put","document":{"as_of_tick":2.0}}`, "2.0 is not an integer (write integers without a fraction or exponent)"},
		{"policy integer wording", `{"op":"retrieve","policy":{"limit":1e3}}`, "1e3 is not an integer (write integers without a fraction or exponent)"},
		{"policy overflow wording", `{"op":"retrieve","policy":{"top_n":9223372036854775808}}`, "9223372036854775808 is not a 64-bit integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch {
			case strings.Contains(tt.step, `"ground"`):
				err = decodeStrict([]byte(tt.step), new(groundIn))
			case strings.Contains(tt.step, `"retrieve"`):
				err = decodeStrict([]byte(tt.step), new(retrieveIn))
			default:
				err = decodeStrict([]byte(tt.step), new(putIn))
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("decodeStrict(%s) = %v, want an error containing %q", tt.step, err, tt.wantErr)
			}
		})
	}
}

// TestPolicyWordingMatchesIntAndFloat: policy fields decode into
// retrieval.PolicyPatch's plain Go numbers, and their errors still read as
// the replay's own Int and Float fields word them (golden files pin both).
func TestPolicyWordingMatchesIntAndFloat(t *testing.T) {
	for _, v := range []string{`2.0`, `1e3`, `"5"`, `true`, `[1, 2]`, `{"a": 1}`, `9223372036854775808`, `"x\"y"`, `-1.5e-3`} {
		t.Run(v, func(t *testing.T) {
			var i Int
			wantInt := i.UnmarshalJSON([]byte(v))
			if _, err := ParsePolicy([]byte(`{"limit": `+v+`}`), retrieval.DefaultPolicy()); err == nil || wantInt == nil || err.Error() != wantInt.Error() {
				t.Errorf("limit %s: got %v, want %v", v, err, wantInt)
			}
			if !strings.ContainsAny(v[:1], `"tf[{`) {
				return // numbers: Float accepts them
			}
			var f Float
			wantFloat := f.UnmarshalJSON([]byte(v))
			if _, err := ParsePolicy([]byte(`{"min_score": `+v+`}`), retrieval.DefaultPolicy()); err == nil || wantFloat == nil || err.Error() != wantFloat.Error() {
				t.Errorf("min_score %s: got %v, want %v", v, err, wantFloat)
			}
		})
	}
}

// TestPolicyModelFields: replay scripts accept the model reranker's fields
// (strictly: rerank_budget_ms is an integer), and refuse rerank "model",
// since a replay has no model reranker.
func TestPolicyModelFields(t *testing.T) {
	pol, err := ParsePolicy([]byte(`{"rerank_min_score": -0.5, "rerank_budget_ms": 250}`), retrieval.DefaultPolicy())
	if err != nil || pol.RerankMinScore != -0.5 || pol.RerankBudgetMS != 250 {
		t.Fatalf("got %+v, %v; want rerank_min_score -0.5 and rerank_budget_ms 250", pol, err)
	}
	for _, tt := range []struct{ raw, want string }{
		{`{"rerank_budget_ms": 2.5}`, "2.5 is not an integer"},
		{`{"rerank_budget_ms": 0}`, "rerank_budget_ms 0 must be in [1, 60000]"},
		{`{"rerank": "model"}`, `rerank "model" needs a model reranker`},
		{`{"rerank_min_score": "high"}`, `"high" is not a number`},
	} {
		if _, err := ParsePolicy([]byte(tt.raw), retrieval.DefaultPolicy()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
	// The retrieve step reports it like any invalid policy.
	r := &runner{retriever: retrieval.New(nil)}
	if _, err := r.retrieve(context.Background(), []byte(`{"op":"retrieve","principal":{"tenant":"w","clearance":"public"},"policy":{"rerank":"model"}}`)); err == nil || !strings.Contains(err.Error(), "needs a model reranker") {
		t.Errorf("retrieve step with rerank model: got %v", err)
	}
}
