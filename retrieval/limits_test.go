package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// TestPolicyLimits: each costly field passes [retrieval.Limits.Check] at
// its limit and fails one above it, with a *LimitError naming the field,
// the value and the limit; other limits move the bound; and the limits are
// the service's alone: Policy.Validate and the retriever accept any value
// in SPEC section 9's range, and Retrieve ranks it.
func TestPolicyLimits(t *testing.T) {
	def := retrieval.DefaultLimits()
	tests := []struct {
		field string
		max   int
		set   func(p *retrieval.Policy, v int)
	}{
		{"top_n", def.TopN, func(p *retrieval.Policy, v int) { p.TopN = v }},
		{"rerank_depth", def.RerankDepth, func(p *retrieval.Policy, v int) { p.RerankDepth = v }},
		{"limit", def.Limit, func(p *retrieval.Policy, v int) { p.Limit = v }},
		{"prf_docs", def.PRFDocs, func(p *retrieval.Policy, v int) { p.PRFDocs = v }},
		{"prf_terms", def.PRFTerms, func(p *retrieval.Policy, v int) { p.PRFTerms = v }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			p := retrieval.ServicePolicy()
			tt.set(&p, tt.max)
			if err := def.Check(p); err != nil {
				t.Fatalf("%s at its limit %d: %v", tt.field, tt.max, err)
			}
			tt.set(&p, tt.max+1)
			err := def.Check(p)
			var le *retrieval.LimitError
			if !errors.As(err, &le) || !errors.Is(err, retrieval.ErrInvalidPolicy) || *le != (retrieval.LimitError{Field: tt.field, Value: tt.max + 1, Max: tt.max}) {
				t.Fatalf("%s %d: got %v, want a LimitError wrapping ErrInvalidPolicy", tt.field, tt.max+1, err)
			}
			want := "invalid retrieval policy: " + tt.field
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "at most") {
				t.Errorf("message %q, want it to begin %q and give the limit", err.Error(), want)
			}
			// A higher limit accepts it; a lower one refuses what the
			// defaults accept.
			higher, lower := def, def
			setLimit(&higher, tt.field, tt.max+1)
			setLimit(&lower, tt.field, tt.max-1)
			if err := higher.Check(p); err != nil {
				t.Errorf("limit %d: %v", tt.max+1, err)
			}
			tt.set(&p, tt.max)
			if err := lower.Check(p); !errors.As(err, &le) || le.Max != tt.max-1 {
				t.Errorf("limit %d, value %d: got %v, want a LimitError", tt.max-1, tt.max, err)
			}
			// Far over the limit is still a valid policy (SPEC section 9:
			// >= 1, or >= 0 for prf_docs) for the retriever.
			tt.set(&p, 100000)
			if err := p.Validate(); err != nil {
				t.Errorf("Policy.Validate of %s 100000: %v, want valid (the limits are the service's)", tt.field, err)
			}
			if err := retrieval.New(nil).Validate(p); err != nil {
				t.Errorf("Retriever.Validate of %s 100000: %v, want valid", tt.field, err)
			}
		})
	}
	// Several over their limits: the first in the documented order is
	// named.
	p := retrieval.ServicePolicy()
	p.PRFTerms, p.Limit = def.PRFTerms+1, def.Limit+1
	var le *retrieval.LimitError
	if err := def.Check(p); !errors.As(err, &le) || le.Field != "limit" {
		t.Fatalf("limit and prf_terms over: got %v, want limit named", err)
	}
	// Check reads the limits only: a range error is Validate's.
	p = retrieval.ServicePolicy()
	p.TopN = 0
	if err := def.Check(p); err != nil {
		t.Fatalf("Check of top_n 0: got %v, want nil (Validate refuses it)", err)
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "top_n 0 must be >= 1") {
		t.Fatalf("Validate of top_n 0: got %v", err)
	}
}

// TestRetrieveBeyondLimits: the retriever ranks a policy over every default
// limit: the whole ranking is kept and returned.
func TestRetrieveBeyondLimits(t *testing.T) {
	const n = 3 * retrieval.DefaultMaxTopN
	docs := make([]cordontype.Document, n)
	for i := range docs {
		docs[i] = cordontype.Document{Tenant: "w", DocID: fmt.Sprintf("d%d", i), Text: fmt.Sprintf("hold payment %d", i), Classification: cordontype.Public}
	}
	st := newStore(t, docs...)
	ctx := context.Background()
	p := retrieval.DefaultPolicy()
	p.TopN, p.RerankDepth, p.Limit, p.PRFDocs, p.PRFTerms = 100000, 100000, 100000, 1000, 1000
	res, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{Principal: cordontype.Principal{Tenant: "w", Clearance: cordontype.Public}, Text: "hold", Policy: p})
	if err != nil {
		t.Fatalf("Retrieve: %v", err)
	}
	if len(res.Chunks) != n {
		t.Fatalf("got %d chunks, want all %d", len(res.Chunks), n)
	}
}

func setLimit(l *retrieval.Limits, field string, v int) {
	switch field {
	case "top_n":
		l.TopN = v
	case "rerank_depth":
		l.RerankDepth = v
	case "limit":
		l.Limit = v
	case "prf_docs":
		l.PRFDocs = v
	case "prf_terms":
		l.PRFTerms = v
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(l *retrieval.Limits)
		want string // "" is valid
	}{
		{"defaults", nil, ""},
		{"all 1", func(l *retrieval.Limits) {
			*l = retrieval.Limits{TopN: 1, RerankDepth: 1, Limit: 1, PRFDocs: 1, PRFTerms: 1}
		}, ""},
		{"at the most", func(l *retrieval.Limits) { l.TopN = retrieval.MaxLimit }, ""},
		{"0", func(l *retrieval.Limits) { l.PRFDocs = 0 }, "the limit of prf_docs, 0, must be in [1, 10000]"},
		{"over the most", func(l *retrieval.Limits) { l.Limit = retrieval.MaxLimit + 1 }, "the limit of limit, 10001, must be in [1, 10000]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := retrieval.DefaultLimits()
			if tt.edit != nil {
				tt.edit(&l)
			}
			err := l.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
	// No valid policy's fused list (top_n chunks of each ranking) is cut
	// by the default limit on limit alone.
	if d := retrieval.DefaultLimits(); d.Limit < 2*d.TopN {
		t.Fatalf("default limits %+v: limit below 2 x top_n", d)
	}
}
