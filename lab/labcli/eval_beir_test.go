package labcli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/lab/eval"
)

const beirFixture = "../eval/testdata/beir-tiny"

// TestEvalBEIR runs the whole BEIR path on the tiny fixture: eval with its
// defaults (depth 100, titles as a first line), export with each title
// mode, and score agreeing with eval's document level.
func TestEvalBEIR(t *testing.T) {
	dir := t.TempDir()
	code, js, stderr := runEvalCLI(t, "eval", "--beir", beirFixture, "--split", "train", "--json", "--trec", dir, "--progress-every", "0")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var run eval.Evaluation
	if err := json.Unmarshal([]byte(js), &run); err != nil {
		t.Fatal(err)
	}
	rep, meta := run.Report, run.Meta
	if rep.Documents != 6 || rep.Queries != 4 || rep.Depth != eval.DeepK || len(rep.Results) != 5 {
		t.Errorf("report: got %d documents, %d queries, depth %d, %d pipelines; want 6, 4, 100, 5", rep.Documents, rep.Queries, rep.Depth, len(rep.Results))
	}
	if meta.Title != "line" || meta.Unjudged != 1 || meta.Split != "train" || !strings.HasSuffix(meta.Qrels, "qrels-train.tsv") || meta.QrelsSHA == "" || meta.Fingerprint == "" {
		t.Errorf("meta: got %+v", meta)
	}
	// Every query's relevant documents hold its words: BM25 alone finds
	// them all in its first 10.
	if r := rep.Result(eval.BM25Only).Doc; r.RecallAt10 != 1 || r.RecallAt100 != 1 {
		t.Errorf("bm25 doc level: got %+v, want R@10 and R@100 1", r)
	}
	code, out, stderr := runEvalCLI(t, "eval", "score", "--beir", beirFixture, "--split", "train", "--json",
		"--run", filepath.Join(dir, "hybrid_rrf_rerank.run"), "--run", filepath.Join(dir, "bm25.run"))
	if code != ExitOK {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	var scored struct {
		Queries int
		Runs    []eval.RunScore
	}
	if err := json.Unmarshal([]byte(out), &scored); err != nil {
		t.Fatal(err)
	}
	for i, p := range []eval.Pipeline{eval.HybridRerank, eval.BM25Only} {
		got, want := scored.Runs[i].Metrics, rep.Result(p).Doc
		want.RecallAt100 = 0 // a run of at most 10 documents a query is not deep
		if got != want {
			t.Errorf("score %s: got %+v, eval's document level %+v", p, got, want)
		}
	}

	// Titles: the first line of the text, a heading (not chunk text), or
	// nothing.
	for _, tt := range []struct {
		mode      string
		wantTitle bool
	}{{"line", true}, {"heading", false}, {"none", false}} {
		chunks := filepath.Join(dir, "chunks-"+tt.mode+".jsonl")
		code, _, stderr := runEvalCLI(t, "eval", "export", "--beir", beirFixture, "--split", "train", "--title", tt.mode, "--chunks", chunks)
		if code != ExitOK {
			t.Fatalf("export --title %s: exit %d: %s", tt.mode, code, stderr)
		}
		b, err := os.ReadFile(chunks)
		if err != nil {
			t.Fatal(err)
		}
		var first eval.ChunkRecord
		if err := json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &first); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(first.Text, "Vitamin D and bone density"); first.DocID != "d1" || got != tt.wantTitle {
			t.Errorf("--title %s: chunk of %s %q holds the title: %v, want %v", tt.mode, first.DocID, first.Text, got, tt.wantTitle)
		}
	}
}

