package integration_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cli"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
)

// A tenant on an embedding model, through the HTTP API: writes embed its
// chunks, retrieves embed the query once and rank with the model's cosine
// under the model profile (audited as the policy that ranked); a server
// without the model's provider answers 503 embedding_unavailable and writes
// nothing.
func TestServerModelTenant(t *testing.T) {
	for _, path := range servePaths {
		t.Run(path.name, func(t *testing.T) {
			dbURL := toyTenant(t, "research")
			toy := &embedtest.Toy{Dims: 32}
			a := startAPIServer(t, serverOpts{dbURL: dbURL, cache: path.cache, models: embedtest.Registry("toy-32", toy)})
			w := tok(t, "w", "tenant=research", "writer")
			reader := tok(t, "r", "tenant=research", "clearance=public", "reader")
			for id, text := range map[string]string{
				"df":   "report file system disk space usage",
				"gzip": "compress or expand files",
				"kill": "send a signal to a process",
			} {
				a.want(t, a.call(t, "PUT", "/v1/tenants/research/documents/"+id, w, map[string]any{"text": text, "classification": "public"}), http.StatusOK)
			}
			before := toy.Texts.Load()
			r := a.want(t, a.call(t, "POST", "/v1/tenants/research/retrieve", reader, map[string]any{"query": "disk space"}), http.StatusOK)
			if n := toy.Texts.Load() - before; n != 1 {
				t.Fatalf("the query was embedded %d times, want once", n)
			}
			var out struct {
				Results []struct {
					DocID  string   `json:"doc_id"`
					Cosine *float64 `json:"cosine"`
				} `json:"results"`
			}
			if err := json.Unmarshal(r.body, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Results) == 0 || out.Results[0].DocID != "df" || out.Results[0].Cosine == nil {
				t.Fatalf("results %s, want df first with a cosine", r.body)
			}
			lastPolicy := func() string {
				return queryStrings(t, dbURL, `SELECT policy FROM cordon_t_research.audit WHERE op = 'retrieve' ORDER BY seq DESC LIMIT 1`)[0]
			}
			policy := lastPolicy()
			for _, want := range []string{`"rerank_dense":0.15`, `"rerank_blend":0.75`, `"rrf_weights":{"bm25":1,"cosine":1,"doc":1}`, `"rerank_proximity":0.25`, `"rerank_doc":0.1`, `"qtf_k3":8`} {
				if !strings.Contains(policy, want) {
					t.Fatalf("audited policy %s lacks %s", policy, want)
				}
			}
			// A request's own values win over the model profile.
			a.want(t, a.call(t, "POST", "/v1/tenants/research/retrieve", reader, map[string]any{"query": "disk space", "policy": map[string]any{"rerank_dense": 0, "rerank_blend": 0.9}}), http.StatusOK)
			policy = lastPolicy()
			if !strings.Contains(policy, `"rerank_dense":0`) || !strings.Contains(policy, `"rerank_blend":0.9`) {
				t.Fatalf("audited policy %s: the request's values did not win", policy)
			}

			// A server that does not serve the model.
			b := startAPIServer(t, serverOpts{dbURL: dbURL, cache: path.cache})
			if got := b.want(t, b.call(t, "POST", "/v1/tenants/research/retrieve", reader, map[string]any{"query": "disk space"}), http.StatusServiceUnavailable); got.errCode(t) != "embedding_unavailable" {
				t.Fatalf("retrieve without the model: %s", got.body)
			}
			b.want(t, b.call(t, "PUT", "/v1/tenants/research/documents/late", w, map[string]any{"text": "late text", "classification": "public"}), http.StatusServiceUnavailable)
			if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_research.documents WHERE doc_id = 'late'`); n != 0 {
				t.Fatal("a refused write stored its document")
			}
		})
	}
}

// cordon serve probes its embedding server at start: other dimensions than
// --embed-dims are a usage error, an unreachable server only a warning.
func TestServeEmbeddingProbe(t *testing.T) {
	toy := &embedtest.Toy{Dims: 32}
	srv := httptest.NewServer(embedtest.Handler("toy-32", toy, 0))
	defer srv.Close()
	code, _, stderr := runCLI(t, map[string]string{"CORDON_JWT_HS256_SECRET": testSecret}, "serve", "--audit-unkeyed", "--listen", "127.0.0.1:0",
		"--embed-url", srv.URL, "--embed-model", "toy-32", "--embed-dims", "16")
	if code != cli.ExitUsage || !strings.Contains(stderr, "--embed-dims 16") || !strings.Contains(stderr, "32 dimensions") {
		t.Fatalf("serve with the wrong --embed-dims: exit %d: %s", code, stderr)
	}
	dbURL := migrated(t)
	_, _, logs := startServe(t, map[string]string{"CORDON_JWT_HS256_SECRET": testSecret}, "--database-url", dbURL, "--audit-unkeyed", "--listen", "127.0.0.1:0",
		"--embed-url", "http://127.0.0.1:1", "--embed-model", "toy-32", "--embed-dims", "32", "--embed-retries", "0")
	if !strings.Contains(logs.String(), "the embedding server did not answer a probe") {
		t.Fatalf("no probe warning in the log:\n%s", logs.String())
	}
}

// cordon serve does not follow its embedding server's redirects unless
// --embed-same-origin-redirects allows those within the --embed-url's
// origin: the probe at start says where the server redirected and what to
// do, and with the flag it passes.
func TestServeEmbeddingRedirects(t *testing.T) {
	toy := &embedtest.Toy{Dims: 32}
	mux := http.NewServeMux()
	mux.Handle("/v1/", embedtest.Handler("toy-32", toy, 0))
	mux.HandleFunc("/old/v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v1/embeddings", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dbURL := migrated(t)
	env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret}
	args := []string{"--database-url", dbURL, "--audit-unkeyed", "--listen", "127.0.0.1:0",
		"--embed-url", srv.URL + "/old", "--embed-model", "toy-32", "--embed-dims", "32", "--embed-retries", "0"}
	_, _, logs := startServe(t, env, args...)
	for _, want := range []string{"the embedding server did not answer a probe", "redirected (307 Temporary Redirect) to " + srv.URL + "/v1/embeddings",
		"Cordon does not follow redirects", "--embed-same-origin-redirects", `"embed_same_origin_redirects":false`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log does not say %s:\n%s", want, logs.String())
		}
	}
	_, _, logs = startServe(t, env, append(args, "--embed-same-origin-redirects")...)
	if strings.Contains(logs.String(), "did not answer a probe") || !strings.Contains(logs.String(), `"embed_same_origin_redirects":true`) {
		t.Fatalf("with --embed-same-origin-redirects the probe should pass:\n%s", logs.String())
	}
}

// A model tenant whose provider is down: a retrieve answers 503
// embedding_unavailable unless its policy says dense_fallback "lexical";
// then it answers what enable_dense false answers, byte for byte, with
// "dense" in degraded and in the audit record. A server with no provider
// for the model stays 503 whatever the policy.
func TestServerDenseFallback(t *testing.T) {
	for _, path := range servePaths {
		t.Run(path.name, func(t *testing.T) {
			dbURL := toyTenant(t, "research")
			toy := &embedtest.Toy{Dims: 32}
			logs := &syncBuffer{}
			a := startAPIServer(t, serverOpts{dbURL: dbURL, cache: path.cache, models: embedtest.Registry("toy-32", toy), cfg: server.Config{
				Logger: slog.New(slog.NewJSONHandler(logs, nil))}})
			w := tok(t, "w", "tenant=research", "writer")
			reader := tok(t, "r", "tenant=research", "clearance=public", "reader")
			for id, text := range map[string]string{
				"df":    "report file system disk space usage",
				"du":    "estimate file space usage of a disk directory",
				"gzip":  "compress or expand files",
				"kill":  "send a signal to a process",
				"mount": "mount a file system on a disk",
			} {
				a.want(t, a.call(t, "PUT", "/v1/tenants/research/documents/"+id, w, map[string]any{"text": text, "classification": "public"}), http.StatusOK)
			}
			type answer struct {
				Results  json.RawMessage `json:"results"`
				Degraded []string        `json:"degraded"`
			}
			retrieve := func(t *testing.T, c *apiServer, policy map[string]any, want int) (resp, answer) {
				t.Helper()
				body := map[string]any{"query": "disk space file", "policy": map[string]any{"max_chunks_per_doc": 0}}
				for k, v := range policy {
					body["policy"].(map[string]any)[k] = v
				}
				r := c.want(t, c.call(t, "POST", "/v1/tenants/research/retrieve", reader, body), want)
				var out answer
				if want == http.StatusOK {
					if err := json.Unmarshal(r.body, &out); err != nil {
						t.Fatal(err)
					}
				}
				return r, out
			}
			lastDegraded := func() string {
				return queryStrings(t, dbURL, `SELECT array_to_string(degraded, ',') FROM cordon_t_research.audit WHERE op = 'retrieve' ORDER BY seq DESC LIMIT 1`)[0]
			}
			// Healthy, the fallback changes nothing.
			_, healthy := retrieve(t, a, map[string]any{"dense_fallback": "lexical"}, http.StatusOK)
			if slices.Contains(healthy.Degraded, "dense") {
				t.Fatalf("degraded %v with the model up", healthy.Degraded)
			}

			toy.Fail.Store(true)
			if r, _ := retrieve(t, a, nil, http.StatusServiceUnavailable); r.errCode(t) != "embedding_unavailable" {
				t.Fatalf("without the fallback: %s", r.body)
			}
			_, fell := retrieve(t, a, map[string]any{"dense_fallback": "lexical"}, http.StatusOK)
			if !slices.Equal(fell.Degraded, []string{"dense"}) {
				t.Fatalf("degraded %v, want [dense]", fell.Degraded)
			}
			if got := lastDegraded(); got != "dense" {
				t.Fatalf("audited degraded %q, want dense", got)
			}
			if n := strings.Count(logs.String(), `"dense_shed":"embed 1 query text(s) with toy-32/32: embedding provider failed"`); n != 1 {
				t.Fatalf("%d log lines say why the dense side was shed, want 1:\n%s", n, logs)
			}
			calls := toy.Calls.Load()
			_, off := retrieve(t, a, map[string]any{"enable_dense": false}, http.StatusOK)
			if toy.Calls.Load() != calls {
				t.Fatal("enable_dense false embedded the query")
			}
			if len(off.Degraded) != 0 {
				t.Fatalf("enable_dense false: degraded %v, want none", off.Degraded)
			}
			if string(fell.Results) != string(off.Results) {
				t.Fatalf("fallback results\n%s\nwant those of enable_dense false\n%s", fell.Results, off.Results)
			}
			if string(off.Results) == "[]" || strings.Contains(string(off.Results), `"cosine_rank":1`) {
				t.Fatalf("enable_dense false results %s: want some, none with a cosine", off.Results)
			}

			// No provider for the model at all: a misconfiguration, 503.
			b := startAPIServer(t, serverOpts{dbURL: dbURL, cache: path.cache})
			if r, _ := retrieve(t, b, map[string]any{"dense_fallback": "lexical"}, http.StatusServiceUnavailable); r.errCode(t) != "embedding_unavailable" {
				t.Fatalf("fallback without a provider: %s", r.body)
			}
		})
	}
}

// toyTenant returns a migrated database of its own holding one tenant,
// name, on the model "toy-32" (embedtest.Toy with 32 dimensions).
func toyTenant(t *testing.T, name string) string {
	t.Helper()
	dbURL := migrated(t)
	s := index.DefaultSettings()
	s.Model, s.Dims = "toy-32", 32
	st := openStore(t, dbURL, postgres.Options{})
	defer st.Close()
	if _, err := st.CreateTenant(context.Background(), name, s); err != nil {
		t.Fatal(err)
	}
	return dbURL
}
