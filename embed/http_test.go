package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/internal/redact/redacttest"
)

// request is what a test server received.
type request struct {
	method, path, auth, contentType string
	body                            map[string]any
}

// server is an httptest server that records requests; answer writes the
// reply to each, numbered from 0.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	reqs     []request
	inFlight int
	peak     int
	events   *[]string // shared with a fakeClock, to see requests and waits in order
}

func newServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int, body map[string]any)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body %q is not a JSON object: %v", b, err)
		}
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, request{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"), body: body})
		if s.events != nil {
			*s.events = append(*s.events, "request")
		}
		s.inFlight++
		s.peak = max(s.peak, s.inFlight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		answer(w, r, n, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

// inputs are the texts of a request of any of the three APIs.
func inputs(body map[string]any) []string {
	v := body["input"]
	if v == nil {
		v = body["inputs"]
	}
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// vectorOf is the test vector of a text: its trailing number plus one, then
// halves, so that order mistakes show.
func vectorOf(text string, dims int) []float32 {
	i := strings.LastIndexFunc(text, func(r rune) bool { return r < '0' || r > '9' })
	n, _ := strconv.Atoi(text[i+1:])
	v := make([]float32, dims)
	v[0] = float32(n + 1)
	for j := 1; j < dims; j++ {
		v[j] = 0.5
	}
	return v
}

// reply answers texts in api's format; openai answers in shuffled order.
func reply(w http.ResponseWriter, api string, texts []string, dims int, seed uint64) {
	vs := make([][]float32, len(texts))
	for i, t := range texts {
		vs[i] = vectorOf(t, dims)
	}
	var out any
	switch api {
	case APIOpenAI:
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		items := make([]item, len(vs))
		for i, v := range vs {
			items[i] = item{"embedding", i, v}
		}
		r := rand.New(rand.NewPCG(seed, 7))
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		out = map[string]any{"object": "list", "data": items, "model": "m", "usage": map[string]int{"prompt_tokens": 3, "total_tokens": 3}}
	case APIOllama:
		out = map[string]any{"model": "m", "embeddings": vs, "total_duration": 12345}
	case APITEI:
		out = vs
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// echo is a server that answers every request correctly in api's format.
func echo(t *testing.T, api string, dims int) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
		reply(w, api, inputs(body), dims, uint64(n))
	})
}

// fakeClock records waits instead of sleeping.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
	events *[]string
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), events: new([]string)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	*c.events = append(*c.events, "wait "+d.String())
	c.t = c.t.Add(d)
	return ctx.Err()
}

func (c *fakeClock) install(h *HTTP) { h.clock = clock{now: c.now, sleep: c.sleep} }

func mustHTTP(t *testing.T, c HTTPConfig) *HTTP {
	t.Helper()
	h, err := NewHTTP(c)
	if err != nil {
		t.Fatalf("NewHTTP: %v", err)
	}
	return h
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text %d", i)
	}
	return out
}

func checkVectors(t *testing.T, got [][]float32, ts []string, prefix string, dims int) {
	t.Helper()
	if len(got) != len(ts) {
		t.Fatalf("got %d vectors, want %d", len(got), len(ts))
	}
	for i, tx := range ts {
		if want := vectorOf(prefix+tx, dims); !reflect.DeepEqual(got[i], want) {
			t.Fatalf("vector %d = %v, want %v", i, got[i][:min(3, len(got[i]))], want[:3])
		}
	}
}

