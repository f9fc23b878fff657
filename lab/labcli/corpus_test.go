package labcli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/lab/corpus"
)

func TestCorpusHelpAndUsage(t *testing.T) {
	code, out, _ := runEvalCLI(t, "corpus", "--help")
	if code != ExitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "cordon-lab corpus manpages --out") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"corpus"}, "want a subcommand"},
		{"unknown subcommand", []string{"corpus", "pdfs"}, `unknown subcommand "pdfs"`},
		{"manpages without out", []string{"corpus", "manpages"}, "--out DIR is required"},
		{"godocs without out", []string{"corpus", "godocs"}, "--out DIR is required"},
		{"godocs stray argument", []string{"corpus", "godocs", "--out", "x", "y"}, "unexpected arguments"},
		{"pgdocs without html", []string{"corpus", "pgdocs", "--out", "x"}, "--html DIR and --out DIR are required"},
		{"pgdocs without out", []string{"corpus", "pgdocs", "--html", "x"}, "--html DIR and --out DIR are required"},
		{"pgdocs stray argument", []string{"corpus", "pgdocs", "--html", "x", "--out", "y", "z"}, "unexpected arguments"},
		{"unknown kind", []string{"corpus", "queries", "--corpus", "x", "--kinds", "title"}, "want name, body, option or heldout; for Go documentation summary, signature or docheldout"},
		{"queries without corpus", []string{"corpus", "queries"}, "--corpus DIR is required"},
		{"stray argument", []string{"corpus", "manpages", "--out", "x", "y"}, "unexpected arguments"},
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

// TestCorpusQueriesReproducesGolden: the committed golden query set is
// exactly what the command builds from the committed corpus.
func TestCorpusQueriesReproducesGolden(t *testing.T) {
	code, out, stderr := runEvalCLI(t, "corpus", "queries", "--corpus", evalSubsetCorpus, "--kinds", "name,body,option,heldout")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, err := os.ReadFile(evalSubsetQueries)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("'cordon-lab corpus queries --corpus %s' differs from %s; rerun testdata/eval/build.sh", evalSubsetCorpus, evalSubsetQueries)
	}
	if !strings.Contains(stderr, "195 queries from 58 documents") {
		t.Errorf("stderr: %q", stderr)
	}
}

// TestCorpusManPagesRealMan converts a tiny hand-written manual tree with the
// machine's man-db: the command's real path, end to end.
func TestCorpusManPagesRealMan(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("SKIP: man is not installed; 'cordon-lab corpus manpages' cannot run on this machine")
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "man1"), 0o755)
	os.WriteFile(filepath.Join(root, "man1", "frob.1"), []byte(".TH FROB 1\n.SH NAME\nfrob \\- frobnicate the widgets\n"+
		".SH DESCRIPTION\n.B frob\nfrobnicates every widget.\n.SS Widgets\nA widget is a thing.\n"), 0o644)
	os.Symlink("frob.1", filepath.Join(root, "man1", "unfrob.1"))
	os.WriteFile(filepath.Join(root, "man1", "empty.1"), []byte(".TH EMPTY 1\n"), 0o644)
	out := filepath.Join(t.TempDir(), "corpus")
	args := []string{"corpus", "manpages", "--root", root, "--sections", "1", "--out", out, "--workers", "2"}
	code, _, stderr := runEvalCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2 pages selected", "1 aliases left out", "skipped man/1/empty", "wrote 1 documents"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	got, err := os.ReadFile(filepath.Join(out, "man", "1", "frob.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# NAME\n       frob - frobnicate the widgets\n\n# DESCRIPTION\n       frob frobnicates every widget.\n\n## Widgets\n       A widget is a thing.\n"
	if string(got) != want {
		t.Errorf("frob.md:\ngot  %q\nwant %q", got, want)
	}
	var m corpus.Manifest
	data, _ := os.ReadFile(filepath.Join(out, corpus.ManifestName))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Documents) != 1 || len(m.Skipped) != 1 || len(m.Aliases) != 1 || m.Aliases[0].AliasOf != "man/1/frob" {
		t.Errorf("manifest: %+v", m)
	}

	// A second run must not mix with the first; --replace reproduces it.
	if code, _, stderr := runEvalCLI(t, args...); code != ExitError || !strings.Contains(stderr, "--replace") {
		t.Errorf("second run: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runEvalCLI(t, append(args, "--replace")...); code != ExitOK {
		t.Fatalf("--replace: exit %d: %s", code, stderr)
	}
	again, _ := os.ReadFile(filepath.Join(out, "man", "1", "frob.md"))
	if string(again) != string(got) {
		t.Errorf("a second run wrote a different page")
	}
}

