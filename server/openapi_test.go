package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cordon-rag/cordon/retrieval"
)

// TestOpenAPIMatchesRoutes checks that openapi.yaml documents exactly the
// routes the server registers, and that every documented path reaches a
// handler (no route-level 404 or 405).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                          `yaml:"openapi"`
		Paths   map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(m)+" "+path)
		}
	}
	srv := New(Config{}, nil, &Verifier{})
	var routed []string
	for _, r := range srv.Routes() {
		routed = append(routed, strings.ReplaceAll(r, "...}", "}"))
	}
	slices.Sort(documented)
	slices.Sort(routed)
	if !slices.Equal(documented, routed) {
		t.Fatalf("openapi.yaml documents\n  %s\nbut the server routes\n  %s", strings.Join(documented, "\n  "), strings.Join(routed, "\n  "))
	}
	// Each documented /v1 operation is routed: without a token it is a 401
	// (not a 404 or 405 from the router).
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		path = strings.NewReplacer("{tenant}", "wholesale", "{doc_id}", "a/b-1").Replace(path)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", method, path, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.yaml", nil))
	if rec.Code != 200 || rec.Body.Len() != len(openAPI) {
		t.Fatalf("GET /openapi.yaml = %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

// jsonFields lists a struct's JSON field names.
func jsonFields(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIMatchesBodies checks that the documented request and response
// properties are exactly the fields the handlers decode and encode.
func TestOpenAPIMatchesBodies(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	get := func(path ...string) map[string]any {
		var cur any = doc
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("openapi.yaml: no %s", strings.Join(path, "."))
			}
			cur = m[p]
		}
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("openapi.yaml: %s is not an object", strings.Join(path, "."))
		}
		return m
	}
	props := func(schema map[string]any) []string {
		var out []string
		for k := range schema["properties"].(map[string]any) {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	reqSchema := func(path, method string) map[string]any {
		return get("paths", path, method, "requestBody", "content", "application/json", "schema")
	}
	okSchema := func(path, method string) map[string]any {
		return get("paths", path, method, "responses", "200", "content", "application/json", "schema")
	}
	tests := []struct {
		name   string
		schema map[string]any
		v      any
	}{
		{"create tenant request", reqSchema("/v1/tenants", "post"), CreateTenantRequest{}},
		{"document", get("components", "schemas", "Document"), DocumentRequest{}},
		{"chunk", get("components", "schemas", "Chunk"), ChunkJSON{}},
		{"retrieve request", reqSchema("/v1/tenants/{tenant}/retrieve", "post"), RetrieveRequest{}},
		{"policy", get("components", "schemas", "Policy"), retrieval.PolicyPatch{}},
		{"retrieve response", okSchema("/v1/tenants/{tenant}/retrieve", "post"), RetrieveResponse{}},
		{"result", get("components", "schemas", "Result"), ResultJSON{}},
		{"ground request", reqSchema("/v1/tenants/{tenant}/ground", "post"), GroundRequest{}},
		{"ground claim", get("paths", "/v1/tenants/{tenant}/ground", "post", "responses", "200", "content", "application/json", "schema", "properties", "claims", "items"), ClaimJSON{}},
		{"assemble request", reqSchema("/v1/tenants/{tenant}/assemble", "post"), AssembleRequest{}},
		{"batch outcome", get("components", "schemas", "BatchResult", "properties", "results", "items"), BatchOutcome{}},
		{"error", get("components", "schemas", "ErrorBody"), apiError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := props(tt.schema), jsonFields(tt.v); !slices.Equal(got, want) {
				t.Errorf("openapi.yaml documents %v, the handler uses %v", got, want)
			}
		})
	}
}

// TestOpenAPIPolicyDefaults checks that the Policy schema's defaults are
// the service profile's (the server's default rerank budget included), its
// maximums the server's default limits, and
// that its rerank enum lists exactly the kinds a retriever with a model
// reranker accepts.
func TestOpenAPIPolicyDefaults(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Policy struct {
					Properties map[string]struct {
						Default    any            `yaml:"default"`
						Maximum    any            `yaml:"maximum"`
						Enum       []string       `yaml:"enum"`
						Properties map[string]any `yaml:"properties"`
					} `yaml:"properties"`
				} `yaml:"Policy"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	props := doc.Components.Schemas.Policy.Properties
	svc := retrieval.ServicePolicy()
	want := map[string]any{
		"enable_rerank": svc.EnableRerank, "min_score": svc.MinScore, "top_n": svc.TopN, "rerank_depth": svc.RerankDepth,
		"rrf_k": svc.RRFK, "limit": svc.Limit, "rerank": string(svc.Rerank), "rerank_blend": svc.RerankBlend,
		"max_chunks_per_doc": svc.MaxChunksPerDoc, "prf_docs": svc.PRFDocs, "prf_terms": svc.PRFTerms, "prf_weight": svc.PRFWeight, "qtf_k3": svc.QTFK3, "idf": string(svc.IDF),
		"stop_words":       string(svc.StopWords),
		"rerank_min_score": svc.RerankMinScore, "rerank_budget_ms": int(DefaultConfig().RerankBudget / time.Millisecond),
	}
	for name, v := range want {
		got, ok := props[name]
		if !ok {
			t.Errorf("Policy.%s is not documented", name)
			continue
		}
		if fmt.Sprint(got.Default) != fmt.Sprint(v) {
			t.Errorf("Policy.%s default %v, the service profile's %v", name, got.Default, v)
		}
	}
	// The documented maximums of the bounded fields are the default
	// limits.
	lim := DefaultConfig().Limits
	for name, v := range map[string]int{"top_n": lim.TopN, "rerank_depth": lim.RerankDepth, "limit": lim.Limit, "prf_docs": lim.PRFDocs, "prf_terms": lim.PRFTerms} {
		if got := props[name].Maximum; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("Policy.%s maximum %v, the default limit %d", name, got, v)
		}
	}
	w := props["rrf_weights"].Properties
	if b, c := w["bm25"].(map[string]any)["default"], w["cosine"].(map[string]any)["default"]; fmt.Sprint(b) != fmt.Sprint(svc.RRFWeights.BM25) || fmt.Sprint(c) != fmt.Sprint(svc.RRFWeights.Cosine) {
		t.Errorf("rrf_weights defaults %v, %v; the service profile's %v", b, c, svc.RRFWeights)
	}
	if d := w["doc"].(map[string]any)["default"]; fmt.Sprint(d) != fmt.Sprint(svc.RRFWeights.Doc) {
		t.Errorf("rrf_weights.doc default %v; the service profile's %v", d, svc.RRFWeights.Doc)
	}
	// The documented kinds are exactly those a retriever with a model
	// reranker accepts.
	rt := retrieval.New(nil, retrieval.WithReranker(stubReranker{}))
	for _, k := range props["rerank"].Enum {
		p := svc
		p.Rerank = retrieval.RerankKind(k)
		if err := rt.Validate(p); err != nil {
			t.Errorf("documented rerank %q is refused: %v", k, err)
		}
	}
	// The documented stop lists are exactly those a policy accepts.
	for _, s := range props["stop_words"].Enum {
		p := svc
		p.StopWords = retrieval.StopWords(s)
		if err := p.Validate(); err != nil {
			t.Errorf("documented stop_words %q is refused: %v", s, err)
		}
	}
	if got, want := props["stop_words"].Enum, []string{"", "none", "english"}; !slices.Equal(got, want) {
		t.Errorf("stop_words enum %q, want %q", got, want)
	}
	if got, want := props["rerank"].Enum, []string{"overlap", "idf_overlap", "model"}; !slices.Equal(got, want) {
		t.Errorf("rerank enum %v, want %v", got, want)
	}
}
