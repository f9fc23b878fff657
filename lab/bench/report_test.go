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