// Each API's request as the server receives it, and its answer parsed back
// in input order.
func TestHTTPRequestShape(t *testing.T) {
	tests := []struct {
		name        string
		cfg         HTTPConfig
		kind        Kind
		wantPath    string
		wantBody    map[string]any
		wantAuth    string
		wantPrefix  string
		keyFromFile bool
	}{
		{
			name: "openai", cfg: HTTPConfig{API: APIOpenAI, Model: "text-embedding-3-small", Dims: 4},
			wantPath: "/v1/embeddings",
			wantBody: map[string]any{"model": "text-embedding-3-small", "input": []any{"a 0", "b 1", "c 2"}, "encoding_format": "float"},
		},
		{
			name: "openai with dimensions and a key", cfg: HTTPConfig{API: APIOpenAI, Model: "text-embedding-3-large", Dims: 4, RequestDims: true},
			keyFromFile: true, wantAuth: "Bearer sk-test-123",
			wantPath: "/v1/embeddings",
			wantBody: map[string]any{"model": "text-embedding-3-large", "input": []any{"a 0", "b 1", "c 2"}, "encoding_format": "float", "dimensions": 4.0},
		},
		{
			name: "ollama", cfg: HTTPConfig{API: APIOllama, Model: "nomic-embed-text:latest", Dims: 4},
			wantPath: "/api/embed",
			wantBody: map[string]any{"model": "nomic-embed-text:latest", "input": []any{"a 0", "b 1", "c 2"}},
		},
		{
			name: "tei", cfg: HTTPConfig{API: APITEI, Model: "BAAI/bge-small-en-v1.5", Dims: 4},
			wantPath: "/embed",
			wantBody: map[string]any{"inputs": []any{"a 0", "b 1", "c 2"}, "truncate": true},
		},
		{
			name: "query prefix", cfg: HTTPConfig{API: APITEI, Model: "e5", Dims: 4, DocPrefix: "passage: ", QueryPrefix: "query: "},
			kind: Query, wantPath: "/embed", wantPrefix: "query: ",
			wantBody: map[string]any{"inputs": []any{"query: a 0", "query: b 1", "query: c 2"}, "truncate": true},
		},
		{
			name: "document prefix", cfg: HTTPConfig{API: APIOpenAI, Model: "e5", Dims: 4, DocPrefix: "passage: ", QueryPrefix: "query: "},
			kind: Document, wantPath: "/v1/embeddings", wantPrefix: "passage: ",
			wantBody: map[string]any{"model": "e5", "input": []any{"passage: a 0", "passage: b 1", "passage: c 2"}, "encoding_format": "float"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := echo(t, tt.cfg.API, tt.cfg.Dims)
			tt.cfg.URL = s.URL
			if tt.keyFromFile {
				tt.cfg.KeyFile = filepath.Join(t.TempDir(), "key")
				if err := os.WriteFile(tt.cfg.KeyFile, []byte("sk-test-123\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			h := mustHTTP(t, tt.cfg)
			ts := []string{"a 0", "b 1", "c 2"}
			got, err := h.Embed(context.Background(), ts, tt.kind)
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, got, ts, tt.wantPrefix, tt.cfg.Dims)
			reqs := s.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != http.MethodPost || r.path != tt.wantPath || r.contentType != "application/json" || r.auth != tt.wantAuth {
				t.Fatalf("got %s %s (Content-Type %q, Authorization %q), want POST %s (application/json, %q)", r.method, r.path, r.contentType, r.auth, tt.wantPath, tt.wantAuth)
			}
			if !reflect.DeepEqual(r.body, tt.wantBody) {
				t.Fatalf("body %v, want %v", r.body, tt.wantBody)
			}
		})
	}
}

// The base URL may carry a path (a proxy's prefix); for openai a trailing
// /v1, as OpenAI's own clients take it, is not doubled.
func TestHTTPEndpoint(t *testing.T) {
	tests := []struct{ api, base, want string }{
		{APIOpenAI, "http://h:1", "http://h:1/v1/embeddings"},
		{APIOpenAI, "http://h:1/", "http://h:1/v1/embeddings"},
		{APIOpenAI, "https://h/v1", "https://h/v1/embeddings"},
		{APIOpenAI, "https://h/proxy/v1/", "https://h/proxy/v1/embeddings"},
		{APIOllama, "http://localhost:11434", "http://localhost:11434/api/embed"},
		{APITEI, "http://h/tei/", "http://h/tei/embed"},
	}
	for _, tt := range tests {
		t.Run(tt.api+" "+tt.base, func(t *testing.T) {
			h := mustHTTP(t, HTTPConfig{API: tt.api, URL: tt.base, Model: "m", Dims: 2})
			if h.endpoint != tt.want {
				t.Fatalf("endpoint %q, want %q", h.endpoint, tt.want)
			}
		})
	}
}

// Long calls are split into batches and reassembled in order, with the
// openai server answering each batch in shuffled index order, one request
// at a time or several at once.
func TestHTTPBatching(t *testing.T) {
	for _, api := range []string{APIOpenAI, APIOllama, APITEI} {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s concurrency %d", api, conc), func(t *testing.T) {
				s := echo(t, api, 3)
				h := mustHTTP(t, HTTPConfig{API: api, URL: s.URL, Model: "m", Dims: 3, Batch: 4, Concurrency: conc})
				ts := texts(23)
				got, err := h.Embed(context.Background(), ts, Document)
				if err != nil {
					t.Fatal(err)
				}
				checkVectors(t, got, ts, "", 3)
				reqs := s.requests()
				if len(reqs) != 6 {
					t.Fatalf("got %d requests, want 6 (23 texts in batches of 4)", len(reqs))
				}
				seen := map[string]int{}
				for _, r := range reqs {
					in := inputs(r.body)
					if len(in) > 4 {
						t.Fatalf("a request carried %d texts, more than the batch of 4", len(in))
					}
					for _, x := range in {
						seen[x]++
					}
				}
				for _, x := range ts {
					if seen[x] != 1 {
						t.Fatalf("text %q sent %d times, want once", x, seen[x])
					}
				}
				if s.peak > conc {
					t.Fatalf("%d requests in flight at once, more than the concurrency %d", s.peak, conc)
				}
			})
		}
	}
}

func TestHTTPNoTexts(t *testing.T) {
	s := echo(t, APIOpenAI, 2)
	h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2})
	got, err := h.Embed(context.Background(), nil, Document)
	if err != nil || got != nil {
		t.Fatalf("got %v, %v; want nil, nil", got, err)
	}
	if n := len(s.requests()); n != 0 {
		t.Fatalf("got %d requests, want none", n)
	}
}

// failThen answers the first fails requests with status (and Retry-After
// when given), then correctly.
func failThen(t *testing.T, api string, dims, fails, status int, retryAfter string) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
		if n < fails {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":"try %d failed"}`, n)
			return
		}
		reply(w, api, inputs(body), dims, 1)
	})
}

