package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgxpool"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/htmltext"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// memStore serves documents and retrieves from the in-memory reference
// store; the other methods are the nil embedded Store's.
type memStore struct {
	Store
	mem  *memory.Store
	docs map[string]cordontype.Document // as stored, by doc id
}

// Pool: no database behind this store.
func (m *memStore) Pool() *pgxpool.Pool { return nil }

func newMemStore(t *testing.T) *memStore {
	t.Helper()
	m, err := memory.New(index.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	return &memStore{mem: m, docs: map[string]cordontype.Document{}}
}

func (m *memStore) Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error) {
	cs, err := m.mem.Put(ctx, doc)
	if err == nil {
		m.docs[doc.DocID] = doc
	}
	return cs, err
}

func (m *memStore) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	return m.mem.Rank(ctx, req)
}

func (m *memStore) RankVersion(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, int64, error) {
	r, err := m.mem.Rank(ctx, req)
	return r, 1, err
}

func (m *memStore) TenantModel(ctx context.Context, tenant string) (embed.Spec, error) {
	return m.mem.TenantModel(ctx, tenant)
}

func (m *memStore) EmbedQuery(ctx context.Context, spec embed.Spec, text string, tokens []string) (*retrieval.DenseQuery, error) {
	return m.mem.EmbedQuery(ctx, spec, text, tokens)
}

func (m *memStore) IDF(ctx context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	return m.mem.IDF(ctx, p, terms)
}

func (m *memStore) Models() *embed.Registry { return nil }
func (m *memStore) HasReplicas() bool       { return false }
func (m *memStore) ReadStats() postgres.ReadStats {
	return postgres.ReadStats{}
}
func (m *memStore) AppendAudit(_ context.Context, _ string, r audit.Record) (audit.Record, error) {
	return r, nil
}

const guideHTML = `<!doctype html><html><head><title>Settlement guide</title><script>var secret = "scriptword";</script></head>
<body><nav><a href="/">Home</a> navword</nav>
<main><h1>Settlement</h1><p>Intro to netting.</p>
<h2>Holds &amp; releases</h2><p>A PMT-771 hold needs dual approval before release.</p>
<pre><code class="language-sh"># release it
cordon release PMT-771</code></pre></main></body></html>`

// PUT and documents:batch take "format": "html": the stored text is the
// converted one, the <title> stands in for a missing title, and an h2's
// text is its chunks' section.
func TestServerHTMLDocuments(t *testing.T) {
	st := newMemStore(t)
	srv := New(Config{}, st, newHS256Verifier(t, AuthConfig{}))
	writer := signMap(t, map[string]any{"sub": "w", "tenant": "bank", "clearance": "restricted", "roles": []string{RoleWriter, RoleReader}, "exp": inAnHour()})
	call := func(method, path, ctype, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+writer)
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w
	}
	doc := func(fields map[string]any) string {
		t.Helper()
		b, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	w := call("PUT", "/v1/tenants/bank/documents/guide", "application/json",
		doc(map[string]any{"text": guideHTML, "classification": "internal", "format": "html"}))
	if w.Code != http.StatusOK {
		t.Fatalf("PUT html: %d %s", w.Code, w.Body.String())
	}
	var put struct{ Chunks []ChunkJSON }
	if err := json.Unmarshal(w.Body.Bytes(), &put); err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, c := range put.Chunks {
		sections = append(sections, c.Section)
	}
	if strings.Join(sections, "|") != "Settlement|Holds & releases" {
		t.Fatalf("sections %q, want Settlement, Holds & releases", sections)
	}
	stored := st.docs["guide"]
	if stored.Title != "Settlement guide" || strings.Contains(stored.Text, "<") || strings.Contains(stored.Text, "scriptword") ||
		strings.Contains(stored.Text, "navword") || !strings.Contains(stored.Text, "```sh\n# release it\ncordon release PMT-771\n```") {
		t.Fatalf("stored title %q, text %q", stored.Title, stored.Text)
	}

	// A reader retrieves the hold's chunk, cited in the h2's section.
	r := httptest.NewRequest("POST", "/v1/tenants/bank/retrieve", strings.NewReader(`{"query": "PMT-771 hold dual approval", "now_tick": 10}`))
	r.Header.Set("Authorization", "Bearer "+writer)
	r.Header.Set("Content-Type", "application/json")
	rw := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rw, r)
	var got RetrieveResponse
	if err := json.Unmarshal(rw.Body.Bytes(), &got); err != nil || len(got.Results) == 0 {
		t.Fatalf("retrieve: %d %s", rw.Code, rw.Body.String())
	}
	if top := got.Results[0]; top.Section != "Holds & releases" || !strings.Contains(top.Text, "PMT-771 hold") {
		t.Fatalf("top result in section %q: %q; want the h2's section", top.Section, top.Text)
	}

	// A given title wins over <title>; "text" and "markdown" store the
	// text as given.
	w = call("POST", "/v1/tenants/bank/documents:batch", "application/x-ndjson", strings.Join([]string{
		doc(map[string]any{"doc_id": "titled", "text": guideHTML, "classification": "internal", "format": "html", "title": "Mine"}),
		doc(map[string]any{"doc_id": "raw", "text": "<p>kept <b>as</b> is</p>", "classification": "internal", "format": "markdown"}),
		doc(map[string]any{"doc_id": "plain", "text": "# Head\nbody", "classification": "internal", "format": "text"}),
		doc(map[string]any{"doc_id": "odd", "text": "x", "classification": "internal", "format": "HTML"}),
		doc(map[string]any{"doc_id": "deep", "text": strings.Repeat("<div>", 600) + "x", "classification": "internal", "format": "html"}),
		doc(map[string]any{"doc_id": "accented", "text": "<p>caf\u00e9</p>", "classification": "internal", "format": "html"}),
		doc(map[string]any{"doc_id": "empty", "text": "<script>only()</script>", "classification": "internal", "format": "html"}),
	}, "\n"))
	if w.Code != http.StatusMultiStatus {
		t.Fatalf("batch: %d %s", w.Code, w.Body.String())
	}
	var batch struct{ Results []BatchOutcome }
	if err := json.Unmarshal(w.Body.Bytes(), &batch); err != nil {
		t.Fatal(err)
	}
	wantErr := map[int]string{
		4: `format "HTML" is not one of text, markdown, html`,
		5: "html nests more than 512 open elements",
		7: "text has no token",
	}
	for i, res := range batch.Results {
		msg, bad := wantErr[res.Line]
		switch {
		case bad && (res.Status != http.StatusBadRequest || res.Error == nil || !strings.Contains(res.Error.Message, msg)):
			t.Errorf("line %d: got %d %+v, want 400 saying %q", res.Line, res.Status, res.Error, msg)
		case !bad && res.Status != http.StatusOK:
			t.Errorf("line %d (result %d): got %d %+v, want 200", res.Line, i, res.Status, res.Error)
		}
	}
	if d := st.docs["titled"]; d.Title != "Mine" {
		t.Errorf("titled: title %q, want the given one", d.Title)
	}
	if d := st.docs["raw"]; d.Text != "<p>kept <b>as</b> is</p>" {
		t.Errorf("markdown format changed the text: %q", d.Text)
	}
	if d := st.docs["accented"]; d.Text != "café\n" {
		t.Errorf("accented: %q", d.Text)
	}

	// PUT refuses an unknown format with a 400 naming the formats.
	w = call("PUT", "/v1/tenants/bank/documents/x", "application/json", `{"text": "x", "classification": "public", "format": "pdf"}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `format \"pdf\" is not one of text, markdown, html`) {
		t.Fatalf("unknown format: %d %s", w.Code, w.Body.String())
	}
}

