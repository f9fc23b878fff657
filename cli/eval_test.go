package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/eval"
)

const (
	evalSubsetCorpus  = "../testdata/eval/corpus"
	evalSubsetQueries = "../testdata/eval/queries.jsonl"
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
		if code != ExitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "cordon eval --corpus") {
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
		{"plot without out", []string{"eval", "plot", "x.json"}, "--out FILE.png is required"},
		{"unknown flag", []string{"eval", "--nope"}, "flag provided but not defined"},
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
	base := []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--progress-every", "0"}
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
	code, js, stderr := runEvalCLI(t, append(base, "--json", "--plot", png, "--per-query", perQuery)...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var run eval.Evaluation
	if err := json.Unmarshal([]byte(js), &run); err != nil {
		t.Fatalf("--json output does not parse: %v", err)
	}
	if len(run.Report.Results) != 4 || run.Report.Queries != 58 || run.Meta.Fingerprint == "" {
		t.Errorf("--json: got %+v", run.Report)
	}
	checkEvalPNG(t, png)
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

	// eval plot draws saved runs.
	saved := filepath.Join(dir, "run.json")
	os.WriteFile(saved, []byte(js), 0o644)
	png2 := filepath.Join(dir, "two.png")
	if code, _, stderr := runEvalCLI(t, "eval", "plot", "--out", png2, saved, saved); code != ExitOK {
		t.Fatalf("eval plot: exit %d: %s", code, stderr)
	}
	checkEvalPNG(t, png2)
	if code, _, stderr := runEvalCLI(t, "eval", "plot", "--out", png2, perQuery); code != ExitError || !strings.Contains(stderr, "not a 'cordon eval --json' run") {
		t.Errorf("eval plot of a non-run: exit %d, %s", code, stderr)
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