// TestEvalBEIRDeepScore: on a dataset where a query matches more than 10
// documents, Cordon's runs are deep, and 'eval score' gives eval's document
// level R@100 and graded nDCG@10, with intervals for both.
func TestEvalBEIRDeepScore(t *testing.T) {
	data := t.TempDir()
	var corpus, qrels strings.Builder
	for i := range 40 {
		fmt.Fprintf(&corpus, `{"_id": "d%d", "title": "Study %d", "text": "common words here and marker%d"}`+"\n", i, i, i%7)
	}
	qrels.WriteString("query-id\tcorpus-id\tscore\n")
	for _, d := range []string{"d3", "d17", "d31"} {
		fmt.Fprintf(&qrels, "q1\t%s\t%d\n", d, 1+len(d)%2)
	}
	qrels.WriteString("q2\td5\t1\n")
	os.WriteFile(filepath.Join(data, "corpus.jsonl"), []byte(corpus.String()), 0o644)
	os.WriteFile(filepath.Join(data, "queries-dev.jsonl"), []byte(`{"_id": "q1", "text": "common words"}`+"\n"+`{"_id": "q2", "text": "marker5 words"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(data, "qrels-dev.tsv"), []byte(qrels.String()), 0o644)

	runs := t.TempDir()
	code, js, stderr := runEvalCLI(t, "eval", "--beir", data, "--split", "dev", "--json", "--trec", runs, "--progress-every", "0")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var run eval.Evaluation
	if err := json.Unmarshal([]byte(js), &run); err != nil {
		t.Fatal(err)
	}
	perQuery := filepath.Join(runs, "pq.jsonl")
	code, out, stderr := runEvalCLI(t, "eval", "score", "--beir", data, "--split", "dev", "--json", "--per-query", perQuery,
		"--run", filepath.Join(runs, "bm25.run"), "--run", filepath.Join(runs, "hybrid_rrf_rerank.run"))
	if code != ExitOK {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	var scored struct {
		Runs      []eval.RunScore
		Intervals []eval.Interval
	}
	if err := json.Unmarshal([]byte(out), &scored); err != nil {
		t.Fatal(err)
	}
	for i, p := range []eval.Pipeline{eval.BM25Only, eval.HybridRerank} {
		if s := scored.Runs[i]; !s.Deep() || s.Metrics != run.Report.Result(p).Doc {
			t.Errorf("score %s: got %+v (depth %d), eval's document level %+v", p, s.Metrics, s.Depth, run.Report.Result(p).Doc)
		}
	}
	if r := run.Report.Result(eval.BM25Only).Doc; r.RecallAt100 != 1 || r.RecallAt10 == 1 {
		t.Errorf("bm25: got R@10 %v and R@100 %v; want 3 relevant of 40 tied documents found by 100 and not all by 10", r.RecallAt10, r.RecallAt100)
	}
	if len(scored.Intervals) != 4 || scored.Intervals[2].Metric != "ndcg_at_10" || scored.Intervals[3].Metric != "recall_at_100" {
		t.Errorf("intervals: got %+v, want R@10, MRR@10, nDCG@10, R@100", scored.Intervals)
	}
	b, err := os.ReadFile(perQuery)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `"id":"q1"`) ||
		!strings.Contains(lines[0], `"bm25":{`) || !strings.Contains(lines[0], `"grades":{`) {
		t.Errorf("score --per-query: got %s", b)
	}
}

func TestEvalBEIRUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"with --corpus", []string{"eval", "--beir", beirFixture, "--split", "train", "--corpus", evalSubsetCorpus}, ExitUsage, "--beir DIR excludes --corpus and --queries"},
		{"with --queries", []string{"eval", "score", "--beir", beirFixture, "--split", "train", "--queries", evalSubsetQueries, "--run", "x"}, ExitUsage, "excludes --corpus and --queries"},
		{"without --split", []string{"eval", "--beir", beirFixture}, ExitUsage, "--beir DIR needs --split SPLIT"},
		{"with --kind", []string{"eval", "export", "--beir", beirFixture, "--split", "train", "--kind", "name", "--chunks", "x"}, ExitUsage, "--kind does not apply"},
		{"bad title", []string{"eval", "--beir", beirFixture, "--split", "train", "--title", "top"}, ExitUsage, `--title "top"`},
		{"bad depth", []string{"eval", "--beir", beirFixture, "--split", "train", "--depth", "5"}, ExitUsage, "--depth 5"},
		{"bad text", []string{"eval", "--beir", beirFixture, "--split", "train", "--text", "html"}, ExitUsage, `--text "html": want prose or markdown`},
		{"text without --beir", []string{"eval", "--corpus", evalSubsetCorpus, "--queries", evalSubsetQueries, "--text", "markdown"}, ExitUsage, "--text applies to --beir only"},
		{"no such split", []string{"eval", "--beir", beirFixture, "--split", "test"}, ExitError, "queries-test.jsonl"},
		{"no such directory", []string{"eval", "--beir", "/nonexistent/beir", "--split", "train"}, ExitError, "/nonexistent/beir/queries-train.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runEvalCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}