func TestHTTPRetries(t *testing.T) {
	const backoff = 100 * time.Millisecond
	tests := []struct {
		name       string
		status     int
		fails      int
		retries    int
		retryAfter string
		// quick makes the backoff negligible, so that the wait is the
		// Retry-After's alone.
		quick      bool
		wantReqs   int
		wantErr    []string // substrings; none means success
		wantSleeps func(t *testing.T, sleeps []time.Duration)
	}{
		{
			name: "503 twice then success", status: 503, fails: 2, retries: 3, wantReqs: 3,
			wantSleeps: func(t *testing.T, s []time.Duration) {
				// Exponential backoff with jitter from the upper half.
				if len(s) != 2 || s[0] < backoff/2 || s[0] > backoff || s[1] < backoff || s[1] > 2*backoff {
					t.Fatalf("waits %v, want one in [50ms,100ms] then one in [100ms,200ms]", s)
				}
			},
		},
		{
			name: "429 with Retry-After seconds", status: 429, fails: 1, retries: 1, retryAfter: "2", quick: true, wantReqs: 2,
			wantSleeps: func(t *testing.T, s []time.Duration) {
				if !reflect.DeepEqual(s, []time.Duration{2 * time.Second}) {
					t.Fatalf("waits %v, want [2s] (the Retry-After)", s)
				}
			},
		},
		{
			name: "503 with Retry-After date", status: 503, fails: 1, retries: 1,
			retryAfter: newFakeClock().t.Add(3 * time.Second).Format(http.TimeFormat), quick: true, wantReqs: 2,
			wantSleeps: func(t *testing.T, s []time.Duration) {
				if !reflect.DeepEqual(s, []time.Duration{3 * time.Second}) {
					t.Fatalf("waits %v, want [3s] (until the Retry-After date)", s)
				}
			},
		},
		{
			name: "no retry on 400", status: 400, fails: 1, retries: 3, wantReqs: 1,
			wantErr: []string{"400 Bad Request", "(try 0 failed)", "check --embed-model"},
		},
		{
			name: "no retry on 422", status: 422, fails: 1, retries: 3, wantReqs: 1,
			wantErr: []string{"422 Unprocessable Entity", "lower --embed-batch"},
		},
		{
			name: "no retry on 401", status: 401, fails: 1, retries: 3, wantReqs: 1,
			wantErr: []string{"401 Unauthorized", "check the API key"},
		},
		{
			name: "no retry on 413", status: 413, fails: 1, retries: 3, wantReqs: 1,
			wantErr: []string{"413 Request Entity Too Large", "lower --embed-batch"},
		},
		{
			name: "gives up after the retries", status: 503, fails: 100, retries: 2, wantReqs: 3,
			wantErr: []string{"gave up after 3 attempts", "503 Service Unavailable", "(try 2 failed)", "check its logs"},
		},
		{
			name: "gives up on 429", status: 429, fails: 100, retries: 1, retryAfter: "1", wantReqs: 2,
			wantErr: []string{"gave up after 2 attempts", "429 Too Many Requests", "lower --embed-rate"},
		},
		{
			name: "no retries configured", status: 500, fails: 1, retries: 0, wantReqs: 1,
			wantErr: []string{"500 Internal Server Error"},
		},
		{
			name: "Retry-After too long", status: 429, fails: 1, retries: 3, retryAfter: "3600", wantReqs: 1,
			wantErr: []string{"retry after 1h0m0s", "longer than the 1m0s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := failThen(t, APIOllama, 2, tt.fails, tt.status, tt.retryAfter)
			h := mustHTTP(t, HTTPConfig{API: APIOllama, URL: s.URL, Model: "m", Dims: 2, Retries: tt.retries, Backoff: backoff, MaxBackoff: time.Second})
			if tt.quick {
				h.backoff, h.maxBackoff = time.Nanosecond, time.Nanosecond
			}
			fc := newFakeClock()
			fc.install(h)
			got, err := h.Embed(context.Background(), []string{"x 1"}, Document)
			if n := len(s.requests()); n != tt.wantReqs {
				t.Fatalf("got %d requests, want %d", n, tt.wantReqs)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				checkVectors(t, got, []string{"x 1"}, "", 2)
				tt.wantSleeps(t, fc.sleeps)
				return
			}
			checkErr(t, err, append(tt.wantErr, "ollama POST "+s.URL+"/api/embed")...)
		})
	}
}

func checkErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, ErrProvider) {
		t.Fatalf("error %v does not wrap ErrProvider", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

// The backoff doubles up to its cap and stays in the upper half of each
// step.
func TestBackoffDelay(t *testing.T) {
	h := &HTTP{backoff: 100 * time.Millisecond, maxBackoff: 500 * time.Millisecond}
	steps := []time.Duration{100, 200, 400, 500, 500, 500}
	for i := 0; i < 200; i++ {
		for a, step := range steps {
			step *= time.Millisecond
			if d := h.backoffDelay(a + 1); d < step/2 || d > step {
				t.Fatalf("retry %d waits %s, want in [%s,%s]", a+1, d, step/2, step)
			}
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"5", 5 * time.Second}, {" 7 ", 7 * time.Second}, {"-3", 0}, {"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"99999999999999999", 1<<63 - 1},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.v, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tt.v, got, tt.want)
		}
	}
}

// A connection the server drops is retried; a server that is not there is
// retried, then reported with what to check.
func TestHTTPConnectionErrors(t *testing.T) {
	t.Run("dropped then answered", func(t *testing.T) {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
			if n == 0 {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				conn.Close()
				return
			}
			reply(w, APITEI, inputs(body), 2, 0)
		})
		h := mustHTTP(t, HTTPConfig{API: APITEI, URL: s.URL, Model: "m", Dims: 2, Retries: 1})
		newFakeClock().install(h)
		got, err := h.Embed(context.Background(), []string{"y 4"}, Query)
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, got, []string{"y 4"}, "", 2)
		if n := len(s.requests()); n != 2 {
			t.Fatalf("got %d requests, want 2", n)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		s := httptest.NewServer(http.NotFoundHandler())
		url := s.URL
		s.Close()
		h := mustHTTP(t, HTTPConfig{API: APITEI, URL: url, Model: "m", Dims: 2, Retries: 2})
		fc := newFakeClock()
		fc.install(h)
		_, err := h.Embed(context.Background(), []string{"y"}, Query)
		checkErr(t, err, "gave up after 3 attempts", "cannot reach the server", "check --embed-url", "tei POST "+url+"/embed")
		if len(fc.sleeps) != 2 {
			t.Fatalf("waited %d times, want 2 (between 3 attempts)", len(fc.sleeps))
		}
	})
}

