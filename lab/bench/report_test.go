package bench

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
)

// The report names the policy the retriever-backed systems ran and records
// it as a SPEC section 9 object that decodes back to the same policy.
func TestReportPolicy(t *testing.T) {
	service := retrieval.ServicePolicy()
	service.Limit = Limit
	custom := BasePolicy()
	custom.RRFK = 7
	for _, tt := range []struct {
		name   string
		policy *retrieval.Policy
		want   string
	}{
		{"none", nil, "seed profile"},
		{"seed", func() *retrieval.Policy { p := BasePolicy(); return &p }(), "seed profile"},
		{"service", &service, "service profile"},
		{"custom", &custom, "custom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newReport(Options{Policy: tt.policy})
			if r.PolicyName != tt.want {
				t.Fatalf("policy name: got %q, want %q", r.PolicyName, tt.want)
			}
			raw, err := json.Marshal(r.Policy)
			if err != nil {
				t.Fatal(err)
			}
			var patch retrieval.PolicyPatch
			if err := json.Unmarshal(raw, &patch); err != nil {
				t.Fatalf("decode %s: %v", raw, err)
			}
			got := patch.Apply(retrieval.DefaultPolicy())
			if want := effectivePolicy(tt.policy); !reflect.DeepEqual(got, want) {
				t.Fatalf("recorded policy %s decodes to %+v, want %+v", raw, got, want)
			}
		})
	}
}

// TestCPUOverCordon: the service path's CPU over the store's counts
// PostgreSQL's CPU for both systems or for neither, and is not reported
// when either system's CPU was not measured.
func TestCPUOverCordon(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tt := range []struct {
		name               string
		h, c               SystemResult
		wantRatio, wantAdd float64
		none               bool
	}{
		{"with PostgreSQL", SystemResult{CPUMsPerQuery: f(1.0), DBCPUMsPerQuery: f(0.25)}, SystemResult{CPUMsPerQuery: f(0.5), DBCPUMsPerQuery: f(0.125)}, 2, 0.625, false},
		{"without PostgreSQL", SystemResult{CPUMsPerQuery: f(1.5)}, SystemResult{CPUMsPerQuery: f(1.0)}, 1.5, 0.5, false},
		{"PostgreSQL for one only", SystemResult{CPUMsPerQuery: f(1.0), DBCPUMsPerQuery: f(0.25)}, SystemResult{CPUMsPerQuery: f(0.5)}, 0, 0, true},
		{"no http CPU", SystemResult{}, SystemResult{CPUMsPerQuery: f(0.5)}, 0, 0, true},
		{"no cordon CPU", SystemResult{CPUMsPerQuery: f(1.0)}, SystemResult{}, 0, 0, true},
		{"zero cordon CPU", SystemResult{CPUMsPerQuery: f(1.0)}, SystemResult{CPUMsPerQuery: f(0)}, 0, 0, true},
	} {
		r, a := CPUOverCordon(&tt.h, &tt.c)
		switch {
		case tt.none && (r != nil || a != nil):
			t.Errorf("%s: %v, %v; want none", tt.name, r, a)
		case !tt.none && (r == nil || a == nil || *r != tt.wantRatio || *a != tt.wantAdd):
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, r, a, tt.wantRatio, tt.wantAdd)
		}
	}
}
