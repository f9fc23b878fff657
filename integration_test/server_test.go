package integration_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

const testSecret = "cordon-test-secret-0123456789abcdef0123456789"

// apiServer is a real Cordon server on a loopback port over a fresh,
// migrated database.
type apiServer struct {
	url        string
	metricsURL string // the metrics listener, when serverOpts.metrics
	dbURL      string
	store      *postgres.Store
	keys       *audit.Keyring // nil: unkeyed audit chains
	client     *http.Client
	close      func()
}

// servePaths are the server's two query paths, for tests that run on
// both: ranking in SQL (no cache) and in memory (a cache that holds the
// test's tenants).
var servePaths = []struct {
	name  string
	cache int64
}{{"sql", 0}, {"in-memory", 1 << 28}}

type serverOpts struct {
	dbURL    string          // reuse this database (else a fresh one)
	storeURL string          // connect the store here (e.g. through a proxy)
	cache    int64           // postgres.Options.CacheBytes: the in-memory query path
	replicas []string        // postgres.Options.Replicas
	models   *embed.Registry // postgres.Options.Models
	cfg      server.Config
	// auditKeys keys the audit chains; nil means testKeyring("k1"), unless
	// unkeyed is set.
	auditKeys *audit.Keyring
	unkeyed   bool
	metrics   bool // also serve the metrics listener
	// maxConns is the store's pool size (0: 16).
	maxConns int32
	// listener, when set, wraps the API listener (to observe connections).
	listener func(net.Listener) net.Listener
}

// testKeyring returns a keyring holding a fixed test key per id; the first
// id is active.
func testKeyring(ids ...string) *audit.Keyring {
	k := &audit.Keyring{Active: ids[0], Keys: map[string][]byte{}}
	for _, id := range ids {
		h := sha256.Sum256([]byte("cordon test audit key " + id))
		k.Keys[id] = h[:]
	}
	return k
}

// keyringFile writes k in the keyring file format and returns its path.
func keyringFile(t *testing.T, k *audit.Keyring) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test keyring\n")
	for id, key := range k.Keys {
		fmt.Fprintf(&b, "%s %s\n", id, base64.StdEncoding.EncodeToString(key))
	}
	p := filepath.Join(t.TempDir(), "audit.keys")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startAPIServerScoped starts a server; the caller stops it with close.