// A server that does not answer within Timeout fails the attempt, which is
// retried; the caller's own cancellation is not retried and is not a
// provider failure.
func TestHTTPTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	t.Run("timeout", func(t *testing.T) {
		s := newServer(t, hang)
		h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, Timeout: 20 * time.Millisecond, Retries: 1})
		newFakeClock().install(h)
		_, err := h.Embed(context.Background(), []string{"z"}, Document)
		checkErr(t, err, "gave up after 2 attempts", "no answer within 20ms", "raise --embed-timeout")
		if n := len(s.requests()); n != 2 {
			t.Fatalf("got %d requests, want 2", n)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
			cancel()
			hang(w, r, n, body)
		})
		h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, Retries: 3})
		newFakeClock().install(h)
		_, err := h.Embed(ctx, []string{"z"}, Document)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrProvider) {
			t.Fatalf("error %v: want context.Canceled, not ErrProvider", err)
		}
		if n := len(s.requests()); n != 1 {
			t.Fatalf("got %d requests, want 1", n)
		}
	})
	t.Run("deadline shorter than the backoff", func(t *testing.T) {
		s := failThen(t, APIOpenAI, 2, 100, 503, "")
		h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, Retries: 3, Backoff: time.Hour, MaxBackoff: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := h.Embed(ctx, []string{"z"}, Document)
		checkErr(t, err, "503", "the caller's deadline leaves no time for the next retry")
		if n := len(s.requests()); n != 1 {
			t.Fatalf("got %d requests, want 1", n)
		}
	})
}

// Answers that are not what the API promises fail the call with what is
// wrong, and are not retried.
func TestHTTPMalformedAnswers(t *testing.T) {
	tests := []struct {
		name, api, body string
		want            string
	}{
		{"openai missing index", APIOpenAI, `{"data":[{"index":1,"embedding":[1,2]},{"embedding":[1,2]}]}`, "data[1] has no index"},
		{"openai duplicate index", APIOpenAI, `{"data":[{"index":1,"embedding":[1,2]},{"index":1,"embedding":[3,4]}]}`, "data[1] repeats index 1"},
		{"openai index out of range", APIOpenAI, `{"data":[{"index":0,"embedding":[1,2]},{"index":2,"embedding":[3,4]}]}`, "data[1] has index 2, outside 0..1"},
		{"openai negative index", APIOpenAI, `{"data":[{"index":-1,"embedding":[1,2]},{"index":0,"embedding":[3,4]}]}`, "data[0] has index -1"},
		{"openai fractional index", APIOpenAI, `{"data":[{"index":0.5,"embedding":[1,2]},{"index":0,"embedding":[3,4]}]}`, `field "data.index": a JSON number 0.5 is not an integer`},
		{"openai too few", APIOpenAI, `{"data":[{"index":0,"embedding":[1,2]}]}`, "1 embeddings for 2 texts"},
		{"openai too many", APIOpenAI, `{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]},{"index":2,"embedding":[1,2]}]}`, "3 embeddings for 2 texts"},
		{"openai no data", APIOpenAI, `{"object":"list"}`, "0 embeddings for 2 texts"},
		{"openai base64", APIOpenAI, `{"data":[{"index":0,"embedding":"AAAA"},{"index":1,"embedding":[1,2]}]}`, "data[0].embedding: a JSON string, not a list of numbers"},
		{"openai missing embedding", APIOpenAI, `{"data":[{"index":0},{"index":1,"embedding":[1,2]}]}`, "data[0].embedding: missing"},
		{"openai duplicate key", APIOpenAI, `{"data":[],"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]}`, `duplicate key "data"`},
		{"openai key in another case", APIOpenAI, `{"Data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]}`, `key "Data" is not "data"`},
		{"openai error object", APIOpenAI, `{"error":{"message":"boom"}}`, "0 embeddings for 2 texts"},
		{"ollama wrong dims", APIOllama, `{"embeddings":[[1,2],[1,2,3]]}`, "text 1's vector has 3 dimensions, --embed-dims says 2"},
		{"ollama empty vector", APIOllama, `{"embeddings":[[1,2],[]]}`, "embeddings[1]: an empty list"},
		{"ollama null component", APIOllama, `{"embeddings":[[1,null],[1,2]]}`, "embeddings[0]: component 1 is a JSON null, not a number"},
		{"ollama string component", APIOllama, `{"embeddings":[[1,2],["NaN",2]]}`, "embeddings[1]: component 0 is a JSON string"},
		{"ollama overflow", APIOllama, `{"embeddings":[[1,2],[1e39,2]]}`, "embeddings[1]: component 0, 1e39, is not a finite float32"},
		{"ollama negative overflow", APIOllama, `{"embeddings":[[1,-3.5e38],[1,2]]}`, "component 1, -3.5e38, is not a finite float32"},
		{"ollama huge exponent", APIOllama, `{"embeddings":[[1,2],[1,1e999999]]}`, "component 1, 1e999999, is not a finite float32"},
		{"ollama null vector", APIOllama, `{"embeddings":[null,[1,2]]}`, "embeddings[0]: a JSON null"},
		{"ollama nested", APIOllama, `{"embeddings":[[[1],[2]],[1,2]]}`, "embeddings[0]: component 0 is a JSON list"},
		{"ollama count", APIOllama, `{"embeddings":[[1,2]]}`, "1 embeddings for 2 texts"},
		{"ollama trailing data", APIOllama, `{"embeddings":[[1,2],[1,2]]} {}`, "trailing data after the JSON object"},
		{"ollama not JSON", APIOllama, `<html>hello</html>`, "malformed JSON"},
		{"ollama truncated", APIOllama, `{"embeddings":[[1,2],[1,`, "not a complete JSON value"},
		{"ollama invalid UTF-8", APIOllama, "{\"model\":\"\xff\",\"embeddings\":[[1,2],[1,2]]}", "not valid UTF-8"},
		{"ollama a list", APIOllama, `[[1,2],[1,2]]`, "must be a JSON object"},
		{"tei an object", APITEI, `{"embeddings":[[1,2],[1,2]]}`, "a JSON object is not a list"},
		{"tei null", APITEI, `null`, "null, not a list of embeddings"},
		{"tei count", APITEI, `[[1,2],[1,2],[3,4]]`, "3 embeddings for 2 texts"},
		{"tei bool component", APITEI, `[[1,2],[true,2]]`, "[1]: component 0 is a JSON boolean"},
		{"tei wrong dims", APITEI, `[[1],[1]]`, "text 0's vector has 1 dimensions"},
		{"tei deep", APITEI, strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "exceeded max depth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
				io.WriteString(w, tt.body)
			})
			h := mustHTTP(t, HTTPConfig{API: tt.api, URL: s.URL, Model: "m", Dims: 2, Retries: 3})
			newFakeClock().install(h)
			_, err := h.Embed(context.Background(), []string{"a", "b"}, Document)
			checkErr(t, err, tt.want)
			if n := len(s.requests()); n != 1 {
				t.Fatalf("got %d requests, want 1 (no retry)", n)
			}
		})
	}
}