// Every subcommand has its own help, printed without a database.
func TestSubcommandHelp(t *testing.T) {
	for _, path := range [][]string{{"eval", "score"}, {"eval", "export"}, {"corpus", "manpages"}, {"corpus", "queries"}} {
		name := strings.Join(path, " ")
		t.Run(name, func(t *testing.T) {
			for _, args := range [][]string{append(slices.Clone(path), "--help"), append([]string{path[0], "-h"}, path[1:]...), append([]string{"help"}, path...)} {
				code, out, stderr := runEvalCLI(t, args...)
				if code != ExitOK || !strings.HasPrefix(out, "Usage: cordon-lab "+name) || stderr != "" {
					t.Errorf("%q: got exit %d, stdout %q, stderr %q; want exit 0 and 'Usage: cordon-lab %s'", args, code, out, stderr, name)
				}
			}
		})
	}
}

// TestCorpusGoDocsThenEval builds a Go-docs corpus from a hand-written
// installation, its queries, and evaluates them: the genre's whole path
// through the commands.
func TestCorpusGoDocsThenEval(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	pkgs := map[string]string{
		"alpha/alpha.go": "// Package alpha parses configuration files written by people.\npackage alpha\n\n" +
			"// Parse reads one configuration file and returns its settings in order. Comments and blank lines are skipped entirely.\nfunc Parse(path string) ([]string, error) { return nil, nil }\n",
		"beta/beta.go": "// Package beta draws charts of time series onto images.\npackage beta\n\n" +
			"// Draw renders the series as a line chart of the given pixel width. Points outside the window are clipped at the border.\nfunc Draw(width int, ys []float64) error { return nil }\n",
		"internal/gamma/gamma.go": "// Package gamma is internal.\npackage gamma\n",
	}
	for name, text := range pkgs {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	code, _, stderr := runEvalCLI(t, "corpus", "godocs", "--out", out, "--goroot", root)
	if code != ExitOK || !strings.Contains(stderr, "wrote 2 documents") {
		t.Fatalf("godocs: exit %d: %s", code, stderr)
	}
	queries := filepath.Join(t.TempDir(), "q.jsonl")
	code, _, stderr = runEvalCLI(t, "corpus", "queries", "--corpus", out, "--kinds", "summary,signature,docheldout", "--out", queries)
	if code != ExitOK || !strings.Contains(stderr, "8 queries from 2 documents") {
		t.Fatalf("queries: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(queries)
	if err != nil {
		t.Fatal(err)
	}
	var q corpus.Query
	if err := json.Unmarshal([]byte(strings.SplitN(string(data), "\n", 2)[0]), &q); err != nil {
		t.Fatal(err)
	}
	if q.ID != "summary:go/alpha#1" || q.Query != "Parse reads one configuration file and returns its settings in order." {
		t.Errorf("first query: got %+v", q)
	}
	code, stdout, stderr := runEvalCLI(t, "eval", "--corpus", out, "--queries", queries, "--kind", "docheldout", "--bootstrap", "0")
	if code != ExitOK || !strings.Contains(stdout, "4 queries (0 with several relevant documents; kind docheldout)") || !strings.Contains(stdout, "hybrid RRF + rerank") {
		t.Fatalf("eval: exit %d: %s%s", code, stdout, stderr)
	}
}

// refPage is a DocBook reference page as the PostgreSQL documentation
// ships it: a navigation table, the refnamediv, a script.
func refPage(name, purpose, body string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">` +
		`<html xmlns="http://www.w3.org/1999/xhtml"><head><title>` + name + `</title><script>var tracked = 1;</script></head>` +
		`<body><div class="navheader"><table><tr><td><a href="prev.html">Prev</a></td></tr></table></div>` +
		`<div class="refentry"><div class="refnamediv"><h2><span class="refentrytitle">` + name + `</span></h2>` +
		`<p>` + name + ` — ` + purpose + `</p></div><div class="refsect1"><h2>Description</h2><p>` + body + `</p></div></div></body></html>`
}

// TestCorpusPGDocsThenEval converts a hand-written PostgreSQL
// documentation tree into a BEIR dataset and evaluates it: the genre's
// whole path through the commands.
func TestCorpusPGDocsThenEval(t *testing.T) {
	htmlDir := t.TempDir()
	pages := map[string]string{
		"sql-cluster.html": refPage("CLUSTER", "cluster a table according to an index",
			"CLUSTER instructs <span class=\"productname\">PostgreSQL</span> to reorder the table physically by the index."),
		"sql-alterpublication.html": refPage("ALTER PUBLICATION", "change the definition of a publication",
			"The command ALTER PUBLICATION can change the attributes of a publication."),
		"creating-cluster.html": `<html><head><title>19.2. Creating a Database Cluster</title></head><body>` +
			`<h2>19.2. Creating a Database Cluster</h2><p>Before you can do anything, you must initialize a database storage area on disk.</p>` +
			`<pre class="programlisting">initdb -D /usr/local/pgsql/data</pre></body></html>`,
		"stylesheet.css": "body { color: black }",
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(htmlDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	code, _, stderr := runEvalCLI(t, "corpus", "pgdocs", "--html", htmlDir, "--out", out)
	if code != ExitOK || !strings.Contains(stderr, "wrote 3 documents") {
		t.Fatalf("pgdocs: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	type beirDoc struct{ ID, Title, Text string }
	var docs []beirDoc
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, beirDoc{d.ID, d.Title, d.Text})
	}
	if len(docs) != 3 || docs[0].ID != "pg/creating-cluster" || docs[1].ID != "pg/sql-alterpublication" || docs[2].ID != "pg/sql-cluster" {
		t.Fatalf("documents: got %+v", docs)
	}
	cluster := docs[2]
	if cluster.Title != "CLUSTER" || !strings.Contains(cluster.Text, "## Description\n\nCLUSTER instructs PostgreSQL to reorder") ||
		strings.Contains(cluster.Text, "<") || strings.Contains(cluster.Text, "tracked") {
		t.Errorf("sql-cluster: got title %q, text %q", cluster.Title, cluster.Text)
	}
	if !strings.Contains(docs[0].Text, "```\ninitdb -D /usr/local/pgsql/data\n```") {
		t.Errorf("creating-cluster: the code block is not kept: %q", docs[0].Text)
	}
	split := corpus.SplitOf("pg/sql-cluster")
	queries, err := os.ReadFile(filepath.Join(out, "queries-command-"+split+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(queries), `{"_id":"command:pg/sql-cluster","text":"what does the CLUSTER command do"}`) {
		t.Errorf("command queries: got %s", queries)
	}
	purpose, err := os.ReadFile(filepath.Join(out, "queries-purpose-"+split+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(purpose), `{"_id":"purpose:pg/sql-cluster","text":"cluster a table according to an index"}`) {
		t.Errorf("purpose queries: got %s", purpose)
	}
	qrels, err := os.ReadFile(filepath.Join(out, "qrels-command-"+split+".tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(qrels), "query-id\tcorpus-id\tscore\ncommand:") || !strings.Contains(string(qrels), "command:pg/sql-cluster\tpg/sql-cluster\t1\n") {
		t.Errorf("command judgments: got %q", qrels)
	}
	if strings.Contains(string(qrels)+string(queries), "creating-cluster") {
		t.Errorf("a page without a refnamediv gave a query: %s %s", queries, qrels)
	}
	code, stdout, stderr := runEvalCLI(t, "eval", "--beir", out, "--split", "command-"+split, "--title", "field", "--text", "markdown", "--bootstrap", "0", "--markdown")
	if code != ExitOK || !strings.Contains(stdout, "titles: field; text: markdown") || !strings.Contains(stdout, "hybrid RRF + rerank") {
		t.Fatalf("eval: exit %d: %s%s", code, stdout, stderr)
	}
	code, _, stderr = runEvalCLI(t, "corpus", "pgdocs", "--html", htmlDir, "--out", out)
	if code != ExitError || !strings.Contains(stderr, "--replace") {
		t.Errorf("a second run without --replace: exit %d, %s", code, stderr)
	}
	code, _, stderr = runEvalCLI(t, "corpus", "pgdocs", "--html", filepath.Join(htmlDir, "missing"), "--out", t.TempDir())
	if code != ExitError || !strings.Contains(stderr, "postgresql-doc-15") {
		t.Errorf("a missing --html: exit %d, %s", code, stderr)
	}
}