func startAPIServerScoped(t testing.TB, o serverOpts) *apiServer {
	t.Helper()
	ctx := context.Background()
	dbURL := o.dbURL
	if dbURL == "" {
		dbURL = newDatabase(t)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	storeURL := dbURL
	if o.storeURL != "" {
		storeURL = o.storeURL
	}
	keys := o.auditKeys
	if keys == nil && !o.unkeyed {
		keys = testKeyring("k1")
	}
	conns := o.maxConns
	if conns == 0 {
		conns = 16
	}
	st, err := postgres.Open(ctx, storeURL, postgres.Options{MaxConns: conns, CacheBytes: o.cache, AuditKeys: keys, Replicas: o.replicas, Models: o.models})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	v, err := server.NewVerifier(ctx, server.AuthConfig{HS256Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.cfg
	if os.Getenv("CORDON_TEST_SERVER_LOG") != "" {
		cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	srv := server.New(cfg, st, v)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.listener != nil {
		ln = o.listener(ln)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	serving := 1
	go func() { done <- srv.Serve(sctx, ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	a := &apiServer{url: "http://" + ln.Addr().String(), dbURL: dbURL, store: st, keys: keys, client: &http.Client{Timeout: 60 * time.Second, Transport: tr}}
	if o.metrics {
		mln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		serving++
		go func() { done <- srv.ServeMetrics(sctx, mln) }()
		a.metricsURL = "http://" + mln.Addr().String()
	}
	var once sync.Once
	a.close = func() {
		once.Do(func() {
			cancel()
			for range serving {
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}
			tr.CloseIdleConnections()
			st.Close()
		})
	}
	return a
}

// startAPIServer starts a server that stops when the test ends.
func startAPIServer(t testing.TB, o serverOpts) *apiServer {
	t.Helper()
	a := startAPIServerScoped(t, o)
	t.Cleanup(a.close)
	return a
}

// tok mints a test token. roles may include "tenant=x", "clearance=y" and
// "barrier=z" settings among the roles, to keep call sites short.
func tok(t testing.TB, sub string, settings ...string) string {
	t.Helper()
	c := server.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}
	for _, s := range settings {
		k, v, ok := strings.Cut(s, "=")
		switch {
		case !ok:
			c.Roles = append(c.Roles, s)
		case k == "tenant":
			c.Tenant = v
		case k == "clearance":
			c.Clearance = v
		case k == "barrier":
			c.Barriers = append(c.Barriers, v)
		default:
			t.Fatalf("bad token setting %q", s)
		}
	}
	s, err := server.MintHS256(testSecret, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type resp struct {
	status int
	body   []byte
	header http.Header
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v: %q", r.status, err, r.body)
	}
	return m
}

func (r resp) errCode(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// call sends a request; body may be a string, []byte or a value to encode.
// contentType "" means application/json when there is a body.
func (a *apiServer) call(t testing.TB, method, path, token string, body any, contentType ...string) resp {
	t.Helper()
	r, err := a.try(method, path, token, body, contentType...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (a *apiServer) try(method, path, token string, body any, contentType ...string) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		return resp{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	switch {
	case len(contentType) > 0:
		if contentType[0] != "" {
			req.Header.Set("Content-Type", contentType[0])
		}
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.client.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, err
	}
	return resp{status: res.StatusCode, body: data, header: res.Header}, nil
}

func (a *apiServer) want(t testing.TB, r resp, status int) resp {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") && status != http.StatusOK {
		t.Fatalf("error response Content-Type %q, want JSON", r.header.Get("Content-Type"))
	}
	return r
}

// seed creates tenants and puts documents as their admins and writers.
func (a *apiServer) seed(t *testing.T) {
	t.Helper()
	admin := tok(t, "root", "admin")
	for _, tn := range []string{"wholesale", "retail"} {
		a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": tn}), http.StatusCreated)
	}
	ww := tok(t, "w", "tenant=wholesale", "writer")
	docs := []struct{ id, text, class string }{
		{"pay-001", "# Payments\nPMT-771 hold release requires dual approval by treasury.", "confidential"},
		{"pay-002", "# Payments\nStandard settlement window for wholesale payments is T+1.", "internal"},
		{"memo/secret", "# Deal\nProject Falcon acquisition hold: treasury approval pending.", "restricted"},
	}
	for _, d := range docs {
		a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/"+d.id, ww,
			map[string]any{"text": d.text, "classification": d.class, "as_of_tick": 100}), http.StatusOK)
	}
	rw := tok(t, "w", "tenant=retail", "writer")
	a.want(t, a.call(t, "PUT", "/v1/tenants/retail/documents/r-1", rw,
		map[string]any{"text": "Retail treasury hold approval card limits.", "classification": "public"}), http.StatusOK)
}

func resultIDs(t *testing.T, m map[string]any) []string {
	t.Helper()
	rs, ok := m["results"].([]any)
	if !ok {
		t.Fatalf("no results list in %v", m)
	}
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.(map[string]any)["chunk_id"].(string))
	}
	return ids
}

func TestServerEndToEnd(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	admin := tok(t, "root", "admin")
	a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "wholesale"}), http.StatusCreated)
	a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "wholesale"}), http.StatusOK)

	w := tok(t, "writer1", "tenant=wholesale", "writer")
	r := a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/pay-001", w, map[string]any{
		"text": "# Payments\nPMT-771 hold release requires dual approval.\n# Limits\nDaily limit is 5m.", "classification": "confidential",
		"barriers": []string{}, "as_of_tick": 100, "title": "Payments", "metadata": map[string]any{"owner": "treasury"},
	}), http.StatusOK).json(t)
	chunks := r["chunks"].([]any)
	if len(chunks) != 2 {
		t.Fatalf("put returned %d chunks, want 2: %v", len(chunks), r)
	}
	c0 := chunks[0].(map[string]any)
	if c0["chunk_id"] != "pay-001::0" || c0["section"] != "Payments" || c0["start_char"] != float64(11) {
		t.Fatalf("first chunk = %v", c0)
	}

	reader := tok(t, "alice", "tenant=wholesale", "clearance=confidential", "reader")
	res := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold", "now_tick": 120}), http.StatusOK).json(t)
	if ids := resultIDs(t, res); len(ids) != 1 || ids[0] != "pay-001::0" {
		t.Fatalf("retrieve ids = %v, want [pay-001::0]", ids)
	}
	first := res["results"].([]any)[0].(map[string]any)
	if !strings.Contains(first["text"].(string), "PMT-771") || first["end_char"] == nil || first["rerank"] == nil {
		t.Fatalf("result lacks text, span or scores: %v", first)
	}
	if _, ok := res["degraded"].([]any); !ok {
		t.Fatalf("no degraded list: %v", res)
	}
	if _, ok := res["expansion"]; ok {
		t.Fatalf("expansion without prf_docs: %v", res)
	}
	// Query expansion: the added terms come back, best first.
	res = a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold", "now_tick": 120,
		"policy": map[string]any{"prf_docs": 1, "prf_terms": 2, "prf_weight": 0.3}}), http.StatusOK).json(t)
	if exp, _ := res["expansion"].([]any); len(exp) != 2 {
		t.Fatalf("expansion = %v, want two terms", res["expansion"])
	}
	// Document evidence (the service profile's rrf_weights.doc 1): the
	// result carries its document's rank; weight 0 leaves it out.
	if first["doc_rank"] != float64(1) {
		t.Fatalf("doc_rank under the service profile = %v, want 1", first["doc_rank"])
	}
	res = a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold", "now_tick": 120,
		"policy": map[string]any{"rrf_weights": map[string]any{"doc": 0}}}), http.StatusOK).json(t)
	if rs := res["results"].([]any); len(rs) != 1 {
		t.Fatalf("retrieve with rrf_weights.doc 0 = %v, want pay-001::0", rs)
	} else if _, ok := rs[0].(map[string]any)["doc_rank"]; ok {
		t.Fatalf("doc_rank with rrf_weights.doc 0: %v", rs[0])
	}
	// Defaults: now_tick from the server clock.
	res = a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "daily limit"}), http.StatusOK).json(t)
	if nt := res["now_tick"].(float64); nt < float64(time.Now().Unix()-60) {
		t.Fatalf("default now_tick = %v, want the server clock", nt)
	}

	g := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, map[string]any{
		"answer": "PMT-771 hold release requires dual approval. The moon is cheese.", "chunk_ids": []string{"pay-001::0", "pay-001::1"},
	}), http.StatusOK).json(t)
	cl := g["claims"].([]any)
	if len(cl) != 2 || cl[0].(map[string]any)["supported"] != true || cl[1].(map[string]any)["supported"] != false || g["is_grounded"] != false {
		t.Fatalf("ground = %v", g)
	}
	if cl[0].(map[string]any)["chunk_id"] != "pay-001::0" {
		t.Fatalf("claim cites %v, want pay-001::0", cl[0])
	}
	g = a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, map[string]any{
		"claims": []string{"daily limit is 5m"}, "chunk_ids": []string{"pay-001::0", "pay-001::1"},
	}), http.StatusOK).json(t)
	if g["coverage"] != float64(1) {
		t.Fatalf("ground claims = %v", g)
	}

	as := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/assemble", reader, map[string]any{
		"question": "What releases a PMT-771 hold?", "chunk_ids": []string{"pay-001::0", "pay-001::1"}, "budget_tokens": 100,
		"instructions": "Answer from the sources.", "tool_schema": "", "policy": "cite spans",
	}), http.StatusOK).json(t)
	if inc := as["included"].([]any); len(inc) == 0 || inc[0] != "pay-001::0" {
		t.Fatalf("assemble = %v", as)
	}
	if !strings.Contains(as["text"].(string), "[source pay-001::0 | pay-001 | Payments |") {
		t.Fatalf("assembled text lacks the citation block: %q", as["text"])
	}
	r2 := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/assemble", reader, map[string]any{
		"question": strings.Repeat("long question ", 50), "chunk_ids": []string{}, "budget_tokens": 10,
	}), http.StatusBadRequest)
	if r2.errCode(t) != "budget_too_small" {
		t.Fatalf("impossible budget: %s", r2.body)
	}

	a.want(t, a.call(t, "DELETE", "/v1/tenants/wholesale/documents/pay-001", w, nil), http.StatusOK)
	a.want(t, a.call(t, "DELETE", "/v1/tenants/wholesale/documents/pay-001", w, nil), http.StatusNotFound)
	res = a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold", "now_tick": 120}), http.StatusOK).json(t)
	if ids := resultIDs(t, res); len(ids) != 0 {
		t.Fatalf("retrieve after delete = %v", ids)
	}
}