// Valid answers in the odd shapes JSON allows decode to the same vectors.
func TestDecodeAnswers(t *testing.T) {
	tests := []struct {
		name   string
		decode func([]byte, int) ([][]float32, error)
		body   string
		want   [][]float32
	}{
		{"openai reordered", decodeOpenAI, `{"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}]}`, [][]float32{{1, 2}, {3, 4}}},
		{"openai whitespace and extras", decodeOpenAI, " {\n \"object\": \"list\", \"data\" : [ { \"embedding\" : [ -0.5 , 1E-2 ] , \"index\" : 0, \"object\":\"embedding\" } ], \"usage\": {\"x\": [1, {\"y\": null}]} }\n", [][]float32{{-0.5, 0.01}}},
		{"ollama", decodeOllama, `{"model":"m","embeddings":[[0.25,-1e-3],[3.4028234e38,-0]]}`, [][]float32{{0.25, -0.001}, {3.4028234e38, 0}}},
		{"ollama tiny underflows to zero", decodeOllama, `{"embeddings":[[1,1e-50]]}`, [][]float32{{1, 0}}},
		{"tei", decodeTEI, "[[1.5,2],\n[3,4]]", [][]float32{{1.5, 2}, {3, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.decode([]byte(tt.body), len(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// An answer larger than MaxResponseBytes is refused without reading it
// all.
func TestHTTPResponseTooLarge(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
		io.WriteString(w, `{"embeddings":[[`+strings.Repeat("0.123456789,", 100000)+`1]]}`)
	})
	h := mustHTTP(t, HTTPConfig{API: APIOllama, URL: s.URL, Model: "m", Dims: 2, MaxResponseBytes: 1000, Retries: 2})
	newFakeClock().install(h)
	_, err := h.Embed(context.Background(), []string{"a"}, Document)
	checkErr(t, err, "larger than 1000 bytes", "lower --embed-batch")
	if n := len(s.requests()); n != 1 {
		t.Fatalf("got %d requests, want 1", n)
	}
	if d := mustHTTP(t, HTTPConfig{API: APIOllama, URL: s.URL, Model: "m", Dims: 512, Batch: 32}); d.maxResponse != 1<<20+32*512*48 {
		t.Fatalf("default bound %d, want %d", d.maxResponse, 1<<20+32*512*48)
	}
}

// The rate limiter lets a burst through at once and spaces the rest by
// 1/rate, retries included; the clock is fake, so the test asserts the
// waits it asked for, not how long it took.
func TestHTTPRateLimit(t *testing.T) {
	t.Run("burst then spaced", func(t *testing.T) {
		fc := newFakeClock()
		s := echo(t, APIOpenAI, 2)
		s.events = fc.events
		h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, Batch: 1, RateLimit: 10, RateBurst: 3})
		fc.install(h)
		ts := texts(6)
		got, err := h.Embed(context.Background(), ts, Document)
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, got, ts, "", 2)
		want := []string{"request", "request", "request", "wait 100ms", "request", "wait 100ms", "request", "wait 100ms", "request"}
		if !reflect.DeepEqual(*fc.events, want) {
			t.Fatalf("events %v, want %v", *fc.events, want)
		}
	})
	t.Run("default burst of one", func(t *testing.T) {
		fc := newFakeClock()
		s := echo(t, APITEI, 2)
		s.events = fc.events
		h := mustHTTP(t, HTTPConfig{API: APITEI, URL: s.URL, Model: "m", Dims: 2, Batch: 1, RateLimit: 4})
		fc.install(h)
		if _, err := h.Embed(context.Background(), texts(3), Document); err != nil {
			t.Fatal(err)
		}
		want := []string{"request", "wait 250ms", "request", "wait 250ms", "request"}
		if !reflect.DeepEqual(*fc.events, want) {
			t.Fatalf("events %v, want %v", *fc.events, want)
		}
	})
	t.Run("retries count against the limit", func(t *testing.T) {
		fc := newFakeClock()
		s := failThen(t, APIOllama, 2, 1, 503, "")
		s.events = fc.events
		h := mustHTTP(t, HTTPConfig{API: APIOllama, URL: s.URL, Model: "m", Dims: 2, RateLimit: 1, Retries: 1, Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond})
		fc.install(h)
		if _, err := h.Embed(context.Background(), []string{"q 1"}, Query); err != nil {
			t.Fatal(err)
		}
		want := []string{"request", "wait 1ns", "wait 999.999999ms", "request"}
		if !reflect.DeepEqual(*fc.events, want) {
			t.Fatalf("events %v, want %v", *fc.events, want)
		}
	})
	t.Run("wait past the deadline", func(t *testing.T) {
		s := echo(t, APIOllama, 2)
		h := mustHTTP(t, HTTPConfig{API: APIOllama, URL: s.URL, Model: "m", Dims: 2, Batch: 1, RateLimit: 0.001})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := h.Embed(ctx, texts(2), Document)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "--embed-rate allows the next request in") {
			t.Fatalf("error %v, want the rate limit's wait past the deadline", err)
		}
		if n := len(s.requests()); n != 1 {
			t.Fatalf("got %d requests, want 1", n)
		}
	})
}

// The API key goes in the Authorization header and nowhere else: not in
// errors, even when the server echoes it, and not in the provider's
// printed forms.
func TestHTTPAPIKey(t *testing.T) {
	const key = "sk-secret-0123456789"
	t.Setenv("CORDON_TEST_EMBED_KEY", " "+key+"\n")
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`, r.Header.Get("Authorization"))
	})
	h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, KeyEnv: "CORDON_TEST_EMBED_KEY"})
	_, err := h.Embed(context.Background(), []string{"a"}, Document)
	checkErr(t, err, "401 Unauthorized", "Incorrect API key provided: Bearer [redacted]", "check the API key")
	if got := s.requests()[0].auth; got != "Bearer "+key {
		t.Fatalf("Authorization %q, want %q", got, "Bearer "+key)
	}
	for _, text := range []string{err.Error(), fmt.Sprint(h), fmt.Sprintf("%+v", h), fmt.Sprintf("%#v", h)} {
		if strings.Contains(text, key) {
			t.Fatalf("%q contains the API key", text)
		}
	}
	if want := "openai " + s.URL + "/v1/embeddings (model m/2)"; h.String() != want {
		t.Fatalf("String() = %q, want %q", h.String(), want)
	}
}

// TestHTTPAPIKeyEchoedEncoded: a provider's 401 that echoes the key in any
// encoding (in a JSON string with "/" escaped as "\/", percent- or
// HTML-encoded, quoted, base64 or hex), in the message Cordon reads or in a
// member it does not, puts no recognisable form of it in the error; nor
// does an echo cut by the message's 200-byte limit.
func TestHTTPAPIKeyEchoedEncoded(t *testing.T) {
	const key = "rk-Ab9/x+Yz=q_~.7Kp"
	t.Setenv("CORDON_TEST_EMBED_KEY", key)
	bodies := []struct {
		name string
		body func(echo string) string
	}{
		{"error member", func(echo string) string { return `{"error":"invalid key Bearer ` + echo + `"}` }},
		{"other member", func(echo string) string { return `{"detail":"invalid key Bearer ` + echo + `"}` }},
		{"plain text", func(echo string) string { return "invalid key Bearer " + echo }},
		{"cut at 200 bytes", func(echo string) string { return `{"error":"` + strings.Repeat(".", 190) + echo + `"}` }},
	}
	for _, b := range bodies {
		for _, e := range redacttest.Encodings {
			t.Run(b.name+"/"+e.Name, func(t *testing.T) {
				s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
					w.WriteHeader(http.StatusUnauthorized)
					io.WriteString(w, b.body(e.Encode(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))))
				})
				h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, KeyEnv: "CORDON_TEST_EMBED_KEY"})
				_, err := h.Embed(context.Background(), []string{"a"}, Document)
				checkErr(t, err, "401 Unauthorized", "check the API key")
				if name, form, leak := redacttest.Leak(err.Error(), key); leak {
					t.Fatalf("the error holds the key (%s %q): %v", name, form, err)
				}
				if strings.Contains(err.Error(), key[:8]) {
					t.Fatalf("the error holds the key's start: %v", err)
				}
			})
		}
	}
}

// recorder is a server that records what reaches it, whatever it is: a
// redirect's target.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD /path auth=... body=..."
}

func newRecorder(t *testing.T, answer http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		rec.mu.Lock()
		rec.seen = append(rec.seen, fmt.Sprintf("%s %s auth=%q body=%q", r.Method, r.URL.Path, r.Header.Get("Authorization"), b))
		rec.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) received() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.seen...)
}

// TestHTTPRedirects: a redirect is not followed by default, whatever the
// status and whatever client sends the requests, so the texts and the API
// key reach --embed-url's server only; the error says where the server
// redirected and what to do. With SameOriginRedirects, a redirect to the
// same scheme, host and port is followed and any other is refused.
func TestHTTPRedirects(t *testing.T) {
	const key = "sk-redirect-0123456789"
	t.Setenv("CORDON_TEST_EMBED_KEY", key)
	// elsewhere is another origin: the same host on another port.
	elsewhere := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, APIOpenAI, []string{"secret text 0"}, 2, 1)
	})
	followingClient := &http.Client{} // follows redirects, as http.Client does by default
	tests := []struct {
		name       string
		status     int
		target     string // "elsewhere", or a path on the same server
		sameOrigin bool
		client     *http.Client
		wantErr    []string // empty: the call succeeds
	}{
		{"307 elsewhere", http.StatusTemporaryRedirect, "elsewhere", false, nil,
			[]string{"redirected (307 Temporary Redirect) to " + elsewhere.URL + "/v1/embeddings", "Cordon does not follow redirects", "set --embed-url to the address it redirects to"}},
		{"308 elsewhere", http.StatusPermanentRedirect, "elsewhere", false, nil, []string{"redirected (308 Permanent Redirect)"}},
		{"301 elsewhere", http.StatusMovedPermanently, "elsewhere", false, nil, []string{"redirected (301 Moved Permanently)"}},
		{"302 elsewhere", http.StatusFound, "elsewhere", false, nil, []string{"redirected (302 Found)"}},
		{"303 elsewhere", http.StatusSeeOther, "elsewhere", false, nil, []string{"redirected (303 See Other)"}},
		{"307 elsewhere, a following client", http.StatusTemporaryRedirect, "elsewhere", false, followingClient, []string{"Cordon does not follow redirects"}},
		{"307 same origin, not allowed", http.StatusTemporaryRedirect, "/v2/embeddings", false, nil,
			[]string{"/v2/embeddings", "Cordon does not follow redirects", "--embed-same-origin-redirects"}},
		{"307 same origin, allowed", http.StatusTemporaryRedirect, "/v2/embeddings", true, nil, nil},
		{"308 same origin, allowed, a following client", http.StatusPermanentRedirect, "/v2/embeddings", true, followingClient, nil},
		{"307 elsewhere, same origin allowed", http.StatusTemporaryRedirect, "elsewhere", true, nil,
			[]string{"redirected (307 Temporary Redirect) to " + elsewhere.URL + "/v1/embeddings", "another origin", "only within the scheme, host and port of --embed-url"}},
		{"307 to itself, same origin allowed", http.StatusTemporaryRedirect, "/v1/embeddings", true, nil,
			[]string{"redirected (307 Temporary Redirect)", "Cordon follows at most 10 redirects"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/embeddings" {
					target := tt.target
					if target == "elsewhere" {
						target = elsewhere.URL + "/v1/embeddings"
					}
					http.Redirect(w, r, target, tt.status)
					return
				}
				var body map[string]any
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					http.Error(w, "no body", http.StatusBadRequest)
					return
				}
				reply(w, APIOpenAI, inputs(body), 2, 1)
			})
			before := len(elsewhere.received())
			h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: origin.URL, Model: "m", Dims: 2, KeyEnv: "CORDON_TEST_EMBED_KEY",
				SameOriginRedirects: tt.sameOrigin, Client: tt.client, Retries: 2})
			vs, err := h.Embed(context.Background(), []string{"secret text 0"}, Document)
			if got := elsewhere.received()[before:]; len(got) != 0 {
				t.Fatalf("the other origin received %q", got)
			}
			if len(tt.wantErr) == 0 {
				if err != nil || len(vs) != 1 {
					t.Fatalf("Embed = %v, %v; want the vector from the redirect's target", vs, err)
				}
				got := origin.received()
				if len(got) != 2 || got[1] != fmt.Sprintf("POST /v2/embeddings auth=%q body=%q", "Bearer "+key, `{"model":"m","input":["secret text 0"],"encoding_format":"float"}`) {
					t.Fatalf("the server received %q, want the POST again at /v2/embeddings", got)
				}
				return
			}
			checkErr(t, err, tt.wantErr...)
			if strings.Contains(err.Error(), key) {
				t.Fatalf("the error holds the key: %v", err)
			}
			want := 1
			if tt.sameOrigin && tt.target != "elsewhere" {
				want = 1 + maxRedirects // the loop, followed until the bound
			}
			if got := origin.received(); len(got) != want {
				t.Fatalf("the server received %d requests, want %d (a redirect is not retried): %q", len(got), want, got)
			}
		})
	}
}

// TestHTTPRedirectKeyInLocation: a redirect whose target holds the API key
// (in its path, percent-encoded, or in its query) is described without it.
func TestHTTPRedirectKeyInLocation(t *testing.T) {
	const key = "sk-redirect/0123+456789"
	t.Setenv("CORDON_TEST_EMBED_KEY", key)
	s := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		http.Redirect(w, r, "/auth/"+url.PathEscape(k)+"/v1/embeddings?key="+url.QueryEscape(k), http.StatusTemporaryRedirect)
	})
	h := mustHTTP(t, HTTPConfig{API: APIOpenAI, URL: s.URL, Model: "m", Dims: 2, KeyEnv: "CORDON_TEST_EMBED_KEY"})
	_, err := h.Embed(context.Background(), []string{"a"}, Document)
	checkErr(t, err, "redirected (307 Temporary Redirect) to "+s.URL+"/auth/[redacted]/v1/embeddings:")
	if name, form, leak := redacttest.Leak(err.Error(), key); leak {
		t.Fatalf("the error holds the key (%s %q): %v", name, form, err)
	}
}

// Other answers' messages: a 404 says what to check for the model.
func TestHTTPNotFound(t *testing.T) {
	for _, tt := range []struct{ api, body, want string }{
		{APIOllama, `{"error":"model \"nomic\" not found, try pulling it first"}`, `(model "nomic" not found, try pulling it first)`},
		{APIOpenAI, `{"error":{"message":"The model does not exist","type":"invalid_request_error"}}`, "(The model does not exist)"},
		{APITEI, "404 page not found\n\n", "(404 page not found)"},
	} {
		t.Run(tt.api, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int, body map[string]any) {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, tt.body)
			})
			h := mustHTTP(t, HTTPConfig{API: tt.api, URL: s.URL, Model: "nomic", Dims: 2, Retries: 2})
			newFakeClock().install(h)
			_, err := h.Embed(context.Background(), []string{"a"}, Document)
			want := []string{`the server answered 404 for model "nomic"`, tt.want, "is it pulled/served", "speak the " + tt.api + " API at " + h.api.path}
			if tt.api == APIOllama {
				want = append(want, "(ollama pull nomic)")
			}
			checkErr(t, err, want...)
			if n := len(s.requests()); n != 1 {
				t.Fatalf("got %d requests, want 1", n)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":"plain"}`, "plain"},
		{`{"error":{"message":"nested","code":1}}`, "nested"},
		{`{"message":"top"}`, "top"},
		{`{"error":"Input validation error: ` + "`inputs`" + ` must have less than 512 tokens","error_type":"Validation"}`, "Input validation error: `inputs` must have less than 512 tokens"},
		{"line one\nline\ttwo\x00", "line one line two"},
		{strings.Repeat("é", 150), strings.Repeat("é", 100) + "..."},
		{"", ""},
	}
	for _, tt := range tests {
		if got := errorMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("errorMessage(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestNewHTTPValidates(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("two words\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CORDON_TEST_EMPTY_KEY", "")
	ok := HTTPConfig{API: APIOpenAI, URL: "http://localhost:8080", Model: "m", Dims: 8}
	tests := []struct {
		name string
		edit func(c *HTTPConfig)
		want string
	}{
		{"unknown api", func(c *HTTPConfig) { c.API = "cohere" }, `--embed-api "cohere" is not an API Cordon speaks`},
		{"no api", func(c *HTTPConfig) { c.API = "" }, `--embed-api ""`},
		{"no url", func(c *HTTPConfig) { c.URL = "" }, `--embed-url "" is not a URL`},
		{"bad scheme", func(c *HTTPConfig) { c.URL = "ftp://h" }, "must start with http:// or https://"},
		{"no scheme", func(c *HTTPConfig) { c.URL = "localhost:8080" }, "must start with http:// or https://"},
		{"no host", func(c *HTTPConfig) { c.URL = "http:///v1" }, "has no host"},
		{"credentials", func(c *HTTPConfig) { c.URL = "http://u:sk-pass@h" }, "must not carry credentials"},
		{"query", func(c *HTTPConfig) { c.URL = "http://h/?key=sk-q" }, "must not have a query"},
		{"bad model", func(c *HTTPConfig) { c.Model = "bad model" }, "--embed-model"},
		{"hash model", func(c *HTTPConfig) { c.Model = Hash }, "built in"},
		{"no dims", func(c *HTTPConfig) { c.Dims = 0 }, "--embed-dims 0 must be"},
		{"too many dims", func(c *HTTPConfig) { c.Dims = 16001 }, "1..16000"},
		{"dimensions on ollama", func(c *HTTPConfig) { c.API, c.RequestDims = APIOllama, true }, "--embed-request-dims needs --embed-api openai"},
		{"two keys", func(c *HTTPConfig) { c.KeyFile, c.KeyEnv = keyFile, "X" }, "not both"},
		{"missing key file", func(c *HTTPConfig) { c.KeyFile = "/nonexistent/key" }, "read --embed-key-file"},
		{"empty key file", func(c *HTTPConfig) { c.KeyFile = emptyFile }, "holds no API key"},
		{"key with a space", func(c *HTTPConfig) { c.KeyFile = keyFile }, "must be one line of printable ASCII"},
		{"empty key env", func(c *HTTPConfig) { c.KeyEnv = "CORDON_TEST_EMPTY_KEY" }, "environment variable CORDON_TEST_EMPTY_KEY (--embed-key-env) holds no API key"},
		{"negative batch", func(c *HTTPConfig) { c.Batch = -1 }, "--embed-batch -1 must be in 1..2048"},
		{"huge batch", func(c *HTTPConfig) { c.Batch = 5000 }, "--embed-batch 5000"},
		{"concurrency", func(c *HTTPConfig) { c.Concurrency = 17 }, "--embed-concurrency 17 must be in 1..16"},
		{"timeout", func(c *HTTPConfig) { c.Timeout = -time.Second }, "--embed-timeout -1s must be positive"},
		{"retries", func(c *HTTPConfig) { c.Retries = -1 }, "--embed-retries -1 must be in 0..10"},
		{"backoff above its cap", func(c *HTTPConfig) { c.Backoff, c.MaxBackoff = time.Minute, time.Second }, "backoff 1m0s and max backoff 1s"},
		{"rate NaN", func(c *HTTPConfig) { c.RateLimit = nan() }, "--embed-rate NaN must be a finite number"},
		{"rate negative", func(c *HTTPConfig) { c.RateLimit = -1 }, "--embed-rate -1"},
		{"burst without rate", func(c *HTTPConfig) { c.RateBurst = 4 }, "--embed-burst needs --embed-rate"},
		{"negative max response", func(c *HTTPConfig) { c.MaxResponseBytes = -1 }, "max response bytes -1"},
		{"long prefix", func(c *HTTPConfig) { c.QueryPrefix = strings.Repeat("q", 1025) }, "--embed-query-prefix must be valid UTF-8 of at most 1024 bytes"},
		{"bad UTF-8 prefix", func(c *HTTPConfig) { c.DocPrefix = "\xff" }, "--embed-doc-prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			_, err := NewHTTP(c)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrInvalidConfig saying %q", err, tt.want)
			}
			for _, secret := range []string{"sk-pass", "sk-q", "two words"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q reveals %q", err, secret)
				}
			}
		})
	}
	if _, err := NewHTTP(ok); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

