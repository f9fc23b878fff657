package labcli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cordon-rag/cordon/lab/eval"
)

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
