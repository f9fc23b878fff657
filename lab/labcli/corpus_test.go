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
