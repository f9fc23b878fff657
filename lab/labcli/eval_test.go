package labcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/lab/eval"
)

const (
	evalSubsetCorpus  = "../../testdata/eval/corpus"
	evalSubsetQueries = "../../testdata/eval/queries.jsonl"
)

// runEvalCLI runs the CLI and returns its exit code, stdout and stderr.
func runEvalCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func TestEvalHelp(t *testing.T) {
	for _, args := range [][]string{{"eval", "--help"}, {"help", "eval"}} {
		code, out, _ := runEvalCLI(t, args...)
		if code != ExitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "cordon-lab eval --corpus") {
			t.Errorf("%v: exit %d, help without an example:\n%s", args, code, out)
		}
	}
}

func TestEvalUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no corpus", []string{"eval", "--queries", evalSubsetQueries}, "--corpus DIR is required"},
		{"no queries", []string{"eval", "--corpus", evalSubsetCorpus}, "--queries FILE.jsonl is required"},
		{"json and markdown", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--json", "--markdown"}, "exclude each other"},
		{"bad chunking", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--overlap-words", "300"}, "overlap_words"},
		{"unknown flag", []string{"eval", "--nope"}, "flag provided but not defined"},
		{"bad policy JSON", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--policy", `{"rrf_k": 0}`}, "--policy: invalid retrieval policy: rrf_k 0 must be >= 1"},
		{"unknown policy field", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--policy", `{"rrf": 10}`}, "--policy"},
		{"policy not JSON", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--policy", `{rrf_k`}, "--policy"},
		{"profile without name", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--profile", `{"rrf_k": 10}`}, "want NAME=JSON"},
		{"bad profile", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--profile", `x={"rerank": "bogus"}`}, "--profile x: invalid retrieval policy: rerank"},
		{"bad statistics", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--bm25-statistics", "global"}, "global"},
		{"bad k1", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--k1", "-1"}, "k1"},
		{"score without run", []string{"eval", "score", "--queries", evalSubsetQueries}, "--run FILE is required"},
		{"score k", []string{"eval", "score", "--queries", evalSubsetQueries, "--run", "x", "--k", "5"}, "only 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runEvalCLI(t, tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}
}

func TestEvalInputErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.jsonl")
	os.WriteFile(missing, []byte(`{"query": "list files", "relevant": ["man/1/no-such-page"]}`+"\n"), 0o644)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"query": "list files", "relevant": ["man/1/x"]}`+"\n"+`{"query": "x y", "relevant": []}`+"\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"relevant document not in corpus", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", missing}, `relevant document not in the corpus: "man/1/no-such-page"`},
		{"bad query line", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", bad}, "line 2"},
		{"no corpus dir", []string{"eval", "--corpus", filepath.Join(dir, "nope"), "--queries", bad}, "no such file"},
		{"empty corpus", []string{"eval", "--corpus", dir, "--queries", bad}, "holds no .md documents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runEvalCLI(t, tt.args...)
			if code != ExitError || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, ExitError, tt.want)
			}
		})
	}
}

func TestEvalOutputs(t *testing.T) {
	base := []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--kind", "name", "--progress-every", "0"}
	code, text, stderr := runEvalCLI(t, base...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"58 documents", "BM25 only", "dense only", "hybrid RRF + rerank", "R@10", "sha256:"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}

	dir := t.TempDir()
	png := filepath.Join(dir, "run.png")
	perQuery := filepath.Join(dir, "per-query.jsonl")
	code, js, stderr := runEvalCLI(t, append(base, "--json", "--per-query", perQuery)...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var run eval.Evaluation
	if err := json.Unmarshal([]byte(js), &run); err != nil {
		t.Fatalf("--json output does not parse: %v", err)
	}
	if len(run.Report.Results) != 5 || run.Report.Queries != 58 || run.Meta.Fingerprint == "" {
		t.Errorf("--json: got %+v", run.Report)
	}
	lines, err := os.ReadFile(perQuery)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(lines), "\n"); n != 58 {
		t.Errorf("per-query file has %d lines, want 58", n)
	}

	saved0 := filepath.Join(dir, "saved.json")
	code, md, _ := runEvalCLI(t, append(base, "--markdown", "--save", saved0)...)
	if b, err := os.ReadFile(saved0); err != nil || string(b) != js {
		t.Errorf("--save wrote something other than --json prints (%v)", err)
	}
	if code != ExitOK || !strings.Contains(md, "| pipeline | R@1 |") || !strings.Contains(md, "| hybrid RRF + rerank |") {
		t.Errorf("--markdown: exit %d\n%s", code, md)
	}

	// The same run twice gives the same numbers.
	_, again, _ := runEvalCLI(t, append(base, "--workers", "1")...)
	if again != text {
		t.Errorf("a second run with 1 worker printed a different table")
	}

	// plot eval draws saved runs: one, and two side by side.
	saved := filepath.Join(dir, "run.json")
	os.WriteFile(saved, []byte(js), 0o644)
	png2 := filepath.Join(dir, "two.png")
	if code, _, perr := runEvalCLI(t, "plot", "eval", "--out", png, saved); code != ExitOK {
		t.Fatalf("plot eval: exit %d: %s", code, perr)
	}
	checkEvalPNG(t, png)
	if code, _, perr := runEvalCLI(t, "plot", "eval", "--out", png2, saved, saved); code != ExitOK {
		t.Fatalf("plot eval: exit %d: %s", code, perr)
	}
	checkEvalPNG(t, png2)
	if code, _, perr := runEvalCLI(t, "plot", "eval", "--out", png2, perQuery); code != ExitError || !strings.Contains(perr, "not a 'cordon-lab eval --json' run") {
		t.Errorf("plot eval of a non-run: exit %d, %s", code, perr)
	}
	for _, args := range [][]string{{"plot", "eval", saved}, {"plot", "bench", "--out", png}} {
		if code, _, perr := runEvalCLI(t, args...); code != ExitUsage {
			t.Errorf("%q: exit %d, %s; want a usage error", args, code, perr)
		}
	}
}

func checkEvalPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG", path)
	}
}

// TestEvalProfilesAndScore: a --profile becomes a pipeline of its own; --trec
// writes runs that 'eval score' scores to exactly eval's document-level
// figures; a malformed run is refused with its line.
func TestEvalProfilesAndScore(t *testing.T) {
	dir := t.TempDir()
	perQuery := filepath.Join(dir, "pq.jsonl")
	code, js, stderr := runEvalCLI(t, "eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--split", "dev",
		"--profile", `k10={"rrf_k":10,"rerank":"idf_overlap","rerank_blend":0.5}`, "--k1", "1.2", "--b", "0.5",
		"--trec", dir, "--per-query", perQuery, "--json", "--progress-every", "0")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var run eval.Evaluation
	if err := json.Unmarshal([]byte(js), &run); err != nil {
		t.Fatal(err)
	}
	rep := run.Report
	if len(rep.Results) != 6 || rep.Results[5].Pipeline != "k10" || rep.BM25K1 != 1.2 || rep.BM25B != 0.5 {
		t.Fatalf("got pipelines %+v, k1 %v, b %v; want 6 with k10 last, k1 1.2, b 0.5", rep.Pipelines, rep.BM25K1, rep.BM25B)
	}
	if p := rep.Pipelines[5].Policy; p.RRFK != 10 || p.Rerank != "idf_overlap" || p.RerankBlend != 0.5 || p.TopN != 50 {
		t.Errorf("k10 policy: got %+v", p)
	}
	if len(rep.Intervals) != 5*3 || len(rep.Kinds) != 4 {
		t.Errorf("got %d intervals and %d kinds, want 15 and 4", len(rep.Intervals), len(rep.Kinds))
	}
	b, err := os.ReadFile(perQuery)
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(b), "\n", 2)[0]
	for _, want := range []string{`"kind":`, `"split":"dev"`, `"chunks":{`, `"chunk_id":`, `"bm25_rank":`, `"fused":`, `"rerank":`} {
		if !strings.Contains(first, want) {
			t.Errorf("per-query line lacks %s: %.300s", want, first)
		}
	}
	code, out, stderr := runEvalCLI(t, "eval", "score", "--queries", evalSubsetQueries, "--split", "dev", "--json",
		"--run", filepath.Join(dir, "bm25.run"), "--run", filepath.Join(dir, "k10.run"))
	if code != ExitOK {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	var scored struct {
		Queries   int
		Runs      []eval.RunScore
		Intervals []eval.Interval
	}
	if err := json.Unmarshal([]byte(out), &scored); err != nil {
		t.Fatal(err)
	}
	if scored.Queries != rep.Queries || len(scored.Runs) != 2 || len(scored.Intervals) != 2 {
		t.Fatalf("score: got %+v", scored)
	}
	for i, p := range []eval.Pipeline{eval.BM25Only, "k10"} {
		if got, want := scored.Runs[i].Metrics, rep.Result(p).Doc; got != want {
			t.Errorf("score %s: got %+v, eval's document level %+v", p, got, want)
		}
	}
	bad := filepath.Join(dir, "bad.run")
	os.WriteFile(bad, []byte("1 Q0 man/1/ls 1 2.5 x\n2 Q0 man/1/ls one 2.5 x\n"), 0o644)
	code, _, stderr = runEvalCLI(t, "eval", "score", "--queries", evalSubsetQueries, "--run", bad)
	if code != ExitError || !strings.Contains(stderr, `line 2: rank "one" is not an integer`) {
		t.Errorf("bad run: got exit %d, %q", code, stderr)
	}
}
