package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cordon-rag/cordon/lab/eval"
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

// fakeTEIServer answers /rerank with a score per text: the share of the
// query's words the text holds; fail makes it answer 500.
func fakeTEIServer(t *testing.T, fail bool, calls *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if fail {
			http.Error(w, "model crashed", http.StatusInternalServerError)
			return
		}
		var req struct {
			Query string   `json:"query"`
			Texts []string `json:"texts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		words := strings.Fields(strings.ToLower(req.Query))
		out := make([]map[string]any, len(req.Texts))
		for i, text := range req.Texts {
			text = strings.ToLower(text)
			n := 0
			for _, w := range words {
				if strings.Contains(text, w) {
					n++
				}
			}
			out[i] = map[string]any{"index": i, "score": float64(n) / float64(max(1, len(words)))}
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func evalRun(t *testing.T, args ...string) eval.Evaluation {
	t.Helper()
	code, out, stderr := runEvalCLI(t, append([]string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries,
		"--bootstrap", "0", "--json", "--workers", "2", "--progress-every", "0"}, args...)...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var run eval.Evaluation
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	return run
}

func pipelineResult(t *testing.T, rep eval.Report, name eval.Pipeline) eval.PipelineResult {
	t.Helper()
	for _, r := range rep.Results {
		if r.Pipeline == name {
			return r
		}
	}
	t.Fatalf("no pipeline %s in %+v", name, rep.Results)
	return eval.PipelineResult{}
}

// TestEvalModelReranker: eval measures a model-reranked profile through
// the --reranker-* flags; a failing model is shed query by query, counted,
// and then ranks exactly as the fused order does.
func TestEvalModelReranker(t *testing.T) {
	profile := `model={"rerank":"model","rerank_blend":0}`
	var calls atomic.Int32
	srv := fakeTEIServer(t, false, &calls)
	run := evalRun(t, "--reranker-url", srv.URL, "--reranker-model", "overlap-fake", "--rerank-budget", "10s", "--profile", profile)
	model := pipelineResult(t, run.Report, "model")
	if model.ModelShed != 0 || calls.Load() == 0 {
		t.Fatalf("healthy model: %d shed after %d calls, want none shed", model.ModelShed, calls.Load())
	}
	if rrf := pipelineResult(t, run.Report, eval.HybridRRF); model.Metrics == rrf.Metrics {
		t.Errorf("the model profile ranks exactly as the fused order: %+v", model.Metrics)
	}
	var info eval.PipelineInfo
	for _, p := range run.Report.Pipelines {
		if p.Name == "model" {
			info = p
		}
	}
	if info.Policy.Rerank != "model" || info.Policy.RerankBudgetMS != 10000 || info.Policy.RerankMinScore == nil || *info.Policy.RerankMinScore != 0 {
		t.Errorf("model pipeline policy %+v, want rerank model, budget 10000 ms, floor 0", info.Policy)
	}
	for _, p := range run.Report.Pipelines {
		if p.Name != "model" && (p.Policy.RerankMinScore != nil || p.Policy.RerankBudgetMS != 0) {
			t.Errorf("pipeline %s reports model fields: %+v", p.Name, p.Policy)
		}
	}

	var failed atomic.Int32
	bad := fakeTEIServer(t, true, &failed)
	run = evalRun(t, "--reranker-url", bad.URL, "--profile", profile)
	model = pipelineResult(t, run.Report, "model")
	if model.ModelShed != run.Report.Queries || failed.Load() == 0 || int(failed.Load()) >= run.Report.Queries {
		t.Fatalf("failing model: %d of %d queries shed after %d calls; want all shed, and the breaker to spare most calls",
			model.ModelShed, run.Report.Queries, failed.Load())
	}
	if rrf := pipelineResult(t, run.Report, eval.HybridRRF); model.Metrics != rrf.Metrics || model.Doc != rrf.Doc {
		t.Errorf("shed model metrics %+v, want hybrid_rrf's %+v", model.Metrics, rrf.Metrics)
	}
	code, out, stderr := runEvalCLI(t, "eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--bootstrap", "0",
		"--progress-every", "0", "--reranker-url", bad.URL, "--profile", profile)
	if want := fmt.Sprintf("the model reranker was shed for %d of %d queries", run.Report.Queries, run.Report.Queries); code != ExitOK || !strings.Contains(out, want) {
		t.Errorf("text report (exit %d) lacks %q:\n%s%s", code, want, out, stderr)
	}
}

func TestEvalModelWithoutReranker(t *testing.T) {
	code, _, stderr := runEvalCLI(t, "eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--profile", `m={"rerank":"model"}`)
	if code != ExitUsage || !strings.Contains(stderr, `--profile m: invalid retrieval policy: rerank "model" needs a model reranker`) {
		t.Fatalf("got exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runEvalCLI(t, "eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--rerank-budget", "0s")
	if code != ExitUsage || !strings.Contains(stderr, "--rerank-budget 0s") {
		t.Fatalf("budget 0: got exit %d, stderr %q", code, stderr)
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
