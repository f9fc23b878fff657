package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/retrieval"
)

const testHS256Secret = "0123456789abcdef0123456789abcdef"

// newTestServer is a server without a database: enough for everything that
// is decided before the store is reached (authentication, body decoding).
func newTestServer(t *testing.T) *Server {
	t.Helper()
	v, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: testHS256Secret})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{}, nil, v)
}

func testToken(t *testing.T, roles ...string) string {
	t.Helper()
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "u", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Tenant: "wholesale", Roles: roles}
	s, err := MintHS256(testHS256Secret, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deepMetadata is a document whose metadata holds n nested arrays.
func deepMetadata(prefix string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{` + prefix + `"text": "x", "classification": "public", "metadata": {"a": `)
	b.WriteString(strings.Repeat("[", n))
	b.WriteString(strings.Repeat("]", n))
	b.WriteString(`}}`)
	return b.Bytes()
}

// TestDeepNestingRejected: nesting far past MaxJSONDepth is a clean 400 that
// names the limit, through every route that decodes JSON, and never takes
// the process down (3,000,000 levels once overflowed the goroutine stack).
func TestDeepNestingRejected(t *testing.T) {
	srv := newTestServer(t)
	writer, reader := testToken(t, RoleWriter), testToken(t, RoleReader)
	tests := []struct {
		name        string
		method      string
		path        string
		token       string
		contentType string
		body        []byte
		batch       bool
	}{
		{"PUT metadata 3,000,000 deep", "PUT", "/v1/tenants/wholesale/documents/d-1", writer, "application/json",
			deepMetadata("", 3_000_000), false},
		{"batch line metadata 3,000,000 deep", "POST", "/v1/tenants/wholesale/documents:batch", writer, "application/x-ndjson",
			deepMetadata(`"doc_id": "d-1", `, 3_000_000), true},
		{"retrieve 1 MiB of [", "POST", "/v1/tenants/wholesale/retrieve", reader, "application/json",
			bytes.Repeat([]byte("["), 1<<20), false},
		{"retrieve query of 1 MiB of [", "POST", "/v1/tenants/wholesale/retrieve", reader, "application/json",
			append([]byte(`{"query": `), bytes.Repeat([]byte("["), 1<<20-10)...), false},
		{"retrieve 200,000 nested objects", "POST", "/v1/tenants/wholesale/retrieve", reader, "application/json",
			bytes.Repeat([]byte(`{"a":`), 1<<20/5), false},
		{"retrieve policy 65 deep", "POST", "/v1/tenants/wholesale/retrieve", reader, "application/json",
			[]byte(`{"query": "x", "policy": ` + strings.Repeat(`{"a": `, 64) + `1` + strings.Repeat(`}`, 64) + `}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, bytes.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.token)
			req.Header.Set("Content-Type", tt.contentType)
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			var e *apiError
			if tt.batch {
				var out struct {
					Results []BatchOutcome `json:"results"`
				}
				if rec.Code != http.StatusMultiStatus || json.Unmarshal(rec.Body.Bytes(), &out) != nil || len(out.Results) != 1 {
					t.Fatalf("batch: got %d %s, want 207 with one line's outcome", rec.Code, rec.Body.Bytes())
				}
				if out.Results[0].Status != http.StatusBadRequest {
					t.Fatalf("batch line status %d, want 400: %+v", out.Results[0].Status, out.Results[0])
				}
				e = out.Results[0].Error
			} else {
				var out struct {
					Error *apiError `json:"error"`
				}
				if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
					t.Fatalf("got %d %.200s, want 400", rec.Code, rec.Body.Bytes())
				}
				e = out.Error
			}
			if e == nil || e.Code != "bad_request" || !strings.Contains(e.Message, "deeper than 64 levels") {
				t.Fatalf("error %+v, want bad_request naming the limit of 64 levels", e)
			}
		})
	}
}