func TestServerBatch(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.want(t, a.call(t, "POST", "/v1/tenants", tok(t, "root", "admin"), map[string]string{"tenant": "wholesale"}), http.StatusCreated)
	w := tok(t, "w", "tenant=wholesale", "writer")
	body := strings.Join([]string{
		`{"doc_id": "a/1", "text": "alpha beta gamma", "classification": "public"}`,
		``,
		`{"doc_id": "a/2", "text": "delta", "classification": "secret"}`,
		`{"doc_id": "a/3", "text": "epsilon", "classification": "public", "bogus": 1}`,
		`{"doc_id": "a 4", "text": "zeta", "classification": "public"}`,
		`{"doc_id": "a/5", "text": "eta theta", "classification": "internal", "as_of_tick": 7}`,
	}, "\n")
	// Some lines failed: 207, never a bare 200.
	r := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/documents:batch", w, body, "application/x-ndjson"), http.StatusMultiStatus).json(t)
	if r["succeeded"] != float64(2) || r["failed"] != float64(3) {
		t.Fatalf("batch = %v", r)
	}
	// Every line stored: 200.
	ok := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/documents:batch", w,
		`{"doc_id": "b/1", "text": "iota kappa", "classification": "public"}`+"\n", "application/x-ndjson"), http.StatusOK).json(t)
	if ok["succeeded"] != float64(1) || ok["failed"] != float64(0) {
		t.Fatalf("all-good batch = %v", ok)
	}
	var statuses []int
	for _, o := range r["results"].([]any) {
		statuses = append(statuses, int(o.(map[string]any)["status"].(float64)))
	}
	if fmt.Sprint(statuses) != "[200 400 400 400 200]" {
		t.Fatalf("batch statuses = %v: %v", statuses, r)
	}
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/documents:batch", w, body), http.StatusUnsupportedMediaType)
}

