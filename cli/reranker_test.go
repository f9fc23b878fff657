package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testSecret = "0123456789abcdef0123456789abcdef"

// TestServeRerankerFlags: bad reranker settings are usage errors that say
// what to fix, before anything is opened.
func TestServeRerankerFlags(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte("sk-file-key\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	base := []string{"serve", "--audit-unkeyed", "--database-url", deadURL}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown API", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-api", "openai"}, nil, `API "openai"`},
		{"cohere without a model", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-api", "cohere"}, nil, "needs a model name"},
		{"ftp URL", []string{"--reranker-url", "ftp://127.0.0.1:1"}, nil, `scheme "ftp"`},
		{"credentials in the URL", []string{"--reranker-url", "https://u:secret@rerank.example"}, nil, "credentials"},
		{"batch 0", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-batch", "0"}, nil, "--reranker-batch 0"},
		{"batch from the environment", nil, map[string]string{"CORDON_RERANKER_URL": "http://127.0.0.1:1", "CORDON_RERANKER_BATCH": "many"}, `$CORDON_RERANKER_BATCH="many" is not an integer`},
		{"breaker failures 0", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-breaker-failures", "0"}, nil, "--reranker-breaker-failures 0"},
		{"breaker cool-down 0", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-breaker-cooldown", "0s"}, nil, "--reranker-breaker-cooldown 0s"},
		{"key without a URL", []string{"--reranker-key-file", keyFile}, nil, "without --reranker-url"},
		{"model without a URL", []string{"--reranker-model", "bge"}, nil, "without --reranker-url"},
		{"two keys", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-key-file", keyFile}, map[string]string{"CORDON_RERANKER_API_KEY": "sk-env"}, "keep one"},
		{"empty key file", []string{"--reranker-url", "http://127.0.0.1:1", "--reranker-key-file", empty}, nil, "is empty"},
		{"budget 0", []string{"--rerank-budget", "0s"}, nil, "--rerank-budget 0s: want 1ms to 1m0s"},
		{"budget over a minute", []string{"--rerank-budget", "2m"}, nil, "--rerank-budget 2m0s: want 1ms to 1m0s"},
		{"budget not a duration", []string{"--rerank-budget", "300"}, nil, `--rerank-budget "300" is not a duration`},
		{"budget from the environment", nil, map[string]string{"CORDON_RERANK_BUDGET": "soon"}, `"soon" is not a duration`},
		{"tenant budget without =", []string{"--rerank-budget-tenant", "wholesale"}, nil, "want NAME=DURATION"},
		{"tenant budget, bad tenant", []string{"--rerank-budget-tenant", "Whole Sale=1s"}, nil, "--rerank-budget-tenant"},
		{"tenant budget twice", []string{"--rerank-budget-tenant", "wholesale=1s", "--rerank-budget-tenant", "wholesale=2s"}, nil, "given twice"},
		{"tenant budget from the environment", nil, map[string]string{"CORDON_RERANK_BUDGET_TENANTS": "retail=1s,wholesale=0ms"}, "--rerank-budget-tenant wholesale 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret}
			for k, v := range tt.env {
				env[k] = v
			}
			code, _, stderr := runCLIEnv(t, env, append(append([]string{}, base...), tt.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("got exit %d, stderr %q; want exit %d and %q", code, stderr, ExitUsage, tt.want)
			}
			if strings.Contains(stderr, "secret@") || strings.Contains(stderr, "sk-") {
				t.Errorf("a credential reached stderr: %s", stderr)
			}
		})
	}
}

// TestServeRerankerConfigLogged: a valid reranker configuration gets past
// the flags (to the database, which is absent here) and is logged with its
// key redacted.
func TestServeRerankerConfigLogged(t *testing.T) {
	const key = "sk-env-key-0123456789"
	env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret, "CORDON_RERANKER_API_KEY": key, "CORDON_RERANK_BUDGET_TENANTS": "wholesale=500ms"}
	code, _, stderr := runCLIEnv(t, env, "serve", "--audit-unkeyed", "--database-url", deadURL,
		"--reranker-url", "https://rerank.example/v1/rerank", "--reranker-api", "cohere", "--reranker-model", "jina-reranker-v2-base-multilingual",
		"--rerank-budget", "250ms")
	if code != ExitError || !strings.Contains(stderr, "database unavailable") {
		t.Fatalf("got exit %d, stderr %q; want the database to be the first trouble", code, stderr)
	}
	for _, want := range []string{`"reranker_url":"https://rerank.example/v1/rerank"`, `"reranker_api":"cohere"`,
		`"reranker_model":"jina-reranker-v2-base-multilingual"`, `"reranker_key":"set (redacted)"`, `"rerank_budget":"250ms"`,
		`"rerank_budget_tenants":"wholesale=500ms"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("config log lacks %s:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, key) {
		t.Fatalf("the key reached the log: %s", stderr)
	}
}

// TestQueryRerankFlags: cordon query asks for a rerank kind and budget in
// the request's policy, and prints what the server shed.
func TestQueryRerankFlags(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"results": [], "degraded": ["rerank"], "now_tick": 1}`)
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"CORDON_SERVER": srv.URL, "CORDON_TOKEN": "x.y.z"}
	code, out, stderr := runCLIEnv(t, env, "query", "--tenant", "wholesale", "--rerank", "model", "--rerank-budget", "1500us", "why", "held")
	if code != ExitOK || !strings.Contains(out, "degraded: rerank") {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, stderr)
	}
	pol, _ := got["policy"].(map[string]any)
	if pol["rerank"] != "model" || pol["rerank_budget_ms"] != float64(2) || got["query"] != "why held" {
		t.Fatalf("request %v: want rerank model and rerank_budget_ms 2 (1.5ms rounded up)", got)
	}
	if code, _, stderr := runCLIEnv(t, env, "query", "--tenant", "wholesale", "--rerank-budget", "5m", "x"); code != ExitUsage || !strings.Contains(stderr, "want 1ms to 1m0s") {
		t.Fatalf("budget 5m: exit %d, stderr %q", code, stderr)
	}
}
