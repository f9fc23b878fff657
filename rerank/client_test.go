package rerank_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/internal/redact/redacttest"
	"github.com/cordon-rag/cordon/rerank"
)

// lengthScore is the fake model's score: a text's length, so any mix-up of
// indexes shows.
func lengthScore(s string) float64 { return float64(len(s)) / 100 }

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat("x", i+1)
	}
	return out
}

func newClient(t *testing.T, cfg rerank.Config) *rerank.Client {
	t.Helper()
	c, err := rerank.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// teiServer answers /rerank like text-embeddings-inference, results in
// reverse order, and records every request body.
type teiServer struct {
	mu       sync.Mutex
	requests []map[string]any
	inFlight atomic.Int32
	maxIn    atomic.Int32
}

func (s *teiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxIn.Load()
		if n <= m || s.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/rerank" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "wrong request", http.StatusBadRequest)
		return
	}
	var req struct {
		Query     string   `json:"query"`
		Texts     []string `json:"texts"`
		RawScores *bool    `json:"raw_scores"`
	}
	body, _ := io.ReadAll(r.Body)
	var raw map[string]any
	_ = json.Unmarshal(body, &raw)
	if err := json.Unmarshal(body, &req); err != nil || req.RawScores == nil || *req.RawScores {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, raw)
	s.mu.Unlock()
	type res struct {
		Index int     `json:"index"`
		Score float64 `json:"score"`
		Text  *string `json:"text"`
	}
	out := make([]res, 0, len(req.Texts))
	for i := len(req.Texts) - 1; i >= 0; i-- {
		out = append(out, res{Index: i, Score: lengthScore(req.Texts[i])})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func TestTEIScores(t *testing.T) {
	fake := &teiServer{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c := newClient(t, rerank.Config{URL: srv.URL, API: rerank.TEI, BatchSize: 32})
	in := texts(70)
	got, err := c.Score(context.Background(), "q", in)
	if err != nil {
		t.Fatalf("Score: %v", err)
	}
	want := make([]float64, len(in))
	for i, s := range in {
		want[i] = lengthScore(s)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	var sizes []int
	for _, r := range fake.requests {
		sizes = append(sizes, len(r["texts"].([]any)))
		if r["query"] != "q" || r["raw_scores"] != false {
			t.Errorf("request %v: want query q and raw_scores false", r)
		}
		if _, ok := r["truncate"]; ok {
			t.Errorf("request %v sends truncate without Truncate", r)
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{6, 32, 32}) {
		t.Errorf("batch sizes %v, want 32, 32 and 6", sizes)
	}
	if c.Name() != "tei" {
		t.Errorf("Name() = %q", c.Name())
	}
	// No texts: no request.
	fake.requests = nil
	if got, err := c.Score(context.Background(), "q", nil); err != nil || len(got) != 0 || len(fake.requests) != 0 {
		t.Errorf("Score(no texts) = %v, %v after %d requests; want [], nil, none", got, err, len(fake.requests))
	}
}

func TestTEITruncateAndConcurrency(t *testing.T) {
	fake := &teiServer{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c := newClient(t, rerank.Config{URL: srv.URL + "/", API: rerank.TEI, BatchSize: 2, Concurrency: 1, Truncate: true})
	if _, err := c.Score(context.Background(), "q", texts(9)); err != nil {
		t.Fatalf("Score: %v", err)
	}
	if len(fake.requests) != 5 {
		t.Fatalf("%d requests, want 5", len(fake.requests))
	}
	for _, r := range fake.requests {
		if r["truncate"] != true {
			t.Errorf("request %v: want truncate true", r)
		}
	}
	if m := fake.maxIn.Load(); m != 1 {
		t.Errorf("%d requests in flight at once, want at most 1 (Concurrency 1)", m)
	}
}

func TestCohereScores(t *testing.T) {
	const key = "sk-test-0123456789"
	var got []map[string]any
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/rerank" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		docs := req["documents"].([]any)
		// A provider's extra fields (documents echoed, ids, usage) are
		// ignored; the order is by relevance, not by index.
		var results []map[string]any
		for i := range docs {
			results = append(results, map[string]any{"index": i, "relevance_score": lengthScore(docs[i].(string)), "document": map[string]any{"text": docs[i]}})
		}
		slices.SortFunc(results, func(a, b map[string]any) int {
			return int(100*b["relevance_score"].(float64)) - int(100*a["relevance_score"].(float64))
		})
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "results": results, "meta": map[string]any{}})
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, rerank.Config{URL: srv.URL + "/v1/rerank", API: rerank.Cohere, Model: "jina-reranker-v2", APIKey: key, BatchSize: 4})
	in := texts(6)
	scores, err := c.Score(context.Background(), "payment hold", in)
	if err != nil {
		t.Fatalf("Score: %v", err)
	}
	for i, s := range in {
		if scores[i] != lengthScore(s) {
			t.Errorf("score %d = %v, want %v", i, scores[i], lengthScore(s))
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	for _, r := range got {
		n := len(r["documents"].([]any))
		if r["model"] != "jina-reranker-v2" || r["query"] != "payment hold" || r["top_n"] != float64(n) {
			t.Errorf("request %v: want model, query and top_n = %d", r, n)
		}
	}
	if c.Name() != "cohere" || c.Model() != "jina-reranker-v2" {
		t.Errorf("Name, Model = %q, %q", c.Name(), c.Model())
	}
}

// TestCohereDefaultPath: a base URL gets /v2/rerank.
func TestCohereDefaultPath(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/rerank" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"results": [{"index": 0, "relevance_score": 0.5}]}`)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, rerank.Config{URL: srv.URL, API: rerank.Cohere, Model: "m"})
	if got, err := c.Score(context.Background(), "q", []string{"a"}); err != nil || !slices.Equal(got, []float64{0.5}) {
		t.Fatalf("got %v, %v; want [0.5]", got, err)
	}
}

// TestMalformedResponses: every break of the wire contract is an error
// that names the provider, the path and what was wrong, never scores.
func TestMalformedResponses(t *testing.T) {
	tests := []struct {
		name    string
		api     rerank.API
		status  int
		body    string
		wantErr error
		part    string
	}{
		{"tei missing index", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "result 1 has no index"},
		{"tei duplicate index", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": 0, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "index 0 given twice"},
		{"tei index out of range", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": 3, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "index 3 out of range [0, 3)"},
		{"tei negative index", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": -1, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "index -1 out of range"},
		{"tei fractional index", rerank.TEI, 200, `[{"index": 0.5, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "not the expected JSON"},
		{"tei missing score", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": 1}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "result 1 (index 1) has no score"},
		{"tei null score", rerank.TEI, 200, `[{"index": 0, "score": null}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "has no score"},
		{"tei NaN", rerank.TEI, 200, `[{"index": 0, "score": NaN}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "not the expected JSON"},
		{"tei overflowing score", rerank.TEI, 200, `[{"index": 0, "score": 1e999}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "not the expected JSON"},
		{"tei string score", rerank.TEI, 200, `[{"index": 0, "score": "NaN"}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "not the expected JSON"},
		{"tei too few", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}]`, rerank.ErrBadResponse, "2 results for 3 passages"},
		{"tei too many", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}, {"index": 2, "score": 0.3}]`, rerank.ErrBadResponse, "4 results for 3 passages"},
		{"tei empty list", rerank.TEI, 200, `[]`, rerank.ErrBadResponse, "0 results for 3 passages"},
		{"tei null", rerank.TEI, 200, `null`, rerank.ErrBadResponse, "got null"},
		{"tei object", rerank.TEI, 200, `{"results": []}`, rerank.ErrBadResponse, "not the expected JSON"},
		{"tei not JSON", rerank.TEI, 200, `<html>gateway</html>`, rerank.ErrBadResponse, "not the expected JSON"},
		{"tei trailing data", rerank.TEI, 200, `[{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}] []`, rerank.ErrBadResponse, "data after the JSON value"},
		{"tei 500", rerank.TEI, 500, `{"error": "model crashed", "error_type": "backend"}`, rerank.ErrStatus, `status 500: {"error": "model crashed"`},
		{"tei 413", rerank.TEI, 413, `{"error": "batch size 3 > maximum allowed batch size 2"}`, rerank.ErrStatus, "status 413"},
		{"tei 503 empty", rerank.TEI, 503, ``, rerank.ErrStatus, "status 503: (empty body)"},
		{"tei redirect", rerank.TEI, 307, ``, rerank.ErrStatus, "status 307"},
		{"cohere missing results", rerank.Cohere, 200, `{"id": "x"}`, rerank.ErrBadResponse, `no "results" array`},
		{"cohere missing index", rerank.Cohere, 200, `{"results": [{"relevance_score": 0.1}, {"index": 1, "relevance_score": 0.2}, {"index": 2, "relevance_score": 0.3}]}`, rerank.ErrBadResponse, "result 0 has no index"},
		{"cohere duplicate", rerank.Cohere, 200, `{"results": [{"index": 1, "relevance_score": 0.1}, {"index": 1, "relevance_score": 0.2}, {"index": 2, "relevance_score": 0.3}]}`, rerank.ErrBadResponse, "index 1 given twice"},
		{"cohere out of range", rerank.Cohere, 200, `{"results": [{"index": 0, "relevance_score": 0.1}, {"index": 1, "relevance_score": 0.2}, {"index": 7, "relevance_score": 0.3}]}`, rerank.ErrBadResponse, "index 7 out of range [0, 3)"},
		{"cohere score under another name", rerank.Cohere, 200, `{"results": [{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.3}]}`, rerank.ErrBadResponse, "has no score"},
		{"cohere top_n cut", rerank.Cohere, 200, `{"results": [{"index": 2, "relevance_score": 0.9}]}`, rerank.ErrBadResponse, "1 results for 3 passages"},
		{"cohere 429", rerank.Cohere, 429, `{"message": "rate limited"}`, rerank.ErrStatus, "status 429"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 307 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			c := newClient(t, rerank.Config{URL: srv.URL, API: tt.api, Model: "m"})
			got, err := c.Score(context.Background(), "q", []string{"a", "b", "c"})
			if got != nil || !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.part) {
				t.Fatalf("got %v, %v; want nil and an error wrapping %v mentioning %q", got, err, tt.wantErr, tt.part)
			}
			path := map[rerank.API]string{rerank.TEI: "/rerank", rerank.Cohere: "/v2/rerank"}[tt.api]
			if prefix := "rerank " + string(tt.api) + " POST " + path + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if rerank.OutcomeOf(err) != rerank.Error {
				t.Errorf("OutcomeOf = %q, want error", rerank.OutcomeOf(err))
			}
		})
	}
}

func TestResponseSizeBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"index": 0, "score": 0.5, "text": %q}]`, strings.Repeat("y", 5000))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, rerank.Config{URL: srv.URL, API: rerank.TEI, MaxResponseBytes: 1000})
	if _, err := c.Score(context.Background(), "q", []string{"a"}); !errors.Is(err, rerank.ErrBadResponse) || !strings.Contains(err.Error(), "over 1000 bytes") {
		t.Fatalf("got %v, want a response over 1000 bytes refused", err)
	}
	c = newClient(t, rerank.Config{URL: srv.URL, API: rerank.TEI, MaxResponseBytes: 10000})
	if got, err := c.Score(context.Background(), "q", []string{"a"}); err != nil || !slices.Equal(got, []float64{0.5}) {
		t.Fatalf("within the bound: got %v, %v", got, err)
	}
}

// TestTimeout: a server slower than the caller's budget gives a timeout
// (the context's deadline), and the call returns when the budget ends.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := newClient(t, rerank.Config{URL: srv.URL, API: rerank.TEI, BatchSize: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	got, err := c.Score(ctx, "q", []string{"a", "b", "c"})
	if got != nil || !errors.Is(err, context.DeadlineExceeded) || rerank.OutcomeOf(err) != rerank.Timeout {
		t.Fatalf("got %v, %v; want a timeout", got, err)
	}
	if !strings.HasPrefix(err.Error(), "rerank tei POST /rerank: ") {
		t.Errorf("error %q does not name the provider and path", err)
	}
}

// TestUnreachable: a refused connection is an error (not a timeout) naming
// the path.
func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := newClient(t, rerank.Config{URL: url, API: rerank.TEI})
	_, err := c.Score(context.Background(), "q", []string{"a"})
	if err == nil || rerank.OutcomeOf(err) != rerank.Error || !strings.HasPrefix(err.Error(), "rerank tei POST /rerank: ") {
		t.Fatalf("got %v, want a connection error naming the path", err)
	}
}

// TestKeyNeverInErrors: a server that echoes the Authorization header in
// its error body does not put the key into the error.
func TestKeyNeverInErrors(t *testing.T) {
	const key = "sk-secret-abcdef0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "%s%s is not valid", strings.Repeat(".", 190), r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, rerank.Config{URL: srv.URL, API: rerank.Cohere, Model: "m", APIKey: key})
	_, err := c.Score(context.Background(), "q", []string{"a"})
	if !errors.Is(err, rerank.ErrStatus) {
		t.Fatalf("got %v, want a status error", err)
	}
	if strings.Contains(err.Error(), key[:12]) || strings.Contains(fmt.Sprintf("%v %+v %#v %s", c, c, c, c), key) {
		t.Fatalf("the key leaks: %v", err)
	}
	cfg := rerank.Config{APIKey: key}
	if strings.Contains(fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), key) {
		t.Fatalf("the key leaks: %v", err)
	}
}

// TestKeyNeverInErrorsEncoded: a provider's 401 that echoes the key in any
// encoding (the key in a JSON string with "/" escaped as "\/", percent- or
// HTML-encoded, quoted, base64 or hex) puts no recognisable form of it in
// the error, and the message around it stays.
func TestKeyNeverInErrorsEncoded(t *testing.T) {
	const key = "rk-Ab9/x+Yz=q_~.7Kp"
	for _, e := range redacttest.Encodings {
		t.Run(e.Name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"error":"invalid key Bearer %s"}`, e.Encode(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
			}))
			t.Cleanup(srv.Close)
			c := newClient(t, rerank.Config{URL: srv.URL, API: rerank.TEI, APIKey: key})
			_, err := c.Score(context.Background(), "q", []string{"a"})
			if !errors.Is(err, rerank.ErrStatus) {
				t.Fatalf("got %v, want a status error", err)
			}
			if name, form, leak := redacttest.Leak(err.Error(), key); leak {
				t.Fatalf("the error holds the key (%s %q): %v", name, form, err)
			}
			if !strings.Contains(err.Error(), `{"error":"invalid key Bearer `) || !strings.Contains(err.Error(), "[redacted]") {
				t.Fatalf("got %v, want the answer quoted with [redacted] for the key", err)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  rerank.Config
		part string
	}{
		{"no URL", rerank.Config{API: rerank.TEI}, "no URL"},
		{"unknown API", rerank.Config{URL: "http://x", API: "openai"}, `API "openai"`},
		{"no API", rerank.Config{URL: "http://x"}, `API ""`},
		{"ftp", rerank.Config{URL: "ftp://x", API: rerank.TEI}, `scheme "ftp"`},
		{"no host", rerank.Config{URL: "http:///rerank", API: rerank.TEI}, "no host"},
		{"credentials in URL", rerank.Config{URL: "https://u:p@x", API: rerank.TEI}, "credentials"},
		{"cohere without model", rerank.Config{URL: "https://x", API: rerank.Cohere}, "model"},
		{"key with newline", rerank.Config{URL: "https://x", API: rerank.TEI, APIKey: "a\nb"}, "API key"},
		{"batch too big", rerank.Config{URL: "https://x", API: rerank.TEI, BatchSize: 5000}, "batch size 5000"},
		{"batch negative", rerank.Config{URL: "https://x", API: rerank.TEI, BatchSize: -1}, "batch size -1"},
		{"concurrency negative", rerank.Config{URL: "https://x", API: rerank.TEI, Concurrency: -2}, "concurrency -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rerank.New(tt.cfg)
			if !errors.Is(err, rerank.ErrConfig) || !strings.Contains(err.Error(), tt.part) {
				t.Fatalf("got %v, want ErrConfig mentioning %q", err, tt.part)
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		err  error
		want rerank.Outcome
	}{
		{nil, rerank.OK},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), rerank.Timeout},
		{fmt.Errorf("x: %w", rerank.ErrBreakerOpen), rerank.BreakerOpen},
		{rerank.ErrBadResponse, rerank.Error},
		{context.Canceled, rerank.Error},
	}
	for _, tt := range tests {
		if got := rerank.OutcomeOf(tt.err); got != tt.want {
			t.Errorf("OutcomeOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