func nan() float64 { return math.NaN() }

// An HTTP provider serves a registry's model: the vectors come back
// quantized.
func TestHTTPInRegistry(t *testing.T) {
	s := echo(t, APIOllama, 4)
	h := mustHTTP(t, HTTPConfig{API: APIOllama, URL: s.URL, Model: "use-lite", Dims: 4})
	var r Registry
	if err := r.Register(h.Spec().Model, h); err != nil {
		t.Fatal(err)
	}
	got, err := r.Vectors(context.Background(), h.Spec(), []string{"a 1", "b 253"}, Document)
	if err != nil {
		t.Fatal(err)
	}
	// [2, .5, .5, .5] and [254, .5, .5, .5] scaled to 127 at their largest.
	want := [][]int32{{127, 32, 32, 32}, {127, 0, 0, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"http://h:8080/v1/embeddings", "http://h:8080/v2/other?x=1", true},
		{"http://H/x", "http://h:80/y", true},
		{"https://h/x", "https://h:443/y", true},
		{"http://h:8080/x", "http://h:8081/x", false},
		{"http://h/x", "https://h/x", false},
		{"http://h/x", "http://h.evil/x", false},
		{"https://h/x", "https://h:80/x", false},
	}
	for _, tt := range tests {
		a, _ := url.Parse(tt.a)
		b, _ := url.Parse(tt.b)
		if got := sameOrigin(a, b); got != tt.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