// Hostile HTML (10 MiB of list items 500 elements deep, which the parser
// would take minutes over) is a 400 before it is parsed, in a PUT and in a
// batch line; nothing is stored.
func TestServerHTMLHostile(t *testing.T) {
	st := newMemStore(t)
	srv := New(Config{}, st, newHS256Verifier(t, AuthConfig{}))
	writer := signMap(t, map[string]any{"sub": "w", "tenant": "bank", "clearance": "restricted", "roles": []string{RoleWriter, RoleReader}, "exp": inAnHour()})
	hostile := strings.Repeat("<ul><li>", 250) + strings.Repeat("<li>x", (htmltext.MaxBytes-4096)/5)
	body, err := json.Marshal(map[string]any{"doc_id": "deep", "text": hostile, "classification": "internal", "format": "html"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, method, path, ctype string }{
		{"put", "PUT", "/v1/tenants/bank/documents/deep", "application/json"},
		{"batch", "POST", "/v1/tenants/bank/documents:batch", "application/x-ndjson"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := body
			if tt.method == "PUT" {
				b, _ = json.Marshal(map[string]any{"text": hostile, "classification": "internal", "format": "html"})
			}
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(string(b)))
			r.Header.Set("Authorization", "Bearer "+writer)
			r.Header.Set("Content-Type", tt.ctype)
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, r)
			got := w.Body.String()
			if tt.method == "PUT" && w.Code != http.StatusBadRequest || tt.method == "POST" && w.Code != http.StatusMultiStatus ||
				!strings.Contains(got, "bad_request") || !strings.Contains(got, "units of parsing work") {
				t.Fatalf("got %d %.300s, want a 400 bad_request about the parsing work", w.Code, got)
			}
			if len(st.docs) != 0 {
				t.Fatalf("stored %d documents, want none", len(st.docs))
			}
		})
	}
}

// An HTML conversion waits for a free slot of the server's gate until the
// request's deadline, then answers 503; the conversion itself stops at the
// deadline too (a context error, never a 400).
func TestServerHTMLGate(t *testing.T) {
	st := newMemStore(t)
	srv := New(Config{RequestTimeout: 50 * time.Millisecond}, st, newHS256Verifier(t, AuthConfig{}))
	writer := signMap(t, map[string]any{"sub": "w", "tenant": "bank", "clearance": "restricted", "roles": []string{RoleWriter, RoleReader}, "exp": inAnHour()})
	for range cap(srv.html) {
		srv.html <- struct{}{} // every slot taken
	}
	b, _ := json.Marshal(map[string]any{"text": "<p>x</p>", "classification": "internal", "format": "html"})
	r := httptest.NewRequest("PUT", "/v1/tenants/bank/documents/d", strings.NewReader(string(b)))
	r.Header.Set("Authorization", "Bearer "+writer)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "HTML conversions in progress") {
		t.Fatalf("got %d %s, want 503 naming the HTML conversions", w.Code, w.Body.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := htmlGate(nil).convert(ctx, "<p>x</p>"); !errors.Is(err, context.Canceled) {
		t.Fatalf("converting with a done context: got %v, want context.Canceled", err)
	}
	if e := toAPIError(fmt.Errorf("x: %w", context.DeadlineExceeded)); e.Status != http.StatusServiceUnavailable {
		t.Fatalf("a conversion past its deadline: got %d, want 503", e.Status)
	}
}