// TestMetadataSizeLimit: metadata beyond MaxMetadataBytes is a 400 naming the
// limit, decided before the metadata is built as Go values (a 1 MiB array of
// numbers once cost about 49 MB to decode); metadata at the limit, null or
// absent passes that check, and metadata that is not an object is refused.
func TestMetadataSizeLimit(t *testing.T) {
	wide := func(n int) json.RawMessage {
		var b bytes.Buffer
		b.WriteString(`{"a": [`)
		for b.Len() < n-3 {
			b.WriteString("0,")
		}
		b.WriteString("0]}")
		return b.Bytes()
	}
	text, class := "x", "public"
	tests := []struct {
		name    string
		meta    json.RawMessage
		wantErr string
	}{
		{"absent", nil, ""},
		{"null", json.RawMessage("null"), ""},
		{"at the limit", wide(MaxMetadataBytes), ""},
		{"one byte over", wide(MaxMetadataBytes + 1), "the limit is 65536"},
		{"1 MiB", wide(1 << 20), "the limit is 65536"},
		{"an array", json.RawMessage(`[1, 2]`), "metadata must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DocumentRequest{Text: &text, Classification: &class, Metadata: tt.meta}
			_, err := d.document(context.Background(), nil, "wholesale", "d1")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("document() = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("document() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	// Through the decoder: a 1 MiB metadata array decodes without building it.
	body := append([]byte(`{"text": "x", "classification": "public", "metadata": `), wide(1<<20)...)
	body = append(body, '}')
	var req DocumentRequest
	allocs := testing.AllocsPerRun(3, func() {
		req = DocumentRequest{}
		if err := DecodeStrict(body, &req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 200 {
		t.Errorf("decoding a body with 1 MiB of metadata made %v allocations; the metadata must stay raw", allocs)
	}
	if _, err := req.document(context.Background(), nil, "wholesale", "d1"); err == nil || !strings.Contains(err.Error(), "the limit is 65536") {
		t.Errorf("document() = %v, want the metadata limit", err)
	}
}

// TestRetrievePolicyLimits: a policy field over the server's limit is a
// 400 naming the field, the limit and the flag that sets it, read before
// the ranges; the limits are the server's configuration (the retriever
// applies none: replay scripts keep SPEC section 9's ranges).
func TestRetrievePolicyLimits(t *testing.T) {
	def := newTestServer(t)
	low := newRerankServer(t, Config{Limits: retrieval.Limits{TopN: 60, PRFTerms: 12}})
	reader := testToken(t, RoleReader)
	tests := []struct {
		name   string
		srv    *Server
		policy string
		want   string
	}{
		{"top_n", def, `{"top_n": 201}`, "policy top_n 201 must be at most 200: this server's limit on what one retrieve may cost (cordon serve --max-top-n)"},
		{"rerank_depth", def, `{"rerank_depth": 10000}`, "policy rerank_depth 10000 must be at most 200: this server's limit on what one retrieve may cost (cordon serve --max-rerank-depth)"},
		{"limit", def, `{"limit": 401}`, "policy limit 401 must be at most 400: this server's limit on what one retrieve may cost (cordon serve --max-limit)"},
		{"prf_docs", def, `{"prf_docs": 10000, "prf_terms": 10000, "top_n": 10000}`, "policy top_n 10000 must be at most 200"},
		{"prf_docs alone", def, `{"prf_docs": 51}`, "(cordon serve --max-prf-docs)"},
		{"prf_terms", def, `{"prf_terms": 51}`, "policy prf_terms 51 must be at most 50: this server's limit on what one retrieve may cost (cordon serve --max-prf-terms)"},
		{"a configured top_n limit", low, `{"top_n": 61}`, "policy top_n 61 must be at most 60: this server's limit on what one retrieve may cost (cordon serve --max-top-n)"},
		{"a configured prf_terms limit", low, `{"prf_terms": 13}`, "policy prf_terms 13 must be at most 12"},
		{"the other limits of a configured server are the defaults", low, `{"rerank_depth": 201}`, "policy rerank_depth 201 must be at most 200"},
		{"a negative document weight", def, `{"rrf_weights": {"doc": -1}}`, "rrf_weights.doc -1 must be a finite number >= 0"},
		{"over a limit and out of range: the limit is read first", def, `{"top_n": 100000, "rrf_k": 0}`, "policy top_n 100000 must be at most 200"},
		{"in the limits, out of range", def, `{"top_n": 200, "rrf_k": 0}`, "rrf_k 0 must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/tenants/wholesale/retrieve", strings.NewReader(`{"query": "hold", "policy": `+tt.policy+`}`))
			req.Header.Set("Authorization", "Bearer "+reader)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			tt.srv.Handler().ServeHTTP(rec, req)
			var body errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusBadRequest || body.Error.Code != "bad_request" || !strings.Contains(body.Error.Message, tt.want) {
				t.Fatalf("got %d %s, want 400 bad_request with %q", rec.Code, rec.Body, tt.want)
			}
		})
	}
}