// TestServerStatusCodes covers every error status the API gives for bad
// requests (503 is in TestServerDatabaseOutage).
func TestServerStatusCodes(t *testing.T) {
	a := startAPIServer(t, serverOpts{cfg: server.Config{MaxBodyBytes: 4096, MaxDocumentBytes: 64 << 10}})
	a.seed(t)
	reader := tok(t, "alice", "tenant=wholesale", "clearance=restricted", "reader")
	writer := tok(t, "w", "tenant=wholesale", "writer")
	expired, _ := server.MintHS256(testSecret, server.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "x", ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Hour))}, Tenant: "wholesale", Roles: []string{"reader"}})
	noExp, _ := server.MintHS256(testSecret, server.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "x"}, Tenant: "wholesale", Roles: []string{"reader"}})
	noSub, _ := server.MintHS256(testSecret, server.Claims{RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}, Tenant: "wholesale", Roles: []string{"reader"}})
	otherKey, _ := server.MintHS256(strings.Repeat("k", 40), server.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "x", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}, Tenant: "wholesale", Roles: []string{"reader"}})
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, server.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "x", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}, Tenant: "wholesale", Roles: []string{"reader"}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	badRole := tok(t, "x", "tenant=wholesale", "superuser")
	badClearance := tok(t, "x", "tenant=wholesale", "clearance=secret", "reader")

	retrieve := "/v1/tenants/wholesale/retrieve"
	put := "/v1/tenants/wholesale/documents/d1"
	tests := []struct {
		name        string
		method      string
		path        string
		token       string
		body        any
		contentType []string
		status      int
		code        string
	}{
		{"ok", "POST", retrieve, reader, `{"query": "hold"}`, nil, 200, ""},
		{"unknown field", "POST", retrieve, reader, `{"query": "hold", "principal": {"tenant": "retail"}}`, nil, 400, "bad_request"},
		{"case-variant key", "POST", retrieve, reader, `{"Query": "hold"}`, nil, 400, "bad_request"},
		{"duplicate key", "POST", retrieve, reader, `{"query": "hold", "query": "x"}`, nil, 400, "bad_request"},
		{"nested duplicate key", "POST", retrieve, reader, `{"query": "hold", "policy": {"limit": 1, "limit": 2}}`, nil, 400, "bad_request"},
		{"trailing data", "POST", retrieve, reader, `{"query": "hold"} {}`, nil, 400, "bad_request"},
		{"trailing bracket", "POST", retrieve, reader, `{"query": "hold"}]`, nil, 400, "bad_request"},
		{"invalid UTF-8", "POST", retrieve, reader, []byte("{\"query\": \"hold \xff\"}"), nil, 400, "bad_request"},
		{"unpaired surrogate", "POST", retrieve, reader, `{"query": "hold \ud800"}`, nil, 400, "bad_request"},
		{"not an object", "POST", retrieve, reader, `["hold"]`, nil, 400, "bad_request"},
		{"empty body", "POST", retrieve, reader, ``, nil, 400, "bad_request"},
		{"truncated", "POST", retrieve, reader, `{"query": "ho`, nil, 400, "bad_request"},
		{"float tick", "POST", retrieve, reader, `{"query": "hold", "now_tick": 2.0}`, nil, 400, "bad_request"},
		{"negative tick", "POST", retrieve, reader, `{"query": "hold", "now_tick": -1}`, nil, 400, "bad_request"},
		{"tick over 2^62", "POST", retrieve, reader, `{"query": "hold", "now_tick": 4611686018427387905}`, nil, 400, "bad_request"},
		{"limit 0", "POST", retrieve, reader, `{"query": "hold", "policy": {"limit": 0}}`, nil, 400, "bad_request"},
		{"min_score 2", "POST", retrieve, reader, `{"query": "hold", "policy": {"min_score": 2}}`, nil, 400, "bad_request"},
		{"huge top_n", "POST", retrieve, reader, `{"query": "hold", "policy": {"top_n": 99999999}}`, nil, 400, "bad_request"},
		{"prf_docs -1", "POST", retrieve, reader, `{"query": "hold", "policy": {"prf_docs": -1}}`, nil, 400, "bad_request"},
		{"huge prf_terms", "POST", retrieve, reader, `{"query": "hold", "policy": {"prf_docs": 1, "prf_terms": 99999999}}`, nil, 400, "bad_request"},
		{"prf_weight 2", "POST", retrieve, reader, `{"query": "hold", "policy": {"prf_docs": 1, "prf_weight": 2}}`, nil, 400, "bad_request"},
		{"prf ok", "POST", retrieve, reader, `{"query": "hold", "policy": {"prf_docs": 3, "prf_terms": 1, "prf_weight": 1}}`, nil, 200, ""},
		{"qtf_k3 negative", "POST", retrieve, reader, `{"query": "hold hold", "policy": {"qtf_k3": -1}}`, nil, 400, "bad_request"},
		{"qtf_k3 too large", "POST", retrieve, reader, `{"query": "hold hold", "policy": {"qtf_k3": 1001}}`, nil, 400, "bad_request"},
		{"qtf_k3 string", "POST", retrieve, reader, `{"query": "hold hold", "policy": {"qtf_k3": "8"}}`, nil, 400, "bad_request"},
		{"qtf_k3 off", "POST", retrieve, reader, `{"query": "hold hold", "policy": {"qtf_k3": 0}}`, nil, 200, ""},
		{"idf unknown", "POST", retrieve, reader, `{"query": "hold", "policy": {"idf": "lucene"}}`, nil, 400, "bad_request"},
		{"stop_words unknown", "POST", retrieve, reader, `{"query": "the hold", "policy": {"stop_words": "french"}}`, nil, 400, "bad_request"},
		{"stop_words case variant", "POST", retrieve, reader, `{"query": "the hold", "policy": {"stop_words": "English"}}`, nil, 400, "bad_request"},
		{"stop_words english", "POST", retrieve, reader, `{"query": "the hold", "policy": {"stop_words": "english"}}`, nil, 200, ""},
		{"stop_words none", "POST", retrieve, reader, `{"query": "the hold", "policy": {"stop_words": "none"}}`, nil, 200, ""},
		{"idf number", "POST", retrieve, reader, `{"query": "hold", "policy": {"idf": 1}}`, nil, 400, "bad_request"},
		{"idf empty", "POST", retrieve, reader, `{"query": "hold", "policy": {"idf": ""}}`, nil, 400, "bad_request"},
		{"idf plus1", "POST", retrieve, reader, `{"query": "hold", "policy": {"idf": "plus1"}}`, nil, 200, ""},
		{"NUL in query", "POST", retrieve, reader, `{"query": "hold\u0000"}`, nil, 400, "bad_request"},
		{"string for number", "POST", retrieve, reader, `{"query": "hold", "now_tick": "5"}`, nil, 400, "bad_request"},
		{"bad classification", "PUT", put, writer, `{"text": "x y", "classification": "secret"}`, nil, 400, "bad_request"},
		{"missing classification", "PUT", put, writer, `{"text": "x y"}`, nil, 400, "bad_request"},
		{"no token in text", "PUT", put, writer, `{"text": "-- !!", "classification": "public"}`, nil, 400, "bad_request"},
		{"bad barrier", "PUT", put, writer, `{"text": "x", "classification": "public", "barriers": ["a b"]}`, nil, 400, "bad_request"},
		{"bad doc id", "PUT", "/v1/tenants/wholesale/documents/a%20b", writer, `{"text": "x", "classification": "public"}`, nil, 400, "bad_request"},
		{"doc_id in body", "PUT", put, writer, `{"doc_id": "z", "text": "x", "classification": "public"}`, nil, 400, "bad_request"},
		{"NUL in metadata", "PUT", put, writer, `{"text": "x", "classification": "public", "metadata": {"k": "\u0000"}}`, nil, 400, "bad_request"},
		{"metadata keys are free-form", "PUT", put, writer, `{"text": "x", "classification": "public", "metadata": {"Owner": 1}}`, nil, 200, ""},
		{"ground with both", "POST", "/v1/tenants/wholesale/ground", reader, `{"claims": [], "answer": "x", "chunk_ids": []}`, nil, 400, "bad_request"},
		{"ground duplicate ids", "POST", "/v1/tenants/wholesale/ground", reader, `{"claims": ["x"], "chunk_ids": ["pay-001::0", "pay-001::0"]}`, nil, 400, "bad_request"},
		{"ground bad threshold", "POST", "/v1/tenants/wholesale/ground", reader, `{"claims": ["x"], "chunk_ids": [], "threshold": 1.5}`, nil, 400, "bad_request"},
		{"assemble no budget", "POST", "/v1/tenants/wholesale/assemble", reader, `{"question": "x", "chunk_ids": []}`, nil, 400, "bad_request"},
		{"assemble budget 0", "POST", "/v1/tenants/wholesale/assemble", reader, `{"question": "x", "chunk_ids": [], "budget_tokens": 0}`, nil, 400, "bad_request"},
		{"tenant name invalid", "POST", "/v1/tenants", tok(t, "root", "admin"), `{"tenant": "Bad-Name"}`, nil, 400, "bad_request"},
		{"no token", "POST", retrieve, "", `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"garbage token", "POST", retrieve, "not.a.jwt", `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"expired token", "POST", retrieve, expired, `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"token without exp", "POST", retrieve, noExp, `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"token without sub", "POST", retrieve, noSub, `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"token from another key", "POST", retrieve, otherKey, `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"alg none", "POST", retrieve, none, `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"no known role", "POST", retrieve, badRole, `{"query": "hold"}`, nil, 403, "forbidden"},
		{"bad clearance claim", "POST", retrieve, badClearance, `{"query": "hold"}`, nil, 401, "unauthorized"},
		{"reader cannot write", "PUT", put, reader, `{"text": "x", "classification": "public"}`, nil, 403, "forbidden"},
		{"reader cannot delete", "DELETE", "/v1/tenants/wholesale/documents/pay-001", reader, nil, nil, 403, "forbidden"},
		{"reader cannot batch", "POST", "/v1/tenants/wholesale/documents:batch", reader, "{}", []string{"application/x-ndjson"}, 403, "forbidden"},
		{"writer cannot retrieve", "POST", retrieve, writer, `{"query": "hold"}`, nil, 403, "forbidden"},
		{"reader cannot create tenants", "POST", "/v1/tenants", reader, `{"tenant": "x"}`, nil, 403, "forbidden"},
		{"other tenant", "POST", "/v1/tenants/retail/retrieve", reader, `{"query": "hold"}`, nil, 404, "not_found"},
		{"unknown route", "GET", "/v2/nothing", reader, nil, nil, 404, "not_found"},
		{"wrong method", "GET", retrieve, reader, nil, nil, 405, "method_not_allowed"},
		{"body over limit", "POST", retrieve, reader, `{"query": "` + strings.Repeat("a", 5000) + `"}`, nil, 413, "payload_too_large"},
		{"document over limit", "PUT", put, writer, `{"classification": "public", "text": "` + strings.Repeat("a ", 40000) + `"}`, nil, 413, "payload_too_large"},
		{"text/plain", "POST", retrieve, reader, `{"query": "hold"}`, []string{"text/plain"}, 415, "unsupported_media_type"},
		{"no content type", "POST", retrieve, reader, `{"query": "hold"}`, []string{""}, 415, "unsupported_media_type"},
		{"latin-1 charset", "POST", retrieve, reader, `{"query": "hold"}`, []string{"application/json; charset=latin1"}, 415, "unsupported_media_type"},
		{"charset utf-8 is fine", "POST", retrieve, reader, `{"query": "hold"}`, []string{"application/json; charset=utf-8"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.call(t, tt.method, tt.path, tt.token, tt.body, tt.contentType...)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.code != "" {
				if got := r.errCode(t); got != tt.code {
					t.Fatalf("error code %q, want %q: %s", got, tt.code, r.body)
				}
				if bytes.Contains(r.body, []byte("goroutine")) || bytes.Contains(r.body, []byte(".go:")) {
					t.Fatalf("response leaks internals: %s", r.body)
				}
			}
			if tt.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("401 without WWW-Authenticate")
			}
			if r.header.Get("X-Request-Id") == "" {
				t.Fatalf("no X-Request-Id")
			}
		})
	}
}

// TestServerCrossTenantProbes probes every tenant endpoint with a token of
// tenant wholesale (holding every role): another existing tenant, a tenant
// that does not exist and a name that is not even valid must all give the
// same 404 body, whatever the method's body says.
func TestServerCrossTenantProbes(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	all := tok(t, "mallory", "tenant=wholesale", "clearance=restricted", "reader", "writer", "auditor", "admin")
	endpoints := []struct {
		method, path string
		body         string
		ct           string
	}{
		{"PUT", "/v1/tenants/%s/documents/r-1", `{"text": "pwned", "classification": "public"}`, "application/json"},
		{"PUT", "/v1/tenants/%s/documents/new-doc", `{"text": "pwned", "classification": "public"}`, "application/json"},
		{"DELETE", "/v1/tenants/%s/documents/r-1", ``, ""},
		{"DELETE", "/v1/tenants/%s/documents/missing", ``, ""},
		{"POST", "/v1/tenants/%s/documents:batch", `{"doc_id": "x", "text": "pwned", "classification": "public"}`, "application/x-ndjson"},
		{"POST", "/v1/tenants/%s/retrieve", `{"query": "treasury hold"}`, "application/json"},
		{"POST", "/v1/tenants/%s/ground", `{"claims": ["treasury"], "chunk_ids": ["r-1::0"]}`, "application/json"},
		{"POST", "/v1/tenants/%s/assemble", `{"question": "q", "chunk_ids": ["r-1::0"], "budget_tokens": 100}`, "application/json"},
		// Bad bodies and media types must not change the answer either.
		{"POST", "/v1/tenants/%s/retrieve", `{"bogus": `, "text/plain"},
	}
	var want []byte
	for _, e := range endpoints {
		for _, tenant := range []string{"retail", "nosuchtenant", "Not-Valid", "wholesale_"} {
			path := fmt.Sprintf(e.path, tenant)
			var body any
			if e.body != "" {
				body = e.body
			}
			r := a.call(t, e.method, path, all, body, e.ct)
			if r.status != http.StatusNotFound {
				t.Fatalf("%s %s: status %d, want 404: %s", e.method, path, r.status, r.body)
			}
			if want == nil {
				want = r.body
			}
			if !bytes.Equal(r.body, want) {
				t.Fatalf("%s %s: body %s differs from %s", e.method, path, r.body, want)
			}
		}
	}
	// Nothing changed in retail.
	rr := tok(t, "r", "tenant=retail", "reader")
	res := a.want(t, a.call(t, "POST", "/v1/tenants/retail/retrieve", rr, map[string]any{"query": "pwned treasury"}), http.StatusOK).json(t)
	if ids := resultIDs(t, res); len(ids) != 1 || ids[0] != "r-1::0" {
		t.Fatalf("retail after probes: %v", ids)
	}
	// And the hidden-chunk 404 of ground and assemble is the same body too.
	pub := tok(t, "p", "tenant=wholesale", "clearance=public", "reader")
	for _, ids := range [][]string{{"memo/secret::0"}, {"no-such::0"}, {"pay-002::0", "memo/secret::0"}} {
		r := a.call(t, "POST", "/v1/tenants/wholesale/ground", pub, map[string]any{"claims": []string{"x"}, "chunk_ids": ids})
		if r.status != 404 || !bytes.Equal(r.body, want) {
			t.Fatalf("ground %v: %d %s, want the same 404", ids, r.status, r.body)
		}
		r = a.call(t, "POST", "/v1/tenants/wholesale/assemble", pub, map[string]any{"question": "q", "chunk_ids": ids, "budget_tokens": 100})
		if r.status != 404 || !bytes.Equal(r.body, want) {
			t.Fatalf("assemble %v: %d %s, want the same 404", ids, r.status, r.body)
		}
	}
}

func TestServerCountersOnlyForAuditors(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	body := map[string]any{"query": "treasury hold approval", "now_tick": 150}
	reader := tok(t, "p", "tenant=wholesale", "clearance=internal", "reader")
	r := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, body), http.StatusOK)
	for _, k := range []string{"considered", "excluded_by_entitlement", "excluded_by_freshness", "index_version"} {
		if bytes.Contains(r.body, []byte(`"`+k+`"`)) {
			t.Fatalf("a reader's response has %q: %s", k, r.body)
		}
	}
	auditor := tok(t, "au", "tenant=wholesale", "clearance=internal", "reader", "auditor")
	m := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", auditor, body), http.StatusOK).json(t)
	if m["excluded_by_entitlement"].(float64) < 1 || m["considered"].(float64) < 2 {
		t.Fatalf("auditor counters = %v, want hidden chunks counted", m)
	}
	if _, ok := m["index_version"].(float64); !ok {
		t.Fatalf("auditor response has no index_version: %v", m)
	}
	for _, id := range resultIDs(t, m) {
		if strings.HasPrefix(id, "memo/") || strings.HasPrefix(id, "pay-001") {
			t.Fatalf("internal clearance saw %s", id)
		}
	}
	// An auditor without reader cannot retrieve at all.
	onlyAuditor := tok(t, "au", "tenant=wholesale", "auditor")
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", onlyAuditor, body), http.StatusForbidden)
}

// TestServerVisibilityRecheck raises a document's classification after a
// reader retrieved it: ground and assemble with its chunk id must then 404.
func TestServerVisibilityRecheck(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	reader := tok(t, "c", "tenant=wholesale", "clearance=confidential", "reader")
	m := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold release"}), http.StatusOK).json(t)
	ids := resultIDs(t, m)
	if len(ids) == 0 || ids[0] != "pay-001::0" {
		t.Fatalf("retrieve = %v", ids)
	}
	ground := map[string]any{"claims": []string{"PMT-771 hold release requires dual approval"}, "chunk_ids": ids}
	assembleBody := map[string]any{"question": "q", "chunk_ids": ids, "budget_tokens": 500}
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, ground), http.StatusOK)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/assemble", reader, assembleBody), http.StatusOK)

	w := tok(t, "w", "tenant=wholesale", "writer")
	a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/pay-001", w, map[string]any{
		"text": "# Payments\nPMT-771 hold release requires dual approval by treasury.", "classification": "restricted", "as_of_tick": 100,
	}), http.StatusOK)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, ground), http.StatusNotFound)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/assemble", reader, assembleBody), http.StatusNotFound)
	// Same for a barrier added later.
	a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/pay-002", w, map[string]any{
		"text": "# Payments\nStandard settlement window for wholesale payments is T+1.", "classification": "internal", "barriers": []string{"deal-x"},
	}), http.StatusOK)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, map[string]any{"claims": []string{"x"}, "chunk_ids": []string{"pay-002::0"}}), http.StatusNotFound)
	withBarrier := tok(t, "c", "tenant=wholesale", "clearance=confidential", "barrier=deal-x", "reader")
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", withBarrier, map[string]any{"claims": []string{"x"}, "chunk_ids": []string{"pay-002::0"}}), http.StatusOK)
}

func TestServerHealthAndReady(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.want(t, a.call(t, "GET", "/healthz", "", nil), http.StatusOK)
	a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusOK)
	// Migrations behind the binary: not ready.
	if err := migrate.DownTo(context.Background(), a.dbURL, 3); err != nil {
		t.Fatal(err)
	}
	r := a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusServiceUnavailable)
	if r.errCode(t) != "not_ready" {
		t.Fatalf("readyz = %s", r.body)
	}
	if _, err := migrate.Up(context.Background(), a.dbURL); err != nil {
		t.Fatal(err)
	}
	a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusOK)
}

// TestServerDeepNesting: a writer's PUT whose metadata nests 3,000,000
// arrays (6 MB, inside the document limit) is a 400 naming the depth limit,
// and the server keeps serving; it once overflowed the goroutine stack and
// took the process down.
func TestServerDeepNesting(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	w := tok(t, "w", "tenant=wholesale", "writer")
	const depth = 3_000_000
	body := `{"text": "x", "classification": "public", "metadata": {"a": ` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`
	r := a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/deep", w, body), http.StatusBadRequest)
	if msg, _ := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "deeper than 64 levels") {
		t.Fatalf("message %q, want it to name the limit of 64 levels", msg)
	}
	a.want(t, a.call(t, "GET", "/healthz", "", nil), http.StatusOK)
	a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/deep", w,
		map[string]any{"text": "Shallow metadata is fine.", "classification": "public", "metadata": map[string]any{"a": [][]int{{1}}}}), http.StatusOK)
}
